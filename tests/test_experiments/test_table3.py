"""Table 3 on Multi30k (experiments.table3): the runs in the order that decides most first, one resumable command
with its records and learning curves, and the page generated from them under the verdict rule."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F
from training_helpers import synthetic_run, tiny_preset
from transformers import AutoModelForSeq2SeqLM

from experiments import comparable, launch, table3, table3_page
from experiments.comparable import BF16, FP32, experiment_precision
from experiments.verdict import difference
from training.data.batching import batch_shapes
from training.run.record import check_run_record
from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.cli import UsageError, load_tokenizer
from vanilla_tools.provenance import ROOT, generated

PAPER = {
    "C-layers-2": {"change": "N = 4", "ppl": 5.19, "bleu": 25.3},
    "B-dk-16": {"change": "d_k = 16", "ppl": 5.16, "bleu": 25.1},
    "base": {"change": "base", "ppl": 4.92, "bleu": 25.8},
    "D-dropout-0.2": {"change": "P_drop = 0.2", "ppl": 4.95, "bleu": 25.5},
}


def test_the_sweep_runs_the_base_then_the_decided_rows_then_the_rest():
    runs = table3.plan(table3.select(None, []), [1, 2, 3], 1000)
    assert len(runs) == 3 * 41 and len({run.folder for run in runs}) == len(runs)
    names = list(dict.fromkeys(run.row.name for run in runs))
    assert names[0] == "base" and names[1 : 1 + len(table3.PRIORITY)] == list(table3.PRIORITY)
    first = names.index("restricted-r-4")  # then the schedule rows, last: not in the paper
    assert names[first : first + 3] == ["restricted-r-4", "restricted-r-8", "schedule-layers-4-lr-half"]
    assert all(name.startswith("schedule-") for name in names[first + 2 :])
    assert [run.seed for run in runs[:6]] == [1, 2, 3, 1, 2, 3]  # a row's seeds together: its cell decides sooner
    assert runs[3].folder == "1000-steps/fp32/A-heads-1/seed-1"  # the sweep's precision keeps its runs apart


def test_every_row_of_the_rows_file_is_a_vanilla_train_change():
    """experiments/table3_rows.yaml is data: a misspelt flag, a repeated name or an unknown group fails here, not
    hours into a sweep."""
    names = [row.name for row in table3.ROWS]
    assert len(names) == len(set(names)) == 41
    assert {row.group for row in table3.ROWS} == {"base", "(A)", "(B)", "(C)", "(D)", "(E)", "restricted", "schedule"}
    for run in table3.plan(list(table3.ROWS), [1], 1000):
        parsed = table3.parse_args([*run.settings("multi30k"), "--output_dir", "out"])
        for flag, value in zip(run.row.flags[::2], run.row.flags[1::2], strict=True):  # each reaches its setting
            name = flag.removeprefix("--")
            setting = next(getattr(arguments, name) for arguments in parsed if hasattr(arguments, name))
            assert str(setting) == value or float(setting) == float(value), (run.row.name, flag, setting)
    assert table3.ROWS[0].paper == {"change": "base", "ppl": 4.92, "bleu": 25.8, "params_m": 65}


def test_rows_are_chosen_by_name_group_or_the_longer_budgets_rule():
    assert [row.name for row in table3.select(["A"], [])] == ["A-heads-1", "A-heads-2", "A-heads-8", "A-heads-16"]
    schedule = [row.name for row in table3.select(["schedule"], [])]
    assert schedule[:3] == ["schedule-layers-4-lr-half", "schedule-lr-half", "schedule-lr-quarter"]
    longer = [row.name for row in table3.select(["longer"], [])]  # no verdict yet: the base and the (C) rows
    assert longer[0] == "base" and {row.group for row in table3.select(["longer"], [])} == {"base", "(C)"}
    opposite = [record("base", seed, 16.0 + seed / 10, 21.0) for seed in (1, 2, 3)]
    opposite += [record("B-dk-16", seed, 14.0 + seed / 10, 21.0) for seed in (1, 2, 3)]  # paper: worse; here better
    assert "B-dk-16" in [row.name for row in table3.select(["longer"], opposite)]
    differs = [record("D-dropout-0.2", seed, 19.0 + seed / 10, 21.0) for seed in (1, 2, 3)]  # paper: no change
    assert "D-dropout-0.2" in [row.name for row in table3.select(["longer"], opposite[:3] + differs)]


def test_every_run_is_a_vanilla_train_command_with_its_seed_curve_and_precision(monkeypatch):
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    run = table3.plan(table3.select(["A-heads-1"], []), [2], 3000)[0]
    argv = [*run.settings("multi30k"), "--output_dir", "out", "--summary_dir", "rec"]
    model_args, _, training_args = table3.parse_args(argv)
    assert run.precision == FP32 == experiment_precision() and not training_args.bf16  # not measured to agree: fp32
    assert model_args.max_train_minutes == 0  # the budget is steps, the same on every machine
    bf16 = table3.plan(table3.select(["A-heads-1"], []), [2], 3000, BF16)[0]
    settings = bf16.settings("multi30k")
    assert bf16.folder == "3000-steps/bf16/A-heads-1/seed-2" and settings[settings.index("--bf16") + 1] == "true"
    assert model_args.num_attention_heads == 1 and model_args.final_splits == ["validation"]
    assert model_args.average_last == 0 and training_args.max_steps == 3000 and training_args.seed == 2
    assert training_args.save_strategy == "steps" and training_args.save_steps == 100
    assert training_args.save_only_model and training_args.save_total_limit == 31  # every curve point kept


@pytest.mark.slow
def test_a_run_recorded_in_the_other_precision_stands_for_it_once_they_are_measured_alike(tmp_path, monkeypatch):
    """Without the evidence, a sweep in fp32 trains a run that a bf16 machine recorded; with it, that record stands
    for the run and the machine goes on with the next."""
    bf16, fp32 = (table3.plan(table3.select(["A-heads-1"], []), [1], 1000, precision)[0] for precision in (BF16, FP32))
    folder = tmp_path / bf16.folder
    folder.mkdir(parents=True)
    (folder / table3.RECORD).write_text(json.dumps({"settings": bf16.settings("multi30k"), "run": synthetic_run()}))
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)
    assert table3.recorded(fp32, "multi30k", tmp_path) is None
    assert table3.recorded(bf16, "multi30k", tmp_path)["settings"] == bf16.settings("multi30k")
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", "docs/table3.md#precision")
    assert table3.recorded(fp32, "multi30k", tmp_path)["settings"] == bf16.settings("multi30k")


def test_a_run_on_a_gpu_is_filed_apart_and_a_cpu_record_does_not_stand_for_it(tmp_path, monkeypatch):
    """A GPU and a CPU have not been measured to train alike (experiments/comparable.py): a lent GPU trains the runs
    the CPUs recorded, into folders of its own, and the page counts its seed as another replicate than the CPU's."""
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", "docs/table3.md#precision")
    cpu, gpu = (
        table3.plan(table3.select(["A-heads-1"], []), [1], 1000, BF16, device=kind)[0] for kind in ("cpu", "cuda")
    )
    assert (cpu.folder, gpu.folder) == ("1000-steps/bf16/A-heads-1/seed-1", "1000-steps/bf16-cuda/A-heads-1/seed-1")
    assert table3.device_kind() == "cpu"  # this machine has no GPU
    # the GPU trains the CPU's batches, unbucketed, though CUDA's own default buckets them: the preset says so. Its
    # settings ask for bf16, which vanilla-train refuses on a CPU that emulates it; parsed here as on a GPU
    monkeypatch.setattr("training.arguments.cpu_bf16", lambda: True)
    gpu_args = table3.parse_args([*gpu.settings("multi30k"), "--output_dir", "out"])[1]
    assert batch_shapes(gpu_args, "cuda") == batch_shapes(gpu_args, "cpu") == BatchShapes()
    for one in (cpu, table3.plan(table3.select(["A-heads-1"], []), [1], 1000, FP32)[0]):
        (tmp_path / one.folder).mkdir(parents=True)
        record = {"settings": one.settings("multi30k"), "run": synthetic_run(one.precision.split()[0])}
        (tmp_path / one.folder / table3.RECORD).write_text(json.dumps(record))
    assert table3.recorded(cpu, "multi30k", tmp_path) is not None and table3.recorded(gpu, "multi30k", tmp_path) is None
    runs = [
        {"code_key": "new", "seed": 1, "date": date, "run": synthetic_run(device=kind)}
        for date, kind in (("1", "cpu"), ("2", "cuda"), ("3", "cpu"))
    ]
    assert table3_page.one_per_seed(runs) == runs[:2]


