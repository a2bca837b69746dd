"""The learning curve is one curve across a run's launches: a resumed launch keeps the rows up to its checkpoint,
writes the evaluations after it once (they run again), and counts minutes on from where the curve stood."""

import csv
import json
from types import SimpleNamespace

from training.curve import LearningCurveCallback


def launch(output, resumed_at: int, steps: list[int]) -> LearningCurveCallback:
    """One launch of a run: resumed at ``resumed_at`` (0: from scratch), evaluating at ``steps``."""
    callback = LearningCurveCallback(output)
    state = SimpleNamespace(global_step=resumed_at, epoch=0.0, is_world_process_zero=True)
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
