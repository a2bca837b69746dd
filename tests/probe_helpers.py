"""What the fault probes share: vanilla-train's console script run with a change made to its trainer."""

import sys
from collections.abc import Callable

from training import train


def run_train_with(change: Callable[[object], None], argv: list[str]) -> None:
    """vanilla-train ``argv`` (its console script: exit status, one-line errors), ``change(trainer)`` applied to the
    trainer it builds."""
    build_trainer = train.build_trainer

    def build_changed(*args, **kwargs):
        trainer, data = build_trainer(*args, **kwargs)
        change(trainer)
        return trainer, data

    train.build_trainer = build_changed
    sys.argv = ["vanilla-train", *argv]
    train.main()


def before_optimizer_write(trainer, checkpoint: str, action: Callable[[str], None]) -> None:
    """``action(folder)`` when the trainer is about to write the optimizer state into ``checkpoint``."""
    save = trainer._save_optimizer_and_scheduler

    def save_after(folder):
        if folder.endswith(checkpoint):
            action(folder)
        return save(folder)

    trainer._save_optimizer_and_scheduler = save_after