def test_the_command_trains_records_skips_and_reports(tmp_path):
    """Two rows of a tiny preset end to end: trained, recorded with perplexity, learning curve, BLEU and code, skipped
    on the second call, trained again when their settings change; the page lists them beside the paper's rows."""
    preset = tiny_preset(tmp_path)

    def argv(curve_steps: int, *rows: str) -> list[str]:  # in fp32: a bf16 CPU's default is bf16
        return [
            "--config",
            str(preset),
            "--steps",
            "2",
            "--curve_steps",
            str(curve_steps),
            "--seeds",
            "1",
            "--rows",
            *rows,
            "--runs",
            str(tmp_path / "runs"),
            "--results",
            str(tmp_path / "results"),
            "--page",
            str(tmp_path / "t.md"),
            "--precision",
            "fp32",
        ]

    table3.run(argv(1, "base", "B-dk-32"))
    path = tmp_path / "results" / "2-steps" / "fp32" / "B-dk-32" / "seed-1" / "table3.json"
    record = json.loads(path.read_text())
    assert record["steps"] == 2 and record["seed"] == 1 and record["flags"] == ["--head_dim", "32"]
    assert [point["step"] for point in record["curve"]] == [1, 2] and record["curve"][-1]["validation_ppl"] > 1
    assert record["curve"][-1]["validation_ppl"] == record["validation_ppl"]  # the last checkpoint is the model
    assert not list((tmp_path / "runs" / "2-steps" / "fp32" / "B-dk-32" / "seed-1").glob("checkpoint-*"))  # measured
    assert record["validation_tokens"] > 20 * 5 and 0 <= record["validation_bleu"] <= 100
    assert record["paper"] == {"change": "d_k = 32", "ppl": 5.01, "bleu": 25.4, "params_m": 60}
    summary = json.loads((path.parent / "summary.json").read_text())
    check_run_record(record["run"])
    assert record["run"] == summary["run"] and record["date"] and "code_tree" in record["run"]["code"]
    assert record["run"]["precision"] == FP32 and not summary["arguments"]["bf16"]  # the sweep's, not the CPU's
    assert (
        record["run"]["budget"]
        == {"max_steps": 2, "num_train_epochs": None, "max_train_minutes": None, "tokens_per_step": 256}
        and record["run"]["steps"] == 2
    )
    assert record["command"].startswith("python -m training.train --config") and "--seed 1" in record["command"]
    assert_unsmoothed_perplexity(tmp_path / "runs" / "2-steps" / "fp32" / "base" / "seed-1", preset)
    page = (tmp_path / "t.md").read_text()
    assert "2 runs recorded" in page and "| (B) B-dk-32 | d_k = 32 |" in page and ": too few seeds |" in page
    assert "![(B), 2 steps](table3-curves/2-steps-B.png)" in page
    assert (tmp_path / "table3-curves" / "2-steps-B.png").stat().st_size > 5_000
    stamp = path.stat().st_mtime_ns
    table3.run(argv(1, "base", "B-dk-32"))  # recorded: skipped
    assert path.stat().st_mtime_ns == stamp
    table3.run(argv(2, "B-dk-32"))
    assert [point["step"] for point in json.loads(path.read_text())["curve"]] == [2]  # other settings: trained again


