"""The Multi30k recipe chosen on validation (experiments.recipe): candidates are the preset with flags changed,
trained, recorded with their validation score, steps and machine, skipped once recorded, and listed on a page."""

import json
import re
import subprocess
from dataclasses import replace

import pytest
from training_helpers import stop_at_step_2, synthetic_run, tiny_preset

from experiments import comparable, launch, lr_walk, recipe, table3
from experiments.comparable import FP32, experiment_precision
from training.arguments import parse_args
from vanilla_tools.cli import UsageError
from vanilla_tools.provenance import ROOT, generated

SIZE_FLAGS = {"--encoder_layers", "--decoder_layers", "--d_model", "--ffn_dim"}  # what Table 3's (C) rows change


def test_every_candidate_is_the_preset_scored_on_validation_only():
    assert recipe.NAMES[0] == "preset" and len(set(recipe.NAMES)) == len(recipe.NAMES)
    assert [r.number for r in recipe.ROUNDS] == [1, 2, 3, 4] and len({r.folder for r in recipe.ROUNDS}) == 4
    # a round's preset is the one before with the previous round's choice in it
    first, second, third, fourth = recipe.ROUNDS
    chosen = {c.name: c for c in first.candidates}[second.reference]
    assert chosen.flags == ("--warmup_steps", "1200") and second.preset == {
        "warmup_steps": 1200,
        "max_train_minutes": 54,
    }
    assert third.preset == {"warmup_steps": 1200, "max_steps": 7200}  # round 2's preset at the budget in steps
    assert {c.name: c.flags for c in third.candidates}[third.reference] == ()  # a run of the preset itself
    assert [recipe.closed(one, "multi30k") is None for one in recipe.ROUNDS] == [False, False, True, True]  # the YAML's
    # round 4: round 3's preset against another recipe whole, at its own hour, in the score both texts share
    assert fourth.preset == third.preset and fourth.reference == third.reference and fourth.score == "bleu_lc_tok"
    assert fourth.budget_apart and [c.config for c in fourth.candidates] == ["multi30k-tiny"]
    for candidate in recipe.CANDIDATES:
        model_args, data_args, training_args = parse_args([*candidate.settings("multi30k", FP32), "--output_dir", "x"])
        assert model_args.final_splits == ["validation"] and model_args.translate_examples == 0
        assert model_args.max_train_minutes == 0 and not training_args.bf16  # a budget in steps, the stated precision
        steps = {"tiny-wu2021": 8000, "tiny-recipe-hour": 3795}.get(candidate.name, 7200)
        assert training_args.max_steps == steps and data_args.moses_lowercase_tokenize == bool(candidate.config)
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
    first, second = recipe.ROUNDS[:2]

    def records(**scores):
        return [{"candidate": name.replace("_", "-"), "validation_bleu": bleu} for name, bleu in scores.items()]

    assert recipe.chosen(first, records(preset=40.0, a=42.9, b=42.0), band) == "preset"  # within: not told apart
    assert recipe.chosen(first, records(preset=40.0, a=43.5, b=43.1, c=39.0), band) == "a"
    assert recipe.chosen(first, records(preset=44.5, a=43.1), band) == "a"  # the preset's own run is not a candidate
    assert recipe.chosen(first, records(a=50.0), None) == "preset"  # too few preset runs: nothing replaces it
    assert recipe.chosen(second, records(a=42.0), band) == "warmup-1200"  # round 2's preset: round 1's choice


