"""The learning curve: validation loss, BLEU and chrF against wall-clock minutes, written during training."""

import csv
import time
from pathlib import Path

from transformers import TrainerCallback

from vanilla_tools.disk import write_guard
from vanilla_tools.run_files import write_json

from .checkpoints import RERUN

FIELDS = ["minutes", "step", "epoch", "eval_loss", "eval_bleu", "eval_chrf", "train_loss"]


class LearningCurveCallback(TrainerCallback):
    """Appends a row to ``learning_curve.csv`` (and rewrites ``learning_curve.json``) after every evaluation."""

    def __init__(self, output_dir: str | Path):
        self.csv_path = Path(output_dir) / "learning_curve.csv"
        self.json_path = self.csv_path.with_suffix(".json")
        self.start: float | None = None
        self.rows: list[dict] = []
        self.last_train_loss: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.last_train_loss = logs["loss"]

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero or not metrics or self.start is None:
            return
        if self.rows and self.rows[-1]["step"] == state.global_step:  # a stop mid-epoch evaluates twice
            return
        row = {
            "minutes": round((time.monotonic() - self.start) / 60, 3),
            "step": state.global_step,
            "epoch": round(state.epoch or 0.0, 3),
            "eval_loss": metrics.get("eval_loss"),
            "eval_bleu": metrics.get("eval_bleu"),
            "eval_chrf": metrics.get("eval_chrf"),
            "train_loss": self.last_train_loss,
        }
        self.rows.append(row)
        with write_guard(self.csv_path.parent, "the learning curve", RERUN):
            self.csv_path.parent.mkdir(parents=True, exist_ok=True)
            new_file = not self.csv_path.is_file()
            with open(self.csv_path, "a", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=FIELDS)
                if new_file:
                    writer.writeheader()
                writer.writerow(row)
            write_json(self.json_path, self.rows)
