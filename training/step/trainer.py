"""Seq2SeqTrainer with what of the paper's recipe must be an override: token-count batches (§5.1), the exact
learning-rate schedule (§5.3's, or another of ``schedules``), the loss of §5.4 in the model, and §6.1's output
length when it decodes; its ``train()`` resumes a run's checkpoint and stops on a signal. The rest of a run is
callbacks and modules of their own: how it stops (``stopping``), how its checkpoints are completed
(``checkpoints.CompleteCheckpoints``), how it resumes (``relaunch``), how it reaches the Hub (``hub_push``)."""

import copy
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property, partial
from pathlib import Path

import torch
import transformers
from packaging import version
from transformers import Seq2SeqTrainer, TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import TrainOutput

from vanilla_tools.batch_shapes import UNPADDED, BatchShapes
from vanilla_tools.decoding import Decoding

from ..data.batching import Placement, TokenBatchSampler, TrainingSet
from ..resolved import RunDecoding
from ..run import checkpoints
from ..run.stopping import SaveOnSignal, stopped_by_signal, train_until_stopped
from .average import average_newest_into, load_average
from .compiled import mark_dynamic
from .loader_wait import LoaderWait

logger = logging.getLogger(__name__)


class PaperSeq2SeqTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer plus token-count batching, the run's schedule (``schedules``) and §6.1's output length.
    ``training_set`` batches the training data (and keeps its position in checkpoints) as its kind does;
    ``decoding`` is how the run decodes in its evaluations and how the saved model does; ``stop``: the run's signal
    stop (--save_on_signal; one of its callbacks), which ``train()`` listens with."""

    def __init__(
        self,
        *args,
        training_set: TrainingSet,
        max_tokens_per_batch: int,
        decoding: RunDecoding,
        shapes: BatchShapes = UNPADDED,
        lr_multiplier: Callable[[int], float] | None = None,
        stop: SaveOnSignal | None = None,
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
        # how this run decodes (§6.1), built once from its arguments; the model's generation config is given its
        # final decoding when the model is saved (save_model), the one place it is written
        self.decoding = decoding
        # the search of the evaluation in progress, set for the length of its evaluate or predict call only
        # (``searching``), None between them: Trainer's evaluation_loop calls prediction_step with a batch alone and
        # no public parameter carries a search from evaluate to it, so it reaches prediction_step only through the
        # trainer, as Seq2SeqTrainer's own generate arguments do (its evaluate(**gen_kwargs) keeps them on the trainer
        # as _gen_kwargs, and they outlive the call)
        self.search: Decoding | None = None
        self.stop = stop
        self.loader_wait = LoaderWait()  # the time the loop waits for its batches, reported in the logs (log)

    def token_batches(self) -> TokenBatchSampler | None:
        """The sampler of this process's training batches (§5.1), None for a stream (it plans as it reads)."""
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        placement = Placement(num_replicas=self.args.world_size, rank=self.args.process_index, seed=seed)
        return self.training_set.batch_sampler(self.max_tokens_per_batch, placement, self.shapes)

    def _get_train_sampler(self, train_dataset=None) -> TokenBatchSampler | None:
        # Trainer passes the dataset stripped of the columns the model does not take, the lengths among them; the
        # rows are the same, so the sampler plans on the training set itself.
        return self.token_batches()

    def train(self, resume_from_checkpoint: str | bool | None = None, trial=None, ignore_keys_for_eval=None, **kwargs):
        """Trainer's training, from the checkpoint ``resume_from_checkpoint`` names (None: from scratch), stopping
        with a checkpoint on a signal with ``stop`` (exits 128 + its number: ``stopping.stopped_by_signal``); the
        metrics are this launch's (``launch_metrics``).
        A checkpoint of the run's last step (--max_steps) is the trained model as it is: transformers' loop, resumed
        there in the middle of an epoch, would train one step more than the run had."""
        # the step the checkpoint holds (its folder may be named otherwise: --resume_from_checkpoint takes any)
        checkpoint = Path(resume_from_checkpoint) if isinstance(resume_from_checkpoint, str | Path) else None
        saved = TrainerState.load_from_json(str(checkpoint / TRAINER_STATE_NAME)) if checkpoint is not None else None
        if saved is not None and 0 < self.args.max_steps <= saved.global_step:
            self.state = saved
            load_average(self.model, [checkpoint])  # the mean of one checkpoint: its weights
            logger.info("%s is of the last step: nothing left to train", checkpoint)
            return TrainOutput(self.state.global_step, 0.0, {"epoch": self.state.epoch})
        train = partial(super().train, resume_from_checkpoint, trial, ignore_keys_for_eval, **kwargs)
        if self.stop is None:
            result = train()
        elif (result := train_until_stopped(self, self.stop, train)) is None:
            stopped_by_signal(self.stop, self.args)
        return launch_metrics(result, saved.global_step if saved else 0, self.state.max_steps)

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        own = self.training_set.dataloader(self.data_collator, self.args.dataloader_pin_memory)
        return own if own is not None else super().get_train_dataloader()

    def get_batch_samples(self, epoch_iterator, num_batches: int, device: torch.device):
        # the one place Trainer's loop takes its batches from the loader: each next() is timed there, and each batch
        # is marked dynamic for a compiled step here, in the process that runs it (compiled.mark_dynamic)
        batches, items = super().get_batch_samples(self.loader_wait.timed(epoch_iterator), num_batches, device)
        return [self.for_the_model(batch) for batch in batches], items

    def for_the_model(self, batch: dict) -> dict:
        """A batch as the model is called with it: marked dynamic where the step is compiled."""
        return mark_dynamic(batch) if self.args.torch_compile else batch

    def floating_point_ops(self, inputs: dict[str, torch.Tensor]) -> int:
        """Trainer's estimate (6 x the inputs' tokens x the parameters outside the embeddings), with the parameters
        counted once: Trainer asks on every micro-batch, and ``PreTrainedModel.num_parameters`` walks every module
        each time (about 1.1 ms of host time a micro-batch at the wmt14 depth; issue 99, item 4 B)."""
        tokens = inputs.get(getattr(self.model, "main_input_name", "input_ids"))
        return 0 if tokens is None else 6 * tokens.numel() * self.parameters_outside_embeddings

    @cached_property
    def parameters_outside_embeddings(self) -> int:
        return self.model.num_parameters(exclude_embeddings=True)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Trainer's log, with the milliseconds per step the loop waited for its batches (``loader_wait``): in a
        training log since the previous one, in ``train()``'s metrics over the whole call."""
        if "loss" in logs:
            logs["loader_wait_ms"] = self.loader_wait.report("interval")
        elif "train_runtime" in logs:
            logs["train_loader_wait_ms"] = self.loader_wait.report("whole")
        super().log(logs, start_time)

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

    def evaluate(
        self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval", decoding: Decoding | None = None
    ) -> dict[str, float]:
        """Seq2SeqTrainer's evaluation, searching as ``decoding`` says (default: the run's decoding during
        training)."""
        with self.searching(decoding or self.decoding.during):
            return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)

    def predict(
        self, test_dataset, ignore_keys=None, metric_key_prefix: str = "test", decoding: Decoding | None = None
    ):
        """Seq2SeqTrainer's prediction, searching as ``decoding`` says (default: the run's final decoding)."""
        with self.searching(decoding or self.decoding.final):
            return super().predict(test_dataset, ignore_keys, metric_key_prefix)

    @contextmanager
    def searching(self, search: Decoding) -> Iterator[None]:
        """``search`` as the search of the evaluation inside (``self.search``, which its prediction_step reads), put
        back as it was when the evaluation ends or fails: it never outlives the call that asked for it."""
        outer, self.search = self.search, search
        try:
            yield
        finally:
            self.search = outer

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        # Seq2SeqTrainer fills the model's generation config with transformers' defaults after generating
        # (max_length=20): the next batch's generate() would warn that it sets both lengths, and a model saved after
        # an evaluation would cut every translation at 20 tokens instead of input length + 50 (§6.1). The config is
        # put back as it was.
        generation_config = copy.deepcopy(self.model.generation_config)
        if self.args.predict_with_generate and not prediction_loss_only:
            gen_kwargs = gen_kwargs or self.generate_kwargs(inputs, self.search)
        try:
            return super().prediction_step(
                model, self.for_the_model(inputs), prediction_loss_only, ignore_keys, **gen_kwargs
            )
        finally:
            self.model.generation_config = generation_config

    def generate_kwargs(self, inputs: dict, search: Decoding) -> dict:
        """``generate()``'s arguments for a batch of ``inputs``: the ``search`` (given to Seq2SeqTrainer's
        prediction_step whole, so none of its own flags is merged over it) and its output length, §6.1's counted
        from the batch's longest source, not its width: a batch padded to its bucket translates as it would
        unpadded. (One read of a value a batch where batches are padded, where the predictions are read back
        anyway; unpadded, the width is the longest source.)"""
        mask = inputs["attention_mask"]
        longest = int(mask.sum(dim=1).max()) if self.shapes.pads() else mask.shape[1]
        return search.generate_kwargs(longest)

    def average_newest(self, count: int) -> list[Path]:
        """§6.1: the model becomes the mean of the run's ``count`` newest complete checkpoints
        (``average.average_newest_into``, into ``weights_target``), which are returned."""
        return average_newest_into(self.weights_target(), self.args.output_dir, count)

    def load_checkpoint_weights(self, checkpoint: Path) -> None:
        """The model becomes ``checkpoint``'s (--final_model best): the average of that one checkpoint."""
        load_average(self.weights_target(), [checkpoint])

    def weights_target(self) -> torch.nn.Module:
        """The module checkpoint weights are loaded into: under FSDP 1 its wrapper, not its inner module of flat
        parameters (FSDP 2 shards the model itself)."""
        return self.model_wrapped if self.is_fsdp_enabled else self.accelerator.unwrap_model(self.model)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Trainer's save of the model (a checkpoint's, or the final model), its generation config holding the run's
        final decoding: what ``generate()`` does without arguments, and what vanilla-translate and the Hub copy
        decode with."""
        self.decoding.final.save_to(self.accelerator.unwrap_model(self.model).generation_config)
        super().save_model(output_dir, _internal_call)

    def save_final_model(self, decoding: Decoding) -> None:
        """The trained model saved (``save_model``) with ``decoding``, the one its final evaluation chose."""
        self.decoding = self.decoding.chosen(decoding)
        self.save_model()

    def save_checkpoint(self) -> None:
        """A complete checkpoint of the step reached, as after any step: Trainer's save, then the on_save callbacks
        that complete it (checkpoints.CompleteCheckpoints). For a stop that abandoned an evaluation
        (``train``, stopping.train_until_stopped): no public method of Trainer writes a resumable checkpoint."""
        self._save_checkpoint(self.model, trial=None)
        self.control = self.callback_handler.on_save(self.args, self.state, self.control)

    def _save_checkpoint(self, model, trial) -> None:
        """Trainer's checkpoint files (without its rotation: ``checkpoints.trainer_arguments``). A failed write is
        named in one line; the unmarked folder is removed, the previous complete checkpoint kept."""
        run_dir, folder = checkpoints.checkpoint_folder(self.args, self.state.global_step)
        with checkpoints.checkpoint_write_guard(run_dir, folder):
            super()._save_checkpoint(model, trial)


def launch_metrics(
    result: TrainOutput, first_step: int, max_steps: int, release: str = transformers.__version__
) -> TrainOutput:
    """This launch's training metrics on every release: ``train_loss`` the mean over its own steps, the steps and
    samples a second over the steps it ran. Releases before 5.19 divide a launch's summed loss by the run's global
    step (too small by first_step / global_step when resumed at ``first_step``) and count the whole schedule's
    ``max_steps`` as run (too fast when resumed, or stopped early by the time budget)."""
    ran = result.global_step - first_step
    if version.parse(release).release >= (5, 19) or ran <= 0:
        return result
    metrics = {**result.metrics, "train_loss": result.training_loss * result.global_step / ran}
    for key in ("train_samples_per_second", "train_steps_per_second"):
        if key in metrics:
            metrics[key] = round(metrics[key] * ran / max_steps, 3)
    return result._replace(training_loss=metrics["train_loss"], metrics=metrics)