def test_a_rounds_preset_runs_are_the_full_runs_with_its_values_and_its_reference():
    minutes, steps = {"warmup_steps": 1200, "max_train_minutes": 54}, {"warmup_steps": 1200, "max_steps": 7200}
    summaries = [
        {"role": role, "validation": {"bleu": bleu}, "arguments": arguments}
        for role, bleu, arguments in (
            ("superseded", 40.0, {"warmup_steps": 600}),
            ("seed", 41.0, {"warmup_steps": 600}),
            ("seed", 42.0, minutes),
            ("ablation", 30.0, minutes),
            ("history", 31.0, {"warmup_steps": 600}),
            ("canonical", 44.0, steps),
            ("earlier", 43.5, steps),
            ("hardware", 45.0, steps),
        )
    ]
    records = {
        1: [{"candidate": "preset", "validation_bleu": 39.0}, {"candidate": "warmup-1200", "validation_bleu": 43.0}],
        3: [{"candidate": "preset-7200-steps", "validation_bleu": 46.0}],
    }
    first, second, third = recipe.ROUNDS[:3]
    assert recipe.preset_runs(first, records, summaries) == [40.0, 41.0, 39.0]
    assert recipe.preset_runs(second, records, summaries) == [42.0, 43.0]
    # the runs at earlier code too; not a run of 54 minutes, nor on other hardware
    assert recipe.preset_runs(third, records, summaries) == [44.0, 43.5, 46.0]


def test_a_round_of_another_recipe_reads_the_score_both_texts_share():
    """Round 4 reads lowercased, tokenized BLEU: the band of the preset's runs, the candidate's place and the choice
    in it; its candidate, another recipe at its own hour, is read against runs of another budget (said on the page),
    and no figure puts the candidates' checks of their own text beside the preset's."""
    third, fourth = recipe.ROUNDS[2:]
    steps = {"warmup_steps": 1200, "max_steps": 7200}
    summaries = [
        {"role": "seed", "validation": {"bleu": bleu, "bleu_lc_tok": bleu + 0.5}, "arguments": steps, "run": {}}
        for bleu in (40.0, 40.5)
    ]
    reference = {"candidate": "preset-7200-steps", "validation_bleu": 41.0, "validation_bleu_lc_tok": 41.5}
    candidate = {"candidate": "tiny-recipe-hour", "validation_bleu": 45.0, "validation_bleu_lc_tok": 43.0}
    records = {3: [reference], 4: [candidate]}
    assert recipe.preset_runs(third, records, summaries) == [40.0, 40.5, 41.0]
    assert recipe.preset_runs(fourth, records, summaries) == [40.5, 41.0, 41.5]
    band = recipe.Band.of([40.5, 41.0, 41.5])  # 41.0 -+ 4.303 * 0.5 * sqrt(4/3): 38.52-43.48
    assert band.place(fourth.of(candidate)) == "within" and band.place(third.of(candidate)) == "above"
    assert recipe.chosen(fourth, [candidate], band) == "preset-7200-steps"
    assert recipe.chosen(fourth, [{**candidate, "validation_bleu_lc_tok": 43.5}], band) == "tiny-recipe-hour"
    other_budget = synthetic_run(max_steps=3795, tokens=8192)
    recipe.check_comparable(fourth, other_budget, [synthetic_run(max_steps=7200)])
    with pytest.raises(UsageError, match=r"other budgets \(3,795 steps of 8192 tokens; 7,200 steps of 2048 tokens\)"):
        recipe.check_comparable(third, other_budget, [synthetic_run(max_steps=7200)])
    with pytest.raises(UsageError, match="other devices"):  # only the budget is set aside
        recipe.check_comparable(fourth, synthetic_run(device="cuda"), [synthetic_run(max_steps=7200)])
    record = {**candidate, "change": "c", "steps": 3795, "epochs": 55.0, "parameters": 2.3e6, "fp32_gflops_before": 1}
    record["run"] = {"code": {"commit": "abc1234"}, "launches": []}
    text = "\n".join(recipe.round_section(fourth, [record], [40.5, 41.0, 41.5], None))
    assert "scored 41.00 on validation in lowercased, tokenized BLEU (the lc-tok column) (40.50-41.50)" in text
    assert f"Its candidates' budgets are not the preset's, on purpose: {fourth.budget_apart}" in text
    assert "| tiny-recipe-hour | c | 45.00 | within | 43.00 | 3795 |" in text
    assert recipe.NOT_DRAWN in text and "![" not in text and not recipe.drawn(fourth) and recipe.drawn(third)


