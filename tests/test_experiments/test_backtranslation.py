"""One back-translation round (experiments.backtranslation): the halves of Multi30k's training set, the runs and
their order, what a record must match to be skipped, the scores' bootstrap, and the page written from records."""

import gzip
import json
import subprocess
import sys

import numpy as np
import pytest
from training_helpers import synthetic_run

from experiments import backtranslation as bt
from experiments import backtranslation_bootstrap as bootstrap
from experiments import backtranslation_page as bt_page
from experiments import backtranslation_round as bt_round
from experiments import launch
from vanilla_tools.cli import UsageError
from vanilla_tools.metrics import statistics_bleu, tokenized_bleu, tokenized_bleu_statistics

REFERENCES = bt.read_bundled("test_2016_flickr.de")


def test_the_halves_split_every_pair_once_by_a_fixed_permutation(tmp_path):
    a, b = bt.halves(29000)
    assert (len(a), len(b)) == (14500, 14500)
    assert np.array_equal(np.sort(np.concatenate([a, b])), np.arange(29000))
    assert np.array_equal(bt.halves(29000)[0], a)  # the same split in every session
    assert a[:5].tolist() != list(range(5))  # not the file's first half
    bt.prepare_data(tmp_path, bt.Budget.of(2000, 100))
    english, german = bt.read_bundled("train.en", 100), bt.read_bundled("train.de", 100)
    a_en, a_de = ((tmp_path / f"A.{lang}").read_text().splitlines() for lang in ("en", "de"))
    assert len(a_en) == len(a_de) == 50
    pairs = dict(zip(english, german, strict=True))
    assert all(pairs[en] == de for en, de in zip(a_en, a_de, strict=True))  # aligned
    assert set(a_en).isdisjoint((tmp_path / "B.en").read_text().splitlines())
    assert len((tmp_path / "test.de").read_text().splitlines()) == 10  # a rehearsal's: 100 // 10
    bt.prepare_data(tmp_path / "all", bt.Budget())
    assert len((tmp_path / "all" / "test.de").read_text().splitlines()) == 1000
    assert len((tmp_path / "all" / "A.de").read_text().splitlines()) == 14500


def test_unchanged_files_are_not_written_again(tmp_path):
    """datasets' cache keys on a file's time: a second call must not touch the files it would write alike."""
    bt.prepare_data(tmp_path, bt.Budget.of(2000, 60))
    stamp = (tmp_path / "A.en").stat().st_mtime_ns
    bt.prepare_data(tmp_path, bt.Budget.of(2000, 60))
    assert (tmp_path / "A.en").stat().st_mtime_ns == stamp


def test_the_plan_runs_the_reverse_model_then_first_seeds_then_further_seeds():
    runs = [str(run) for run in bt.plan(bt.Budget())]
    assert runs[:3] == ["reverse-de-en seed 1", "A seed 1", "A+B seed 1"]
    assert runs[-4:] == ["A seed 2", "A+BT-sample-tagged seed 2", "A seed 3", "A+BT-sample-tagged seed 3"]
    assert len(runs) == 1 + 3 + 1 + 3 + 3
    assert [str(r) for r in bt.plan(bt.Budget(), (bt.BY_NAME["A"],))] == ["A seed 1", "A seed 2", "A seed 3"]


def test_each_condition_trains_on_its_corpora_and_the_budget_stated():
    tagged = bt.Run.forward(bt.BY_NAME["A+BT-sample-tagged"], 2).settings(bt.Budget())
    groups = " ".join(tagged)
    assert "--train_files {data}/A.en {data}/A.de --train_files {data}/B.bt-sample.en {data}/B.de tag=<BT>" in groups
    assert "tag=" not in " ".join(bt.Run.forward(bt.BY_NAME["A+BT-beam"], 1).settings(bt.Budget()))
    assert "{data}/B.en {data}/B.de" in " ".join(bt.Run.forward(bt.BY_NAME["A+B"], 1).settings(bt.Budget()))
    reverse = bt.Run.reverse().settings(bt.Budget())
    assert reverse[reverse.index("--source_lang") + 1] == "de"
    for flag, value in (("--max_steps", "2000"), ("--tokens_per_step", "4096"), ("--bf16", "false"), ("--seed", "2")):
        assert tagged[tagged.index(flag) + 1] == value
    assert bt.Budget.of(2000) == bt.Budget()
    assert bt.Budget.of(4) == bt.Budget(4, 4096, 2, 1, 4)
    with pytest.raises(UsageError, match="--steps 0: a run needs at least 1 step"):
        bt.Budget.of(0)
    with pytest.raises(UsageError, match="--pairs 1: a rehearsal needs at least 2 pairs, one for each half"):
        bt.Budget.of(2000, 1)


