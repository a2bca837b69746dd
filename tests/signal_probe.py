"""Run by the signal tests: vanilla-train (its console script) that sends itself a signal at a chosen point, as a
cloud machine's preemption (SIGTERM) or a user's Ctrl-C (SIGINT) would, then lets the run handle it.

    signal_probe.py SIGNAL POINT STEP ARGS...

POINT is where, at (or for the checkpoint of) step STEP:
    step          in the middle of the step (after its forward, before its optimizer update)
    write         while the checkpoint of the step is written: the model is on disk, the optimizer not yet
    evaluation    during the evaluation after the step
"""

import os
import signal
import sys

from probe_helpers import before_optimizer_write, run_train_with
from transformers import TrainerCallback


def send(number: int) -> None:
    os.kill(os.getpid(), number)


class SignalAt(TrainerCallback):
    def __init__(self, number: int, point: str, step: int):
        self.number, self.point, self.step, self.sent = number, point, step, False

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.point == "step" and state.global_step + 1 == self.step:
            send(self.number)

    def on_prediction_step(self, args, state, control, **kwargs):
        if self.point == "evaluation" and state.global_step == self.step and not self.sent:
            self.sent = True
            send(self.number)


if __name__ == "__main__":
    number, point, step, argv = signal.Signals[sys.argv[1]], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    if point not in ("step", "write", "evaluation"):
        sys.exit(f"unknown signal point {point!r}")

    def change(trainer) -> None:
        trainer.add_callback(SignalAt(number, point, step))
        if point == "write":
            before_optimizer_write(trainer, f"checkpoint-{step}", lambda folder: send(number))

    run_train_with(change, argv)
