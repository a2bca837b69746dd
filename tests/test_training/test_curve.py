"""The learning curve is one curve across a run's launches: a resumed launch keeps the rows up to its checkpoint,
writes the evaluations after it once (they run again), and counts minutes on from where the curve stood."""

import csv
import errno
import json
import os
from types import SimpleNamespace

import pytest

from training.run.curve import LearningCurveCallback
from vanilla_tools import run_files
from vanilla_tools.cli import UsageError


def launch(output, resumed_at: int, steps: list[int], process_zero: bool = True) -> LearningCurveCallback:
    """One launch of a run: resumed at ``resumed_at`` (0: from scratch), evaluating at ``steps``."""
    callback = LearningCurveCallback(output)
    state = SimpleNamespace(global_step=resumed_at, epoch=0.0, is_world_process_zero=process_zero)
    callback.on_train_begin(None, state, None)
    for step in steps:
        state.global_step, state.epoch = step, step / 4
        callback.on_log(None, state, None, logs={"loss": 10.0 / step})
        callback.on_evaluate(None, state, None, metrics={"eval_loss": 5.0 / step, "eval_bleu": float(step)})
    return callback


def test_a_resumed_launch_continues_the_curve(tmp_path):
    launch(tmp_path, 0, [2, 4, 6, 8])  # stopped after the evaluation at 8; its newest checkpoint: step 6
    first = json.loads((tmp_path / "learning_curve.json").read_text())
    launch(tmp_path, 6, [8, 10, 12])
    rows = json.loads((tmp_path / "learning_curve.json").read_text())
    assert [row["step"] for row in rows] == [2, 4, 6, 8, 10, 12]
    assert rows[:3] == first[:3]  # the first launch's rows up to the checkpoint, as written
    minutes = [row["minutes"] for row in rows]
    assert minutes == sorted(minutes) and minutes[3] >= first[2]["minutes"]
    with open(tmp_path / "learning_curve.csv", newline="") as f:
        written = list(csv.DictReader(f))
    assert [int(row["step"]) for row in written] == [2, 4, 6, 8, 10, 12]
    assert written[5]["eval_bleu"] == "12.0" and written[5]["eval_chrf"] == "" and rows[5]["eval_chrf"] is None


def test_a_launch_from_scratch_starts_a_new_curve_only_where_there_is_none(tmp_path):
    launch(tmp_path / "a", 0, [2, 4])
    assert [row["step"] for row in json.loads((tmp_path / "a" / "learning_curve.json").read_text())] == [2, 4]
    launch(tmp_path / "b", 0, [])  # no evaluation yet: no file
    assert not (tmp_path / "b" / "learning_curve.csv").exists()


def test_only_process_zero_reads_and_writes_the_curve(tmp_path):
    """Under torchrun every process has the callback; a resumed run's other processes must not read the CSV while
    process zero rewrites it (a half-read row gave a None step, then a TypeError)."""
    launch(tmp_path, 0, [2, 4])
    written = (tmp_path / "learning_curve.csv").read_bytes()
    (tmp_path / "learning_curve.csv").write_text("minutes,step\n0.1,")  # as another process might see it mid-write
    other = launch(tmp_path, 2, [4, 6], process_zero=False)
    assert other.rows == [] and (tmp_path / "learning_curve.csv").read_text() == "minutes,step\n0.1,"
    (tmp_path / "learning_curve.csv").write_bytes(written)
    assert [row["step"] for row in launch(tmp_path, 2, [4]).rows] == [2, 4]


def test_a_failed_write_keeps_the_earlier_curve_whole(tmp_path, monkeypatch):
    """The CSV is rewritten with every row, so a write that fails (a full disk; a kill leaves the same staged copy)
    must leave the earlier file as it was, not one cut short: each file is staged, then renamed."""
    launch(tmp_path, 0, [2, 4])
    before = {name: (tmp_path / name).read_bytes() for name in ("learning_curve.csv", "learning_curve.json")}
    callback = launch(tmp_path, 4, [])

    def full(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(run_files.os, "replace", full)
    state = SimpleNamespace(global_step=6, epoch=1.5, is_world_process_zero=True)
    with pytest.raises(UsageError, match="no space left on the device"):
        callback.on_evaluate(None, state, None, metrics={"eval_loss": 0.8})
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(before)  # no staged copy left