def record(results, run: bt.Run, budget: bt.Budget, translations: list[str], **test) -> None:
    folder = results / budget.folder / run.folder
    folder.mkdir(parents=True)
    (folder / bt.TRANSLATIONS).write_text("".join(f"{line}\n" for line in translations))
    summary = {"run": synthetic_run(), "test": test, "train_minutes": 12.5, "settings": run.settings(budget)}
    (folder / bt.SUMMARY).write_text(json.dumps(summary))


def test_a_record_stands_for_a_run_only_with_its_settings(tmp_path):
    budget, run = bt.Budget(), bt.Run.forward(bt.BY_NAME["A"], 1)
    record(tmp_path, run, budget, ["x"])
    assert bt.recorded(run, budget, tmp_path)["train_minutes"] == 12.5
    assert bt.recorded(bt.Run.forward(bt.BY_NAME["A"], 2), budget, tmp_path) is None
    other = tmp_path / "other"
    record(other, bt.Run("A", 1, ("en", "de"), ("--train_files", "elsewhere")), budget, ["x"])
    assert bt.recorded(bt.Run.forward(bt.BY_NAME["A"], 1), budget, other) is None


def test_a_rehearsal_is_kept_apart_and_its_record_never_stands_for_the_round(tmp_path):
    """--pairs 200 at the round's steps: its settings name its data (so its record, even moved into the round's
    folder, is not the round's run), and its data, models and records go to folders of their own."""
    round_, rehearsal, run = bt.Budget(), bt.Budget.of(bt.STEPS, 200), bt.Run.forward(bt.BY_NAME["A"], 1)
    assert (rehearsal.folder, rehearsal.data_folder) == ("2000-steps-200-pairs", "data-200-pairs")
    assert rehearsal.held_out == 20
    assert "{data-200-pairs}/A.en" in run.settings(rehearsal) and "{data}/A.en" in run.settings(round_)
    record(tmp_path, run, rehearsal, ["x"])
    assert bt.recorded(run, rehearsal, tmp_path) is not None
    assert bt.recorded(run, round_, tmp_path) is None
    (tmp_path / round_.folder).mkdir()
    (tmp_path / rehearsal.folder).rename(tmp_path / round_.folder)  # a rehearsal's record in the round's place
    assert bt.recorded(run, round_, tmp_path) is None


def test_a_translation_file_shorter_than_test2016_is_refused_naming_both_counts(tmp_path):
    budget = bt.Budget()
    for name, every in (("A", 2), ("A+B", 6)):
        record(tmp_path, bt.Run.forward(bt.BY_NAME[name], 1), budget, worse(REFERENCES, every), bleu=1.0)
    record(tmp_path, bt.Run.forward(bt.BY_NAME["A+BT-beam"], 1), budget, REFERENCES[:999], bleu=1.0)
    with pytest.raises(
        UsageError, match=r"^.*A\+BT-beam/seed-1/test2016.de: 999 translations of test2016's 1000 sentences; delete"
    ):
        bt_page.page(budget, tmp_path)


