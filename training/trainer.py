"""Seq2SeqTrainer with the two things of the paper's recipe that transformers does not have built in:
token-count batches (§5.1) and the exact learning-rate schedule (§5.3), and checkpoints kept by
``checkpoints`` (crash-safe: marked complete once on disk, rotated only after)."""

import copy
import logging
import time
from pathlib import Path

import torch
from transformers import Seq2SeqTrainer, TrainerCallback
from transformers.trainer import TRAINING_ARGS_NAME

from hub_card import write_model_card
from vanilla_tools.cli import UsageError

from . import checkpoints
from .batching import Placement, TokenBatchSampler, TrainingSet

logger = logging.getLogger(__name__)


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


class TimeBudget(TrainerCallback):
    """Ends training once ``minutes`` of it have passed (counted from this process's start of training): the step
    that crosses the budget is evaluated and checkpointed (unless a regular checkpoint is less than half a save
    interval old), so checkpoint averaging and the final evaluation follow.
    With an "epoch" strategy the Trainer's end-of-epoch handling does that itself (it also runs when training stops
    mid-epoch), so the flag is left to it rather than doing the work twice. Data-parallel ranks take the decision
    together, so none is left waiting in a collective."""

    def __init__(self, minutes: float):
        if minutes <= 0:
            raise UsageError(f"a time budget needs minutes > 0, got {minutes}")
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


class PaperSeq2SeqTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer plus token-count batching, the §5.3 schedule and §6.1's output length. ``training_set``
    batches the training data (and keeps its position in checkpoints) as its kind does."""

    def __init__(
        self,
        *args,
        training_set: TrainingSet,
        max_tokens_per_batch: int,
        noam_warmup_steps: int | None = None,
        **kwargs,
    ):
        super().__init__(*args, train_dataset=training_set.dataset, **kwargs)
        self.training_set = training_set
        if self.label_smoother is not None and hasattr(self.model.config, "label_smoothing"):
            # The model's loss is the same §5.4 loss in one fused cross_entropy(label_smoothing=...); Trainer's
            # LabelSmoother would materialise the log-probabilities of the whole vocabulary a second time.
            self.model.config.label_smoothing = self.label_smoother.epsilon
            self.label_smoother = None
        self.max_tokens_per_batch = max_tokens_per_batch
        self.noam_warmup_steps = noam_warmup_steps

    def _get_train_sampler(self, train_dataset=None) -> TokenBatchSampler | None:
        # Trainer passes the dataset stripped of the columns the model does not take, the lengths among them; the
        # rows are the same, so the sampler plans on the training set itself.
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        placement = Placement(num_replicas=self.args.world_size, rank=self.args.process_index, seed=seed)
        return self.training_set.batch_sampler(self.max_tokens_per_batch, placement)

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        own = self.training_set.dataloader(self.data_collator, self.args.dataloader_pin_memory)
        return own if own is not None else super().get_train_dataloader()

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        if self.noam_warmup_steps is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        optimizer = optimizer if optimizer is not None else self.optimizer
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(self.noam_warmup_steps))
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def evaluation_loop(self, *args, **kwargs):
        # Seq2SeqTrainer gathers predictions with accelerator.gather, which keeps the pairs that the ranks' last
        # batches repeat to be of equal size: on 2 processes 1,014 validation pairs came back as 1,200 hypotheses and
        # BLEU failed. gather_for_metrics drops them, in the order a single process would produce.
        self.gather_function = self.accelerator.gather_for_metrics
        return super().evaluation_loop(*args, **kwargs)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        # Seq2SeqTrainer fills the model's generation config with transformers' defaults after generating
        # (max_length=20), and the model saved after an evaluation would then cut every translation at 20 tokens
        # instead of input length + 50 (§6.1). The config is put back as it was.
        generation_config = copy.deepcopy(self.model.generation_config)
        try:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)
        finally:
            self.model.generation_config = generation_config

    def create_model_card(self, **kwargs) -> None:
        """Trainer.push_to_hub writes a card first: ours (hub_card), from the files of the output directory."""
        if self.is_world_process_zero():
            write_model_card(self.args.output_dir, self.hub_model_id or self.args.hub_model_id)

    def _save_checkpoint(self, model, trial) -> None:
        # Trainer rotates (save_total_limit) as soon as the new checkpoint's files are written, before it is marked
        # complete: a crash in between left no complete checkpoint at all. Rotation is done here, after the marker.
        keep, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = keep
        run_dir = Path(self._get_output_dir(trial=trial))
        folder = run_dir / f"checkpoint-{self.state.global_step}"
        self.training_set.save(folder, self.state.global_step * self.args.gradient_accumulation_steps)
        self.accelerator.wait_for_everyone()  # every rank's files (RNG states, streams) are on disk before the marker
        if self.args.should_save:
            torch.save(self.args, folder / TRAINING_ARGS_NAME)  # saved above with the limit set aside
            checkpoints.mark_complete(folder, self.state.global_step)
            checkpoints.rotate_complete_checkpoints(run_dir, keep, self.state.best_model_checkpoint)