def test_a_record_in_the_other_precision_stands_for_the_candidate_once_they_train_alike(tmp_path, monkeypatch):
    candidate = recipe.ROUNDS[2].candidates[0]
    path = tmp_path / candidate.name / recipe.RECORD
    path.parent.mkdir()
    path.write_text(json.dumps({"settings": candidate.settings("multi30k", comparable.BF16)}))
    assert recipe.recorded(candidate, "multi30k", comparable.BF16, tmp_path)
    assert recipe.recorded(candidate, "multi30k", FP32, tmp_path)  # PRECISION_EVIDENCE: measured alike
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)
    assert recipe.recorded(candidate, "multi30k", FP32, tmp_path) is None
    assert recipe.recorded(recipe.ROUNDS[2].candidates[1], "multi30k", comparable.BF16, tmp_path) is None


def test_every_candidate_not_yet_recorded_is_that_of_the_open_rounds(tmp_path, monkeypatch):
    """Without --candidates the command skips the closed rounds (their candidates train no more) and trains the
    open ones' candidates not recorded, in order."""
    trained = []
    monkeypatch.setattr(recipe, "ROUNDS", recipe.ROUNDS[:3])
    monkeypatch.setattr(recipe, "recorded", lambda candidate, *args: candidate.name != "dropout-0.3")
    monkeypatch.setattr(recipe, "check_comparable", lambda *args: None)
    monkeypatch.setattr(recipe, "write_page", lambda *args: None)
    monkeypatch.setattr(
        recipe, "train", lambda candidate, *args: trained.append(candidate.name) or {"validation_bleu": 1.0}
    )
    recipe.run(["--results", str(tmp_path), "--repeats", str(tmp_path), "--page", str(tmp_path / "page.md")])
    assert trained == ["dropout-0.3"]


def test_each_size_trains_at_the_rate_its_table3_walk_gives_it():
    """The learning-rate rule: a candidate of another size has ``--lr_scale`` = its size's rate in Table 3's walk / the
    base's, read from the committed records; a walk that moves makes this fail, and the candidate is stated again."""
    walks = table3.size_walks(table3.records(table3.RESULTS)).walks
    base = walks["base"].chosen()
    sizes = {lr_walk.size_and_scale(table3.FLAGS[name])[0]: walk.chosen() / base for name, walk in walks.items()}
    checked = 0
    for candidate in recipe.ROUNDS[2].candidates:
        flags = dict(zip(candidate.flags[::2], candidate.flags[1::2], strict=True))
        size = [part for flag in sorted(SIZE_FLAGS & flags.keys()) for part in (flag, flags[flag])]
        if size:
            assert float(flags.get("--lr_scale", 1)) == sizes[tuple(size)], candidate.name
            checked += 1
    assert checked == 5  # d_model 512 (twice), N = 2, N = 4, d_ff 2048


