"""The same command run again goes on where the run stopped: after SIGTERM, after SIGKILL, under torchrun; it does
nothing once the run has finished; it is refused, naming what differs, where another run's checkpoints are; and
--overwrite_output_dir alone deletes them. No run deletes a checkpoint of another."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import free_port
from safetensors.torch import load_file
from training_helpers import assert_same_weights, train_argv, write_corpus

from training.run.checkpoints import (
    ON_SIGNAL_MARKER,
    checkpoint_settings,
    complete_checkpoints,
    mark_complete,
    rotate_complete_checkpoints,
)
from training.run.relaunch import FinishedRun, plan_start
from vanilla_tools.cli import UsageError

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SETTINGS = {
    "d_model": 32,
    "lr_schedule": "paper",
    "lr_scale": 2.0,
    "tokens_per_batch": 256,
    "gradient_accumulation_steps": 1,
    "max_steps": 12,
    "num_train_epochs": 3.0,
    "max_train_minutes": 0.0,
}


# ---- the decision, on checkpoints made by hand --------------------------------------------------------------------
def checkpoint(
    run: Path, step: int, settings: dict | None = SETTINGS, on_signal: bool = False, weights_alone: bool = False
) -> Path:
    folder = run / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    for name in ("model.safetensors",) if weights_alone else ("model.safetensors", "optimizer.pt", "scheduler.pt"):
        (folder / name).write_bytes(b"state")
    if on_signal:
        (folder / ON_SIGNAL_MARKER).write_text("SIGTERM\n")
    mark_complete(folder, step, settings=settings)
    return folder


def plan(run: Path, resume=None, overwrite=False, may_delete=True, **changed):
    return plan_start(run, {**SETTINGS, **changed}, resume, overwrite, may_delete)


def refused_alike(run: Path, resumes: tuple, message: str) -> None:
    """Every launch with one of ``resumes`` (--resume_from_checkpoint) is refused with ``message``."""
    for resume in resumes:
        with pytest.raises(UsageError) as refused:
            plan(run, resume)
        assert str(refused.value) == message


def test_the_newest_complete_checkpoint_of_the_same_run_is_resumed(tmp_path):
    checkpoint(tmp_path, 3)
    newest = checkpoint(tmp_path, 6)
    (tmp_path / "checkpoint-9").mkdir()  # not complete: a crash while writing it
    for resume in (None, "auto"):
        start = plan(tmp_path, resume)
        assert start.checkpoint == newest and start.detected and not start.finished
        assert start.message == (
            f"resuming from {newest}: the newest complete checkpoint in {tmp_path}, of a run "
            "with the same settings (--overwrite_output_dir starts over)"
        )
    assert plan(tmp_path, max_steps=24, max_train_minutes=30.0).checkpoint == newest  # a longer run continues it
    assert checkpoint_settings(newest) == SETTINGS


def test_a_run_carried_to_the_next_stretch_on_another_machine_resumes_there(tmp_path):
    """A run longer than a working stretch (the multi30k preset in fp32, docs/multi30k.md): stopped by SIGTERM at the
    stretch's end with a checkpoint, its output directory carried to the next stretch's checkout, where the same
    command resumes from that checkpoint (the precision may differ there: --bf16 is not a run setting)."""
    first = tmp_path / "stretch-1" / "runs" / "multi30k"
    checkpoint(first, 120)
    checkpoint(first, 240, on_signal=True)
    second = Path(shutil.copytree(first, tmp_path / "stretch-2" / "runs" / "multi30k"))
    start = plan(second)
    assert start.checkpoint == second / "checkpoint-240" and start.detected and not start.finished
    assert "bf16" not in checkpoint_settings(start.checkpoint)


def test_an_empty_directory_trains_from_scratch(tmp_path):
    assert plan(tmp_path / "new").checkpoint is None
    assert plan(tmp_path, "auto").checkpoint is None and plan(tmp_path, "false").checkpoint is None


@pytest.mark.parametrize(
    ("saved", "changed", "named"),
    [
        ({"lr_scale": 1.0}, {}, "lr_scale 1.0 -> 2.0"),
        ({"d_model": 64, "lr_scale": 1.0}, {}, "d_model 64 -> 32; lr_scale 1.0 -> 2.0"),
        # a schedule that decays to the last step is another schedule when the length changes
        ({"lr_schedule": "trainer"}, {"lr_schedule": "trainer", "max_steps": 24}, "max_steps 12 -> 24"),
    ],
)
def test_checkpoints_of_other_settings_are_refused_naming_them(saved, changed, named, tmp_path):
    checkpoint(tmp_path, 6, {**SETTINGS, **saved})
    for resume in (None, "auto"):
        with pytest.raises(UsageError) as refused:
            plan(tmp_path, resume, **changed)
        assert str(refused.value) == (
            f"{tmp_path} holds checkpoints of a run with other settings (checkpoint-6: {named}); pass "
            "--overwrite_output_dir to start over there, or give another --output_dir"
        )
    assert (tmp_path / "checkpoint-6").is_dir()


def test_a_checkpoint_that_records_no_settings_is_refused_naming_the_ways_on(tmp_path):
    folder = checkpoint(tmp_path, 6, settings=None)  # as vanilla-train wrote them before
    with pytest.raises(UsageError, match=rf"--resume_from_checkpoint {folder} continues from it, or pass "):
        plan(tmp_path)
    assert plan(tmp_path, str(folder)).checkpoint == folder


def test_a_checkpoint_of_the_weights_alone_is_refused_not_resumed_with_a_fresh_optimizer(tmp_path):
    """--save_only_model's checkpoints hold no optimizer state: transformers would resume one silently, from a fresh
    Adam and the first step of warmup, so it is refused by name (detected or asked for), and deletes nothing."""
    folder = checkpoint(tmp_path, 6, weights_alone=True)
    refused_alike(
        tmp_path,
        (None, "auto", str(folder)),
        (
            f"cannot resume from {folder}: it holds the model's weights alone (--save_only_model), not the optimizer's "
            "state and the schedule's step, so training would go on from a fresh optimizer and warmup; "
            "--overwrite_output_dir starts over"
        ),
    )
    assert (folder / "model.safetensors").is_file()
    assert plan(tmp_path, overwrite=True).checkpoint is None and not folder.exists()


def test_a_finished_run_is_nothing_to_do_and_continues_only_where_it_can(tmp_path):
    checkpoint(tmp_path, 12)
    FinishedRun(step=12, settings=SETTINGS).write(tmp_path)
    start = plan(tmp_path)
    assert start.finished and start.checkpoint is None
    assert start.message == (
        f"{tmp_path} holds the finished run of these settings (step 12): nothing to do. "
        "--overwrite_output_dir trains it again"
    )
    assert plan(tmp_path, "auto").finished
    with pytest.raises(UsageError, match=r"holds a finished run of other settings \(lr_scale 2.0 -> 1.0\); pass "):
        plan(tmp_path, lr_scale=1.0)
    assert (tmp_path / FinishedRun.FILE).is_file()  # a refused launch changes nothing
    longer = plan(tmp_path, max_steps=24)  # a longer run goes on from the finished one's last checkpoint
    assert longer.checkpoint == tmp_path / "checkpoint-12" and not longer.finished
    assert not (tmp_path / FinishedRun.FILE).exists()  # not finished until this launch ends


def test_a_finished_run_without_checkpoints_is_not_continued(tmp_path):
    FinishedRun(step=12, settings=SETTINGS).write(tmp_path)
    with pytest.raises(UsageError, match=r"other settings \(max_steps 12 -> 24\)"):
        plan(tmp_path, max_steps=24)
    with pytest.raises(UsageError, match=r"--resume_from_checkpoint false: .* holds a run"):
        plan(tmp_path, "false")


@pytest.mark.parametrize("files", [("config.json", "model.bin"), ("config.json", "model.safetensors")])
def test_a_model_that_is_no_run_is_not_written_over(files, tmp_path):
    """A CTranslate2 export, or a model saved by other code: no launch but --overwrite_output_dir trains there."""
    for name in files:
        (tmp_path / name).write_text("{}")
    refused_alike(
        tmp_path,
        (None, "auto", "false"),
        (
            f"{tmp_path} holds a saved model ({', '.join(files)}) but no checkpoint and no finished run of "
            "vanilla-train: training would write over it; pass --overwrite_output_dir to start over there, or give "
            "another --output_dir"
        ),
    )
    assert plan(tmp_path, overwrite=True).checkpoint is None
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)  # the user's files stay until training ends


def test_overwrite_deletes_the_runs_checkpoints_naming_each_and_nothing_else(tmp_path, caplog):
    folders = [checkpoint(tmp_path, 3, {**SETTINGS, "d_model": 64}), checkpoint(tmp_path, 12)]
    (tmp_path / "checkpoint-13").mkdir()
    run_files = ["tokenizer.json", "learning_curve.csv", FinishedRun.FILE]
    for name in [*run_files, "notes.txt"]:
        (tmp_path / name).write_text("{}")
    assert plan(tmp_path, overwrite=True, may_delete=False).checkpoint is None  # not the first process: no deletes
    assert all(folder.is_dir() for folder in folders)
    with caplog.at_level(logging.WARNING, logger="training.run.relaunch"):
        start = plan(tmp_path, overwrite=True)
    assert start.checkpoint is None and not start.finished
    assert [r.getMessage() for r in caplog.records] == [
        f"--overwrite_output_dir: deleting {tmp_path / name}"
        for name in ("checkpoint-3", "checkpoint-12", "checkpoint-13")
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_overwrite_with_a_checkpoint_it_would_delete_is_refused(tmp_path):
    inside = checkpoint(tmp_path / "run", 6)
    elsewhere = checkpoint(tmp_path / "other", 6, {**SETTINGS, "lr_scale": 1.0})
    for resume in ("auto", str(inside)):
        with pytest.raises(UsageError, match="--overwrite_output_dir starts over, deleting the checkpoints in"):
            plan(tmp_path / "run", resume, overwrite=True)
    assert inside.is_dir()
    start = plan(tmp_path / "run", str(elsewhere), overwrite=True)  # starting over from another run's checkpoint
    assert start.checkpoint == elsewhere and not inside.exists()


def test_a_named_checkpoint_is_resumed_as_asked_warning_of_other_settings(tmp_path, caplog):
    folder = checkpoint(tmp_path, 6, {**SETTINGS, "lr_scale": 1.0, "max_steps": 6})
    with caplog.at_level(logging.WARNING, logger="training.run.relaunch"):
        start = plan(tmp_path, str(folder))
    assert start.checkpoint == folder and not start.detected
    assert start.message == f"resuming from {folder}, as --resume_from_checkpoint asks"
    assert caplog.messages == [f"{folder} was written with other settings: lr_scale 1.0 -> 2.0; max_steps 6 -> 12"]


def test_rotation_deletes_only_the_runs_own_checkpoints(tmp_path):
    """save_total_limit=1 and a newer checkpoint: the run's older ones go (a longer run's included), the checkpoint
    of a run with other settings and one that records none stay."""
    checkpoint(tmp_path, 2, {**SETTINGS, "d_model": 64})
    checkpoint(tmp_path, 3, settings=None)
    checkpoint(tmp_path, 4, {**SETTINGS, "max_steps": 6})
    checkpoint(tmp_path, 5, on_signal=True)
    checkpoint(tmp_path, 6)
    rotate_complete_checkpoints(tmp_path, 1, settings=SETTINGS)
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["checkpoint-2", "checkpoint-3", "checkpoint-6"]


# ---- the whole command, relaunched ---------------------------------------------------------------------------------
def run(command: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=TESTS.parent)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return {"train": write_corpus(tmp_path_factory.mktemp("data"))["train"]}


def relaunch_argv(corpus, output: Path, *extra: str) -> list[str]:
    """12 steps, a checkpoint every 3, only the newest kept, the loss logged every step."""
    steps = ("--max_steps", "12", "--save_steps", "3", "--save_total_limit", "1", "--logging_steps", "1")
    return train_argv(corpus, output, *steps, *extra)


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("uninterrupted")
    done = run([str(BIN / "vanilla-train"), *relaunch_argv(corpus, output)])
    assert done.returncode == 0, done.stderr[-3000:]
    return load_file(output / "model.safetensors")


def resumed_line(output: Path, step: int) -> str:
    return (
        f"resuming from {output / f'checkpoint-{step}'}: the newest complete checkpoint in {output}, of a run "
        "with the same settings"
    )


def test_sigterm_then_the_same_command_resumes_then_has_nothing_to_do(corpus, uninterrupted, tmp_path):
    """A run carried over two launches: the second goes on from the first's checkpoint to the uninterrupted weights,
    without a false warning of missing keys, and the run's record lists both launches (steps 0-8, 8-12)."""
    record = tmp_path.parent / f"{tmp_path.name}-record"
    argv = [*relaunch_argv(corpus, tmp_path), "--summary_dir", str(record)]
    stopped = run([sys.executable, str(TESTS / "signal_probe.py"), "SIGTERM", "step", "8", *argv])
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    assert f"{tmp_path / 'checkpoint-8'} is complete; the same command continues from it" in stopped.stderr
    again = run([str(BIN / "vanilla-train"), *argv])
    assert again.returncode == 0, again.stderr[-3000:]
    assert resumed_line(tmp_path, 8) in again.stderr, again.stderr[-3000:]
    assert "missing keys" not in again.stderr  # the tied embedding, saved under one of its four names, loads whole
    assert f"deleting {tmp_path / 'checkpoint-8'} (superseded)" in again.stderr  # once checkpoint-9 is complete
    assert_same_weights(uninterrupted, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-12"]
    history = json.loads((tmp_path / "checkpoint-12" / "trainer_state.json").read_text())["log_history"]
    resumed = [entry["loss"] for entry in history if "loss" in entry and entry["step"] > 8]
    assert len(resumed) == 4  # the train loss and speed are this launch's, steps 9-12, on every release
    reported = json.loads((tmp_path / "train_results.json").read_text())
    assert reported["train_loss"] == pytest.approx(sum(resumed) / 4, abs=1e-3)
    assert reported["train_steps_per_second"] == pytest.approx(4 / reported["train_runtime"], rel=0.01)
    assert json.loads((tmp_path / FinishedRun.FILE).read_text())["step"] == 12
    run_record = json.loads((record / "summary.json").read_text())["run"]
    launches = run_record["launches"]
    assert [(launch["first_step"], launch["last_step"]) for launch in launches] == [(0, 8), (8, 12)]
    assert all(launch["train_minutes"] >= 0 and launch["precision"] == run_record["precision"] for launch in launches)
    assert launches[-1]["code"] == run_record["code"] and launches[0]["machine"] == run_record["machine"]

    model = tmp_path / "model.safetensors"
    written = model.stat().st_mtime_ns
    finished = run([str(BIN / "vanilla-train"), *argv])  # a requeue after the end
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"{tmp_path} holds the finished run of these settings (step 12): nothing to do" in finished.stderr
    assert "tokens per step" not in finished.stderr and model.stat().st_mtime_ns == written  # no data, no training


def test_a_checkpoint_copied_to_a_folder_of_another_name_resumes(corpus, uninterrupted, tmp_path):
    """--resume_from_checkpoint takes any complete checkpoint folder: the step it resumes at is the one it holds
    (before, the step was read from the folder's name, and a copy named otherwise failed with a TypeError)."""
    run_dir = tmp_path / "run"
    argv = relaunch_argv(corpus, run_dir)
    stopped = run([sys.executable, str(TESTS / "signal_probe.py"), "SIGTERM", "step", "8", *argv])
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    saved = Path(shutil.copytree(run_dir / "checkpoint-8", tmp_path / "saved-at-step-8"))
    again = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", str(saved)])
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from {saved}" in again.stderr
    assert_same_weights(uninterrupted, run_dir)
    assert json.loads((run_dir / "train_results.json").read_text())["train_steps_per_second"] > 0


def test_sigkill_mid_step_then_the_same_command_resumes(corpus, uninterrupted, tmp_path):
    argv = relaunch_argv(corpus, tmp_path)
    killed = run([sys.executable, str(TESTS / "kill_probe.py"), "step", "8", *argv])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    again = run([str(BIN / "vanilla-train"), *argv])
    assert again.returncode == 0, again.stderr[-3000:]
    assert resumed_line(tmp_path, 6) in again.stderr, again.stderr[-3000:]
    assert_same_weights(uninterrupted, tmp_path)


def test_a_run_of_save_only_model_stopped_by_sigterm_says_it_cannot_go_on_and_is_not_resumed(corpus, tmp_path):
    """--save_only_model: the checkpoint SIGTERM writes holds the weights alone; the stop says so instead of "the same
    command continues from it", and the same command is refused naming the checkpoint (before: it resumed from a
    fresh Adam and the first step of warmup, without a word), which stays as it was."""
    argv = [*relaunch_argv(corpus, tmp_path), "--save_only_model", "true"]
    stopped = run([sys.executable, str(TESTS / "signal_probe.py"), "SIGTERM", "step", "8", *argv])
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    folder = tmp_path / "checkpoint-8"
    assert (
        f"{folder} is complete; it holds the model's weights alone (--save_only_model), not the optimizer's state "
        "and the schedule's step, so training would go on from a fresh optimizer and warmup: the same command "
        "with --overwrite_output_dir trains the run again"
    ) in stopped.stderr
    written = (folder / "model.safetensors").read_bytes()
    again = run([str(BIN / "vanilla-train"), *argv])
    assert again.returncode == 1, again.stderr[-3000:]
    assert (
        again.stderr.strip()
        .splitlines()[-1]
        .startswith(f"vanilla-train: error: cannot resume from {folder}: it holds the model's weights alone")
    )
    assert "Traceback" not in again.stderr and (folder / "model.safetensors").read_bytes() == written


def test_other_settings_in_the_same_directory_are_refused_until_overwrite(corpus, uninterrupted, tmp_path):
    """A run with --lr_scale 1.0 killed after its checkpoint-3; the command of another --lr_scale and d_model in
    its directory is refused, naming both, and deletes nothing; with --overwrite_output_dir it starts over, naming
    the checkpoint it deletes, and ends as an uninterrupted run of its own settings."""
    argv = relaunch_argv(corpus, tmp_path)
    other = [*argv, "--lr_scale", "1.0", "--d_model", "16"]
    killed = run([sys.executable, str(TESTS / "kill_probe.py"), "step", "5", *other])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    written = (tmp_path / "checkpoint-3" / "model.safetensors").read_bytes()
    refused = run([str(BIN / "vanilla-train"), *argv])
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert refused.stderr.strip().splitlines()[-1] == (
        f"vanilla-train: error: {tmp_path} holds checkpoints of a run with other settings (checkpoint-3: d_model "
        "16 -> 32; lr_scale 1.0 -> 2.0); pass --overwrite_output_dir to start over there, or give another "
        "--output_dir"
    )
    assert (tmp_path / "checkpoint-3" / "model.safetensors").read_bytes() == written
    over = run([str(BIN / "vanilla-train"), *argv, "--overwrite_output_dir"])
    assert over.returncode == 0, over.stderr[-3000:]
    assert f"--overwrite_output_dir: deleting {tmp_path / 'checkpoint-3'}" in over.stderr
    assert_same_weights(uninterrupted, tmp_path)


def torchrun(*command: str) -> subprocess.CompletedProcess:
    return run([str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_port", str(free_port()), *command])


def test_a_torchrun_relaunch_after_sigterm_resumes(corpus, tmp_path):
    """2 processes over gloo, 6 steps of 2 x 128 tokens: SIGTERM in step 4 on both (as a job's preemption signals
    every process), then the same torchrun command: the weights of an uninterrupted 2-process run, exactly."""

    def argv(output: Path) -> list[str]:
        return train_argv(corpus, output, "--max_steps", "6", "--save_steps", "3", "--max_tokens_per_batch", "128")

    whole = torchrun("-m", "training.train", *argv(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]
    output = tmp_path / "relaunched"
    stopped = torchrun(str(TESTS / "signal_probe.py"), "SIGTERM", "step", "4", *argv(output))
    assert stopped.returncode != 0 and "stopped by SIGTERM at step 4" in stopped.stderr, stopped.stderr[-3000:]
    again = torchrun("-m", "training.train", *argv(output))
    assert again.returncode == 0, again.stderr[-3000:]
    assert resumed_line(output, 4) in again.stderr, again.stderr[-3000:]
    assert_same_weights(load_file(tmp_path / "whole" / "model.safetensors"), output)


def test_a_relaunched_run_goes_on_with_its_patience_count(tmp_path):
    """--patience 2 on validation BLEU, evaluated and saved every step: the tiny model's BLEU is 0.0 at steps 1-3,
    so the count is 1 at step 2 and an uninterrupted run stops at step 3. A run that ended at step 2, launched
    again for 8 steps, resumes from checkpoint-2 with its count and stops at step 3 too (a count started over would
    reach 1 there, and BLEU 0.04 at step 4 would reset it). The best checkpoint (step 1: a tie is no improvement)
    is kept through rotation (--save_total_limit 1), and is the final model (--final_model best)."""
    data = write_corpus(tmp_path / "data")
    output = tmp_path / "run"
    flags = ("--eval_strategy", "steps", "--eval_steps", "1", "--save_steps", "1", "--save_total_limit", "1")
    argv = train_argv(
        data, output, *flags, "--patience", "2", "--metric_for_best_model", "bleu", "--final_model", "best"
    )
    first = run([str(BIN / "vanilla-train"), *argv, "--max_steps", "2"])
    assert first.returncode == 0, first.stderr[-3000:]
    again = run([str(BIN / "vanilla-train"), *argv, "--max_steps", "8"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from " + str(output / "checkpoint-2") in again.stderr, again.stderr[-3000:]
    assert [p.name for p in complete_checkpoints(output)] == ["checkpoint-1", "checkpoint-3"]
    state = json.loads((output / "checkpoint-3" / "trainer_state.json").read_text())
    assert [(entry["step"], entry["eval_bleu"]) for entry in state["log_history"] if "eval_bleu" in entry] == [
        (1, 0.0),
        (2, 0.0),
        (3, 0.0),
    ]
    assert state["stateful_callbacks"]["EarlyStoppingCallback"]["attributes"] == {"early_stopping_patience_counter": 2}
    assert (state["global_step"], state["best_metric"]) == (3, 0.0)
    assert state["best_model_checkpoint"] == str(output / "checkpoint-1")
    assert json.loads((output / FinishedRun.FILE).read_text())["step"] == 3
    assert json.loads((output / "eval_results.json").read_text())["final_model"] == {
        "model": "best",
        "checkpoints": ["checkpoint-1"],
        "why": "--final_model best: its validation bleu (0) was the run's best",
    }
    assert_same_weights(load_file(output / "checkpoint-1" / "model.safetensors"), output)
