"""Run by the resume test: train as vanilla-train does, but SIGKILL this process right after a given step."""

import os
import signal
import sys

from transformers import TrainerCallback

from training.train import build_trainer, parse_args


class KillAfter(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no flush: as a crash or an OOM kill


if __name__ == "__main__":
    kill_after, argv = int(sys.argv[1]), sys.argv[2:]
    trainer, _ = build_trainer(*parse_args(argv))
    trainer.add_callback(KillAfter(kill_after))
    trainer.train()
