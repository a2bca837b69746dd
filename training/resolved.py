"""The run resolved (``ResolvedRun``): every value vanilla-train derives from its command and its machine, decided
once, before anything is built or saved, by ``build.resolve_run`` (the one function that makes it, whole: its
settings included), and frozen. Values flow one way from it: the builders, the Trainer, the callbacks and the record
read them here, and ``resolve_run`` writes the parsed Seq2SeqTrainingArguments with it once (``write``), as
transformers' ``TrainingArguments.__post_init__`` sets its derived fields where the arguments are made.
tests/test_training/test_resolved.py fails on an accumulation, batch shapes, micro-batch, precision, text form or list
of corpora computed anywhere else."""

import logging
from dataclasses import dataclass, replace

from transformers import Seq2SeqTrainingArguments
from transformers.trainer_utils import IntervalStrategy

from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding
from vanilla_tools.text_form import TextForm

from .arguments import RecipeArguments
from .data.corpus import Corpus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunDecoding:
    """How a run decodes (§6.1), built once from its arguments (``of``): ``during`` training, in its evaluations,
    and ``final``: the final evaluation's (its alpha chosen on validation there), which the model is saved with."""

    during: Decoding
    final: Decoding

    @classmethod
    def of(cls, model_args: RecipeArguments, training_args: Seq2SeqTrainingArguments) -> "RunDecoding":
        """``final``: --num_beams and --length_penalty; ``during``: the same with Seq2SeqTrainer's
        --generation_num_beams where given (the presets decode greedily there: no alpha, no early stopping). Both
        stop at Seq2SeqTrainer's --generation_max_length where given, else at §6.1's input length + 50."""
        final = Decoding.paper(model_args.num_beams, model_args.length_penalty)
        during = Decoding.paper(training_args.generation_num_beams or final.num_beams, model_args.length_penalty)
        length = training_args.generation_max_length
        return cls(during=replace(during, max_length=length), final=replace(final, max_length=length))

    def chosen(self, final: Decoding) -> "RunDecoding":
        """This run's decoding with the ``final`` one its final evaluation chose."""
        return replace(self, final=final)


def batch_plan(micro_batch: int, processes: int, accumulation: int) -> dict:
    """What decides which pairs make each step, kept in every checkpoint (relaunch.check_resume compares it): the
    sampler's batches of ``micro_batch`` x ``processes`` tokens (dealt out pair by pair to the processes), and how
    many (``accumulation``) make a step."""
    return {
        "tokens_per_batch": micro_batch * processes,
        "gradient_accumulation_steps": accumulation,
        "processes": processes,
        "max_tokens_per_batch": micro_batch,
    }


def check_patience(patience: int, validation: bool) -> None:
    """Refuses, in one line, a --patience that could never act: it counts evaluations, and without a ``validation``
    split there are none (``build.resolve_run`` asks before anything is built or saved)."""
    if patience and not validation:
        raise UsageError(f"--patience {patience} counts evaluations, but there is no validation set")


def accumulation_steps(tokens_per_step: int | None, micro_batch: int, processes: int, given: int) -> int:
    """The micro-batches accumulated into an optimizer step: ``given`` (--gradient_accumulation_steps), or with
    --tokens_per_step the number that comes closest to it (§5.1 counts the batch per optimizer step) with
    ``micro_batch`` tokens on each of ``processes``."""
    if not tokens_per_step:
        return given
    return max(1, round(tokens_per_step / (micro_batch * processes)))


