"""vanilla-train's arguments: the model's (generated from VanillaTransformerConfig's own fields, so a field added
to the config is a flag at once), the recipe's that are not Trainer flags (``RecipeArguments``), the data's
(``data.DataArguments``) and every Seq2SeqTrainingArguments flag; a ``--config`` preset gives their defaults.
The values derived from them are resolved once (``resolved.ResolvedRun``)."""

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Literal

import yaml
from transformers import HfArgumentParser, Seq2SeqTrainingArguments
from transformers.trainer_utils import IntervalStrategy

from modeling_vanilla import VanillaTransformerConfig
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import PAPER_LENGTH_PENALTY, PAPER_NUM_BEAMS
from vanilla_tools.hardware import bf16_supported, cpu_bf16, device_type, precision

from .data.corpus import DataArguments

logger = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
# What each evaluation during training computes (step.evaluation.BleuMetric; bleu_lc_tok where the target language
# is known), by the names --metric_for_best_model takes.
EVALUATION_METRICS = ("loss", "bleu", "chrf", "bleu_lc_tok")
PRESETS = ("demo", "multi30k", "multi30k-tiny", "wmt14", "big")
# The config's fields that vanilla-train sets itself: from the tokenizer (the vocabulary and its special tokens),
# from --label_smoothing_factor (label_smoothing), from --moses_lowercase_tokenize (text_form), or fixed for this
# model.
SET_BY_TRAINING = frozenset(
    {
        "vocab_size",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "decoder_start_token_id",
        "label_smoothing",
        "text_form",
        "use_cache",
        "is_encoder_decoder",
    }
)


def documented_fields(cls: type) -> dict[str, str]:
    """The help of each field that ``cls``'s docstring describes under "Args:" (``name[, name]: text``, continued on
    more deeply indented lines)."""
    helps, names = {}, []
    args = (cls.__doc__ or "").split("Args:", 1)[-1]
    for line in args.splitlines():
        entry = re.match(r"^ {8}([a-z_, ]+): (.*)$", line)
        if entry:
            names = [name.strip() for name in entry.group(1).split(",")]
            helps.update(dict.fromkeys(names, entry.group(2)))
        elif line.startswith(" " * 12) and names:
            helps.update({name: f"{helps[name]} {line.strip()}" for name in names})
    return helps


def model_fields() -> list[str]:
    """The config fields a vanilla-train flag sets: those VanillaTransformerConfig declares, less SET_BY_TRAINING."""
    own = VanillaTransformerConfig.__annotations__  # this class's fields, not PreTrainedConfig's
    return [f.name for f in fields(VanillaTransformerConfig) if f.name in own and f.name not in SET_BY_TRAINING]


