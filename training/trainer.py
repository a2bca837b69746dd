"""Seq2SeqTrainer with what of the paper's recipe must be an override: token-count batches (§5.1), the exact
learning-rate schedule (§5.3's, or another of ``schedules``), the loss of §5.4 in the model, and §6.1's output
length when it decodes. The rest of a run is callbacks and modules of their own: how it stops (``stopping``), how its
checkpoints are completed (``checkpoints.CompleteCheckpoints``), how it resumes (``relaunch``), how it reaches the
Hub (``hub_push``)."""

import copy
from collections.abc import Callable

import torch
from transformers import Seq2SeqTrainer

from vanilla_tools.batch_shapes import UNPADDED, BatchShapes
from vanilla_tools.decoding import Decoding

from . import checkpoints
from .batching import Placement, TokenBatchSampler, TrainingSet

# Trainer's private methods overridden below, where no public hook does the same (docs/architecture.md says why for
# each; tests/test_training/test_trainer_hooks.py fails by name if a release renames one or changes its parameters).
PRIVATE_TRAINER_HOOKS = ("_get_train_sampler", "_save_checkpoint")


class PaperSeq2SeqTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer plus token-count batching, the run's schedule (``schedules``) and §6.1's output length.
    ``training_set`` batches the training data (and keeps its position in checkpoints) as its kind does."""

    def __init__(
        self,
        *args,
        training_set: TrainingSet,
        max_tokens_per_batch: int,
        shapes: BatchShapes = UNPADDED,
        lr_multiplier: Callable[[int], float] | None = None,
        decoding: Decoding | None = None,
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
        self.shapes = shapes  # how the sampler plans and the collator pads every batch
        self.lr_multiplier = lr_multiplier  # the schedule of --lr_schedule (schedules.lr_multiplier)
        # how this run decodes (§6.1): built once from the arguments, here for evaluations during training and for
        # the final one (train.py); the model's generation config holds the same, written once before training
        self.decoding = decoding if decoding is not None else Decoding.paper()

    def token_batches(self) -> TokenBatchSampler | None:
        """The sampler of this process's training batches (§5.1), None for a stream (it plans as it reads)."""
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        placement = Placement(num_replicas=self.args.world_size, rank=self.args.process_index, seed=seed)
        return self.training_set.batch_sampler(self.max_tokens_per_batch, placement, self.shapes)

    def _get_train_sampler(self, train_dataset=None) -> TokenBatchSampler | None:
        # Trainer passes the dataset stripped of the columns the model does not take, the lengths among them; the
        # rows are the same, so the sampler plans on the training set itself.
        return self.token_batches()

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        own = self.training_set.dataloader(self.data_collator, self.args.dataloader_pin_memory)
        return own if own is not None else super().get_train_dataloader()

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        """The run's own schedule when ``lr_multiplier`` is set (§5.3's, or fairseq's inverse_sqrt): made anew for each
        ``train()``, over the optimizer that call made (a scheduler kept from an earlier call would step another
        optimizer)."""
        if self.lr_multiplier is None:
            return super().create_scheduler(num_training_steps, optimizer)
        optimizer = optimizer if optimizer is not None else self.optimizer
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.lr_multiplier)
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
        if self.args.predict_with_generate and not prediction_loss_only:
            gen_kwargs = self.output_length(inputs, gen_kwargs)
        try:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)
        finally:
            self.model.generation_config = generation_config

    def output_length(self, inputs: dict, gen_kwargs: dict) -> dict:
        """``gen_kwargs`` (else the run's ``decoding``, with Seq2SeqTrainer's own flags over it) with §6.1's output
        length counted from the batch's longest source, not its width: a batch padded to its bucket translates as
        it would unpadded. (One read of a value a batch, where the predictions are read back anyway.)"""
        given = {key: value for key, value in getattr(self, "_gen_kwargs", {}).items() if value is not None}
        gen_kwargs = gen_kwargs or {**self.decoding.search_kwargs(), **given}
        if not self.shapes.pads() or any(gen_kwargs.get(key) is not None for key in ("max_length", "max_new_tokens")):
            return gen_kwargs
        longest = int(inputs["attention_mask"].sum(dim=1).max())
        return {**gen_kwargs, "max_new_tokens": self.decoding.max_new_tokens_for(longest)}

    def _save_checkpoint(self, model, trial) -> None:
        """Trainer's checkpoint files, with its rotation (``save_total_limit``) held off: Trainer rotates as soon as
        the files are written, before the on_save callbacks mark the checkpoint complete
        (checkpoints.CompleteCheckpoints, which rotates after), and a crash in between left no complete checkpoint.
        A failed write is named in one line; the unmarked folder is removed, the previous complete checkpoint kept."""
        run_dir, folder = checkpoints.checkpoint_folder(self.args, self.state.global_step)
        keep, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            with checkpoints.checkpoint_write_guard(run_dir, folder):
                super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = keep
