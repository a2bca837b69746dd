"""The Multi30k recipe chosen on validation (experiments.recipe): candidates are the preset with flags changed,
trained, recorded with their validation score, steps and machine, skipped once recorded, and listed on a page."""

import json
import subprocess

import pytest
from training_helpers import synthetic_run, tiny_preset

from experiments import comparable, recipe
from experiments.comparable import FP32, experiment_precision
from training.arguments import parse_args
from vanilla_tools.cli import UsageError
from vanilla_tools.provenance import ROOT, generated


def test_every_candidate_is_the_preset_scored_on_validation_only():
    assert recipe.NAMES[0] == "preset" and len(set(recipe.NAMES)) == len(recipe.NAMES)
    assert [r.number for r in recipe.ROUNDS] == [1, 2] and len({r.folder for r in recipe.ROUNDS}) == 2
    # a round's preset is the one before with the previous round's choice in it
    chosen = {c.name: c for c in recipe.ROUNDS[0].candidates}[recipe.ROUNDS[1].reference]
    assert chosen.flags == ("--warmup_steps", "1200") and recipe.ROUNDS[1].preset == {"warmup_steps": 1200}
    model_args, _, training_args = parse_args(["--config", "multi30k", "--output_dir", "x"])
    assert training_args.warmup_steps == 1200  # the YAML holds the open round's preset
    for candidate in recipe.CANDIDATES:
        model_args, data_args, training_args = parse_args([*candidate.settings("multi30k", FP32), "--output_dir", "x"])
        assert model_args.final_splits == ["validation"] and model_args.translate_examples == 0
        assert model_args.max_train_minutes == 0 and not training_args.bf16  # a budget in steps, the stated precision
        assert training_args.max_steps == (8000 if candidate.name == "tiny-wu2021" else 7200)
    flags = {c.name: dict(zip(c.flags[::2], c.flags[1::2], strict=True)) for c in recipe.CANDIDATES}
    big = flags["dmodel-384-dropout-0.3"]
    assert int(big["--d_model"]) // int(big["--num_attention_heads"]) == 64  # d_k as the preset's
    deep = flags["layers-4-lr-0.7"]  # half the peak of round 1's preset, 256^-0.5 * 600^-0.5 = 2.55e-3
    assert abs(float(deep["--lr_scale"]) * (256 * 1200) ** -0.5 - 0.5 * (256 * 600) ** -0.5) < 2e-5
    tiny = flags["tiny-wu2021"]  # its published peak learning rate, 0.005 at the end of warmup (§5.3's formula)
    peak = float(tiny["--lr_scale"]) * (int(tiny["--d_model"]) * int(tiny["--warmup_steps"])) ** -0.5
    assert abs(peak - 0.005) < 1e-5
    assert generated(str(recipe.PAGE.relative_to(ROOT))) and generated(str(recipe.RESULTS.relative_to(ROOT)) + "/x")


def test_the_band_is_the_prediction_interval_for_one_more_preset_run():
    band = recipe.Band.of([39.0, 40.0, 40.0, 40.0, 41.0, 40.0])
    # mean 40, s = sqrt(2/5), t(0.975, 5) = 2.5706: 40 -+ 2.5706 * 0.63246 * sqrt(7/6) = 40 -+ 1.7561
    assert band.runs == 6 and band.mean == 40.0
    assert abs(band.high - 41.7561) < 1e-3 and abs(band.low - 38.2439) < 1e-3
    assert [band.place(x) for x in (41.75, 41.76, 38.24)] == ["within", "above", "below"]
    assert recipe.Band.of([40.0, 41.0]) is None


def test_the_preset_changes_only_for_the_best_candidate_above_the_band():
    band = recipe.Band.of([40.0, 40.5, 41.0])  # 40.5 -+ 4.303 * 0.5 * sqrt(4/3): 38.02-42.98
    first, second = recipe.ROUNDS

    def records(**scores):
        return [{"candidate": name.replace("_", "-"), "validation_bleu": bleu} for name, bleu in scores.items()]

    assert recipe.chosen(first, records(preset=40.0, a=42.9, b=42.0), band) == "preset"  # within: not told apart
    assert recipe.chosen(first, records(preset=40.0, a=43.5, b=43.1, c=39.0), band) == "a"
    assert recipe.chosen(first, records(preset=44.5, a=43.1), band) == "a"  # the preset's own run is not a candidate
    assert recipe.chosen(first, records(a=50.0), None) == "preset"  # too few preset runs: nothing replaces it
    assert recipe.chosen(second, records(a=42.0), band) == "warmup-1200"  # round 2's preset: round 1's choice


