"""training.run.park: a run's folder parked in one archive and unparked on another machine: what it keeps (the newest
checkpoint whole, the older ones the final average still reaches as weights alone, the run's own files, never the
lock), what it refuses (a run in progress, a folder already holding a run), and the record of a park."""

import json
import tarfile
from pathlib import Path

import pytest
import torch
from transformers import TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME, TRAINING_ARGS_NAME

from training.run import park
from training.run.checkpoints import (
    ON_SIGNAL_MARKER,
    complete_checkpoints,
    mark_complete,
    verify_checkpoint,
)
from training.run.run_lock import LOCK_FILE, OutputDirLock
from vanilla_tools.cli import UsageError

RESUMABLE = ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "config.json", TRAINER_STATE_NAME)


def checkpoint(run: Path, step: int, *, keep: int | None = 10, max_steps: int = 8000, on_signal=False) -> Path:
    """A complete checkpoint as CompleteCheckpoints leaves it: its files, the run's limit in training_args.bin, the
    marker with the run's settings."""
    folder = run / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    for name in RESUMABLE:
        (folder / name).write_bytes(f"{name} of step {step}".encode())
    torch.save(TrainingArguments(output_dir=str(run), save_total_limit=keep), folder / TRAINING_ARGS_NAME)
    if on_signal:
        (folder / ON_SIGNAL_MARKER).write_text("SIGTERM\n")
    mark_complete(folder, step, settings={"max_steps": max_steps, "seed": 1})
    return folder


def a_run(tmp_path: Path, steps: list[int], **options) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "tokenizer.json").write_text("{}")
    (run / LOCK_FILE).write_text("")
    for step in steps:
        checkpoint(run, step, **options)
    return run


def names(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {member.name for member in tar.getmembers()}


@pytest.mark.parametrize(
    ("step", "saves"),
    [(7383, 9), (7314, 10), (7935, 1), (7999, 1), (8000, 0), (69, 115)],
)
def test_the_scheduled_saves_after_a_step_count_the_one_where_the_run_ends(step, saves):
    assert park.scheduled_saves_after(step, 69, 8000) == saves


def test_early_in_a_run_only_the_newest_checkpoint_travels_and_whole(tmp_path):
    run = a_run(tmp_path, [69 * k for k in range(1, 11)])
    record = park.park(run, tmp_path / "parked.tar.gz", finished=False)
    newest = "checkpoint-690"
    assert names(tmp_path / "parked.tar.gz") == {"tokenizer.json"} | {
        f"{newest}/{name}" for name in (*RESUMABLE, TRAINING_ARGS_NAME, ".checkpoint-complete")
    }
    assert record["resumes_from_step"] == 690 and record["checkpoints"] == {newest: "whole"}
    assert record["finished"] is False and record["bytes"] == (tmp_path / "parked.tar.gz").stat().st_size
    assert park.park_summary(record).startswith("goes on from step 690, ")


def test_near_its_end_the_checkpoints_its_average_still_reaches_travel_as_weights_alone(tmp_path):
    # stopped by a signal at 7,400: 9 scheduled saves remain (7,452 ... 7,935 and 8,000), so the last 10 averaged
    # are those and 7,383; 7,314 would be rotated away
    run = a_run(tmp_path, [7245, 7314, 7383])
    checkpoint(run, 7400, on_signal=True)
    record = park.park(run, tmp_path / "parked.tar.gz", finished=False)
    assert record["checkpoints"] == {"checkpoint-7383": "weights alone", "checkpoint-7400": "whole"}
    assert record["resumes_from_step"] == 7400

    there = tmp_path / "elsewhere" / "run"
    park.unpark(tmp_path / "parked.tar.gz", there)
    assert [p.name for p in complete_checkpoints(there)] == ["checkpoint-7383", "checkpoint-7400"]
    verify_checkpoint(there / "checkpoint-7400")  # resumable: every file the size it was saved with
    with pytest.raises(UsageError, match="cannot resume from .*checkpoint-7383"):
        verify_checkpoint(there / "checkpoint-7383")  # its marker lists the weights alone, which are all there
    kept = json.loads((there / "checkpoint-7383" / ".checkpoint-complete").read_text())
    assert set(kept["files"]) == set(park.WEIGHTS_ALONE_FILES) and kept["settings"]["max_steps"] == 8000
    assert (there / "checkpoint-7383" / "model.safetensors").read_bytes() == b"model.safetensors of step 7383"
    assert not (there / LOCK_FILE).exists()


def test_a_run_without_a_limit_keeps_every_checkpoint_for_its_average(tmp_path):
    run = a_run(tmp_path, [100, 200, 300], keep=None)
    record = park.park(run, tmp_path / "parked.tar.gz", finished=False)
    assert record["checkpoints"] == {
        "checkpoint-100": "weights alone",
        "checkpoint-200": "weights alone",
        "checkpoint-300": "whole",
    }


def test_a_finished_run_parks_its_own_files_alone(tmp_path):
    run = a_run(tmp_path, [7935, 8000])
    (run / "model.safetensors").write_bytes(b"averaged")
    (run / "config.json").write_text("{}")
    record = park.park(run, tmp_path / "parked.tar.gz", finished=True)
    assert names(tmp_path / "parked.tar.gz") == {"tokenizer.json", "model.safetensors", "config.json"}
    assert record["checkpoints"] == {} and record["resumes_from_step"] is None
    assert park.park_summary(record).startswith("the finished run's model, ")


def test_a_run_in_progress_is_not_parked_and_the_archive_before_stays(tmp_path):
    run = a_run(tmp_path, [69])
    archive = tmp_path / "parked.tar.gz"
    archive.write_bytes(b"the park before")
    lock = OutputDirLock(run).acquire()
    try:
        with pytest.raises(UsageError, match="in use by another run"):
            park.park(run, archive, finished=False)
    finally:
        lock.release()
    assert archive.read_bytes() == b"the park before"


def test_nothing_to_go_on_from_is_refused(tmp_path):
    run = a_run(tmp_path, [])
    with pytest.raises(UsageError, match="no complete checkpoint to go on from"):
        park.park(run, tmp_path / "parked.tar.gz", finished=False)
    with pytest.raises(UsageError, match="no run to park"):
        park.park(tmp_path / "absent", tmp_path / "parked.tar.gz", finished=False)


def test_a_folder_holding_a_run_is_not_unparked_over(tmp_path):
    run = a_run(tmp_path, [69, 138])
    park.park(run, tmp_path / "parked.tar.gz", finished=False)
    with pytest.raises(UsageError, match="already holds checkpoint-138, checkpoint-69"):
        park.unpark(tmp_path / "parked.tar.gz", run)
