"""What a vanilla-train run leaves besides the model: training_recipe.json and eval_results.json in the model
directory (through vanilla_tools.run_files), and with --summary_dir the run's record, summary.json: its scores, the
command, every argument it resolved to, the git commit and the machine."""

import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from vanilla_tools.corpora import test_set_name
from vanilla_tools.decoding import Decoding
from vanilla_tools.hardware import precision
from vanilla_tools.provenance import git_commit, machine
from vanilla_tools.run_files import TrainingRecipe, write_json

from .arguments import ModelArguments
from .data import DataArguments


def resolved_arguments(model_args: ModelArguments, data_args: DataArguments, training_args) -> dict:
    """Every argument of the run after the preset and the command line (tokens masked by to_dict)."""
    return {**asdict(model_args), **asdict(data_args), **training_args.to_dict()}


def write_summary(
    folder: Path, results: dict, train_minutes: float, wall_minutes: float, model, output_dir: Path, argv,
    arguments: tuple, speed: dict,
) -> None:  # fmt: skip
    """summary.json, the record of the run: its test and validation scores, minutes, parameters, the command and
    every argument it resolved to, the git commit, the machine and its speed (``speed``: fp32 GFLOP/s before and
    after training); and the learning curve."""
    folder.mkdir(parents=True, exist_ok=True)
    model_args, data_args, training_args = arguments

    def scores(split: str) -> dict:
        metrics = results.get(split, {})
        keys = (
            "bleu",
            "chrf",
            "signature",
            "chrf_signature",
            "length_ratio",
            "loss",
            "bleu_lc_tok",
            "lc_tok_signature",
        )
        return {key: metrics[f"{split}_{key}"] for key in keys if f"{split}_{key}" in metrics}

    summary = {
        test_set_name(data_args.dataset): scores("test"),
        "validation": scores("validation"),
        "beam": {
            "num_beams": model.generation_config.num_beams,
            "length_penalty": model.generation_config.length_penalty,
        },
        **{key: results[key] for key in ("length_penalty_search", "averaged_checkpoints") if key in results},
        "steps": results["train"]["steps"],
        "epochs": round(results["train"]["epoch"], 2),
        "train_minutes": round(train_minutes, 2),
        "wall_clock_minutes": round(wall_minutes, 2),  # the whole command: data, training, final evaluation
        "parameters": sum(p.numel() for p in model.parameters()),
        "command": "vanilla-train " + " ".join(sys.argv[1:] if argv is None else argv),
        "arguments": resolved_arguments(model_args, data_args, training_args),
        "code": git_commit(),
        "machine": machine(),
        "machine_speed": speed,
    }
    for name in ("learning_curve.csv", "learning_curve.json"):
        if (output_dir / name).is_file():
            shutil.copy(output_dir / name, folder / name)
    write_json(folder / "summary.json", summary)  # last, and whole: the record is there once complete


def write_recipe(output_dir: Path, model_args, data_args, training_args, model) -> None:
    """training_recipe.json: the recipe actually used, as the model card reports it, and the decoding the model
    was evaluated with (its generation config's, after the length penalty search)."""
    schedule = (
        f"§5.3: d_model^-0.5 * min(step^-0.5, step * {training_args.warmup_steps}^-1.5) x {model_args.lr_scale}"
        if model_args.lr_schedule == "paper"
        else f"{training_args.lr_scheduler_type}, peak {training_args.learning_rate}"
    )
    decoding = Decoding.resolve(model.generation_config)
    TrainingRecipe(
        source_lang=data_args.source_lang,
        target_lang=data_args.target_lang,
        max_source_length=data_args.max_source_length,
        max_target_length=data_args.max_target_length,
        dataset=data_args.dataset,
        num_beams=decoding.num_beams,
        length_penalty=decoding.length_penalty,
        parameters=sum(p.numel() for p in model.parameters()),
        recipe={
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
            "precision": precision(training_args.bf16),
            "seed": training_args.seed,
        },
    ).write(output_dir)  # fmt: skip
