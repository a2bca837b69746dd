"""`vanilla-train`: the paper's recipe through Seq2SeqTrainer, on the bundled Multi30k by default.

    vanilla-train --config demo --output_dir runs/demo
    vanilla-train --config multi30k --output_dir runs/m30k --num_train_epochs 20
    torchrun --nproc_per_node 2 -m training.train --config demo ...      (or: accelerate launch ...)

Every Seq2SeqTrainingArguments flag works; ``--config NAME`` loads ``training/configs/NAME.yaml`` as defaults that
any flag on the command line overrides. ``--resume_from_checkpoint auto`` resumes from the newest complete one.
"""

import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import datasets
import numpy as np
import psutil
import torch
import transformers
import yaml
from transformers import (
    DataCollatorForSeq2Seq,
    HfArgumentParser,
    PreTrainedTokenizerBase,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)

from hub_card import write_model_card
from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq

from .allocator import keep_freed_memory
from .average import average_newest_into
from .bpe_dropout import BPEDropoutPairs
from .cli import console_script, load_tokenizer
from .curve import LearningCurveCallback
from .data import DataArguments, file_stamp, lengths, load_parallel_data, test_set_name, tokenize_splits
from .metrics import score_translations
from .streaming import StreamingTokenBatches, streaming_pairs
from .tokenizer import learned_tokenizer, sample_sentences, streamed_sentences
from .trainer import PaperSeq2SeqTrainer, TimeBudget, resolve_checkpoint

logger = logging.getLogger("vanilla_train")
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
PRESETS = ("demo", "multi30k", "wmt14", "big")


@dataclass
class ModelArguments:
    """The model (Table 3 sizes by default) and the parts of the recipe that are not Trainer flags."""

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "start from this trained model directory (and its tokenizer)"}
    )
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    num_attention_heads: int = 8
    ffn_dim: int = 2048
    dropout: float = field(default=0.1, metadata={"help": "P_drop (§5.4)"})
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    position_embedding_type: str = "sinusoidal"
    sinusoidal_layout: str = "interleaved"
    attn_implementation: str = field(
        default="sdpa", metadata={"help": "transformers attention implementation: sdpa, eager, flex_attention, ..."}
    )
    lr_schedule: str = field(
        default="paper",
        metadata={
            "help": "'paper': §5.3 with --warmup_steps, ignoring --learning_rate; 'trainer': --lr_scheduler_type"
        },
    )
    lr_scale: float = field(default=1.0, metadata={"help": "factor on the §5.3 learning rate"})
    num_beams: int = field(default=4, metadata={"help": "beam size of the final evaluation (§6.1)"})
    length_penalty: float = field(default=0.6, metadata={"help": "alpha of the final evaluation (§6.1)"})
    length_penalty_candidates: list[float] = field(
        default_factory=list,
        metadata={
            "help": "choose alpha among these by validation BLEU, as §6.1 chose it on the development set "
            "(one beam search of the validation set each); the choice decodes test and is saved with the model"
        },
    )
    translate_examples: int = field(default=5, metadata={"help": "test sentences to print translated at the end"})
    average_last: int = field(
        default=0, metadata={"help": "evaluate the average of the last N complete checkpoints (§6.1: 5); 0: the last"}
    )
    max_train_minutes: float = field(
        default=0.0,
        metadata={"help": "end training after this many minutes (checkpointed, then evaluated); 0: no limit"},
    )
    summary_dir: str | None = field(
        default=None,
        metadata={"help": "also write the run's record (summary.json, the learning curve) here; {date} becomes "
                          "today's date (e.g. results/{date}-multi30k)"},
    )  # fmt: skip
    export_ct2: str | None = field(
        default=None,
        metadata={"help": "also export the final model for CTranslate2 with this quantization (int8, float32, ...) "
                          "into OUTPUT_DIR/ctranslate2-QUANTIZATION, where vanilla-translate --quantization "
                          "QUANTIZATION finds it (needs the ct2 extra)"},
    )  # fmt: skip