@dataclass
class RecipeArguments:
    """The parts of the recipe that are neither Trainer flags nor config fields."""

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "start from this trained model directory (and its tokenizer)"}
    )
    attn_implementation: str = field(
        default="sdpa", metadata={"help": "transformers attention implementation: sdpa, eager, flex_attention, ..."}
    )
    lr_schedule: Literal["paper", "inverse_sqrt", "trainer"] = field(
        default="paper",
        metadata={
            "help": "'paper': §5.3 with --warmup_steps, ignoring --learning_rate; 'inverse_sqrt': fairseq's, linear "
            "from --warmup_init_lr to --learning_rate over --warmup_steps, then inverse square root "
            "(training/schedules.py); 'trainer': --lr_scheduler_type"
        },
    )
    lr_scale: float = field(default=1.0, metadata={"help": "factor on the §5.3 learning rate"})
    warmup_init_lr: float = field(
        default=1e-7, metadata={"help": "--lr_schedule inverse_sqrt: the rate of the first step (fairseq's default)"}
    )
    num_beams: int = field(default=PAPER_NUM_BEAMS, metadata={"help": "beam size of the final evaluation (§6.1)"})
    length_penalty: float = field(
        default=PAPER_LENGTH_PENALTY, metadata={"help": "alpha of the final evaluation (§6.1)"}
    )
    length_penalty_candidates: list[float] = field(
        default_factory=list,
        metadata={
            "help": "choose alpha among these by validation BLEU, as §6.1 chose it on the development set "
            "(one beam search of the validation set each); the choice decodes test and is saved with the model"
        },
    )
    translate_examples: int = field(default=5, metadata={"help": "test sentences to print translated at the end"})
    final_splits: list[str] = field(
        default_factory=lambda: ["validation", "test"],
        metadata={
            "help": "the splits decoded and scored at the end (Table 3's rows: validation only, so that no "
            "choice ever reads the test set)"
        },
    )
    average_last: int = field(
        default=0, metadata={"help": "evaluate the average of the last N complete checkpoints (§6.1: 5); 0: the last"}
    )
    patience: int = field(
        default=0,
        metadata={
            "help": "stop after N evaluations in a row without improvement of --metric_for_best_model (loss unless "
            "given; or bleu, chrf, bleu_lc_tok), fairseq's --patience; the count carries over a relaunch; 0: never"
        },
    )
    final_model: Literal["average", "best", "last"] = field(
        default="average",
        metadata={
            "help": "the model evaluated and saved at the end: average (§6.1: of the last --average_last "
            "checkpoints; the last where 0), best (the checkpoint best on --metric_for_best_model, kept through "
            "rotation), or last"
        },
    )
    save_on_signal: bool = field(
        default=True,
        metadata={
            "help": "on SIGTERM (preemption) or SIGINT: finish the step, write a checkpoint, exit 143 / 130; "
            "the same command continues exactly"
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "start over in --output_dir, deleting the checkpoints of the run there (each named in the "
            "log). Without it, a run resumes from the newest complete checkpoint there of a run with "
            "the same settings, and is refused one with other settings"
        },
    )
    max_train_minutes: float = field(
        default=0.0,
        metadata={"help": "end training after this many minutes (checkpointed, then evaluated); 0: no limit"},
    )
    summary_dir: str | None = field(
        default=None,
        metadata={
            "help": "also write the run's record (summary.json, the learning curve) here; {date} becomes "
            "today's date (e.g. results/{date}-multi30k)"
        },
    )
    export_ct2: str | None = field(
        default=None,
        metadata={
            "help": "also export the final model for CTranslate2 with this quantization (int8, float32, ...) "
            "into OUTPUT_DIR/ctranslate2-QUANTIZATION, where vanilla-translate --quantization "
            "QUANTIZATION finds it (needs the ct2 extra)"
        },
    )


def _model_arguments() -> type:
    helps = documented_fields(VanillaTransformerConfig)
    config_fields = {f.name: f for f in fields(VanillaTransformerConfig)}
    return make_dataclass(
        "ModelArguments",
        [
            (
                name,
                config_fields[name].type,
                field(default=config_fields[name].default, metadata={"help": helps.get(name, "")}),
            )
            for name in model_fields()
        ],
        bases=(RecipeArguments,),
        namespace={
            "__doc__": "The model (VanillaTransformerConfig's fields: Table 3's base model by default) and "
            "the recipe's other arguments.",
            "__module__": __name__,
        },
    )


ModelArguments = _model_arguments()


def load_preset(name: str, seen: tuple[str, ...] = ()) -> dict:
    """The settings of preset ``name`` (one of PRESETS, or a YAML file). A preset may say ``base: OTHER`` and list
    only what differs from OTHER (another preset, or a YAML file next to it)."""
    path = CONFIG_DIR / f"{name}.yaml" if name in PRESETS else Path(name)
    if not path.is_file():
        raise FileNotFoundError(f"--config {name}: no preset of that name and no file {path}")
    if str(path.resolve()) in seen:
        raise UsageError(f"--config {seen[0]}: presets based on each other in a circle ({path})")
    settings = yaml.safe_load(path.read_text()) or {}
    if not isinstance(settings, dict):
        raise UsageError(f"--config {name}: {path} must hold `field: value` lines")
    base = settings.pop("base", None)
    if base is None:
        return settings
    if base not in PRESETS and not Path(base).is_absolute():
        base = str(path.parent / base)
    return {**load_preset(base, (*seen, str(path.resolve()))), **settings}


