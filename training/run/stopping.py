"""How a run stops before its schedule ends: a time budget, or a signal (preemption, Ctrl-C) that checkpoints the
step in progress so the same command goes on from it. Both are TrainerCallbacks; data-parallel ranks decide together
at each step, so none is left waiting in a collective."""

import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch
from transformers import Seq2SeqTrainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import TrainOutput

from vanilla_tools.cli import UsageError

logger = logging.getLogger(__name__)


def any_rank(flag: bool, device) -> bool:
    """``flag`` of any data-parallel rank (all of them take part), or this process's alone (then without a device
    tensor: reading one back would wait for the accelerator at every step)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flag
    value = torch.tensor(float(flag), device=device)
    torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
    return bool(value.item())


class TimeBudget(TrainerCallback):
    """Ends training once ``minutes`` of it have passed (counted from this process's start of training): the step
    that crosses the budget is evaluated and checkpointed (unless a regular checkpoint is less than half a save
    interval old), so checkpoint averaging and the final evaluation follow.
    With an "epoch" strategy the Trainer's end-of-epoch handling does that itself (it also runs when training stops
    mid-epoch), so the flag is left to it rather than doing the work twice."""

    def __init__(self, minutes: float):
        if minutes <= 0:
            raise UsageError(f"a time budget needs minutes > 0, got {minutes}")
        self.seconds = 60 * minutes
        self.start = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if any_rank(time.monotonic() - self.start >= self.seconds, args.device):
            logger.info("time budget of %.1f minutes reached at step %d", self.seconds / 60, state.global_step)
            control.should_training_stop = True
            # Not a second checkpoint a few steps after a regular one: averaging would count the same weights twice.
            since_save = state.global_step % state.save_steps if args.save_strategy == "steps" else 0
            control.should_save = args.save_strategy != "epoch" and not 0 < since_save < state.save_steps / 2
            control.should_evaluate = args.eval_strategy not in ("no", "epoch")


class StopRequested(Exception):
    """Raised out of an evaluation that a signal interrupted, so the run can checkpoint and exit."""


class SaveOnSignal(TrainerCallback):
    """Preemption (SIGTERM, with a grace period) and Ctrl-C (SIGINT): the step in progress finishes, a complete
    checkpoint of it is written, and the run exits with 128 + the signal's number (143, 130). The same command with
    ``--resume_from_checkpoint auto`` then continues exactly where it stopped. An evaluation in progress is
    abandoned (it can take minutes); a second signal stops at once. The handlers are in place only while
    ``train_until_stopped`` trains (the trainer's ``train()``)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received: int | None = None
        self.stopped_at: int | None = None
        self.previous = {}

    def install(self) -> None:
        for number in self.SIGNALS:
            self.previous[number] = signal.signal(number, self.handle)

    def uninstall(self) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def handle(self, number: int, frame) -> None:
        if self.received is not None:  # asked twice: stop now, as without this handler
            self.uninstall()
            signal.raise_signal(number)
            return
        self.received = number
        logger.warning(
            "%s received: finishing the current step, then saving a checkpoint (again to stop at once)",
            signal.Signals(number).name,
        )

    def on_step_end(self, args, state, control, **kwargs):
        if any_rank(self.received is not None, args.device):
            self.stopped_at = state.global_step
            control.should_save, control.should_training_stop, control.should_evaluate = True, True, False

    def on_epoch_end(self, args, state, control, **kwargs):
        # a step's checkpoint for the signal is written: the epoch's end it stopped (--eval_strategy epoch) neither
        # evaluates (abandoned as any evaluation) nor saves that step again
        if self.stopped_at is not None:
            control.should_evaluate = control.should_save = False

    def on_prediction_step(self, args, state, control, **kwargs):
        if any_rank(self.received is not None, args.device):
            raise StopRequested()

    def off_schedule(self, args, state) -> str | None:
        """The signal's name if the checkpoint being written at ``state.global_step`` is the one it asked for, off
        the save schedule (checkpoints.ON_SIGNAL_MARKER); None for a regular checkpoint."""
        if self.received is None:
            return None
        on_schedule = args.save_strategy == "steps" and state.global_step % state.save_steps == 0
        return None if on_schedule else signal.Signals(self.received).name


def train_until_stopped(
    trainer: Seq2SeqTrainer, stop: SaveOnSignal, train: Callable[[], TrainOutput]
) -> TrainOutput | None:
    """``train()`` (Trainer's, of ``trainer``) with ``stop`` (one of its callbacks) listening: a checkpoint is saved
    and None returned if SIGTERM or SIGINT stops it (``trainer``: training.step.trainer's, whose ``save_checkpoint``
    writes it; its ``train()`` calls this)."""
    stop.install()
    try:
        result = train()
        return None if stop.stopped_at is not None else result
    except StopRequested:  # during an evaluation: the step before it is done
        if stop.stopped_at is None:  # and its checkpoint not yet written
            stop.stopped_at = trainer.state.global_step
            trainer.save_checkpoint()
        return None
    finally:
        stop.uninstall()


# Why a checkpoint of --save_only_model (checkpoints.OPTIMIZER_STATE absent) is not resumed from.
WEIGHTS_ALONE = (
    "it holds the model's weights alone (--save_only_model), not the optimizer's state and the schedule's "
    "step, so training would go on from a fresh optimizer and warmup"
)


def stopping_signal(status: int) -> str | None:
    """The name of the signal a vanilla-train process stopped for, read from its exit status (``stopped_by_signal``
    exits 128 + the signal's number once the checkpoint is complete), or None for any other status."""
    numbers = {128 + number: number for number in SaveOnSignal.SIGNALS}
    return signal.Signals(numbers[status]).name if status in numbers else None


def stopped_by_signal(stop: SaveOnSignal, args: TrainingArguments) -> NoReturn:
    """Say where the checkpoint of a run stopped by SIGTERM / SIGINT is and how to go on; exit 128 + its number."""
    folder = Path(args.output_dir) / f"checkpoint-{stop.stopped_at}"
    way_on = (
        f"{WEIGHTS_ALONE}: the same command with --overwrite_output_dir trains the run again"
        if args.save_only_model
        else "the same command continues from it"
    )
    logger.warning(
        "stopped by %s at step %d: %s is complete; %s",
        signal.Signals(stop.received).name,
        stop.stopped_at,
        folder,
        way_on,
    )
    raise SystemExit(128 + stop.received)