@dataclass(frozen=True)
class ResolvedRun:
    """Every value a run derives from its command and its machine (module docstring).

    - ``micro_batch``: the tokens a side one device takes at once (--max_tokens_per_batch, or sized to the device:
      ``step.micro_batch``), ``sized_by``: how that was decided; ``accumulation``: the micro-batches a step;
      ``processes``: the data-parallel processes; together the step's tokens (``tokens_per_step``), which come
      closest to --tokens_per_step (``asked_tokens_per_step``) where given;
    - ``shapes``: the batches' shapes on ``device`` (a device type), training's and evaluation's alike;
    - ``learning_rate``: the base rate (§5.3's ``lr_scale * d_model^-0.5`` under --lr_schedule paper);
    - ``precision``: what autocast runs, by accelerate's name ("no", "bf16", "fp16");
    - ``compile_mode``: the --torch_compile_mode the step runs; ``compiles``: whether inductor compiles here;
    - ``decoding``: how the run decodes; ``streaming``: a stream keeps its own position (Trainer skips no data);
    - ``save_on_signal``, ``max_train_minutes``: how the run stops; ``patience``: the evaluations in a row without
      improvement of ``best_metric`` (the validation metric --metric_for_best_model names, loss unless given) after
      which it stops (fairseq's --patience; 0: never); ``corpora``: the training corpora of --train_files, with
      their tags and weights (the tokenizer keeps each tag whole; --streaming reads its one corpus's files);
      ``text_form``: the text the model reads and writes (--moses_lowercase_tokenize's, or raw), which the data is
      prepared in, the model's config states and the record describes; ``validation``: the data has a validation
      split (``corpus.has_validation``), without which the run does not evaluate while it trains; ``settings``:
      what a relaunch compares (``run_settings``)."""

    micro_batch: int
    sized_by: str
    accumulation: int
    asked_tokens_per_step: int | None
    processes: int
    device: str
    shapes: BatchShapes
    learning_rate: float
    precision: str
    compile_mode: str | None
    compiles: bool
    decoding: RunDecoding
    streaming: bool
    save_on_signal: bool
    max_train_minutes: float
    corpora: tuple[Corpus, ...]
    text_form: TextForm
    validation: bool
    settings: dict
    patience: int = 0
    best_metric: str | None = None

    @property
    def tokens_per_step(self) -> int:
        """§5.1's batch, counted per optimizer step: tokens a side per device x processes x accumulation."""
        return self.micro_batch * self.processes * self.accumulation

    @property
    def batch_plan(self) -> dict:
        """This run's ``batch_plan``."""
        return batch_plan(self.micro_batch, self.processes, self.accumulation)

    @property
    def micro_batch_record(self) -> dict:
        """The run record's ``micro_batch``: the tokens a device took at once, the micro-batches a step, and what
        sized them."""
        return {"tokens_per_side": self.micro_batch, "per_step": self.accumulation, "sized_by": self.sized_by}

    def write(self, training_args: Seq2SeqTrainingArguments) -> None:
        """The one change vanilla-train makes to the parsed ``training_args``, in place, where the run is resolved
        (``build.resolve_run``), before anything is built or saved (the Trainer and the run's record read them back):
        the accumulation, the base learning rate, the compile mode (and --torch_compile off where inductor cannot
        compile), no data skipped for a stream; and, where the data has no ``validation`` split, no evaluation
        (Trainer would refuse the run with a ValueError rather than fail the command the user typed; the presets
        evaluate during training), logged. With a ``patience`` (which ``resolve_run`` refuses without a
        validation split): the metric Trainer tracks as the best (which ``CompleteCheckpoints`` keeps through
        rotation), and its EarlyStoppingCallback's count restored with each checkpoint (a relaunch goes on
        counting)."""
        training_args.gradient_accumulation_steps = self.accumulation
        training_args.learning_rate = self.learning_rate
        training_args.torch_compile_mode = self.compile_mode
        if training_args.torch_compile and not self.compiles:
            training_args.torch_compile, training_args.torch_compile_backend = False, None
        if self.streaming:
            training_args.ignore_data_skip = True
        if self.patience:  # Trainer tracks the best (higher is better but for a loss, as transformers decides)
            training_args.metric_for_best_model = self.best_metric
            if training_args.greater_is_better is None:
                training_args.greater_is_better = not self.best_metric.endswith("loss")
            training_args.restore_callback_states_from_checkpoint = True
        if not self.validation and training_args.eval_strategy != IntervalStrategy.NO:
            logger.warning(
                "no validation set (--validation_files): --eval_strategy %s is off, the run trains without evaluating",
                training_args.eval_strategy.value,
            )
            training_args.eval_strategy = IntervalStrategy.NO