# On a GPU a step makes the host wait for nothing: batches are copied from pinned memory (Trainer pins them)
# without waiting for the copy (accelerate's non_blocking), and Trainer does not read each batch's loss on the host
# to leave a NaN or infinite one out of the logged mean (such a loss shows in the log). Each made the host wait for
# the GPU in every batch (benchmarks/wmt14_step.py's host syncs on a lent H200).
ON_CUDA = {"accelerator_config": {"non_blocking": True}, "logging_nan_inf_filter": False}

# On a GPU the next batches are read and collated in worker processes while the step runs (issue 99: in the training
# process a batch cost 3 ms of the H200's 28 ms a micro-batch): 2 workers, each 4 batches ahead, kept across epochs
# (Trainer pins the batches' memory by default). Only for a training set that Trainer's DataLoader reads: not
# --streaming's, which batches itself in the training process to keep its position for the checkpoints. BPE-dropout's
# workers are made anew each epoch: its pairs are re-segmented in the training process, and a kept worker would go on
# reading the first epoch's segmentation.
LOADER_ON_CUDA = {
    "dataloader_num_workers": 2,
    "dataloader_prefetch_factor": 4,
    "dataloader_persistent_workers": True,
}


DEVICE_DEFAULT = object()  # a loader setting left to the device and the training set (``loader_settings``)


def loader_settings(namespace: argparse.Namespace) -> dict:
    """``LOADER_ON_CUDA``'s settings for the training set that the parsed command (``namespace``) asks for: Trainer's
    own (no workers) for --streaming's, workers made anew each epoch for BPE-dropout's, and no prefetching or kept
    workers where a flag or the preset asks for no workers."""
    if namespace.streaming:
        return {f.name: f.default for f in fields(Seq2SeqTrainingArguments) if f.name in LOADER_ON_CUDA}
    settings = dict(LOADER_ON_CUDA)
    workers = namespace.dataloader_num_workers
    if not (settings["dataloader_num_workers"] if workers is DEVICE_DEFAULT else workers):
        settings.update(dataloader_prefetch_factor=None, dataloader_persistent_workers=False)
    elif namespace.bpe_dropout:
        settings["dataloader_persistent_workers"] = False
    return settings