def test_a_rounds_preset_runs_are_the_full_runs_with_its_values_and_its_reference():
    summaries = [{"role": role, "validation": {"bleu": bleu}, "arguments": {"warmup_steps": warmup}}
                 for role, bleu, warmup in (("superseded", 40.0, 600), ("seed", 41.0, 600), ("seed", 42.0, 1200),
                                            ("ablation", 30.0, 1200), ("history", 31.0, 600))]  # fmt: skip
    records = {
        1: [{"candidate": "preset", "validation_bleu": 39.0}, {"candidate": "warmup-1200", "validation_bleu": 43.0}]
    }
    first, second = recipe.ROUNDS
    assert recipe.preset_runs(first, records, summaries) == [40.0, 41.0, 39.0]
    assert recipe.preset_runs(second, records, summaries) == [42.0, 43.0]


def test_a_candidate_trains_only_where_its_run_compares_with_its_presets_runs(monkeypatch):
    """experiments/comparable.py's rule, but the code (the band holds runs of earlier code on purpose): the same
    budget, kind of device and precision."""
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    summaries = [
        {"role": "seed", "validation": {"bleu": 42.0}, "arguments": {"warmup_steps": 1200}, "run": synthetic_run()},
        {"role": "seed", "validation": {"bleu": 40.0}, "arguments": {"warmup_steps": 600},
         "run": synthetic_run(minutes=54, max_steps=None)},
    ]  # fmt: skip
    records = {1: [{"candidate": "warmup-1200", "validation_bleu": 43.0, "run": synthetic_run(code="older")}]}
    first, second = recipe.ROUNDS
    runs = recipe.preset_run_records(second, records, summaries)
    assert [run["code"]["code_tree"] for run in runs] == ["new", "older"]
    recipe.check_comparable(second, synthetic_run(code="newest"), runs)  # other code: read against them all the same
    with pytest.raises(UsageError, match=r"^round 2: a candidate run here could not be read against its preset's "
                       r"runs: other precisions \(bf16 autocast and fp32\): not measured to train alike$"):  # fmt: skip
        recipe.check_comparable(second, synthetic_run("bf16 autocast"), runs)
    with pytest.raises(UsageError, match=r"a budget in minutes \(54\): the steps it reaches depend on the machine"):
        recipe.check_comparable(
            first, synthetic_run(minutes=54, max_steps=None), recipe.preset_run_records(first, records, summaries)
        )


def test_a_candidate_against_runs_bounded_by_minutes_trains_nothing(tmp_path):
    """Round 2's preset ran for 54 minutes; the preset's budget is steps now: refused before anything trains."""
    preset_repeat(tmp_path / "repeats", "minutes", 41.0, run=synthetic_run(minutes=54, max_steps=None))
    argv = ["--config", "multi30k", "--candidates", "bpe-dropout-0.2", "--results", str(tmp_path / "results"),
            "--runs", str(tmp_path / "runs"), "--repeats", str(tmp_path / "repeats")]  # fmt: skip
    with pytest.raises(
        UsageError,
        match=r"^round 2: a candidate run here could not be read against its preset's "
        r"runs: other budgets \(7,200 steps of 2048 tokens; 40 epochs of 2048 tokens, at most 54 ",
    ):
        recipe.run(argv)
    assert not (tmp_path / "results").exists() and not (tmp_path / "runs").exists()