def bf16_supported() -> bool:
    """bf16 autocast is fast and safe here: CUDA with bf16, or a CPU with AVX512-BF16 / AMX."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def parse_args(argv: list[str] | None = None):
    """(ModelArguments, DataArguments, Seq2SeqTrainingArguments); a ``--config`` preset gives the defaults."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser((ModelArguments, DataArguments, Seq2SeqTrainingArguments))
    parser.add_argument("--config", default=None, help=f"preset: one of {PRESETS} or a YAML file")
    known, _ = parser.parse_known_args(argv)
    defaults = {
        "bf16": bf16_supported(),
        "use_cpu": not torch.cuda.is_available(),
        "predict_with_generate": True,
        "ddp_find_unused_parameters": False,  # every parameter gets a gradient every step
    }
    if known.config:
        path = CONFIG_DIR / f"{known.config}.yaml" if known.config in PRESETS else Path(known.config)
        if not path.is_file():
            raise FileNotFoundError(f"--config {known.config}: no preset of that name and no file {path}")
        defaults.update(yaml.safe_load(path.read_text()) or {})
    unknown = set(defaults) - {action.dest for action in parser._actions}
    if unknown:
        raise ValueError(f"--config {known.config} sets unknown fields: {sorted(unknown)}")
    parser.set_defaults(**defaults)
    *parsed, rest = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True)
    if rest:
        raise ValueError(f"unknown arguments: {rest}")
    return tuple(parsed[:3])  # the fourth is the namespace holding --config


def final_generation_kwargs(args: ModelArguments) -> dict:
    """§6.1 decoding for the final evaluation and the saved generation_config (greedy takes no length penalty)."""
    return {"num_beams": args.num_beams, "length_penalty": args.length_penalty if args.num_beams > 1 else 1.0}