class TrainParser(HfArgumentParser):
    """vanilla-train's parser, which reads the command line once: its defaults (the preset's and the device's) are
    set before it parses, and a data-loader setting left to the device (``DEVICE_DEFAULT``: on a GPU, where neither
    the command nor the preset gives it) is settled from what the command asks for (``loader_settings``) as it
    parses."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, rest = super().parse_known_args(args, namespace)
        left = [name for name in LOADER_ON_CUDA if getattr(namespace, name, None) is DEVICE_DEFAULT]
        if left:
            settings = loader_settings(namespace)
            for name in left:
                setattr(namespace, name, settings[name])
        return namespace, rest


def config_name(argv: list[str]) -> str | None:
    """--config's value, read from the command line before the parser is built: the preset gives its defaults. Given
    twice, it is refused in one line: one preset's defaults would train under the other's name."""
    names = [
        argv[at + 1] if flag == "--config" else flag.split("=", 1)[1]
        for at, flag in enumerate(argv)
        if (flag == "--config" and at + 1 < len(argv)) or flag.startswith("--config=")
    ]
    if len(names) > 1:
        raise UsageError(f"--config given {len(names)} times ({', '.join(names)}): give one preset")
    return names[0] if names else None


def parse_args(argv: list[str] | None = None):
    """(ModelArguments, DataArguments, Seq2SeqTrainingArguments), the command line parsed once; a ``--config``
    preset gives the defaults, and bf16 autocast is on where the hardware runs it fast and safely."""
    argv = list(sys.argv[1:] if argv is None else argv)
    config = config_name(argv)
    on_cuda = device_type() == "cuda"
    defaults = {
        **(ON_CUDA if on_cuda else {}),
        "bf16": bf16_supported(),
        "use_cpu": not on_cuda,
        "predict_with_generate": True,
        "ddp_find_unused_parameters": False,  # every parameter gets a gradient every step
        "warmup_steps": 4000,  # §5.3 (Trainer's 0 would leave the paper's schedule nothing to divide by)
    }
    preset = load_preset(config) if config else {}
    if on_cuda:  # the loader's settings a preset does not give are left to the device (TrainParser)
        defaults.update({name: DEVICE_DEFAULT for name in LOADER_ON_CUDA if name not in preset})
    defaults.update(preset)
    parser = TrainParser((ModelArguments, DataArguments, Seq2SeqTrainingArguments))
    parser.add_argument("--config", default=None, help=f"preset: one of {PRESETS} or a YAML file")
    unknown = set(defaults) - {action.dest for action in parser._actions}
    if unknown:
        raise UsageError(f"--config {config} sets unknown fields: {sorted(unknown)}")
    parser.set_defaults(**defaults)
    *parsed, rest = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True)
    if rest:
        raise UsageError(f"unknown arguments: {rest}")
    check_lengths(parsed[0], parsed[2])
    check_early_stopping(parsed[0], parsed[2])
    check_precision(parsed[2])
    return tuple(parsed[:3])  # the fourth is the namespace holding --config


def check_lengths(model_args, training_args: Seq2SeqTrainingArguments) -> None:
    """Refuses, before any data is read, the counts with which a run would train nothing, average nothing or
    divide by a zero warmup (each would otherwise end in a saved, untrained model or deep inside the loop)."""
    if training_args.max_steps <= 0 and training_args.num_train_epochs <= 0:
        raise UsageError(
            f"nothing to train: --max_steps {training_args.max_steps} and --num_train_epochs "
            f"{training_args.num_train_epochs:g}; give one of them above 0"
        )
    if model_args.average_last < 0:
        raise UsageError(f"--average_last {model_args.average_last}: a number of checkpoints, or 0 for the last")
    if model_args.lr_schedule == "paper" and training_args.warmup_steps <= 0:
        raise UsageError(
            f"--warmup_steps {training_args.warmup_steps:g}: the paper's schedule (--lr_schedule paper) "
            "needs warmup_steps above 0 (§5.3: 4,000)"
        )
    if model_args.lr_schedule == "inverse_sqrt" and min(training_args.warmup_steps, training_args.learning_rate) <= 0:
        raise UsageError(
            "--lr_schedule inverse_sqrt needs --warmup_steps and --learning_rate above 0, got "
            f"{training_args.warmup_steps:g} and {training_args.learning_rate:g}"
        )


def check_early_stopping(model_args, training_args: Seq2SeqTrainingArguments) -> None:
    """Refuses, before any data is read, a --patience that could never act (negative, or with no evaluation to
    count), a --final_model best that nothing measures or keeps (``check_best_kept``), and a
    --metric_for_best_model that the run's evaluations do not compute (Trainer would fail with a KeyError at the
    first evaluation, after the first steps)."""
    if model_args.patience < 0:
        raise UsageError(f"--patience {model_args.patience}: a number of evaluations, or 0 to train to the end")
    if model_args.patience and training_args.eval_strategy == IntervalStrategy.NO:
        raise UsageError(
            f"--patience {model_args.patience} counts evaluations, but --eval_strategy is no: give --eval_strategy "
            "steps or epoch"
        )
    metric = training_args.metric_for_best_model
    if model_args.final_model == "best":
        check_best_kept(model_args, training_args)
    if metric is not None and metric.removeprefix("eval_") not in EVALUATION_METRICS:
        raise UsageError(f"--metric_for_best_model {metric}: the evaluations compute {', '.join(EVALUATION_METRICS)}")


def check_best_kept(model_args, training_args: Seq2SeqTrainingArguments) -> None:
    """--final_model best: a metric measures the best, and a checkpoint is saved at each evaluation that may be it
    (Trainer's rule for --load_best_model_at_end: the same strategy, the saves a multiple of the evaluations); else
    the best evaluation would have no checkpoint to load."""
    if not (training_args.metric_for_best_model or model_args.patience):
        raise UsageError("--final_model best: best by what? give --metric_for_best_model (loss, bleu) or --patience")
    steps = training_args.save_strategy == IntervalStrategy.STEPS
    if training_args.save_strategy != training_args.eval_strategy or (
        steps and training_args.save_steps % training_args.eval_steps
    ):
        raise UsageError(
            f"--final_model best loads the checkpoint of the best evaluation, but --save_strategy "
            f"{training_args.save_strategy.value} does not save at each --eval_strategy "
            f"{training_args.eval_strategy.value}: give the same strategy, --save_steps a multiple of --eval_steps"
        )


def on_cpu(training_args: Seq2SeqTrainingArguments) -> bool:
    return device_type(training_args.use_cpu) == "cpu"


def autocast_precision(training_args: Seq2SeqTrainingArguments) -> str:
    """What the run's autocast runs, by accelerate's name ("no": fp32, "bf16", "fp16"), decided once: here the
    precision flags (--bf16 or --fp16: given, a preset's, an experiment's ``experiment_precision``, or vanilla-train's
    default for the hardware) meet accelerate's config or environment (ACCELERATE_MIXED_PRECISION, which `accelerate
    launch` sets from its config's mixed_precision). transformers reads both into ``mixed_precision``, which the
    Trainer's Accelerator autocasts by: the variable, unless a flag is true. So a flag that asks for another precision
    than the variable is refused, naming both, rather than run the variable's under the flag's label; the variable's
    "no" (accelerate's default) asks for nothing. Also refused: --fp16 on a CPU, where accelerate autocasts nothing
    and the run would train in fp32. Every label of the run reads the value returned (``mixed_precision``)."""
    flags = "fp16" if training_args.fp16 else "bf16" if training_args.bf16 else "no"
    flag = f"--{flags} true" if flags != "no" else "--bf16 false"
    accelerate = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if accelerate.lower() not in ("no", flags):
        raise UsageError(
            f"{flag} asks for {precision(flags)}, but ACCELERATE_MIXED_PRECISION={accelerate} (accelerate launch's "
            f"config's mixed_precision, or the environment) for {precision(accelerate.lower())}, which Trainer would "
            f"run; make them agree (the flag, or mixed_precision: {flags})"
        )
    if flags == "fp16" and on_cpu(training_args):
        raise UsageError(
            "--fp16 true: accelerate runs no fp16 autocast on a CPU, so the run would train in fp32; "
            "train with --fp16 false (and --bf16 true on a CPU with bf16)"
        )
    return training_args.mixed_precision


def check_precision(training_args: Seq2SeqTrainingArguments) -> None:
    """Refuses bf16 autocast on a CPU that would emulate it: without AVX512-BF16 or AMX a bf16 matrix product runs at
    about 1 GFLOP/s (fp32: ~110 on the same CPU), so the run would take a hundred times longer. The default never
    asks for it there; this is a --bf16 true given, or a preset's (``autocast_precision`` refuses the rest)."""
    if autocast_precision(training_args) == "bf16" and on_cpu(training_args) and not cpu_bf16():
        raise UsageError(
            "--bf16 true: this CPU has neither AVX512-BF16 nor AMX and would emulate bf16 at about "
            "1 GFLOP/s; train in fp32 (--bf16 false) or on a CPU or GPU with bf16"
        )
