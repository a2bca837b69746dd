"""What vanilla-train builds before it trains (``train`` conducts): the resolved run (``resolve_run``: every value
decided, every bad combination refused and the parsed arguments written, before anything is built or saved), then
from it the tokenizer, the model, the training set and the trainer with its callbacks (``build_trainer``, the one
way to a trainer: vanilla-train's, benchmarks/' and the tests')."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import datasets
from transformers import (
    EarlyStoppingCallback,
    PreTrainedTokenizerBase,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq
from vanilla_tools.batch_shapes import PairBatches
from vanilla_tools.cli import UsageError, load_tokenizer
from vanilla_tools.disk import write_guard
from vanilla_tools.hardware import precision_line

from .arguments import ModelArguments, autocast_precision, model_fields, on_cpu
from .data.batching import TokenizedPairs, TrainingSet, batch_shapes, share_batches_by_name
from .data.bpe_dropout import BPEDropoutPairs
from .data.corpus import (
    Corpus,
    DataArguments,
    PairTokenizer,
    corpus_tags,
    known_before_reading,
    load_parallel_data,
    text_form,
    tokenize_splits,
)
from .data.streaming import Stream, StreamingTokenBatches, streaming_pairs
from .data.tokenizer import learned_tokenizer, sample_sentences, streamed_sentences
from .resolved import ResolvedRun, RunDecoding, accumulation_steps, batch_plan, check_patience
from .run.checkpoints import CompleteCheckpoints, output_guard, trainer_arguments
from .run.curve import LearningCurveCallback
from .run.hub_push import HubPush
from .run.launches import Launches
from .run.process import FirstStepLog
from .run.run_settings import run_settings
from .run.stopping import SaveOnSignal, TimeBudget
from .schedules import lr_multiplier
from .step.compiled import CompileReport, compiles, fit_for_compile, settle_cuda_graphs
from .step.evaluation import BleuMetric, shortest_first, spread_sample
from .step.micro_batch import Vocabulary, size_micro_batch
from .step.ties import hold_ties_once, load_ties_whole
from .step.trainer import PaperSeq2SeqTrainer

logger = logging.getLogger("vanilla_train")


def resolve_run(
    model_args: ModelArguments, data_args: DataArguments, training_args: Seq2SeqTrainingArguments
) -> ResolvedRun:
    """The run resolved (``resolved.ResolvedRun``), the one place each value derived from the command and the machine
    is decided: the batch shapes on the device, the precision, the micro-batch (``micro_batch.size_micro_batch``,
    which may probe the device with the run's model), the accumulation, the compile mode, the learning rate, the
    decodings, the training corpora, the text form, whether there is a validation split, and the settings a relaunch
    compares. A combination that could not run is refused first, in one line (``check_patience``,
    ``check_streaming``, ``check_bpe_dropout``); the parsed ``training_args`` are written last (``ResolvedRun.write``),
    before anything is built or saved."""
    device, processes = training_args.device.type, training_args.world_size
    with training_args.main_process_first(desc="the data's splits"):  # (a Hub dataset's: the first fills the cache)
        corpora, validation = known_before_reading(data_args)
    check_patience(model_args.patience, validation)
    if data_args.streaming:
        check_streaming(data_args, training_args, corpora)
    check_bpe_dropout(data_args, training_args)
    shapes = batch_shapes(data_args, device)
    precision = autocast_precision(training_args)
    model = partial(build_model, model_args, Vocabulary(data_args.vocab_size))
    overwrite = model_args.overwrite_output_dir
    micro_batch, sized_by = size_micro_batch(data_args, training_args, shapes, overwrite, model, precision)
    accumulation = accumulation_steps(
        data_args.tokens_per_step, micro_batch, processes, training_args.gradient_accumulation_steps
    )
    plan = batch_plan(micro_batch, processes, accumulation)
    run = ResolvedRun(
        micro_batch=micro_batch,
        sized_by=sized_by,
        accumulation=accumulation,
        asked_tokens_per_step=data_args.tokens_per_step,
        processes=processes,
        device=device,
        shapes=shapes,
        learning_rate=base_learning_rate(model_args, training_args),
        precision=precision,
        compile_mode=settle_cuda_graphs(training_args, accumulation),
        compiles=compiles(training_args),
        decoding=RunDecoding.of(model_args, training_args),
        streaming=data_args.streaming,
        save_on_signal=model_args.save_on_signal,
        max_train_minutes=model_args.max_train_minutes,
        corpora=corpora,
        text_form=text_form(data_args),
        validation=validation,
        settings=run_settings(model_args, data_args, training_args, corpora=corpora, plan=plan, shapes=shapes),
        patience=model_args.patience,
        best_metric=training_args.metric_for_best_model or ("loss" if model_args.patience else None),
    )
    logger.info("precision: %s", precision_line(precision, on_cpu(training_args)))
    run.write(training_args)
    return run


def base_learning_rate(model_args: ModelArguments, training_args: Seq2SeqTrainingArguments) -> float:
    """The schedule's base rate: §5.3's ``lr_scale * d_model^-0.5`` (--lr_schedule paper; d_model the start
    model's where there is one), else --learning_rate."""
    if model_args.lr_schedule != "paper":
        return training_args.learning_rate
    if model_args.model_name_or_path:
        d_model = VanillaTransformerConfig.from_pretrained(model_args.model_name_or_path).d_model
    else:
        d_model = model_args.d_model
    return model_args.lr_scale * d_model**-0.5


def log_step_size(run: ResolvedRun) -> None:
    """§5.1's batch is counted per optimizer step: the per-device micro-batch x devices x gradient accumulation.
    With --tokens_per_step, the accumulation comes closest to it; a step far from it is warned of."""
    total, asked = run.tokens_per_step, run.asked_tokens_per_step
    logger.info(
        "tokens per step per side: %d per device x %d devices x %d accumulation = %d%s",
        run.micro_batch,
        run.processes,
        run.accumulation,
        total,
        f" (asked: {asked})" if asked else "",
    )
    if asked and abs(total - asked) > 0.25 * asked:
        logger.warning(
            "a step holds %d tokens per side, far from the %d asked: adjust --max_tokens_per_batch", total, asked
        )


def build_model(args: ModelArguments, tokenizer: PreTrainedTokenizerBase) -> VanillaTransformerForSeq2Seq:
    """The model to train: the start model (--model_name_or_path), or a new one of the config fields' flags with the
    tokenizer's vocabulary and special tokens."""
    if args.model_name_or_path:
        return VanillaTransformerForSeq2Seq.from_pretrained(
            args.model_name_or_path, attn_implementation=args.attn_implementation
        )
    config = VanillaTransformerConfig(
        **{name: getattr(args, name) for name in model_fields()},
        vocab_size=len(tokenizer),
        attn_implementation=args.attn_implementation,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    return VanillaTransformerForSeq2Seq(config)


def run_tokenizer(
    model_args: ModelArguments,
    data_args: DataArguments,
    train: datasets.Dataset | Stream,
    output_dir: Path,
    seed: int,
    tags: tuple[str, ...],
) -> PreTrainedTokenizerBase:
    """The start model's tokenizer, the one --tokenizer names, the run's own (a run being resumed, or the first
    process's), else one learned from a sample of ``train`` (a Dataset, or --streaming's ``Stream``, cached under
    its ``key``), or taken from the cache of tokenizers; a given or learned one holds each of the corpora's ``tags``
    as one token."""
    for folder in (model_args.model_name_or_path, data_args.tokenizer):
        if folder:
            tokenizer = load_tokenizer(folder)
            if not tokenizer.is_fast or tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
                raise UsageError(f"the tokenizer of {folder} must be a fast tokenizer with a pad and an end token")
            check_tags(tokenizer, tags, folder)
            return tokenizer
    if (output_dir / "tokenizer.json").is_file():
        return load_tokenizer(str(output_dir))
    sample = data_args.tokenizer_sample
    if isinstance(train, datasets.Dataset):
        sentences, key = partial(sample_sentences, train, sample, seed), (train._fingerprint, sample, seed)
        count = min(sample, 2 * len(train))
    else:
        sentences, key = partial(streamed_sentences, train.pairs, sample), ("stream", train.key, sample)
        count = sample
    return learned_tokenizer(sentences, key, data_args.vocab_size, data_args.cache_dir, count, tags)


def check_tags(tokenizer: PreTrainedTokenizerBase, tags: tuple[str, ...], folder: str) -> None:
    """Refuses a given tokenizer in which a corpus tag is not one token of its own (it would be split, or unknown)."""
    for tag in tags:
        if len(tokenizer.tokenize(tag)) != 1 or tokenizer.convert_tokens_to_ids(tag) == tokenizer.unk_token_id:
            raise UsageError(f"the tokenizer of {folder} has no token {tag!r}: a corpus tag must be one token")


@dataclass(frozen=True)
class RunData:
    """What the run trains and evaluates on: the tokenized splits (``splits``), the training pairs as the training set
    reads them (``train``: tokenized, or --streaming's stream of raw pairs), the validation pairs evaluated during
    training (None without a validation split) and the tokenizer."""

    splits: datasets.DatasetDict
    train: datasets.Dataset | datasets.IterableDataset
    validation: datasets.Dataset | None
    tokenizer: PreTrainedTokenizerBase


def build_data(
    model_args: ModelArguments, data_args: DataArguments, training_args: Seq2SeqTrainingArguments, run: ResolvedRun
) -> RunData:
    """The data in the ``run``'s text form and the tokenizer holding its corpora's tags (trained on the training text
    unless the run or the start model has one, and saved into the run's directory), the first process filling
    datasets' cache for the others."""
    output_dir = Path(training_args.output_dir)
    cache = Path(data_args.cache_dir or datasets.config.HF_DATASETS_CACHE)
    with write_guard(cache, "datasets' cache", "rerun, or pass --cache_dir on another disk"):
        with training_args.main_process_first(desc="read data"):  # the first process fills datasets' cache
            raw = load_parallel_data(data_args, run.text_form, include_train=not data_args.streaming)
        # the stream is given the run's corpora as resolved and the values it reads, not the arguments to derive them
        if data_args.streaming:
            languages = data_args.source_lang, data_args.target_lang
            train = streaming_pairs(data_args.dataset, data_args.dataset_config, run.corpora, *languages)
        else:
            train = raw["train"]
        with training_args.main_process_first(desc="tokenizer"):
            tags = corpus_tags(run.corpora)
            tokenizer = run_tokenizer(model_args, data_args, train, output_dir, training_args.seed, tags)
            if training_args.should_save and not (output_dir / "tokenizer.json").is_file():
                # a half-written tokenizer.json would be the relaunch's tokenizer
                with output_guard(output_dir, "the tokenizer", (output_dir / "tokenizer.json").unlink):
                    tokenizer.save_pretrained(output_dir)
        with training_args.main_process_first(desc="tokenize"):
            splits = tokenize_splits(raw, tokenizer, data_args)
    validation = shortest_first(splits["validation"]) if "validation" in splits else None
    if validation is not None and data_args.max_eval_samples:
        validation = spread_sample(validation, data_args.max_eval_samples)
    return RunData(splits, train.pairs if data_args.streaming else splits["train"], validation, tokenizer)


def build_trainer(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: Seq2SeqTrainingArguments,
    run: ResolvedRun,
    *,
    hub: HubPush | None = None,
    launches: Launches | None = None,
) -> tuple[PaperSeq2SeqTrainer, datasets.DatasetDict]:
    """The trainer of the resolved ``run`` (``resolve_run`` of the same arguments, which it reads and does not
    change): the data and tokenizer (``build_data``), the model (``build_model``), the training set
    (``training_set``), then the trainer (``assemble_trainer``); with ``hub``, the run's pushes to the Hub are its
    (``hub_push``), not Trainer's; with ``launches``, each checkpoint holds the run's launches."""
    log_step_size(run)
    set_seed(training_args.seed)
    data = build_data(model_args, data_args, training_args, run)
    model = build_model(model_args, data.tokenizer)
    model.config.text_form = run.text_form.as_config()  # the text it learns: every checkpoint says so
    model.text_form_applied = True  # its evaluations decode the data so prepared
    logger.info("model: %s parameters", f"{sum(p.numel() for p in model.parameters()):,}")
    logger.info("batch shapes on %s: %s", run.device, run.shapes.describe())  # training's and evaluation's batches
    parts = TrainerParts(
        model=model,
        data=data,
        training_set=training_set(data_args, training_args, data, run),
        lr_multiplier=lr_multiplier(model_args, training_args),
    )
    trainer = assemble_trainer(training_args, run, parts, hub=hub, launches=launches)
    sampler = trainer.token_batches()  # the very sampler training uses
    if sampler is not None:  # (a stream plans its batches as it reads)
        logger.info("token batches: %d per epoch, %.1f%% padding", len(sampler), 100 * sampler.padding())
    return trainer, data.splits


@dataclass(frozen=True)
class TrainerParts:
    """What a run's trainer is assembled of: the ``model``, its ``data`` and tokenizer, the ``training_set`` read
    from them, and the --lr_schedule's multiplier of the base rate (None: Trainer's own schedule)."""

    model: VanillaTransformerForSeq2Seq
    data: RunData
    training_set: TrainingSet
    lr_multiplier: Callable[[int], float] | None


def assemble_trainer(
    training_args: Seq2SeqTrainingArguments,
    run: ResolvedRun,
    parts: TrainerParts,
    *,
    hub: HubPush | None,
    launches: Launches | None,
) -> PaperSeq2SeqTrainer:
    """The trainer of the ``parts``, as the resolved ``run`` says, with its callbacks (``run_callbacks``)."""
    stop = SaveOnSignal() if run.save_on_signal else None
    fit_for_compile(training_args)
    share_batches_by_name(training_args.dataloader_num_workers)
    model, tokenizer, validation = parts.model, parts.data.tokenizer, parts.data.validation
    trainer = PaperSeq2SeqTrainer(
        model=model,
        args=trainer_arguments(HubPush.trainer_args(training_args) if hub is not None else training_args),
        training_set=parts.training_set,
        eval_dataset=validation,
        processing_class=tokenizer,
        data_collator=PairBatches(run.shapes, tokenizer.pad_token_id, model.prepare_decoder_input_ids_from_labels),
        compute_metrics=BleuMetric(tokenizer, list(validation["target"])) if validation is not None else None,
        max_tokens_per_batch=run.micro_batch,
        shapes=run.shapes,
        lr_multiplier=parts.lr_multiplier,
        decoding=run.decoding,
        stop=stop,
        callbacks=run_callbacks(run, training_args, parts.training_set, stop, hub=hub, launches=launches),
    )
    check_fsdp_state_dict(trainer)
    if trainer.is_fsdp_enabled:  # a checkpoint's full state dict loads into the shards when resuming
        hold_ties_once(trainer.model)
    else:  # a resume loads model.safetensors, which holds the tied weight under one name
        load_ties_whole(trainer.model)
    return trainer


def run_callbacks(
    run: ResolvedRun,
    training_args: Seq2SeqTrainingArguments,
    train_set: TrainingSet,
    stop: SaveOnSignal | None,
    *,
    hub: HubPush | None = None,
    launches: Launches | None = None,
) -> list[TrainerCallback]:
    """The run's callbacks, in the order they act at each event (after Trainer's own): the learning curve, the
    compile report, the checkpoints' completion, the launches, the early stop (--patience), the time budget, the
    signal stop (after the time budget: a signal's checkpoint and stop win over its decision at a step), the Hub
    (after the completion: a checkpoint is pushed once it is complete) and the first step's log."""
    completion = CompleteCheckpoints(
        train_set, run.batch_plan, run.settings, stop, launches, training_args.save_total_limit
    )
    optional = (
        launches,
        EarlyStoppingCallback(run.patience) if run.patience else None,
        TimeBudget(run.max_train_minutes) if run.max_train_minutes else None,
        stop,
        hub,
    )
    return [
        LearningCurveCallback(training_args.output_dir),
        CompileReport(),
        completion,
        *(callback for callback in optional if callback is not None),
        FirstStepLog(),
    ]


def check_fsdp_state_dict(trainer: PaperSeq2SeqTrainer) -> None:
    """Under FSDP, checkpoints and the final model must be full state dicts: from a sharded one Trainer's
    ``save_model`` writes no model (the run would end without one) and a checkpoint holds no model.safetensors for
    §6.1's averaging. Refused before the first step, naming the setting."""
    if not trainer.is_fsdp_enabled:
        return
    kind = str(trainer.accelerator.state.fsdp_plugin.state_dict_type)
    if "FULL_STATE_DICT" not in kind:
        raise UsageError(
            f"FSDP with state dict type {kind.rsplit('.', 1)[-1]}: the run would end without its model "
            "and could not average checkpoints; set fsdp_state_dict_type: FULL_STATE_DICT in the "
            "accelerate config (as training/configs/accelerate/fsdp.yaml does), or state_dict_type: "
            "FULL_STATE_DICT in the --fsdp_config file"
        )


def training_set(
    data_args: DataArguments, training_args: Seq2SeqTrainingArguments, data: RunData, run: ResolvedRun
) -> TrainingSet:
    """The kind of training set the arguments ask for, of ``data``'s training pairs, decided here once: the stream of
    --streaming, the pairs re-segmented each epoch of --bpe_dropout, or the tokenized pairs."""
    tokenizer, lengths = data.tokenizer, (data_args.max_source_length, data_args.max_target_length)
    if data_args.streaming:
        return StreamingTokenBatches(
            data.train,
            PairTokenizer(tokenizer, *lengths),
            window=data_args.streaming_window,
            max_tokens=run.micro_batch,
            shapes=run.shapes,
            rank=training_args.process_index,
            world_size=run.processes,
            seed=training_args.seed,
        )
    if data_args.bpe_dropout:
        return BPEDropoutPairs(data.train, tokenizer, data_args.bpe_dropout, *lengths)
    return TokenizedPairs(data.train)


def check_bpe_dropout(data_args: DataArguments, training_args: Seq2SeqTrainingArguments) -> None:
    """What --bpe_dropout needs: no worker processes kept across epochs (the pairs are re-segmented each epoch in
    the training process)."""
    if data_args.bpe_dropout and training_args.dataloader_num_workers and training_args.dataloader_persistent_workers:
        raise UsageError(
            "--bpe_dropout needs --dataloader_persistent_workers false: the pairs are re-segmented each epoch in "
            "the training process, and a kept worker would go on reading the first epoch's"
        )


def check_streaming(
    data_args: DataArguments, training_args: Seq2SeqTrainingArguments, corpora: tuple[Corpus, ...]
) -> None:
    """What --streaming needs: a length in steps (the stream has no end), no BPE-dropout, one plain corpus of the
    run's ``corpora`` (``ResolvedRun.corpora``), no worker processes (the stream keeps, in the training process,
    where each window began, for the checkpoints)."""
    if training_args.max_steps <= 0:
        raise UsageError("--streaming needs --max_steps: the stream of training pairs has no end")
    if data_args.bpe_dropout:
        raise UsageError("--streaming does not re-segment pairs (--bpe_dropout): the pairs are read once a pass")
    if len(corpora) > 1 or not all(corpus.plain for corpus in corpora):
        raise UsageError("--streaming reads one --train_files corpus as it is: no several corpora, tags or weights")
    if training_args.dataloader_num_workers:
        raise UsageError(
            "--streaming needs --dataloader_num_workers 0: the stream's position is kept in the "
            "training process for the checkpoints"
        )