def test_a_candidate_trains_only_where_its_run_compares_with_its_presets_runs(monkeypatch):
    """experiments/comparable.py's rule, but the code (the band holds runs of earlier code on purpose): the same
    budget, kind of device and precision."""
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    summaries = [
        {
            "role": "seed",
            "validation": {"bleu": 42.0},
            "arguments": {"warmup_steps": 1200, "max_steps": 7200},
            "run": synthetic_run(),
        },
        {
            "role": "seed",
            "validation": {"bleu": 40.0},
            "arguments": {"warmup_steps": 600},
            "run": synthetic_run(minutes=54, max_steps=None),
        },
    ]
    records = {
        1: [{"candidate": "preset", "validation_bleu": 40.0, "run": synthetic_run(minutes=54, max_steps=None)}],
        3: [{"candidate": "preset-7200-steps", "validation_bleu": 43.0, "run": synthetic_run(code="older")}],
    }
    first, _, third = recipe.ROUNDS[:3]
    runs = recipe.preset_run_records(third, records, summaries)
    assert [run["code"]["code_tree"] for run in runs] == ["new", "older"]
    recipe.check_comparable(third, synthetic_run(code="newest"), runs)  # other code: read against them all the same
    with pytest.raises(
        UsageError,
        match=r"^round 3: a candidate run here could not be read against its preset's "
        r"runs: other precisions \(bf16 autocast and fp32\): not measured to train alike$",
    ):
        recipe.check_comparable(third, synthetic_run("bf16 autocast"), runs)
    with pytest.raises(UsageError, match=r"a budget in minutes \(54\): the steps it reaches depend on the machine"):
        recipe.check_comparable(
            first, synthetic_run(minutes=54, max_steps=None), recipe.preset_run_records(first, records, summaries)
        )


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        # round 1's candidates changed the preset with warmup 600; the YAML has 1,200 since
        (
            "layers-4-dropout-0.2",
            r"^round 1 \(the preset of 2026-11-24 \(warmup 600\)\) is closed: its candidates "
            r"change the preset with `warmup_steps: 600`, and --config multi30k now has `warmup_steps: 1200`$",
        ),
        # round 2's changed it when it trained for 54 minutes; the budget is 7,200 steps since
        (
            "bpe-dropout-0.2",
            r"^round 2 \(warmup 1,200 \(round 1's choice\)\) is closed: its candidates change the "
            r"preset with `warmup_steps: 1200`, `max_train_minutes: 54`, and --config multi30k now has "
            r"`warmup_steps: 1200`, `max_train_minutes: 0.0`$",
        ),
    ],
)
def test_a_closed_round_trains_nothing(tmp_path, candidate, message):
    """Training a closed round's candidate would read it against a band measured on another preset: refused before
    anything trains."""
    with pytest.raises(UsageError, match=message):
        recipe.run(["--config", "multi30k", "--candidates", candidate, "--results", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def preset_repeat(results, name: str, bleu: float, role: str, arguments: dict) -> None:
    (results / name).mkdir(parents=True)
    summary = {
        "role": role,
        "validation": {"bleu": bleu},
        "arguments": arguments,
        "run": synthetic_run(max_steps=3, tokens=256),
    }
    (results / name / "summary.json").write_text(json.dumps(summary))


@pytest.mark.slow
def test_the_command_trains_records_skips_and_reports(tmp_path, monkeypatch):
    """Round 3's candidates on a tiny preset end to end (round 3 read as changing a preset of 3 steps): trained,
    recorded with their validation BLEU (the summary's), steps and code, skipped on the second call; the page lists
    both, best first, against the band of the preset's runs (repeats with role canonical or seed and its values; not
    an ablation, not a run of an earlier round's preset), the figure of their learning curves beside it, and the
    closed round's candidates as closed."""
    first, second, third = recipe.ROUNDS[:3]
    tiny_round = replace(third, preset={"warmup_steps": 1200, "max_steps": 3})
    monkeypatch.setattr(recipe, "ROUNDS", (first, second, tiny_round))
    for name, bleu, role, arguments in (
        ("canonical", 1.0, "canonical", tiny_round.preset),
        ("repeat", 2.0, "seed", tiny_round.preset),
        ("repeat2", 3.0, "seed", tiny_round.preset),
        ("other", 90.0, "ablation", tiny_round.preset),
        ("minutes", 70.0, "seed", second.preset),
        ("earlier", 80.0, "seed", first.preset),
    ):
        preset_repeat(tmp_path / "repeats", name, bleu, role, arguments)
    preset = tiny_preset(tmp_path, warmup_steps=1200, max_steps=3, save_steps=1)
    argv = [
        "--config",
        str(preset),
        "--candidates",
        "bpe-dropout-0.2-at-7200-steps",
        "average-20-at-7200-steps",
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(tmp_path / "results"),
        "--page",
        str(tmp_path / "recipe.md"),
        "--repeats",
        str(tmp_path / "repeats"),
    ]
    recipe.run(argv)
    found = recipe.read_records(tmp_path / "results")
    records = {r["candidate"]: r for r in found[3]}
    assert (
        not found[1] and not found[2] and set(records) == {"bpe-dropout-0.2-at-7200-steps", "average-20-at-7200-steps"}
    )
    for name, record in records.items():
        summary = json.loads((tmp_path / "results" / "round-3" / name / "summary.json").read_text())
        assert record["validation_bleu"] == summary["validation"]["bleu"] and not summary["test"]
        assert record["steps"] == 3 and record["epochs"] > 0 and record["fp32_gflops_before"] > 0
        assert record["run"] == summary["run"] and record["run"]["precision"] == experiment_precision()  # the machine's
        assert record["run"]["code"]["commit"] and record["run"]["machine"]["cpu_cores"] >= 1
        assert summary["arguments"]["warmup_steps"] == 1200  # the preset's, which the round changes
    assert records["average-20-at-7200-steps"]["settings"][-4:] == ["--average_last", "20", "--save_total_limit", "20"]
    assert "--bpe_dropout 0.2" in records["bpe-dropout-0.2-at-7200-steps"]["command"]
    page = (tmp_path / "recipe.md").read_text().splitlines()
    rows = [
        line for line in page if line.startswith(("| bpe-dropout-0.2-at-7200-steps |", "| average-20-at-7200-steps |"))
    ]
    best = max(records.values(), key=lambda r: r["validation_bleu"])["candidate"]
    assert len(rows) == 2 and rows[0].startswith(f"| {best} |")
    runs = recipe.preset_runs(tiny_round, found, recipe.full_runs(tmp_path / "repeats"))
    band = recipe.Band.of(runs)
    assert runs == [1.0, 2.0, 3.0] and f"**{band.low:.2f}-{band.high:.2f}**" in "\n".join(page)
    assert f"Chosen in this round so far: **{recipe.chosen(tiny_round, found[3], band)}**." in page
    ran = replace(tiny_round, candidates=tuple(c for c in tiny_round.candidates if c.name in records))
    section = recipe.round_section(ran, found[3], runs, None)  # every candidate recorded: the choice is final
    assert f"Chosen in this round: **{recipe.chosen(ran, found[3], band)}**." in section
    assert not any(line.startswith("Not yet recorded") for line in section)
    assert "The preset has 1 recorded run, too few for a band: nothing replaces it yet." in "\n".join(page)  # round 1
    closed = [line for line in page if line.startswith("Closed before these ran")]  # rounds 1 and 2: none run here
    assert len(closed) == 2 and "`warmup_steps: 600`, and --config" in closed[0]
    assert f"`max_train_minutes: 54`, and --config {preset} now has" in closed[1] and "bpe-dropout-0.2 (" in closed[1]
    figure = recipe.curves_file(tiny_round)
    assert f"![Round 3: the validation check of every candidate against training minutes]({figure})" in page
    assert (tmp_path / figure).read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / recipe.curves_file(first)).exists()  # round 1: no records here, no figure
    path = tmp_path / "results" / "round-3" / "average-20-at-7200-steps" / recipe.RECORD
    stamp = path.stat().st_mtime_ns
    recipe.run(argv)  # recorded: skipped
    assert path.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_a_stopped_candidate_goes_on_from_its_checkpoint_and_one_of_other_settings_is_refused(
    tmp_path, monkeypatch, capfd
):
    """A candidate stopped while it trained (SIGTERM in step 2 of 4) is resumed by the same command, not trained
    again: its record counts both launches' minutes. A folder holding a run of other settings is refused, naming the
    setting and leaving the run there; --start_over trains the candidate from scratch."""
    first, second, third = recipe.ROUNDS[:3]
    tiny_round = replace(third, preset={"warmup_steps": 1200, "max_steps": 4})
    monkeypatch.setattr(recipe, "ROUNDS", (first, second, tiny_round))
    monkeypatch.setattr(recipe, "check_comparable", lambda *args: None)  # no preset runs here to compare with
    preset = tiny_preset(tmp_path, warmup_steps=1200, max_steps=4, save_steps=1, save_total_limit=2)
    runs, results = tmp_path / "runs" / "round-3", tmp_path / "results" / "round-3"
    argv = [
        "--config",
        str(preset),
        "--candidates",
        "dropout-0.3",
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(tmp_path / "results"),
        "--page",
        str(tmp_path / "recipe.md"),
        "--repeats",
        str(tmp_path / "none"),
    ]
    candidate = next(c for c in tiny_round.candidates if c.name == "dropout-0.3")
    settings = candidate.settings(str(preset), experiment_precision())
    stop_at_step_2(settings, runs / "dropout-0.3", results / "dropout-0.3")
    recipe.run(argv)
    assert f"resuming from {runs / 'dropout-0.3' / 'checkpoint-2'}" in capfd.readouterr().err
    record = json.loads((results / "dropout-0.3" / recipe.RECORD).read_text())
    launches = record["run"]["launches"]
    assert [(launch["first_step"], launch["last_step"]) for launch in launches] == [(0, 2), (2, 4)]
    assert record["steps"] == 4 and record["train_minutes"] == round(sum(x["train_minutes"] for x in launches), 2)
    assert "--overwrite_output_dir" not in record["command"]
    speed = f"| {record['fp32_gflops_before']} (last of 2 launches) |"  # the machine of the launch that finished it
    assert speed in (tmp_path / "recipe.md").read_text()

    other = runs / "layers-4"  # a stopped run of dropout 0.2 where layers-4 trains
    stop_at_step_2([*settings[:-2], "--dropout", "0.2"], other, tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="layers-4: vanilla-train exited with status 1 .* --start_over trains"):
        recipe.run([*argv[:2], "--candidates", "layers-4", *argv[4:]])
    assert "dropout 0.2 -> 0.1" in capfd.readouterr().err and (other / "checkpoint-2").is_dir()
    assert not (results / "layers-4").exists()
    recipe.run([*argv[:2], "--candidates", "layers-4", *argv[4:], "--start_over"])
    record = json.loads((results / "layers-4" / recipe.RECORD).read_text())
    assert record["steps"] == 4 and len(record["run"]["launches"]) == 1
    assert "--overwrite_output_dir" in record["command"]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            143,
            r"^dropout-0.3: stopped by SIGTERM, with a complete checkpoint in .*dropout-0.3; the same command goes "
            r"on from it$",
        ),
        (130, r"^dropout-0.3: stopped by SIGINT, "),
        (1, r"^dropout-0.3: vanilla-train exited with status 1 .* --start_over trains the candidate again"),
    ],
)
def test_a_candidate_stopped_by_a_signal_is_said_to_go_on(tmp_path, monkeypatch, status, message):
    """vanilla-train's status after a signal's checkpoint (128 + its number) says the same command goes on; any other
    failure points at its message and, for a folder of other settings, --start_over. Nothing is recorded."""
    monkeypatch.setattr(launch.subprocess, "run", lambda command, cwd: subprocess.CompletedProcess(command, status))
    candidate = next(c for c in recipe.ROUNDS[2].candidates if c.name == "dropout-0.3")
    with pytest.raises(UsageError, match=message):
        recipe.train(candidate, "multi30k", FP32, tmp_path / "runs", tmp_path / "results", start_over=False)
    assert not (tmp_path / "results").exists()


def test_a_damaged_record_is_named_with_what_to_do(tmp_path):
    first = recipe.ROUNDS[0]
    damaged = tmp_path / first.folder / first.candidates[0].name / recipe.RECORD
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"candidate": ')  # cut off while written
    with pytest.raises(UsageError, match=f"{re.escape(str(damaged))} is not valid JSON .*: restore it from git"):
        recipe.read_records(tmp_path)
    (tmp_path / "run" / "summary.json").parent.mkdir()
    (tmp_path / "run" / "summary.json").write_text("[]")
    with pytest.raises(UsageError, match="summary.json holds a list, not an object: restore it from git"):
        recipe.full_runs(tmp_path)


def test_the_page_is_generated_from_the_committed_records():
    found = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "results/recipe/*/recipe.json"], capture_output=True, text=True, check=True
    ).stdout.split()
    records = recipe.read_records(recipe.RESULTS, {ROOT / path for path in found})
    assert sum(map(len, records.values())) == len(found)  # every committed record is some round's candidate
    assert recipe.PAGE.read_text() == recipe.report(
        records, recipe.full_runs(recipe.REPEATS), recipe.arguments().get_default("config")
    )
