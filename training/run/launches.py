"""The launches of a run. A run stopped and continued by the same command (a signal, a crash, a working stretch
ended and the run carried to the next, perhaps on another machine) is one run of several launches, and its weights
are their work together; so its record lists each: the steps it trained, its training minutes, and what it ran
on (the code, the machine, the device, the precision, the processes). The history travels in every checkpoint
(``launches.json``), so a run carried to another machine with its output directory keeps it."""

import json
import time
from pathlib import Path

from transformers import TrainerCallback, TrainerState
from transformers.trainer import TRAINER_STATE_NAME

from vanilla_tools.hardware import precision
from vanilla_tools.provenance import git_commit, machine

from ..resolved import ResolvedRun
from .record import run_device

LAUNCHES_FILE = "launches.json"  # in a checkpoint: the launches that trained it, oldest first


class Launches(TrainerCallback):
    """This launch (measured when made) after the ones ``resume`` reads from the checkpoint it continues; written
    into each checkpoint by ``CompleteCheckpoints`` (``write``), before it marks the checkpoint complete."""

    def __init__(self, run: ResolvedRun):
        host = machine()
        self.this = {
            "code": git_commit(),
            "machine": host,
            "device": run_device(run.device, host),
            "precision": precision(run.precision),
            "processes": run.processes,
        }
        self.earlier: list[dict] = []
        self.first_step: int | None = None  # the step this launch started from (on_train_begin)
        self.started: float | None = None

    def resume(self, checkpoint: Path) -> None:
        """The launches that trained ``checkpoint``; one unrecorded launch if it holds no history (a checkpoint
        written before vanilla-train recorded its launches)."""
        path = checkpoint / LAUNCHES_FILE
        if path.is_file():
            self.earlier = json.loads(path.read_text())
        else:
            step = TrainerState.load_from_json(str(checkpoint / TRAINER_STATE_NAME)).global_step
            self.earlier = [{"last_step": step, "recorded": False}]

    def on_train_begin(self, args, state, control, **kwargs):
        if self.started is None:  # (a launch may call train() again: stopping.train_until_stopped)
            self.first_step, self.started = state.global_step, time.monotonic()

    def history(self, step: int, minutes: float | None = None) -> list[dict]:
        """Every launch up to ``step``, this one last, with its training ``minutes`` (default: since it began)."""
        if minutes is None:
            minutes = (time.monotonic() - self.started) / 60 if self.started is not None else 0.0
        first = self.first_step if self.first_step is not None else step  # a launch that had nothing left to train
        return [
            *self.earlier,
            {"first_step": first, "last_step": step, "train_minutes": round(minutes, 2), **self.this},
        ]

    def write(self, folder: Path, step: int) -> None:
        """The history up to ``step`` into the checkpoint ``folder``."""
        (folder / LAUNCHES_FILE).write_text(json.dumps(self.history(step), indent=1) + "\n")