def build_model(args: ModelArguments, tokenizer: PreTrainedTokenizerBase) -> VanillaTransformerForSeq2Seq:
    if args.model_name_or_path:
        return VanillaTransformerForSeq2Seq.from_pretrained(
            args.model_name_or_path, attn_implementation=args.attn_implementation
        )
    config = VanillaTransformerConfig(
        vocab_size=len(tokenizer),
        d_model=args.d_model,
        encoder_layers=args.encoder_layers,
        decoder_layers=args.decoder_layers,
        num_attention_heads=args.num_attention_heads,
        ffn_dim=args.ffn_dim,
        dropout=args.dropout,
        attention_dropout=args.attention_dropout,
        activation_dropout=args.activation_dropout,
        position_embedding_type=args.position_embedding_type,
        sinusoidal_layout=args.sinusoidal_layout,
        attn_implementation=args.attn_implementation,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    return VanillaTransformerForSeq2Seq(config)


class BleuMetric:
    """compute_metrics for Seq2SeqTrainer: detokenized, cased sacreBLEU and chrF against the raw references."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, references: list[str]):
        self.tokenizer, self.references = tokenizer, references

    def __call__(self, eval_preds) -> dict:
        if isinstance(eval_preds.predictions, tuple):
            raise ValueError("BLEU needs generated translations: run with --predict_with_generate true")
        predictions = np.where(eval_preds.predictions < 0, self.tokenizer.pad_token_id, eval_preds.predictions)
        hypotheses = [h.strip() for h in self.tokenizer.batch_decode(predictions, skip_special_tokens=True)]
        return score_translations(hypotheses, self.references).as_dict()


def shortest_first(dataset):
    """An evaluation set sorted by source length, shortest first, so generation batches carry little padding.
    Shortest first because data-parallel evaluation fills the ranks' uneven last batches with pairs from the start:
    short ones never lengthen that batch's padding, so every pair is translated as one process would."""
    order = np.argsort(lengths(dataset)[0], kind="stable")
    return dataset.select(order.tolist())


def spread_sample(dataset, count: int):
    """``count`` rows spread evenly over ``dataset`` (sorted by length: short, middle and long sentences alike), so the
    evaluations during training see the validation set's mix of lengths, not only its longest sentences."""
    if count >= len(dataset):
        return dataset
    return dataset.select(np.linspace(0, len(dataset) - 1, num=count).round().astype(int).tolist())


def run_tokenizer(model_args: ModelArguments, data_args: DataArguments, train, output_dir: Path,
                  seed: int) -> PreTrainedTokenizerBase:  # fmt: skip
    """The start model's tokenizer, the one --tokenizer names, the run's own (a run being resumed, or the first
    process's), else one learned from a sample of ``train`` (a Dataset, or the stream of --streaming), or taken
    from the cache of tokenizers."""
    for folder in (model_args.model_name_or_path, data_args.tokenizer):
        if folder:
            tokenizer = load_tokenizer(folder)
            if not tokenizer.is_fast or tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
                raise ValueError(f"the tokenizer of {folder} must be a fast tokenizer with a pad and an end token")
            return tokenizer
    if (output_dir / "tokenizer.json").is_file():
        return load_tokenizer(str(output_dir))
    sample = data_args.tokenizer_sample
    if isinstance(train, datasets.Dataset):
        sentences, key = partial(sample_sentences, train, sample, seed), (train._fingerprint, sample, seed)
    else:
        sentences = partial(streamed_sentences, train, sample)
        key = ("stream", data_args.dataset, data_args.dataset_config, data_args.train_files and
               [file_stamp(p) for p in data_args.train_files], sample)  # fmt: skip
    return learned_tokenizer(sentences, key, data_args.vocab_size, data_args.cache_dir)


def build_trainer(
    model_args: ModelArguments, data_args: DataArguments, training_args: Seq2SeqTrainingArguments
) -> tuple[PaperSeq2SeqTrainer, datasets.DatasetDict]:
    """Data, tokenizer (trained on the training text unless the run or the start model has one), model, trainer."""
    set_seed(training_args.seed)
    output_dir = Path(training_args.output_dir)

    if data_args.streaming:
        check_streaming(data_args, training_args)
    step_size(data_args, training_args)
    with training_args.main_process_first(desc="read data"):  # the first process fills datasets' cache
        raw = load_parallel_data(data_args, include_train=not data_args.streaming)
    train = streaming_pairs(data_args) if data_args.streaming else raw["train"]
    with training_args.main_process_first(desc="tokenizer"):
        tokenizer = run_tokenizer(model_args, data_args, train, output_dir, training_args.seed)
        if training_args.should_save and not (output_dir / "tokenizer.json").is_file():
            tokenizer.save_pretrained(output_dir)
    with training_args.main_process_first(desc="tokenize"):
        data = tokenize_splits(raw, tokenizer, data_args)
    validation = shortest_first(data["validation"]) if "validation" in data else None
    if validation is not None and data_args.max_eval_samples:
        validation = spread_sample(validation, data_args.max_eval_samples)

    model = build_model(model_args, tokenizer)
    model.generation_config.update(**final_generation_kwargs(model_args), early_stopping=model_args.num_beams > 1)
    logger.info("model: %s parameters", f"{sum(p.numel() for p in model.parameters()):,}")
    if model_args.lr_schedule == "paper":
        training_args.learning_rate = model_args.lr_scale * model.config.d_model**-0.5
    collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    if data_args.streaming:
        train_dataset = StreamingTokenBatches(train, tokenizer, data_args, training_args.process_index,
                                              training_args.world_size, training_args.seed)  # fmt: skip
    elif data_args.bpe_dropout:
        train_dataset = BPEDropoutPairs(
            data["train"], tokenizer, data_args.bpe_dropout, data_args.max_source_length, data_args.max_target_length
        )
    else:
        train_dataset = data["train"]
    trainer = PaperSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=validation,
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=BleuMetric(tokenizer, list(validation["target"])) if validation is not None else None,
        max_tokens_per_batch=data_args.max_tokens_per_batch,
        noam_warmup_steps=training_args.warmup_steps if model_args.lr_schedule == "paper" else None,
        callbacks=[LearningCurveCallback(training_args.output_dir)],
    )
    if model_args.max_train_minutes:
        trainer.add_callback(TimeBudget(model_args.max_train_minutes))
    if not data_args.streaming:
        sampler = trainer._get_train_sampler()  # the very sampler training uses
        logger.info("token batches: %d per epoch, %.1f%% padding", len(sampler), 100 * sampler.padding())
    return trainer, data


