"""Run by the fault tests: train as vanilla-train does, but SIGKILL this process at a chosen point.

    kill_probe.py POINT STEP ARGS...

POINT is where, at (or for the checkpoint of) step STEP:
    step          in the middle of the step (after its forward, before its optimizer update)
    write         while the checkpoint is written: the model is on disk, the optimizer not yet
    marker        after every file of the checkpoint is written, before it is marked complete
    rotation      while save_total_limit deletes an older checkpoint: its marker removed, its files not yet
"""

import os
import signal
import sys

from training_helpers import built
from transformers import TrainerCallback

from training.run import checkpoints


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no flush: as a crash or an OOM kill


class KillMidStep(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            die()


def kill_after(function, when):
    """``function`` that dies (instead of returning, or before doing anything) once ``when(*args)`` is true."""

    def wrapped(*args, **kwargs):
        if when(*args):
            die()
        return function(*args, **kwargs)

    return wrapped


if __name__ == "__main__":
    point, step, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    trainer, _ = built(argv)
    checkpoint = f"checkpoint-{step}"
    if point == "step":
        trainer.add_callback(KillMidStep(step))
    elif point == "write":
        save = trainer._save_optimizer_and_scheduler
        trainer._save_optimizer_and_scheduler = kill_after(save, lambda folder: folder.endswith(checkpoint))
    elif point == "marker":
        mark = checkpoints.mark_complete
        checkpoints.mark_complete = kill_after(mark, lambda folder, _: folder.name == checkpoint)
    elif point == "rotation":
        remove = checkpoints.remove_checkpoint

        def remove_halfway(folder):
            if trainer.state.global_step != step:
                return remove(folder)
            (folder / checkpoints.COMPLETE_MARKER).unlink()  # what remove_checkpoint does first
            die()

        checkpoints.remove_checkpoint = remove_halfway
    else:
        sys.exit(f"unknown kill point {point!r}")
    trainer.train()
