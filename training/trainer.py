"""Seq2SeqTrainer with the two things of the paper's recipe that transformers does not have built in:
token-count batches (§5.1) and the exact learning-rate schedule (§5.3), and checkpoints kept by
``checkpoints`` (crash-safe: marked complete once on disk, rotated only after)."""

import copy
import json
import logging
import signal
import time
from pathlib import Path

import torch
from huggingface_hub import CommitInfo
from transformers import Seq2SeqTrainer, TrainerCallback
from transformers.trainer import TRAINING_ARGS_NAME

from hub_card.push import push_model_dir
from vanilla_tools.batch_shapes import UNPADDED, BatchShapes
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding

from . import checkpoints
from .batching import Placement, TokenBatchSampler, TrainingSet

logger = logging.getLogger(__name__)
BATCH_PLAN = "batch_plan.json"  # in a checkpoint: how its run cut the data into steps


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
    abandoned (it can take minutes); a second signal stops at once. Ranks decide together at each step, so all stop
    at the same one and none is left waiting in a collective."""

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
        logger.warning("%s received: finishing the current step, then saving a checkpoint (again to stop at once)",
                       signal.Signals(number).name)  # fmt: skip

    def on_step_end(self, args, state, control, **kwargs):
        if any_rank(self.received is not None, args.device):
            self.stopped_at = state.global_step
            control.should_save, control.should_training_stop, control.should_evaluate = True, True, False

    def on_prediction_step(self, args, state, control, **kwargs):
        if any_rank(self.received is not None, args.device):
            raise StopRequested()


# Trainer's private methods overridden below, where no public hook does the same (docs/architecture.md says why for
# each; tests/test_training/test_trainer_hooks.py fails by name if a release renames one or changes its parameters).
PRIVATE_TRAINER_HOOKS = ("_get_train_sampler", "_save_checkpoint")


class PaperSeq2SeqTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer plus token-count batching, the §5.3 schedule and §6.1's output length. ``training_set``
    batches the training data (and keeps its position in checkpoints) as its kind does."""

    def __init__(
        self,
        *args,
        training_set: TrainingSet,
        max_tokens_per_batch: int,
        shapes: BatchShapes = UNPADDED,
        noam_warmup_steps: int | None = None,
        run_settings: dict | None = None,
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
        self.noam_warmup_steps = noam_warmup_steps
        self.run_settings = run_settings  # recorded in each checkpoint: what a relaunch and rotation compare
        self.stop_on_signal: SaveOnSignal | None = None  # set by train_until_stopped

    def _get_train_sampler(self, train_dataset=None) -> TokenBatchSampler | None:
        # Trainer passes the dataset stripped of the columns the model does not take, the lengths among them; the
        # rows are the same, so the sampler plans on the training set itself.
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        placement = Placement(num_replicas=self.args.world_size, rank=self.args.process_index, seed=seed)
        return self.training_set.batch_sampler(self.max_tokens_per_batch, placement, self.shapes)

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        own = self.training_set.dataloader(self.data_collator, self.args.dataloader_pin_memory)
        return own if own is not None else super().get_train_dataloader()

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        """§5.3's schedule when ``noam_warmup_steps`` is set: made anew for each ``train()``, over the optimizer that
        call made (a scheduler kept from an earlier call would step another optimizer)."""
        if self.noam_warmup_steps is None:
            return super().create_scheduler(num_training_steps, optimizer)
        optimizer = optimizer if optimizer is not None else self.optimizer
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(self.noam_warmup_steps))
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
        """``gen_kwargs`` (or Seq2SeqTrainer's own, which it takes only when none are given) with §6.1's output
        length counted from the batch's longest source, not its width: a batch padded to its bucket translates as
        it would unpadded. (One read of a value a batch, where the predictions are read back anyway.)"""
        gen_kwargs = {**getattr(self, "_gen_kwargs", {}), **gen_kwargs}
        if not self.shapes.pads() or any(gen_kwargs.get(key) is not None for key in ("max_length", "max_new_tokens")):
            return gen_kwargs
        longest = int(inputs["attention_mask"].sum(dim=1).max())
        return {**gen_kwargs, "max_new_tokens": Decoding.resolve(self.model.generation_config).max_new_tokens_for(
            longest)}  # fmt: skip

    def push_to_hub(self, commit_message: str | None = "End of training", blocking: bool = True,
                    token: str | None = None, revision: str | None = None, private: bool | None = None,
                    **kwargs) -> CommitInfo | None:  # fmt: skip
        """Trainer's upload of the output directory (at ``save_model`` and at the end) is vanilla-push's: our card,
        and the model's files only (Trainer's would also upload the run's lock, training_args.bin and any serving
        export kept beside the model). Blocking: the run ends once its model is on the Hub."""
        if not self.is_world_process_zero():
            return None
        return push_model_dir(self.args.output_dir, self.hub_model_id or self.args.hub_model_id,
                              self.args.hub_private_repo if private is None else private,
                              revision or self.args.hub_revision, token or self.args.hub_token,
                              commit_message or "End of training")  # fmt: skip

    def _save_checkpoint(self, model, trial) -> None:
        """Trainer's checkpoint, then this run's data position and batch plan, then the marker that makes it
        complete, then rotation. A failed write is named in one line; the unmarked folder is removed (never resumed
        from) and the previous complete checkpoint stays as it was."""
        run_dir = Path(self.args.output_dir)  # where Trainer saves it, outside a hyperparameter search
        folder = run_dir / f"checkpoint-{self.state.global_step}"
        with checkpoints.checkpoint_write_guard(run_dir, folder):
            self._write_checkpoint(model, trial, run_dir, folder)

    def _write_checkpoint(self, model, trial, run_dir: Path, folder: Path) -> None:
        # Trainer rotates (save_total_limit) as soon as the new checkpoint's files are written, before it is marked
        # complete: a crash in between left no complete checkpoint at all. Rotation is done here, after the marker.
        keep, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = keep
        self.training_set.save(folder, self.state.global_step * self.args.gradient_accumulation_steps)
        if self.args.should_save:
            (folder / BATCH_PLAN).write_text(json.dumps(self.batch_plan()) + "\n")
        self.accelerator.wait_for_everyone()  # every rank's files (RNG states, streams) are on disk before the marker
        if self.args.should_save:
            torch.save(self.args, folder / TRAINING_ARGS_NAME)  # saved above with the limit set aside
            if self.saving_on_signal():
                name = signal.Signals(self.stop_on_signal.received).name
                (folder / checkpoints.ON_SIGNAL_MARKER).write_text(name + "\n")
            checkpoints.mark_complete(folder, self.state.global_step, settings=self.run_settings)
            checkpoints.rotate_complete_checkpoints(run_dir, keep, self.state.best_model_checkpoint, self.run_settings)

    def batch_plan(self) -> dict:
        """What decides which pairs make each step: the sampler's batches of ``max_tokens_per_batch`` x processes
        tokens (dealt out pair by pair to the processes), and how many make a step."""
        return {"tokens_per_batch": self.max_tokens_per_batch * self.args.world_size,
                "gradient_accumulation_steps": self.args.gradient_accumulation_steps,
                "processes": self.args.world_size, "max_tokens_per_batch": self.max_tokens_per_batch}  # fmt: skip

    def check_resume(self, checkpoint: Path) -> None:
        """Resuming on another number of processes keeps the data order exactly when the sampler's batches and the
        accumulation stay the same (the batches are cut from the data before they are dealt out); otherwise the
        resumed run would see other pairs, some twice, so it is refused naming the flag that keeps them."""
        path = Path(checkpoint) / BATCH_PLAN
        if not path.is_file():
            return  # written before batch plans were recorded
        saved, now = json.loads(path.read_text()), self.batch_plan()
        keys = ("tokens_per_batch", "gradient_accumulation_steps")
        if all(saved[key] == now[key] for key in keys):
            if saved["processes"] != now["processes"]:
                logger.warning(
                    "resuming a run of %d processes on %d: the same batches of %d tokens in the same order; dropout's "
                    "random numbers differ (each process had its own generator)",
                    saved["processes"], now["processes"], now["tokens_per_batch"],
                )  # fmt: skip
            return
        fits = saved["tokens_per_batch"] % now["processes"] == 0
        advice = (f"pass --max_tokens_per_batch {saved['tokens_per_batch'] // now['processes']} and "
                  f"--gradient_accumulation_steps {saved['gradient_accumulation_steps']}" if fits
                  else f"run it on {saved['processes']} processes")  # fmt: skip
        raise UsageError(
            f"{checkpoint} was trained in batches of {saved['processes']} processes x {saved['max_tokens_per_batch']} "
            f"tokens x {saved['gradient_accumulation_steps']} accumulated; this run would take "
            f"{now['processes']} x {self.max_tokens_per_batch} x {now['gradient_accumulation_steps']}, other pairs "
            f"in each step. To resume with the same batches, {advice}"
        )

    def saving_on_signal(self) -> bool:
        """Whether the checkpoint being written is the one a signal asked for, off the save schedule."""
        stop = self.stop_on_signal
        if stop is None or stop.received is None:
            return False
        on_schedule = self.args.save_strategy == "steps" and self.state.global_step % self.state.save_steps == 0
        return not on_schedule

    def train_until_stopped(self, resume_from_checkpoint: str | None):
        """``train()``, saving a checkpoint and returning None if SIGTERM or SIGINT stops it (see ``SaveOnSignal``)."""
        self.stop_on_signal = stop = SaveOnSignal()
        self.add_callback(stop)
        stop.install()
        try:
            result = self.train(resume_from_checkpoint=resume_from_checkpoint)
            return None if stop.stopped_at is not None else result
        except StopRequested:  # during an evaluation: the step before it is done, its checkpoint not yet written
            stop.stopped_at = self.state.global_step
            self._save_checkpoint(self.model, trial=None)
            return None
        finally:
            stop.uninstall()
