"""Seq2SeqTrainer with the two things of the paper's recipe that transformers does not have built in:
token-count batches (§5.1) and the exact learning-rate schedule (§5.3).

Checkpoints survive a crash at any point: each is marked complete (with the size of every file in it) only once all
its files are on disk, only complete ones are resumed from, and older ones are deleted only after a newer one is
complete. A complete checkpoint with a missing or shorter file is refused by name."""

import copy
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path

import torch
from transformers import Seq2SeqTrainer, TrainerCallback
from transformers.trainer import TRAINING_ARGS_NAME

from hub_card import write_model_card

from .batching import TokenBatchSampler
from .bpe_dropout import BPEDropoutBatchSampler, BPEDropoutPairs
from .data import lengths
from .streaming import StreamingTokenBatches

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


def checkpoint_step(path: Path) -> int | None:
    match = _CHECKPOINT_DIR.match(path.name)
    return int(match.group(1)) if match else None


def complete_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir`` that were completely written, oldest first."""
    complete = []
    for path in Path(output_dir).glob("checkpoint-*"):
        step = checkpoint_step(path)
        if step is not None and (path / COMPLETE_MARKER).is_file():
            complete.append((step, path))
        elif step is not None:
            logger.warning("ignoring %s: it was not completely written", path)
    return [path for _, path in sorted(complete)]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_complete(folder: Path, step: int) -> None:
    """Flush every file of the checkpoint to disk, then write the marker listing them with their sizes (atomically:
    written aside, then renamed), so that a crash or power loss at any point never leaves a marked checkpoint with a
    missing or short file."""
    files = {p.relative_to(folder).as_posix(): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}
    for name in files:
        _fsync(folder / name)
    staged = folder / f"{COMPLETE_MARKER}.tmp"
    staged.write_text(json.dumps({"step": step, "files": files}, indent=1) + "\n")
    _fsync(staged)
    os.replace(staged, folder / COMPLETE_MARKER)
    _fsync(folder)


def verify_checkpoint(folder: Path) -> None:
    """Raise ValueError naming the first file of a complete checkpoint that is missing or not the size it had when
    written (resuming would otherwise start a fresh optimizer or fail deep inside torch.load)."""
    marker = folder / COMPLETE_MARKER
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{marker} is unreadable ({error}): cannot tell what the checkpoint holds") from error
    if isinstance(record, int):  # a marker of vanilla-train before file lists: the step number alone
        logger.warning("%s was marked complete without a file list: its files cannot be verified", folder)
        return
    written = record["files"]
    for name, size in written.items():
        path = folder / name
        if not path.is_file():
            raise ValueError(f"cannot resume from {folder}: {name} is missing")
        if path.stat().st_size != size:
            raise ValueError(f"cannot resume from {folder}: {name} has {path.stat().st_size} bytes, {size} when saved")


def remove_checkpoint(folder: Path) -> None:
    """Unmark, then delete: a crash halfway leaves an unmarked folder, which is never resumed from."""
    (folder / COMPLETE_MARKER).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


def rotate_complete_checkpoints(output_dir: str | os.PathLike, keep: int | None, protect: str | None = None) -> None:
    """``save_total_limit``: keep the ``keep`` newest complete checkpoints (and ``protect``, the best one); drop the
    older ones and any unfinished folder older than the newest complete one (left by a crash)."""
    if not keep or keep <= 0:
        return
    complete = complete_checkpoints(output_dir)
    doomed = [p for p in complete[:-keep] if protect is None or p.resolve() != Path(protect).resolve()]
    if complete:
        newest = checkpoint_step(complete[-1])
        doomed += [
            p for p in Path(output_dir).glob("checkpoint-*")
            if p not in complete and (step := checkpoint_step(p)) is not None and step < newest
        ]  # fmt: skip
    for folder in doomed:
        logger.info("deleting %s (save_total_limit=%d)", folder, keep)
        remove_checkpoint(folder)


def resolve_checkpoint(resume: str | bool | None, output_dir: str) -> str | None:
    """``--resume_from_checkpoint``: a path (must be complete), or True/"auto"/"last" for the newest complete one.
    Either way its files are verified against the sizes recorded when it was written."""
    if resume in (None, False, "", "false", "False"):
        return None
    if resume in (True, "true", "True", "auto", "last"):
        found = complete_checkpoints(output_dir)
        if not found:
            logger.warning("no complete checkpoint in %s: training from scratch", output_dir)
            return None
        resume = found[-1]
    elif not Path(resume).is_dir():
        raise ValueError(f"--resume_from_checkpoint {resume}: no such directory")
    elif not (Path(resume) / COMPLETE_MARKER).is_file():
        raise ValueError(f"{resume} is not a complete checkpoint (no {COMPLETE_MARKER}); it may have been interrupted")
    verify_checkpoint(Path(resume))
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
        # Trainer passes the dataset stripped of the columns the model does not take, the lengths among them; the
        # rows are the same, so the sampler plans on the full training set.
        dataset = self.train_dataset
        placement = {
            "num_replicas": self.args.world_size,
            "rank": self.args.process_index,
            "seed": self.args.data_seed if self.args.data_seed is not None else self.args.seed,
        }
        if isinstance(dataset, BPEDropoutPairs):
            return BPEDropoutBatchSampler(dataset, self.max_tokens_per_batch, **placement)
        return TokenBatchSampler(*lengths(dataset), self.max_tokens_per_batch, **placement)

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        if not isinstance(self.train_dataset, StreamingTokenBatches):
            return super().get_train_dataloader()
        # --streaming: the stream yields whole token batches of this rank's own pairs; accelerate would shard or
        # dispatch them again.
        return torch.utils.data.DataLoader(self.train_dataset, batch_size=None, collate_fn=self.data_collator,
                                           pin_memory=self.args.dataloader_pin_memory)  # fmt: skip

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
        if isinstance(self.train_dataset, StreamingTokenBatches):  # where each rank's stream goes on
            folder.mkdir(parents=True, exist_ok=True)
            self.train_dataset.save(folder, self.state.global_step * self.args.gradient_accumulation_steps)
        self.accelerator.wait_for_everyone()  # every rank's files (RNG states, streams) are on disk before the marker
        if self.args.should_save:
            torch.save(self.args, folder / TRAINING_ARGS_NAME)  # saved above with the limit set aside
            mark_complete(folder, self.state.global_step)
            rotate_complete_checkpoints(run_dir, keep, self.state.best_model_checkpoint)