def test_a_closed_round_trains_nothing(tmp_path):
    """Round 1's candidates changed the preset with warmup 600; the YAML now has 1,200: training one would read it
    against a band measured on another preset."""
    with pytest.raises(UsageError, match=r"^round 1 \(the preset of 2026-11-24 \(warmup 600\)\) is closed: its "
                       r"candidates change the preset with `warmup_steps: 600`, and --config multi30k now has "
                       r"`warmup_steps: 1200`$"):  # fmt: skip
        recipe.run(["--config", "multi30k", "--candidates", "layers-4-dropout-0.2", "--results", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def preset_repeat(results, name: str, bleu: float, role: str = "seed", warmup: int = 1200, run=None) -> None:
    (results / name).mkdir(parents=True)
    summary = {"role": role, "validation": {"bleu": bleu}, "arguments": {"warmup_steps": warmup},
               "run": run or synthetic_run(max_steps=3, tokens=256)}  # fmt: skip
    (results / name / "summary.json").write_text(json.dumps(summary))


@pytest.mark.slow
def test_the_command_trains_records_skips_and_reports(tmp_path):
    """Round 2's candidates on a tiny preset end to end: trained, recorded with their validation BLEU (the
    summary's), steps and code, skipped on the second call; the page lists both, best first, against the band of the
    preset's runs (repeats with role canonical or seed and its warmup; not an ablation, not a run of round 1's
    preset), and the figure of their learning curves beside it."""
    for name, bleu, role, warmup in (("canonical", 1.0, "canonical", 1200), ("repeat", 2.0, "seed", 1200),
                                     ("repeat2", 3.0, "seed", 1200), ("other", 90.0, "ablation", 1200),
                                     ("earlier", 80.0, "seed", 600)):  # fmt: skip
        preset_repeat(tmp_path / "repeats", name, bleu, role, warmup)
    preset = tiny_preset(tmp_path, warmup_steps=1200, max_steps=3, save_steps=1)
    argv = ["--config", str(preset), "--candidates", "bpe-dropout-0.2", "average-20", "--runs",
            str(tmp_path / "runs"), "--results", str(tmp_path / "results"), "--page", str(tmp_path / "recipe.md"),
            "--repeats", str(tmp_path / "repeats")]  # fmt: skip
    recipe.run(argv)
    found = recipe.read_records(tmp_path / "results")
    records = {r["candidate"]: r for r in found[2]}
    assert not found[1] and set(records) == {"bpe-dropout-0.2", "average-20"}
    for name, record in records.items():
        summary = json.loads((tmp_path / "results" / "round-2" / name / "summary.json").read_text())
        assert record["validation_bleu"] == summary["validation"]["bleu"] and not summary["test"]
        assert record["steps"] == 3 and record["epochs"] > 0 and record["fp32_gflops_before"] > 0
        assert record["run"] == summary["run"] and record["run"]["precision"] == experiment_precision()  # the machine's
        assert record["run"]["code"]["commit"] and record["run"]["machine"]["cpu_cores"] >= 1
        assert summary["arguments"]["warmup_steps"] == 1200  # the preset's, which the round changes
    assert records["average-20"]["settings"][-4:] == ["--average_last", "20", "--save_total_limit", "20"]
    assert "--bpe_dropout 0.2" in records["bpe-dropout-0.2"]["command"]
    page = (tmp_path / "recipe.md").read_text().splitlines()
    rows = [line for line in page if line.startswith(("| bpe-dropout-0.2 |", "| average-20 |"))]
    best = max(records.values(), key=lambda r: r["validation_bleu"])["candidate"]
    assert len(rows) == 2 and rows[0].startswith(f"| {best} |")
    runs = recipe.preset_runs(recipe.ROUNDS[1], found, recipe.full_runs(tmp_path / "repeats"))
    band = recipe.Band.of(runs)
    assert runs == [1.0, 2.0, 3.0] and f"**{band.low:.2f}-{band.high:.2f}**" in "\n".join(page)
    assert f"Chosen in this round so far: **{recipe.chosen(recipe.ROUNDS[1], found[2], band)}**." in page
    assert "The preset has 1 recorded run, too few for a band: nothing replaces it yet." in "\n".join(page)  # round 1
    figure = recipe.curves_file(recipe.ROUNDS[1])
    assert f"![Round 2: the validation check of every candidate against training minutes]({figure})" in page
    assert (tmp_path / figure).read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / recipe.curves_file(recipe.ROUNDS[0])).exists()  # round 1: no records here, no figure
    path = tmp_path / "results" / "round-2" / "average-20" / recipe.RECORD
    stamp = path.stat().st_mtime_ns
    recipe.run(argv)  # recorded: skipped
    assert path.stat().st_mtime_ns == stamp


def test_the_page_is_generated_from_the_committed_records():
    found = subprocess.run(["git", "-C", str(ROOT), "ls-files", "results/recipe/*/recipe.json"], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    records = recipe.read_records(recipe.RESULTS, {ROOT / path for path in found})
    assert sum(map(len, records.values())) == len(found)  # every committed record is some round's candidate
    assert recipe.PAGE.read_text() == recipe.report(records, recipe.full_runs(recipe.REPEATS))
