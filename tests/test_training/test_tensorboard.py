"""vanilla-train --report_to tensorboard (the tensorboard extra): a short run writes event files that hold the
learning curve its run record holds, step for step."""

import contextlib
import io
import json

import pytest
from training_helpers import train_argv, write_corpus

from training.train import run

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason='TensorBoard is an optional extra: pip install -e ".[tensorboard]"',
)

pytestmark = pytest.mark.slow

CURVE_TAGS = {"eval_loss": "eval/loss", "eval_bleu": "eval/bleu", "eval_chrf": "eval/chrf", "train_loss": "train/loss"}


def test_a_run_reports_its_learning_curve_to_tensorboard(tmp_path):
    output = tmp_path / "out"
    argv = train_argv(write_corpus(tmp_path / "data", pairs=40), output, "--max_steps", "4")
    argv += ["--eval_strategy", "steps", "--eval_steps", "2", "--logging_steps", "2", "--num_beams", "1"]
    argv += ["--summary_dir", str(tmp_path / "summary"), "--report_to", "tensorboard"]  # the last --report_to wins
    with contextlib.redirect_stdout(io.StringIO()):
        run(argv)
    events = sorted(output.rglob("events.out.tfevents.*"))
    assert events, f"no event file under {output}"
    scalars = {}
    for path in events:
        accumulator = event_accumulator.EventAccumulator(str(path))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            scalars.setdefault(tag, {}).update({e.step: e.value for e in accumulator.Scalars(tag)})
    rows = json.loads((output / "learning_curve.json").read_text())
    assert [row["step"] for row in rows] == [2, 4]
    for row in rows:
        for field, tag in CURVE_TAGS.items():
            assert scalars[tag][row["step"]] == pytest.approx(row[field], rel=1e-6), (tag, row["step"])
