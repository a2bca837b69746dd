"""Wu et al.'s recipe, seed by seed (experiments.reproduce): each seed trained (resumed where it stopped), filed with
role reproduction, its settings, its tokens a second and a note written from the record, and skipped once filed."""

import json
import logging
import subprocess
import time

import pytest
from training_helpers import stop_at_step_2, synthetic_run, tiny_preset

from experiments import launch, reproduce, results_index
from training.api import run_train_minutes
from vanilla_tools.cli import UsageError, load_tokenizer
from vanilla_tools.text_form import TextForm


def filed(results, name: str, **fields) -> None:
    (results / name).mkdir(parents=True)
    (results / name / "summary.json").write_text(json.dumps({"run": synthetic_run(), **fields}))


def test_a_seed_is_recorded_only_by_a_reproduction_of_its_settings(tmp_path):
    """A record stands for a seed where its role is reproduction and its settings are the seed's: not a preset run
    of the same seed, not another seed, not the seed of another recipe."""
    filed(tmp_path, "2026-12-01-multi30k-seed2", role="seed", settings=reproduce.Seed("multi30k-tiny", 2).settings())
    filed(tmp_path, "2026-12-02-other-seed2", role="reproduction", settings=reproduce.Seed("other.yaml", 2).settings())
    filed(
        tmp_path,
        "2026-12-03-multi30k-tiny-seed1",
        role="reproduction",
        settings=reproduce.Seed("multi30k-tiny", 1).settings(),
    )
    assert reproduce.recorded(reproduce.Seed("multi30k-tiny", 2), tmp_path) is None
    assert (
        reproduce.recorded(reproduce.Seed("multi30k-tiny", 1), tmp_path) == tmp_path / "2026-12-03-multi30k-tiny-seed1"
    )
    assert reproduce.Seed("multi30k-tiny", 3).settings() == ["--config", "multi30k-tiny", "--seed", "3"]


def test_a_control_is_recorded_apart_from_the_seed_it_repeats(tmp_path):
    """Seed 2 with another tokenizer is a control: its own role, settings, folder and name, so neither record
    stands for the other."""
    control = reproduce.Seed("multi30k-tiny", 2, "runs/their-bpe")
    assert control.settings() == ["--config", "multi30k-tiny", "--seed", "2", "--tokenizer", "runs/their-bpe"]
    assert (control.role, control.name, str(control)) == (
        "control",
        "seed-2-their-bpe",
        "seed 2 with the tokenizer of runs/their-bpe",
    )
    filed(tmp_path, "2026-12-04-multi30k-tiny-seed2-their-bpe", role="control", settings=control.settings())
    assert reproduce.recorded(reproduce.Seed("multi30k-tiny", 2), tmp_path) is None
    assert reproduce.recorded(control, tmp_path) == tmp_path / "2026-12-04-multi30k-tiny-seed2-their-bpe"


def test_a_damaged_record_is_named_with_what_to_do(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text('{"role": ')  # cut off while written
    with pytest.raises(UsageError, match=r"run/summary.json is not valid JSON .*: restore it from git"):
        reproduce.recorded(reproduce.Seed("multi30k-tiny", 1), tmp_path)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            143,
            r"^seed 2: stopped by SIGTERM, with a complete checkpoint in .*seed-2; the same command goes on from it$",
        ),
        (1, r"^seed 2: vanilla-train exited with status 1 \(its message above\)$"),
    ],
)
def test_a_stopped_seed_is_said_to_go_on_and_nothing_is_filed(tmp_path, monkeypatch, status, message):
    monkeypatch.setattr(launch.subprocess, "run", lambda command, cwd: subprocess.CompletedProcess(command, status))
    with pytest.raises(UsageError, match=message):
        reproduce.run(["--seeds", "2", "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")])
    assert not (tmp_path / "results").exists()


def test_a_finished_run_without_its_summary_is_named(tmp_path, monkeypatch):
    """vanilla-train found the seed's run finished (it trains nothing), but its summary is gone: refused in one line,
    nothing filed."""
    monkeypatch.setattr(launch.subprocess, "run", lambda command, cwd: subprocess.CompletedProcess(command, 0))
    with pytest.raises(
        UsageError,
        match=r"^seed 1: .*seed-1 holds the finished run, but .*seed-1-record has no summary.json; delete .*seed-1 "
        r"and the seed is trained again$",
    ):
        reproduce.run(["--seeds", "1", "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")])
    assert not (tmp_path / "results").exists()


def test_tokens_a_second_are_the_runs_own_counts_over_its_training_minutes():
    """From the record alone: the batches' token slots and the text vanilla-train counted (``train_tokens``); a run
    that did not count its text has the batches' rate alone, and its note says no other."""
    summary = {
        "run": {**synthetic_run(max_steps=8000, tokens=8192), "steps": 8000, "launches": [{"train_minutes": 100.0}]},
        "epochs": 50.0,
        "train_tokens": {"source": 300_000, "target": 360_000},
    }
    assert reproduce.throughput(summary) == {
        "batch_tokens_per_second": round(8192 * 8000 / 6000),
        "source_tokens_per_second": 2500,
        "target_tokens_per_second": 3000,
    }
    del summary["train_tokens"]
    assert reproduce.throughput(summary) == {"batch_tokens_per_second": round(8192 * 8000 / 6000)}
    assert reproduce.text_speed(reproduce.throughput(summary)) == ""


