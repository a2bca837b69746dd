"""Seq2SeqTrainer with the three things of the paper's recipe that transformers does not have built in:
token-count batches (§5.1), the exact learning-rate schedule (§5.3), and decoding up to input length + 50 (§6.1).
Training batches may take their own collator (BPE-dropout). Checkpoints are marked complete only once fully
written, so resuming never picks up a half-written one."""

import logging
import os
import re
import time
from pathlib import Path

import torch
from transformers import Seq2SeqTrainer, TrainerCallback

from hub_card import write_model_card

from .batching import TokenBatchSampler
from .bpe_dropout import BPEDropoutBatchSampler, BPEDropoutPairs
from .translate import output_length

logger = logging.getLogger(__name__)

COMPLETE_MARKER = ".checkpoint-complete"
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


class NoamSchedule:
    """§5.3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), counting optimizer steps from 1.

    A multiplier for ``LambdaLR`` whose base learning rate is ``lr_scale * d_model^-0.5``. (transformers'
    ``inverse_sqrt`` schedule has the same shape but returns 0 for the first step, wasting it.)
    """

    def __init__(self, warmup_steps: int):
        if warmup_steps <= 0:
            raise ValueError(f"the paper's schedule needs warmup_steps > 0, got {warmup_steps}")
        self.warmup_steps = warmup_steps

    def __call__(self, step: int) -> float:
        step += 1  # LambdaLR counts from 0; the paper's first step is 1
        return min(step**-0.5, step * self.warmup_steps**-1.5)


class TimeBudget(TrainerCallback):
    """Ends training once ``minutes`` of it have passed (counted from this process's start of training): the step
    that crosses the budget is evaluated and checkpointed (unless a regular checkpoint is less than half a save
    interval old), so checkpoint averaging and the final evaluation follow.
    With an "epoch" strategy the Trainer's end-of-epoch handling does that itself (it also runs when training stops
    mid-epoch), so the flag is left to it rather than doing the work twice. Data-parallel ranks take the decision
    together, so none is left waiting in a collective."""

    def __init__(self, minutes: float):
        if minutes <= 0:
            raise ValueError(f"a time budget needs minutes > 0, got {minutes}")
        self.seconds = 60 * minutes
        self.start = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        over = torch.tensor(float(time.monotonic() - self.start >= self.seconds), device=args.device)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(over, op=torch.distributed.ReduceOp.MAX)
        if over.item():
            logger.info("time budget of %.1f minutes reached at step %d", self.seconds / 60, state.global_step)
            control.should_training_stop = True
            # Not a second checkpoint a few steps after a regular one: averaging would count the same weights twice.
            since_save = state.global_step % state.save_steps if args.save_strategy == "steps" else 0
            control.should_save = args.save_strategy != "epoch" and not 0 < since_save < state.save_steps / 2
            control.should_evaluate = args.eval_strategy not in ("no", "epoch")


def complete_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir`` that were completely written, oldest first."""
    complete = []
    for path in Path(output_dir).glob("checkpoint-*"):
        match = _CHECKPOINT_DIR.match(path.name)
        if match and (path / COMPLETE_MARKER).is_file():
            complete.append((int(match.group(1)), path))
        elif match:
            logger.warning("ignoring %s: it was not completely written", path)
    return [path for _, path in sorted(complete)]


def resolve_checkpoint(resume: str | bool | None, output_dir: str) -> str | None:
    """``--resume_from_checkpoint``: a path (must be complete), or True/"auto"/"last" for the newest complete one."""
    if resume in (None, False, "", "false", "False"):
        return None
    if resume in (True, "true", "True", "auto", "last"):
        found = complete_checkpoints(output_dir)
        if not found:
            logger.warning("no complete checkpoint in %s: training from scratch", output_dir)
        return str(found[-1]) if found else None
    if not (Path(resume) / COMPLETE_MARKER).is_file():
        raise ValueError(f"{resume} is not a complete checkpoint (no {COMPLETE_MARKER}); it may have been interrupted")
    return str(resume)


class PaperSeq2SeqTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer plus token-count batching, the §5.3 schedule and §6.1's output length."""

    def __init__(
        self,
        *args,
        max_tokens_per_batch: int,
        noam_warmup_steps: int | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if self.label_smoother is not None and hasattr(self.model.config, "label_smoothing"):
            # The model's loss is the same §5.4 loss in one fused cross_entropy(label_smoothing=...); Trainer's
            # LabelSmoother would materialise the log-probabilities of the whole vocabulary a second time.
            self.model.config.label_smoothing = self.label_smoother.epsilon
            self.label_smoother = None
        self.max_tokens_per_batch = max_tokens_per_batch
        self.noam_warmup_steps = noam_warmup_steps

    def _get_train_sampler(self, train_dataset=None) -> TokenBatchSampler:
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        placement = {
            "num_replicas": self.args.world_size,
            "rank": self.args.process_index,
            "seed": self.args.data_seed if self.args.data_seed is not None else self.args.seed,
        }
        if isinstance(dataset, BPEDropoutPairs):
            return BPEDropoutBatchSampler(dataset, self.max_tokens_per_batch, **placement)
        lengths = [len(ids) for ids in dataset["input_ids"]], [len(ids) for ids in dataset["labels"]]
        return TokenBatchSampler(*lengths, self.max_tokens_per_batch, **placement)

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        if self.noam_warmup_steps is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        optimizer = optimizer if optimizer is not None else self.optimizer
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(self.noam_warmup_steps))
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        gen_kwargs = gen_kwargs or dict(getattr(self, "_gen_kwargs", {}))
        if gen_kwargs.get("max_new_tokens") is None and gen_kwargs.get("max_length") is None:
            gen_kwargs.update(output_length(inputs["input_ids"]))  # Seq2SeqTrainer drops the max_length None
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys, **gen_kwargs)

    def create_model_card(self, **kwargs) -> None:
        """Trainer.push_to_hub writes a card first: ours (hub_card), from the files of the output directory."""
        if self.is_world_process_zero():
            write_model_card(self.args.output_dir, self.hub_model_id or self.args.hub_model_id)

    def _save_checkpoint(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        self.accelerator.wait_for_everyone()  # every rank's files (RNG states) are on disk before the marker
        if self.args.should_save:
            marker = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}" / COMPLETE_MARKER
            with open(marker, "w") as f:
                f.write(f"{self.state.global_step}\n")
                f.flush()
                os.fsync(f.fileno())