def assert_unsmoothed_perplexity(run: Path, preset: Path) -> None:
    """The validation perplexity (in batches) is exp of the model's cross-entropy without label smoothing over every
    target token of the set at once, </s> included: torch's own, from the logits."""
    tokenizer = load_tokenizer(str(run))
    validation = table3.validation_set(["--config", str(preset), "--output_dir", str(run)], tokenizer)
    source = tokenizer.pad({"input_ids": validation["input_ids"]}, return_tensors="pt")
    target = tokenizer.pad({"input_ids": validation["labels"]}, return_tensors="pt")
    labels = target["input_ids"].masked_fill(target["attention_mask"] == 0, -100)
    with torch.no_grad():
        logits = AutoModelForSeq2SeqLM.from_pretrained(run).eval()(**source, labels=labels, skip_logits=False).logits
    entropy = F.cross_entropy(logits.flatten(0, 1), labels.flatten()).item()
    ppl, tokens = table3.validation_perplexity(run, validation, tokenizer, batch_size=7)
    assert tokens == int((labels != -100).sum()) and ppl == pytest.approx(math.exp(entropy), rel=1e-5)


def test_a_measurement_cut_short_goes_on_from_its_kept_points_without_training_again(tmp_path, monkeypatch):
    """A run stopped while its curve is measured (after the first of two checkpoints) is not trained again on the
    next call: the point kept before its checkpoint was removed stays, the other checkpoint is measured, and the
    record holds both."""
    argv = [
        "--config",
        str(tiny_preset(tmp_path)),
        "--steps",
        "2",
        "--curve_steps",
        "1",
        "--seeds",
        "1",
        "--rows",
        "base",
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(tmp_path / "results"),
        "--page",
        str(tmp_path / "t.md"),
        "--precision",
        "fp32",
    ]
    measure, calls = table3.validation_perplexity, []

    def stopped_at_the_second(checkpoint, validation, tokenizer):
        calls.append(Path(checkpoint).name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return measure(checkpoint, validation, tokenizer)

    monkeypatch.setattr(table3, "validation_perplexity", stopped_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        table3.run(argv)
    output = tmp_path / "runs" / "2-steps" / "fp32" / "base" / "seed-1"
    assert calls == ["checkpoint-1", "checkpoint-2"]
    assert [checkpoint.name for checkpoint in output.glob("checkpoint-*")] == ["checkpoint-2"]
    (kept,) = json.loads((output / table3.CURVE_POINTS).read_text())
    monkeypatch.setattr(table3, "validation_perplexity", measure)
    run_command = launch.subprocess.run

    def not_trained(command, *args, **kwargs):  # git, for the code's provenance, still runs
        assert "training.train" not in command, "trained again"
        return run_command(command, *args, **kwargs)

    monkeypatch.setattr(launch.subprocess, "run", not_trained)
    table3.run(argv)
    record = json.loads((tmp_path / "results" / "2-steps" / "fp32" / "base" / "seed-1" / "table3.json").read_text())
    assert record["curve"][0] == kept and kept["step"] == 1 and kept["validation_ppl"] > 1
    assert [point["step"] for point in record["curve"]] == [1, 2] and not list(output.glob("checkpoint-*"))
    assert record["curve"][-1]["validation_ppl"] == record["validation_ppl"]
    trained = json.loads((output / table3.TRAINED).read_text())
    assert trained["code"] == record["run"]["code"]["code_tree"] or trained["code"].endswith(" modified")
    assert trained["minutes"] > 0 and record["row_minutes"] >= round(trained["minutes"], 2)  # training, then measuring


def test_a_run_finished_at_other_code_or_arguments_is_trained_again(tmp_path):
    """Only a run that finished training with the same arguments at the same code is measured without training it
    again: at other code (--rerun_other_code) vanilla-train would take the finished run of the same flags for this
    one. A damaged record is named."""
    argv = ["--config", "tiny.yaml", "--overwrite_output_dir", "--output_dir", "out"]
    (tmp_path / table3.TRAINED).write_text(json.dumps({"argv": argv, "code": "4f460c9263c5", "minutes": 12.5}))
    assert table3.finished_training(tmp_path, argv, "4f460c9263c5") == 12.5
    assert table3.finished_training(tmp_path, argv, "0123456789ab") is None
    assert table3.finished_training(tmp_path, [*argv, "--seed", "2"], "4f460c9263c5") is None
    (tmp_path / table3.TRAINED).write_text(json.dumps({"argv": argv, "minutes": 12.5}))  # 327510a's: no code
    assert table3.finished_training(tmp_path, argv, "4f460c9263c5") is None
    (tmp_path / table3.TRAINED).write_text("{")
    with pytest.raises(UsageError, match=f"{table3.TRAINED} is not valid JSON .*: delete .* and the run is trained"):
        table3.finished_training(tmp_path, argv, "4f460c9263c5")


def record(
    row, seed, ppl, bleu, steps=1000, code="new", curve=(), date="2026-12-01", group=None, precision="bf16 autocast"
):
    """A synthetic run record (``code`` None: one of the first sweep's, which named a commit only)."""
    run = synthetic_run(precision, code or "bc03505", max_steps=steps, seed=seed)
    if code is None:
        del run["code"]["code_tree"]
    return {
        "row": row,
        "group": group or ("base" if row == "base" else f"({row[0]})"),
        "change": row,
        "seed": seed,
        "flags": [],
        "steps": steps,
        "paper": PAPER.get(row, {}),
        "validation_ppl": ppl,
        "validation_bleu": bleu,
        "parameters": 7.6e6,
        "row_minutes": 8.0,
        "curve": [{"step": s, "validation_ppl": p} for s, p in curve],
        "run": run,
        **({"date": date} if code else {}),
    }


def synthetic_sweep() -> list[dict]:
    """The first sweep's base (three seeds at bc03505) and one row beside a new sweep at code "new": its base and
    C-layers-2 opposite the paper at 1,000 steps, at 3,000 the same in BLEU and gone in PPL; B-dk-16 at other code,
    B-dk-32 in fp32 (a CPU without bf16) against the base's bf16 autocast."""
    runs = [
        record("base", seed, ppl, bleu, code=None)
        for seed, ppl, bleu in ((1, 16.41, 20.96), (2, 16.44, 22.35), (3, 15.66, 21.83))
    ]
    runs.append(record("A-heads-1", 1, 17.46, 19.77, code=None))
    for seed, (ppl, bleu) in enumerate(((16.4, 21.0), (16.5, 22.3), (15.7, 21.8)), start=1):
        runs.append(record("base", seed, ppl, bleu, curve=((100, 60.0 - seed), (200, 30.0 - seed))))
        runs.append(record("base", seed, ppl - 7, bleu + 8.5, steps=3000, curve=((2500, 9.4), (3000, ppl - 7))))
    for seed, (ppl, bleu) in enumerate(((12.9, 26.4), (13.1, 26.0), (12.7, 26.8)), start=1):
        runs.append(record("C-layers-2", seed, ppl, bleu, curve=((100, 50.0), (200, 25.0))))
        runs.append(record("C-layers-2", seed, ppl - 3.6, bleu + 5.8, steps=3000))
        runs.append(record("B-dk-16", seed, ppl + 4, bleu - 4, code="older", date="2026-11-30"))
        runs.append(record("B-dk-32", seed, ppl - 3, bleu + 3, precision="fp32"))
    return runs


def line(page: str, start: str, section: str = "## 1,000 steps") -> str:
    """The one line of ``section`` that starts with ``start``."""
    text = page.split(section, 1)[1].split("\n## ", 1)[0]
    (found,) = [text for text in text.splitlines() if text.startswith(start)]
    return found


def test_the_page_gives_each_cell_its_difference_interval_and_word(tmp_path, monkeypatch):
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    runs = synthetic_sweep()
    page = table3.report(runs)
    base = line(page, "| base |")
    assert (
        "| 1, 2, 3 | new0000 | 16.20 (15.70-16.50) | 21.70 (21.00-22.30) | base | 4.92 | 25.8 |" in base
    )  # the new code's
    diff = difference([12.9, 13.1, 12.7], [16.4, 16.5, 15.7])
    low, high = diff.interval()
    assert f"| {diff.delta:+.2f} [{low:+.2f}, {high:+.2f}]: opposite |" in line(page, "| (C) C-layers-2 |")
    assert "| 5.19 (+0.27) | 25.3 (-0.50) |" in line(page, "| (C) C-layers-2 |")
    # one seed of the first sweep, against the new base (16.20, 21.70): a difference, no interval, no word
    assert line(page, "| (A) A-heads-1 |").endswith("| +1.26: too few seeds | -1.93: too few seeds |")
    assert ": base at other code |" in line(page, "| (B) B-dk-16 |")
    assert line(page, "| (B) B-dk-32 |").endswith(": base at other precision |")  # 3 seeds a side, no word
    assert "Cells: 2 *base at other code*, 2 *base at other precision*, 2 *opposite*, 2 *too few seeds*." in page
    assert "The base: 3 seeds at commit new0000, bf16 autocast." in page
    assert "![(C), 1,000 steps](table3-curves/1000-steps-C.png)" in page  # base and row both have curves
    assert (
        "| C-layers-2 | opposite | no change found | slower to start | opposite | opposite | stays at the end |" in page
    )
    assert "validation PPL went from 9.40 at step 2,500 to 9.20 at step 3,000" in " ".join(page.split())  # wrapped
    assert [path.name for path in table3_page.plot_curves([table3_page.normalized(r) for r in runs], tmp_path / "p")]
    assert (tmp_path / "table3-curves" / "1000-steps-C.png").stat().st_size > 5_000
    # the figure names the runs it draws and carries the curves it drew: the new base's, not the first sweep's
    assert table3_page.recorded_in(tmp_path / "table3-curves" / "1000-steps-C.png") == {
        "base": {
            "runs": [f"base seed {seed}: new0000, bf16 autocast, test" for seed in (1, 2, 3)],
            "validation_ppl": [[100, 58.0], [200, 28.0]],
        },
        "C-layers-2": {
            "runs": [f"C-layers-2 seed {seed}: new0000, bf16 autocast, test" for seed in (1, 2, 3)],
            "validation_ppl": [[100, 50.0], [200, 25.0]],
        },
    }


@pytest.mark.parametrize(
    ("short", "long", "word"),
    [
        ("opposite", "holds", "slower to start"),
        ("opposite", "opposite", "stays at the end"),
        ("differs (paper: no change)", "no change found", "slower to start"),
        ("differs (paper: no change)", "differs (paper: no change)", "stays at the end"),
        ("differs (paper: no change)", "too few seeds", "undecided (too few seeds at the longer budget)"),
        ("opposite", None, "undecided (not run at the longer budget)"),
        ("holds", "holds", ""),
        ("no change found", "no change found", ""),
    ],
)
def test_a_disagreement_gone_at_the_longer_budget_was_a_slower_start_and_one_kept_stays_at_the_end(short, long, word):
    """Both words that contradict the paper are disagreements: *opposite*, and *differs* where the paper found none."""
    assert table3_page.start_or_end(short, long) == word


def test_the_page_measures_fp32_against_bf16_by_the_rule_stated_before_the_runs():
    """The base in both precisions at one code: agree only where each interval holds zero and each difference is
    under the seeds' spread; the base every cell reads is the group most rows compare with, not the newest."""
    runs = [record("base", seed, ppl, bleu) for seed, ppl, bleu in ((1, 16.3, 21.7), (2, 15.3, 22.5), (3, 16.4, 23.2))]
    runs += [record("B-dk-32", seed, 16.0, 22.0 + seed / 10) for seed in (1, 2, 3)]
    fp32 = [
        record("base", seed, ppl, bleu, precision=FP32, date="2026-12-02")
        for seed, ppl, bleu in ((1, 16.0, 22.0), (2, 15.6, 22.9), (3, 16.5, 22.4))
    ]
    page = table3.report(runs + fp32)
    assert "The base: 3 seeds at commit new0000, bf16 autocast." in page  # B-dk-32's precision, though fp32 is newer
    row = line(page, "| 1,000 steps |", "## Precision: fp32 against bf16 autocast")
    ppl = difference([16.0, 15.6, 16.5], [16.3, 15.3, 16.4])
    low, high = ppl.interval()
    assert row.startswith(f"| 1,000 steps | new0000 | 1, 2, 3 | 1, 2, 3 | {ppl.delta:+.2f} [{low:+.2f}, {high:+.2f}] |")
    assert row.endswith("| yes |")
    far = [
        record("base", seed, ppl + 3, bleu, precision=FP32)
        for seed, ppl, bleu in ((1, 16.0, 22.0), (2, 15.6, 22.9), (3, 16.5, 22.4))
    ]
    assert line(table3.report(runs + far), "| 1,000 steps |", "## Precision").endswith("| no |")
    assert "No budget has base runs of both precisions" in table3.report(runs)


def test_once_the_precisions_agree_a_row_in_fp32_reads_against_the_base_and_a_seed_counts_once(monkeypatch):
    """With the evidence, an fp32 row gets its word against the bf16 base; the base's seeds trained in both
    precisions for the check are three replicates, not six (the first record of each: bf16); at another code a
    seed's records are other runs, and both stay for their own group."""
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", "docs/multi30k.md#bf16-autocast-and-fp32")
    runs = [record("base", seed, ppl, bleu) for seed, ppl, bleu in ((1, 16.3, 21.7), (2, 15.3, 22.5), (3, 16.4, 23.2))]
    runs += [
        record("base", seed, ppl, bleu, precision=FP32, date="2026-12-02")
        for seed, ppl, bleu in ((1, 16.0, 22.0), (2, 15.6, 22.9), (3, 16.5, 22.4))
    ]
    runs += [
        record("schedule-lr-half", seed, 13.5 + seed / 10, 25.0, precision=FP32, group="schedule") for seed in (1, 2, 3)
    ]
    page = table3.report(runs)
    assert "The base: 3 seeds at commit new0000, bf16 autocast." in page
    assert "| 1, 2, 3 | new0000 | 16.00 (15.30-16.40) | 22.47 (21.70-23.20) |" in line(page, "| base |")
    ppl = difference([13.6, 13.7, 13.8], [16.3, 15.3, 16.4])
    low, high = ppl.interval()
    assert f"| {ppl.delta:+.2f} [{low:+.2f}, {high:+.2f}]: lower |" in line(page, "| schedule schedule-lr-half |")
    older = [record("base", 1, 17.0, 20.0, code="older", date="2026-11-30"), runs[0]]
    assert table3_page.one_per_seed([table3_page.normalized(r) for r in older + runs[3:4]]) == [
        table3_page.normalized(r) for r in older
    ]


def test_the_page_is_the_generators_output_and_an_output_not_code():
    """docs/table3.md is never edited by hand: it is what --report makes of results/table3/; and neither it nor its
    records make a later record "uncommitted" (vanilla_tools.provenance.GENERATED)."""
    assert table3.PAGE.read_text() == table3.report(table3.records(table3.RESULTS))
    for path in (
        table3.PAGE,
        table3.RESULTS / "1000-steps/bf16/base/seed-1/table3.json",
        table3.PAGE.parent / table3_page.CURVES / "1000-steps-A.png",
    ):
        assert generated(str(path.relative_to(ROOT))), path


def test_each_figure_beside_the_page_is_drawn_from_the_records_as_they_stand():
    """A figure's provenance is its records': each PNG beside docs/table3.md carries the runs behind each curve (row,
    seed, commit, precision, device) and the mean curve it drew, equal to what the records make now; no figure is
    left from runs no longer recorded."""
    found = [table3_page.normalized(r) for r in table3.records(table3.RESULTS)]
    figures = table3_page.figure_runs(found, table3.size_walks(found))
    folder = table3.PAGE.parent
    assert len(figures) >= 9
    for (steps, group), curves in figures.items():
        drawn = table3_page.recorded_in(folder / table3_page.curve_file(steps, group))
        assert drawn == table3_page.figure_record(curves), (steps, group)
    assert sorted(path.relative_to(folder) for path in (folder / table3_page.CURVES).glob("*.png")) == sorted(
        Path(table3_page.curve_file(steps, group)) for steps, group in figures
    )


def test_the_curves_without_matplotlib_name_the_plot_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(
        UsageError,
        match=r"^python -m experiments.table3 needs matplotlib: pip install "
        r'"vanilla-transformer\[plot\]"$',
    ):
        table3_page.plot_curves([], tmp_path / "table3.md")


def test_a_run_an_older_checkouts_runner_recorded_is_filed_with_its_run_record(tmp_path):
    """A row added after the code changed runs at the base's code, whose runner wrote no run record: --adopt files
    it as this runner would have, refuses one trained with other settings, and the sweep then skips it."""
    one = table3.Run(next(row for row in table3.ROWS if row.name == "schedule-lr-quarter"), 1, 1000, FP32)
    settings = one.settings("multi30k")
    at = settings.index("--bf16")
    older = [*settings[:2], "--max_train_minutes", "0", *settings[2:at], *settings[at + 2 :]]
    code = {"commit": "3b6e9b8", "uncommitted_changes": False, "changed_files": [], "code_tree": "4f460c9263c5"}
    host = {"processor": "AMD EPYC (x86_64)", "cpu_cores": 2, "gpus": [], "torch": "2.13.0+cpu"}
    arguments = {
        "bf16": False,
        "seed": 1,
        "max_steps": 1000,
        "num_train_epochs": 40,
        "max_train_minutes": 0.0,
        "max_tokens_per_batch": 2048,
        "gradient_accumulation_steps": 1,
        "use_cpu": True,
    }
    folder = tmp_path / "older" / "1000-steps" / "schedule-lr-quarter" / "seed-1"
    folder.mkdir(parents=True)
    summary = {"validation": {"bleu": 22.7}, "arguments": arguments, "steps": 1000, "code": code, "machine": host}
    (folder / "summary.json").write_text(json.dumps(summary))
    record = {
        "row": "schedule-lr-quarter",
        "group": "schedule",
        "change": "learning rate x 0.25",
        "seed": 1,
        "flags": list(one.row.flags),
        "steps": 1000,
        "settings": older,
        "paper": {},
        "validation_ppl": 21.04,
        "validation_bleu": 22.7,
        "curve": [],
        "parameters": 7577600,
        "row_minutes": 20.97,
        "date": "2026-11-28T05:36:52+0000",
        "code": code,
        "machine": host,
    }
    (folder / "table3.json").write_text(json.dumps(record))
    results, page = tmp_path / "results", tmp_path / "docs" / "table3.md"
    table3.run(["--adopt", str(tmp_path / "older"), "--results", str(results), "--page", str(page)])
    filed = json.loads((results / one.folder / "table3.json").read_text())
    assert one.folder == "1000-steps/fp32/schedule-lr-quarter/seed-1"
    assert filed["settings"] == settings and "code" not in filed and "machine" not in filed
    check_run_record(filed["run"])
    assert filed["run"]["code"] == code and filed["run"]["precision"] == FP32 and filed["run"]["steps"] == 1000
    assert filed["run"]["budget"] == {
        "max_steps": 1000,
        "num_train_epochs": None,
        "max_train_minutes": None,
        "tokens_per_step": 2048,
    }
    assert json.loads((results / one.folder / "summary.json").read_text())["run"] == filed["run"]
    assert table3.recorded(one, "multi30k", results) == filed  # the sweep skips it
    assert table3.adopt(tmp_path / "older", results, "multi30k") == []  # filed once
    assert "| base |" not in page.read_text().split("## 1,000 steps")[1].split("\n## ")[0]  # no base: no cells
    (folder / "table3.json").write_text(json.dumps({**record, "settings": [*older, "--dropout", "0.2"]}))
    with pytest.raises(UsageError, match="trained with .*--dropout"):
        table3.adopt(tmp_path / "older", tmp_path / "other", "multi30k")


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            143,
            r"^1000-steps/fp32/C-layers-4/seed-1: stopped by SIGTERM; a Table 3 run trains in one launch, so the "
            r"sweep trains it again from its start when it runs again$",
        ),
        (130, r"^1000-steps/fp32/C-layers-4/seed-1: stopped by SIGINT; "),
        (2, r"^1000-steps/fp32/C-layers-4/seed-1: vanilla-train exited with status 2 \(command above\)$"),
    ],
)
def test_a_run_stopped_by_a_signal_is_said_to_train_again_from_its_start(tmp_path, monkeypatch, status, message):
    """vanilla-train's status after a signal's checkpoint (128 + its number): the sweep, which trains each run in
    one launch (--overwrite_output_dir), says the run trains again rather than that its checkpoint goes on."""
    monkeypatch.setattr(launch.subprocess, "run", lambda command, cwd: subprocess.CompletedProcess(command, status))
    one = table3.Run(next(row for row in table3.ROWS if row.name == "C-layers-4"), 1, 1000, FP32)
    with pytest.raises(UsageError, match=message):
        table3.train(one, "multi30k", tmp_path / "runs", tmp_path / "results", code="abc")
    assert not (tmp_path / "results").exists()
