"""What makes two launches of vanilla-train one run: the settings that decide what its training steps do, decided
here once. They are recorded in every checkpoint (its completion marker) and in the finished run's record; a relaunch
resumes from a checkpoint only if they match (``relaunch``), and a run rotates away only checkpoints that match them
(``checkpoints``).

Compared: the model (its config's fields, or the start model), the data (its source, languages, training files by
name and size, lengths, vocabulary, BPE-dropout, streaming), the batches over all processes and the accumulation, the
optimizer, the learning-rate schedule, label smoothing and the seeds.

Not compared, because they may change between launches of one run: where and how often it writes, logs and
evaluates, the final evaluation and decoding, the number of processes (the batches are compared summed over all of
them, which keeps the data order), the precision the hardware picks (--bf16), the attention implementation,
--save_on_signal, and the length (``LENGTH``: a longer run continues a shorter one) unless the schedule decays over it.
"""

import json
from dataclasses import asdict
from pathlib import Path

from transformers import Seq2SeqTrainingArguments

from vanilla_tools.batch_shapes import BatchShapes

from ..arguments import ModelArguments, model_fields
from ..data.corpus import Corpus, DataArguments
from ..schedules import UNPLANNED

LENGTH = ("max_steps", "num_train_epochs", "max_train_minutes")  # how long, not what each step does
BATCHES = ("tokens_per_batch", "gradient_accumulation_steps")  # the sampler's batch (all processes), per step


def file_identity(path: str) -> str:
    """A training file as the run knows it: its name and size (not its directory: a relaunch may copy the data to
    a node's own disk first)."""
    file = Path(path)
    return f"{file.name} ({file.stat().st_size} bytes)" if file.is_file() else file.name


def run_settings(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: Seq2SeqTrainingArguments,
    *,
    corpora: tuple[Corpus, ...],
    plan: dict,
    shapes: BatchShapes,
) -> dict[str, object]:
    """The settings of a run, resolved (the preset, the command line, and the run's resolved ``corpora``, batch
    ``plan`` (``resolved.batch_plan``) and ``shapes``, of which ``build.resolve_run`` makes the run), by flag name,
    as JSON reads them back."""
    if model_args.model_name_or_path:  # its config decides the model; the model flags are not used
        model = {"model_name_or_path": model_args.model_name_or_path}
    else:
        model = {name: getattr(model_args, name) for name in model_fields()}
    data = {
        name: getattr(data_args, name)
        for name in (
            "dataset",
            "dataset_config",
            "source_lang",
            "target_lang",
            "max_source_length",
            "max_target_length",
            "vocab_size",
            "tokenizer",
            "tokenizer_sample",
            "bpe_dropout",
            "streaming",
            "moses_lowercase_tokenize",
        )
    }
    data["train_files"] = [file_identity(p) for corpus in corpora for p in corpus.files]
    if not all(corpus.plain for corpus in corpora) or len(corpora) > 1:  # (a single plain pair's settings as before)
        data["train_corpora"] = [{"tag": corpus.tag, "weight": corpus.weight} for corpus in corpora]
    if data_args.streaming:
        data["streaming_window"] = data_args.streaming_window
    batches = {
        **{key: plan[key] for key in BATCHES},
        "batch_shapes": asdict(shapes),  # resolved by device
    }
    optimization = {
        name: getattr(training_args, name)
        for name in (
            "optim",
            "adam_beta1",
            "adam_beta2",
            "adam_epsilon",
            "weight_decay",
            "max_grad_norm",
            "label_smoothing_factor",
            "warmup_steps",
            "seed",
            "data_seed",
        )
    }
    optimization["lr_schedule"] = model_args.lr_schedule
    if model_args.lr_schedule == "paper":  # §5.3: the rate comes from d_model and the scale, not --learning_rate
        optimization["lr_scale"] = model_args.lr_scale
    else:
        optimization["learning_rate"] = training_args.learning_rate
        if model_args.lr_schedule == "inverse_sqrt":
            optimization["warmup_init_lr"] = model_args.warmup_init_lr
        else:
            optimization["lr_scheduler_type"] = training_args.lr_scheduler_type
    length = {
        "max_steps": training_args.max_steps,
        "num_train_epochs": training_args.num_train_epochs,
        "max_train_minutes": model_args.max_train_minutes,
    }
    return json.loads(json.dumps({**model, **data, **batches, **optimization, **length}, default=str))


def continuable(settings: dict) -> tuple[str, ...]:
    """The settings a run may change and still continue its checkpoints: the length, unless the schedule decays
    over it (transformers' schedules plan their decay to the last step; §5.3's and inverse_sqrt do not)."""
    return LENGTH if settings.get("lr_schedule") in UNPLANNED else ("max_train_minutes",)


def differences(saved: dict, now: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """The settings that differ between ``saved`` and ``now``, each as ``name THEN -> NOW``; settings a record
    does not hold (written by an earlier version) are not compared."""
    return [
        f"{name} {saved[name]} -> {value}"
        for name, value in now.items()
        if name in saved and name not in ignore and saved[name] != value
    ]


def same_run(saved: dict | None, now: dict) -> bool:
    """Whether a checkpoint recording ``saved`` belongs to the run of ``now``: the same settings but those it may
    change and continue (an unrecorded one belongs to no run)."""
    return saved is not None and not differences(saved, now, continuable(now))
