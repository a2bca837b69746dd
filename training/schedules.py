"""vanilla-train's learning-rate schedules of its own (``--lr_schedule``), decided here once: §5.3's (``paper``,
``NoamSchedule``) and fairseq's with a warmup from an initial rate (``inverse_sqrt``, ``InverseSqrtSchedule``), each
a multiplier of ``LambdaLR``'s base rate that the trainer steps with; ``trainer`` leaves the schedule to Trainer's
--lr_scheduler_type."""

from collections.abc import Callable

from transformers import Seq2SeqTrainingArguments

from vanilla_tools.cli import UsageError

from .arguments import ModelArguments


class NoamSchedule:
    """§5.3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), counting optimizer steps from 1.

    A multiplier for ``LambdaLR`` whose base learning rate is ``lr_scale * d_model^-0.5``. (transformers'
    ``inverse_sqrt`` schedule has the same shape but returns 0 for the first step, wasting it.)
    """

    def __init__(self, warmup_steps: int):
        if warmup_steps <= 0:
            raise UsageError(f"the paper's schedule needs warmup_steps > 0, got {warmup_steps}")
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        step += 1  # LambdaLR counts from 0; the paper's first step is 1
        return min(step**-0.5, step * self.warmup_steps**-1.5)


# The schedules that do not plan their decay to the run's last step: a run of one continues with a longer length
UNPLANNED = frozenset({"paper", "inverse_sqrt"})


class InverseSqrtSchedule:
    """fairseq's ``inverse_sqrt`` scheduler with ``--warmup-init-lr``: after ``u`` optimizer steps (the rate of step
    ``u + 1``; LambdaLR's count, fairseq's ``num_updates``), with peak rate ``lr``, ``W`` warmup steps and initial rate
    ``lr_0``::

        rate(u) = lr_0 + u * (lr - lr_0) / W     for u < W   (linear from lr_0 to lr)
        rate(u) = lr * sqrt(W / u)               for u >= W

    A multiplier for ``LambdaLR`` whose base learning rate is ``lr``: returns rate(u) / lr.
    """

    def __init__(self, warmup_steps: int, peak: float, warmup_init_lr: float):
        if warmup_steps <= 0 or peak <= 0:
            raise UsageError(f"inverse_sqrt needs warmup_steps > 0 and a learning rate > 0, got {warmup_steps}, {peak}")
        self.warmup_steps, self.peak, self.warmup_init_lr = warmup_steps, peak, warmup_init_lr

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            rate = self.warmup_init_lr + step * (self.peak - self.warmup_init_lr) / self.warmup_steps
        else:
            rate = self.peak * (self.warmup_steps / step) ** 0.5
        return rate / self.peak


def lr_multiplier(model_args: ModelArguments, training_args: Seq2SeqTrainingArguments) -> Callable[[int], float] | None:
    """The multiplier of the base rate (``training_args.learning_rate``) that --lr_schedule makes, None for Trainer's
    own schedule."""
    if model_args.lr_schedule == "paper":
        return NoamSchedule(training_args.warmup_steps)
    if model_args.lr_schedule == "inverse_sqrt":
        return InverseSqrtSchedule(training_args.warmup_steps, training_args.learning_rate, model_args.warmup_init_lr)
    return None


def describe(model_args: ModelArguments, training_args: Seq2SeqTrainingArguments) -> str:
    """The schedule in one line, as training_recipe.json and the model card give it."""
    warmup, rate = training_args.warmup_steps, training_args.learning_rate
    if model_args.lr_schedule == "paper":
        return f"§5.3: d_model^-0.5 * min(step^-0.5, step * {warmup}^-1.5) x {model_args.lr_scale}"
    if model_args.lr_schedule == "inverse_sqrt":
        return (
            f"inverse_sqrt: linear from {model_args.warmup_init_lr:g} to {rate:g} over {warmup:g} steps, "
            f"then {rate:g} * sqrt({warmup:g} / step)"
        )
    return f"{training_args.lr_scheduler_type}, peak {rate}"
