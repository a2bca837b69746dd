"""The learning curve: validation loss, BLEU and chrF against wall-clock minutes, written during training."""

import csv
import io
import time
from pathlib import Path

from transformers import TrainerCallback

from vanilla_tools.disk import write_guard
from vanilla_tools.run_files import write_json, write_whole

from .checkpoints import RERUN

FIELDS = ["minutes", "step", "epoch", "eval_loss", "eval_bleu", "eval_chrf", "train_loss"]


class LearningCurveCallback(TrainerCallback):
    """Writes ``learning_curve.csv`` and ``learning_curve.json`` after every evaluation: one curve across the
    launches of a run. A resumed launch keeps the rows up to the checkpoint it resumed from (the evaluations after it
    run again) and counts its minutes on from the last of them, so the curve neither loses its start nor goes back."""

    def __init__(self, output_dir: str | Path):
        self.csv_path = Path(output_dir) / "learning_curve.csv"
        self.json_path = self.csv_path.with_suffix(".json")
        self.start: float | None = None
        self.minutes_before = 0.0  # of the earlier launches, up to the step this one resumed from
        self.rows: list[dict] = []
        self.last_train_loss: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()
        if not state.is_world_process_zero:  # only process zero writes the curve, so only it reads it back
            return
        self.rows = [row for row in self.written_rows() if row["step"] <= state.global_step]
        self.minutes_before = self.rows[-1]["minutes"] if self.rows else 0.0
        if self.csv_path.is_file():
            self.write()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.last_train_loss = logs["loss"]

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero or not metrics or self.start is None:
            return
        if self.rows and self.rows[-1]["step"] == state.global_step:  # a stop mid-epoch evaluates twice
            return
        self.rows.append(
            {
                "minutes": round(self.minutes_before + (time.monotonic() - self.start) / 60, 3),
                "step": state.global_step,
                "epoch": round(state.epoch or 0.0, 3),
                "eval_loss": metrics.get("eval_loss"),
                "eval_bleu": metrics.get("eval_bleu"),
                "eval_chrf": metrics.get("eval_chrf"),
                "train_loss": self.last_train_loss,
            }
        )
        self.write()

    def written_rows(self) -> list[dict]:
        """The rows earlier launches wrote (none if there is no curve yet)."""
        if not self.csv_path.is_file():
            return []
        with open(self.csv_path, newline="", encoding="utf-8") as f:
            return [{name: number(row.get(name, ""), name == "step") for name in FIELDS} for row in csv.DictReader(f)]

    def write(self) -> None:
        """Both files, each whole or not at all: the CSV is rewritten with every row (a resume drops rows past its
        checkpoint), so a kill mid-write must leave the earlier file, not a truncated one."""
        table = io.StringIO(newline="")
        writer = csv.DictWriter(table, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(self.rows)
        with write_guard(self.csv_path.parent, "the learning curve", RERUN):
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            write_whole(self.csv_path, table.getvalue())
            write_json(self.json_path, self.rows)


def number(text: str, integer: bool) -> float | int | None:
    """A CSV cell as written: a number, or None for an empty one (a metric an evaluation did not give)."""
    if text in ("", None):
        return None
    return int(text) if integer else float(text)