def test_the_note_says_what_ran_where_how_fast_and_what_it_scored():
    run = {
        **synthetic_run(max_steps=8000, tokens=8192, seed=2),
        "code": {"commit": "abcdef1234"},
        "machine": {"cpu_cores": 2},
        "device": {"type": "cpu", "name": "Some CPU (x86_64)"},
        "launches": [{"train_minutes": 60.0}, {"train_minutes": 73.5}],
    }
    summary = {
        "run": run,
        "epochs": 115.95,
        "machine_speed": {"fp32_gflops_before": 300.1, "fp32_gflops_after": 290.0},
        "test2016": {"bleu": 40.53, "bleu_lc_tok": 40.51},
        "validation": {"bleu_lc_tok": 41.43},
    }
    speed = {"batch_tokens_per_second": 8177, "target_tokens_per_second": 6859, "source_tokens_per_second": 6687}
    assert reproduce.note(reproduce.Seed("multi30k-tiny", 2), summary, speed, "Paused once.") == (
        "Seed 2 of Wu et al.'s recipe (`--config multi30k-tiny`) at abcdef1, in fp32 on Some CPU (x86_64) (2 CPU "
        "cores; a 1024^3 fp32 matrix product at 300.1 GFLOP/s before its last launch, 290.0 after): 8,000 steps of "
        "8,192 tokens (115.95 epochs) in 133.5 training minutes, 2 launches; 8,177 batch tokens a second (padding "
        "included), 6,859 target and 6,687 source tokens a second. test2016 40.51 lowercased and tokenized (40.53 "
        "sacreBLEU of that text), validation 41.43. Paused once."
    )


@pytest.mark.slow
def test_the_command_resumes_a_stopped_seed_files_it_and_then_skips_it(tmp_path, capfd, caplog, monkeypatch):
    """Seed 1 of a tiny recipe of Wu et al.'s kind (lowercased, Moses-tokenized text, a test split) stopped by
    SIGTERM in step 2 of 4: the command resumes it, files its record (two launches; tokens a second as its batches
    and its text give them) and writes the page's reproduction section; called again, it trains nothing."""
    monkeypatch.setattr(results_index, "ROOT", tmp_path)  # the page links its runs from docs/ up to results/
    data = tmp_path / "data"
    preset = tiny_preset(
        tmp_path,
        max_steps=4,
        save_steps=1,
        save_total_limit=2,
        moses_lowercase_tokenize=True,
        test_files=[str(data / "test.en"), str(data / "test.de")],
    )
    runs, results, page = tmp_path / "runs", tmp_path / "results", tmp_path / "results.md"
    stop_at_step_2(reproduce.Seed(str(preset), 1).settings(), runs / "seed-1", runs / "seed-1-record")
    argv = ["--config", str(preset), "--seeds", "1", "--runs", str(runs), "--results", str(results)]
    reproduce.run([*argv, "--page", str(page), "--note", "A test run."])
    assert f"resuming from {runs / 'seed-1' / 'checkpoint-2'}" in capfd.readouterr().err
    folder = results / f"{time.strftime('%Y-%m-%d')}-tiny-seed1"
    record = json.loads((folder / "summary.json").read_text())
    assert record["role"] == "reproduction" and record["settings"] == ["--config", str(preset), "--seed", "1"]
    launches = record["run"]["launches"]
    assert [(launch["first_step"], launch["last_step"]) for launch in launches] == [(0, 2), (2, 4)]
    assert (folder / "learning_curve.json").is_file() and record["test"]["bleu_lc_tok"] is not None

    seconds = run_train_minutes(record) * 60
    moses, tokenizer = TextForm.moses_lowercase("en", "de"), load_tokenizer(str(runs / "seed-1"))
    text = {
        side: sum(len(tokenizer(moses.prepare(line, lang)).input_ids) for line in (data / f"train.{lang}").open())
        for side, lang in (("source", "en"), ("target", "de"))
    }
    assert record["throughput"] == {
        "batch_tokens_per_second": round(256 * 4 / seconds),
        "source_tokens_per_second": round(text["source"] * record["epochs"] / seconds),
        "target_tokens_per_second": round(text["target"] * record["epochs"] / seconds),
    }
    assert record["note"].startswith(f"Seed 1 of Wu et al.'s recipe (`--config {preset}`) at ")
    assert "2 launches" in record["note"] and record["note"].endswith(" A test run.")

    shown = page.read_text()
    assert "## Wu et al.'s Transformer-Tiny recipe, reproduced" in shown and f"[{folder.name}]" in shown
    stamp = (folder / "summary.json").stat().st_mtime_ns
    caplog.set_level(logging.INFO, logger="reproduce")
    reproduce.run([*argv, "--page", str(page)])
    assert f"seed 1: recorded in {folder}, skipped" in caplog.text
    assert (folder / "summary.json").stat().st_mtime_ns == stamp