def step_size(data_args: DataArguments, training_args: Seq2SeqTrainingArguments) -> int:
    """§5.1's batch is counted per optimizer step: the per-device budget x devices x gradient accumulation. With
    --tokens_per_step, the accumulation is set to come closest to it. Logs (and returns) the tokens per side."""
    per_device, devices = data_args.max_tokens_per_batch, training_args.world_size
    if data_args.tokens_per_step:
        training_args.gradient_accumulation_steps = max(1, round(data_args.tokens_per_step / (per_device * devices)))
    accumulation = training_args.gradient_accumulation_steps
    total = per_device * devices * accumulation
    asked = f" (asked: {data_args.tokens_per_step})" if data_args.tokens_per_step else ""
    logger.info("tokens per step per side: %d per device x %d devices x %d accumulation = %d%s", per_device, devices,
                accumulation, total, asked)  # fmt: skip
    if data_args.tokens_per_step and abs(total - data_args.tokens_per_step) > 0.25 * data_args.tokens_per_step:
        logger.warning("a step holds %d tokens per side, far from the %d asked: adjust --max_tokens_per_batch",
                       total, data_args.tokens_per_step)  # fmt: skip
    return total


def check_streaming(data_args: DataArguments, training_args: Seq2SeqTrainingArguments) -> None:
    """What --streaming needs: a length in steps (the stream has no end), no BPE-dropout, no worker processes (the
    stream keeps, in the training process, where each window began, for the checkpoints)."""
    if training_args.max_steps <= 0:
        raise ValueError("--streaming needs --max_steps: the stream of training pairs has no end")
    if data_args.bpe_dropout:
        raise ValueError("--streaming does not re-segment pairs (--bpe_dropout): the pairs are read once a pass")
    if training_args.dataloader_num_workers:
        raise ValueError("--streaming needs --dataloader_num_workers 0: the stream's position is kept in the "
                         "training process for the checkpoints")  # fmt: skip
    training_args.ignore_data_skip = True  # a resumed stream reads on from its saved position itself


class FirstStepLog(TrainerCallback):
    """Logs when the first training step of this process ends, counted from the process's start (imports
    included): what reading the data, the tokenizer and the model cost before training got going
    (benchmarks/data_scale.py reads it)."""

    def __init__(self):
        self.done = False

    def on_step_end(self, args, state, control, **kwargs):
        if not self.done:
            started = psutil.Process().create_time()
            logger.info("first training step done %.1f s after start", time.time() - started)
            self.done = True


def launcher_processes() -> int | None:
    """The process count asked of an ``accelerate launch`` that started this process (its command line, on Linux),
    or None. Without --multi_gpu on a machine without GPUs, accelerate starts a single process and says nothing."""
    try:
        command = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    if "launch" not in command:
        return None
    for flag in ("--num_processes", "--num-processes"):
        if flag in command[:-1] and command[command.index(flag) + 1].isdigit():
            return int(command[command.index(flag) + 1])
    return None


def run(argv: list[str] | None = None) -> dict:
    """vanilla-train: train, average, evaluate, save; returns the results (what eval_results.json holds)."""
    run_start = time.monotonic()
    model_args, data_args, training_args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    asked = launcher_processes()
    if asked and asked > training_args.world_size:
        logger.warning(
            "the launcher asked for %d processes but %d is running: on a machine without GPUs, `accelerate launch` "
            "needs --multi_gpu (CPU processes over gloo), or use torchrun --nproc_per_node %d",
            asked, training_args.world_size, asked,
        )  # fmt: skip
    keep_freed_memory()
    trainer, data = build_trainer(model_args, data_args, training_args)
    trainer.add_callback(FirstStepLog())
    output_dir = Path(training_args.output_dir)
    resume = resolve_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
    if resume:
        logger.info("resuming from %s", resume)
        if isinstance(trainer.train_dataset, StreamingTokenBatches):
            trainer.train_dataset.resume(Path(resume))
    start = time.monotonic()
    train_result = trainer.train(resume_from_checkpoint=resume)
    results = {"train": train_result.metrics}
    if model_args.average_last:  # §6.1
        model = trainer.accelerator.unwrap_model(trainer.model)
        averaged = average_newest_into(model, training_args.output_dir, model_args.average_last)
        results["averaged_checkpoints"] = [path.name for path in averaged]
        logger.info("evaluating the average of %s", ", ".join(results["averaged_checkpoints"]) or "no checkpoint")
    train_minutes = (time.monotonic() - start) / 60
    trainer.save_model()
    trainer.log_metrics("train", train_result.metrics)
    trainer.save_metrics("train", train_result.metrics)
    results.update(final_evaluation(trainer, data, model_args))
    if trainer.is_world_process_zero():
        if model_args.export_ct2:
            from inference.ct2 import cached_export

            logger.info("exported for CTranslate2 to %s", cached_export(output_dir, model_args.export_ct2))
        (output_dir / "eval_results.json").write_text(json.dumps(results, indent=2) + "\n")
        write_recipe(output_dir, model_args, data_args, training_args, trainer.model)
        write_model_card(output_dir, training_args.hub_model_id)
        if model_args.summary_dir:
            folder = Path(model_args.summary_dir.format(date=time.strftime("%Y-%m-%d")))
            write_summary(
                folder, results, train_minutes, (time.monotonic() - run_start) / 60, trainer.model, output_dir, argv,
                (model_args, data_args, training_args),
            )  # fmt: skip
    if training_args.push_to_hub:
        trainer.push_to_hub(commit_message="vanilla-train: final model, tokenizer, results and card")
    return results


