"""What a vanilla-train process knows of itself: the launcher that started it (``launcher_processes``, read from
Linux's /proc), which it names where it started fewer processes than asked (``check_launcher``), and when its first
step ended, counted from its start (``FirstStepLog``)."""

import logging
import os
import time
from pathlib import Path

import psutil
from transformers import Seq2SeqTrainingArguments, TrainerCallback

logger = logging.getLogger("vanilla_train")


class FirstStepLog(TrainerCallback):
    """Logs when the first training step of this process ends, counted from the process's start (imports
    included): what reading the data, the tokenizer and the model cost before training got going
    (benchmarks/data_scale.py reads it)."""

    def __init__(self):
        self.done = False

    def on_step_end(self, args, state, control, **kwargs):
        if not self.done:
            started = psutil.Process().create_time()
            logger.info("first training step done %.1f s after start", time.time() - started)
            self.done = True


def launcher_processes() -> int | None:
    """The process count asked of an ``accelerate launch`` that started this process (its command line, on Linux),
    or None. Without --multi_gpu on a machine without GPUs, accelerate starts a single process and says nothing."""
    try:
        command = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    if "launch" not in command:
        return None
    for flag in ("--num_processes", "--num-processes"):
        if flag in command[:-1] and command[command.index(flag) + 1].isdigit():
            return int(command[command.index(flag) + 1])
    return None


def check_launcher(training_args: Seq2SeqTrainingArguments) -> None:
    """A launcher that asked for more processes than run (``launcher_processes``), named in a warning."""
    asked = launcher_processes()
    if asked and asked > training_args.world_size:
        logger.warning(
            "the launcher asked for %d processes but %d is running: on a machine without GPUs, `accelerate launch` "
            "needs --multi_gpu (CPU processes over gloo), or use torchrun --nproc_per_node %d",
            asked,
            training_args.world_size,
            asked,
        )