def test_the_synthetic_text_records_the_command_that_made_it(tmp_path, monkeypatch):
    """Each back-translation's record states the vanilla-translate command that ran, as it ran."""
    budget, results, runs = bt.Budget(), tmp_path / "results", tmp_path / "runs"
    model = runs / budget.folder / bt.Run.reverse().folder
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (runs / "data").mkdir()
    ran = []

    def translate(command, cwd):
        ran.append(command)
        output = command[command.index("--output") + 1]
        (cwd / output).write_text("a line\nanother\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(launch.subprocess, "run", translate)
    bt.back_translate(budget, runs, results)
    for mode, command in zip(bt.BACK_TRANSLATIONS, ran, strict=True):
        kept = json.loads((results / budget.folder / "synthetic" / f"B.bt-{mode}.en.json").read_text())
        assert command[:3] == [sys.executable, "-m", "inference.translate"]
        assert kept["translate"] == ["vanilla-translate", *command[3:]] and kept["lines"] == 2
        assert kept["translate"][1:4] == [str(runs / "data" / "B.de"), "--model", str(model)]
    assert (runs / "data" / "B.bt-sample.en").read_text() == "a line\nanother\n"


def worse(lines: list[str], every: int) -> list[str]:
    """Each line with every ``every``-th word dropped: a translation that loses more the smaller ``every`` is."""
    return [" ".join(w for i, w in enumerate(line.split()) if i % every != every - 1) for line in lines]


def test_the_bootstrap_statistics_give_the_scores_own_bleu():
    hypotheses = worse(REFERENCES[:200], 3)
    statistics = tokenized_bleu_statistics(hypotheses, REFERENCES[:200], "de")
    assert statistics.shape == (200, 10)
    assert round(statistics_bleu(statistics), 2) == tokenized_bleu(hypotheses, REFERENCES[:200], "de")[0]


def test_the_gap_fraction_and_its_interval():
    references = REFERENCES[:300]
    stats = {every: tokenized_bleu_statistics(worse(references, every), references, "de") for every in (2, 3, 6)}
    a, middle, upper = [stats[2]], [stats[3]], [stats[6]]
    expected = (statistics_bleu(stats[3]) - statistics_bleu(stats[2])) / (
        statistics_bleu(stats[6]) - statistics_bleu(stats[2])
    )
    gap = bootstrap.gap_fraction(a, middle, upper)
    assert gap["fraction"] == pytest.approx(expected)
    assert 0 < gap["low"] < gap["fraction"] < gap["high"] < 1
    assert gap["draws"] == bootstrap.BOOTSTRAP_DRAWS
    assert bootstrap.gap_fraction(a, middle, upper) == gap  # deterministic
    nothing = bootstrap.gap_fraction(a, [stats[2], stats[2]], upper)  # the treatment is A again: its interval holds 0
    assert nothing["fraction"] == 0 and nothing["low"] <= 0 <= nothing["high"]


def test_the_page_is_written_from_the_records(tmp_path):
    budget = bt.Budget()
    for name, seeds, every, score in (
        ("A", (1, 2), 2, 30.0),
        ("A+B", (1,), 6, 40.0),
        ("A+BT-sample-tagged", (1,), 3, 35.0),
    ):
        for seed in seeds:
            run = bt.Run.forward(bt.BY_NAME[name], seed)
            ratio = 1 - 0.01 * seed
            record(
                tmp_path,
                run,
                budget,
                worse(REFERENCES, every),
                bleu=score + seed,
                bleu_lc_tok=score,
                length_ratio=ratio,
            )
    page = bt_page.page(budget, tmp_path)
    assert "| A alone | 31.00, 32.00 (mean 31.50) | 30.00, 30.00 (mean 30.00) | 0.990, 0.980 (mean 0.985) |  |" in page
    assert "| A + BT by sampling, untagged | not run | not run | not run |  |" in page
    row = next(line for line in page.splitlines() if line.startswith("| A + BT by sampling, tagged"))
    assert row.startswith("| A + BT by sampling, tagged | 36.00 | 35.00 | 0.990 | ")
    assert "- A + BT by sampling, tagged recovers" in page and "it helps: its interval is above 0" in page
    assert "Not yet run: reverse-de-en seed 1, A+BT-sample seed 1," in page
    assert "steps; test2016 30.00 lowercased tokenized BLEU (en->de)." in page
    assert "- A seed 1: code new0000, test, fp32, 1,000 steps;" in page
    assert "The intervals: 1,000 bootstrap draws" in page


def test_a_resumed_run_names_each_launch_commit_and_steps():
    run = synthetic_run()
    assert bt_page.code_cell({"run": run}) == "new0000"
    launches = [{"code": {"commit": "e214e72aaa"}, "first_step": 0, "last_step": 63}]
    assert bt_page.code_cell({"run": {**run, "launches": launches}}) == "new0000"
    launches.append({"code": {"commit": "accaa93bbb"}, "first_step": 63, "last_step": 2000})
    assert bt_page.code_cell({"run": {**run, "launches": launches}}) == "e214e72 (steps 0-63), accaa93 (steps 63-2000)"


def test_the_synthetic_english_kept_in_the_results_is_what_a_fresh_clone_trains_on(tmp_path):
    """With both back-translations kept, no reverse model is needed: they are written where the runs read them."""
    budget, results, runs = bt.Budget(), tmp_path / "results", tmp_path / "runs"
    kept = results / budget.folder / "synthetic"
    kept.mkdir(parents=True)
    for mode in bt.BACK_TRANSLATIONS:
        with gzip.open(kept / f"B.bt-{mode}.en.gz", "wt", encoding="utf-8") as f:
            f.write(f"a {mode} line\n")
    assert bt.synthetic_kept(budget, results)
    (runs / "data").mkdir(parents=True)
    bt.back_translate(budget, runs, results)
    assert (runs / "data" / "B.bt-sample.en").read_text() == "a sample line\n"


def test_a_missing_reverse_model_is_named_with_what_to_do(tmp_path):
    with pytest.raises(UsageError, match=r"holds no model to back-translate with: delete .*reverse-de-en"):
        bt.back_translate(bt.Budget(), tmp_path / "runs", tmp_path / "results")


def test_the_report_writes_the_page_and_trains_nothing(tmp_path):
    page = tmp_path / "page.md"
    argv = ["--report", "--results", str(tmp_path), "--runs", str(tmp_path / "runs"), "--page", str(page)]
    done = subprocess.run([sys.executable, "-m", "experiments.backtranslation", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "No back-translation run is compared yet." in page.read_text()
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_rehearsal_runs_the_round_whole_and_a_second_call_skips_it(tmp_path):
    """200 pairs, 2 steps a run, the tagged sampling condition: the reverse model trained and recorded, B's German
    back-translated both ways and kept, the forward run trained on A and the tagged synthetic pairs, its test2016
    translated and recorded, the page written; then the same command trains nothing."""
    results, page = tmp_path / "results", tmp_path / "page.md"
    argv = ["--pairs", "200", "--steps", "2", "--conditions", "A+BT-sample-tagged", "--runs", str(tmp_path / "runs")]
    argv += ["--results", str(results), "--page", str(page)]
    done = subprocess.run([sys.executable, "-m", "experiments.backtranslation", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    budget = bt.Budget.of(2, 200)
    kept = results / budget.folder / "synthetic"
    for mode in bt.BACK_TRANSLATIONS:
        with gzip.open(kept / f"B.bt-{mode}.en.gz", "rt", encoding="utf-8") as f:
            assert len(f.read().splitlines()) == 100
        assert json.loads((kept / f"B.bt-{mode}.en.json").read_text())["lines"] == 100
    forward = json.loads((results / budget.folder / "A+BT-sample-tagged" / "seed-1" / bt.SUMMARY).read_text())
    assert [corpus["tag"] for corpus in forward["corpora"]] == [None, bt_round.TAG]
    assert forward["run"]["steps"] == 2 and forward["run"]["precision"] == "fp32"
    translations = results / budget.folder / "A+BT-sample-tagged" / "seed-1" / bt.TRANSLATIONS
    assert len(translations.read_text().splitlines()) == 20  # test2016's first 200 // 10
    assert "A+BT-sample-tagged seed 1: code" in page.read_text()
    again = subprocess.run([sys.executable, "-m", "experiments.backtranslation", *argv], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "A+BT-sample-tagged seed 1: recorded, skipped" in again.stderr
    assert "vanilla_train" not in again.stderr