def final_evaluation(trainer: PaperSeq2SeqTrainer, data: datasets.DatasetDict, model_args: ModelArguments) -> dict:
    """§6.1 on the whole validation and test sets: beam search (alpha chosen on validation if candidates are given,
    then saved with the model), scored with sacreBLEU. Returns each split's metrics (and the alpha search)."""
    results, tokenizer = {}, trainer.processing_class
    final_generation = final_generation_kwargs(model_args)
    for split in ("validation", "test"):
        if split not in data:
            continue
        dataset = shortest_first(data[split])
        trainer.compute_metrics = BleuMetric(tokenizer, list(dataset["target"]))
        if split == "validation" and model_args.length_penalty_candidates and model_args.num_beams > 1:
            model_args.length_penalty, prediction, results["length_penalty_search"] = choose_length_penalty(
                trainer, dataset, final_generation, model_args.length_penalty_candidates
            )
            final_generation = final_generation_kwargs(model_args)
            trainer.model.generation_config.update(**final_generation)
            if trainer.is_world_process_zero():
                trainer.model.generation_config.save_pretrained(trainer.args.output_dir)
        else:
            prediction = trainer.predict(dataset, metric_key_prefix=split, **final_generation)
        trainer.log_metrics(split, prediction.metrics)
        trainer.save_metrics(split, prediction.metrics)
        results[split] = prediction.metrics
        if split == "test" and trainer.is_world_process_zero():
            report_test(prediction.metrics, dataset, prediction.predictions, tokenizer, model_args.translate_examples)
    return results


def choose_length_penalty(trainer: PaperSeq2SeqTrainer, validation, generation: dict, candidates: list[float]):
    """§6.1 chose alpha "after experimentation on the development set": beam-search ``validation`` with each
    candidate and keep the best BLEU (the first on a tie). Returns the chosen alpha, its prediction, and
    ``{alpha: validation BLEU}`` for the record."""
    tried = {}
    for alpha in candidates:
        tried[alpha] = trainer.predict(
            validation, metric_key_prefix="validation", **{**generation, "length_penalty": alpha}
        )
        logger.info("length penalty %.2f: validation BLEU %.2f", alpha, tried[alpha].metrics["validation_bleu"])
    best = max(candidates, key=lambda alpha: tried[alpha].metrics["validation_bleu"])
    return best, tried[best], {str(alpha): tried[alpha].metrics["validation_bleu"] for alpha in candidates}


def git_commit() -> dict:
    """The commit of the code that ran, and whether the work tree differed from it (None outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    return {"commit": commit, "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no"))
            if commit else None}  # fmt: skip


def processor() -> str:
    """The CPU's model name (Linux lists it in /proc/cpuinfo; platform.processor() is often empty there)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({platform.machine()})"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the run ran on."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"processor": processor(), "cpu_cores": os.cpu_count(), "gpus": gpus,
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__}  # fmt: skip


def resolved_arguments(model_args: ModelArguments, data_args: DataArguments, training_args) -> dict:
    """Every argument of the run after the preset and the command line (tokens masked by to_dict)."""
    return {**asdict(model_args), **asdict(data_args), **training_args.to_dict()}


def write_summary(
    folder: Path, results: dict, train_minutes: float, wall_minutes: float, model, output_dir: Path, argv,
    arguments: tuple,
) -> None:  # fmt: skip
    """summary.json, the record of the run: its test and validation scores, minutes, parameters, the command and
    every argument it resolved to, the git commit and the machine; and the learning curve."""
    folder.mkdir(parents=True, exist_ok=True)
    model_args, data_args, training_args = arguments

    def scores(split: str) -> dict:
        metrics = results.get(split, {})
        keys = ("bleu", "chrf", "signature", "chrf_signature", "length_ratio", "loss")
        return {key: metrics[f"{split}_{key}"] for key in keys if f"{split}_{key}" in metrics}

    summary = {
        test_set_name(data_args.dataset): scores("test"),
        "validation": scores("validation"),
        "beam": {
            "num_beams": model.generation_config.num_beams,
            "length_penalty": model.generation_config.length_penalty,
        },
        **{key: results[key] for key in ("length_penalty_search", "averaged_checkpoints") if key in results},
        "train_minutes": round(train_minutes, 2),
        "wall_clock_minutes": round(wall_minutes, 2),  # the whole command: data, training, final evaluation
        "parameters": sum(p.numel() for p in model.parameters()),
        "command": "vanilla-train " + " ".join(sys.argv[1:] if argv is None else argv),
        "arguments": resolved_arguments(model_args, data_args, training_args),
        "code": git_commit(),
        "machine": machine(),
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name in ("learning_curve.csv", "learning_curve.json"):
        if (output_dir / name).is_file():
            shutil.copy(output_dir / name, folder / name)


def write_recipe(output_dir: Path, model_args, data_args, training_args, model) -> None:
    """training_recipe.json: what the model card reports as the recipe actually used."""
    schedule = (
        f"§5.3: d_model^-0.5 * min(step^-0.5, step * {training_args.warmup_steps}^-1.5) x {model_args.lr_scale}"
        if model_args.lr_schedule == "paper"
        else f"{training_args.lr_scheduler_type}, peak {training_args.learning_rate}"
    )
    recipe = {
        "source_lang": data_args.source_lang,
        "target_lang": data_args.target_lang,
        "max_source_length": data_args.max_source_length,  # vanilla-translate warns about longer inputs
        "max_target_length": data_args.max_target_length,
        "dataset": data_args.dataset,
        "num_beams": model_args.num_beams,
        "length_penalty": model_args.length_penalty,
        "parameters": sum(p.numel() for p in model.parameters()),
        "recipe": {
            "data": f"{data_args.dataset} {data_args.source_lang}->{data_args.target_lang}",
            "vocabulary": f"shared BPE, {data_args.vocab_size} tokens"
            + (f", BPE-dropout {data_args.bpe_dropout} in training" if data_args.bpe_dropout else ""),
            "batches": f"{data_args.max_tokens_per_batch} tokens per side per device, x{training_args.world_size} "
            f"devices, x{training_args.gradient_accumulation_steps} accumulation",
            "optimizer": f"Adam(beta1={training_args.adam_beta1}, beta2={training_args.adam_beta2}, "
            f"eps={training_args.adam_epsilon}), weight decay {training_args.weight_decay}",
            "learning rate": schedule,
            "label smoothing": training_args.label_smoothing_factor,
            "dropout": model_args.dropout,
            "length": (f"{training_args.max_steps} steps" if training_args.max_steps > 0
                       else f"{training_args.num_train_epochs} epochs")
            + (f", at most {model_args.max_train_minutes} minutes" if model_args.max_train_minutes else ""),
            "precision": "bf16 autocast" if training_args.bf16 else "fp32",
            "seed": training_args.seed,
        },
    }  # fmt: skip
    (output_dir / "training_recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")


def report_test(metrics: dict, dataset, predictions, tokenizer, examples: int) -> None:
    print(f"\ntest BLEU = {metrics['test_bleu']:.2f}  chrF = {metrics['test_chrf']:.2f}  ({metrics['test_signature']})")
    predictions = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
    for i in np.linspace(0, len(dataset) - 1, num=min(examples, len(dataset)), dtype=int).tolist():
        print(f"  source:      {dataset[i]['source']}")
        print(f"  reference:   {dataset[i]['target']}")
        print(f"  translation: {tokenizer.decode(predictions[i], skip_special_tokens=True).strip()}\n")


main = console_script(run)

if __name__ == "__main__":
    main()
