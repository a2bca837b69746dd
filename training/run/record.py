"""What a vanilla-train run leaves besides the model: training_recipe.json and eval_results.json in the model
directory (through vanilla_tools.run_files), and with --summary_dir the run's record, summary.json: its scores, the
command, every argument it resolved to, and the run itself (``run_record``).

``run_record`` is the one schema of what a run is, written here and read by the results page, the recipe and Table 3
(experiments/comparable.py decides from it whether two runs may be compared): the code (the commit and every file
the tree differed in), the machine and the device it trained on, the precision, the budget (steps of a token batch,
or epochs, or minutes), the seed and the steps reached. ``check_run_record`` holds a record to it."""

import logging
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from vanilla_tools.corpora import test_set_name
from vanilla_tools.decoding import Decoding
from vanilla_tools.hardware import fp32_gflops, precision
from vanilla_tools.provenance import git_commit, machine
from vanilla_tools.run_files import TrainingRecipe, write_json
from vanilla_tools.text_form import TextForm

from ..arguments import ModelArguments
from ..data.corpus import DataArguments, corpora_record, lengths
from ..resolved import ResolvedRun
from ..schedules import describe as describe_schedule

logger = logging.getLogger("vanilla_train")


CHOICES = ("length_penalty_search", "averaged_checkpoints", "final_model")  # what the final evaluation chose


def resolved_arguments(
    model_args: ModelArguments, data_args: DataArguments, training_args, run: ResolvedRun | None = None
) -> dict:
    """Every argument of the run after the preset and the command line (tokens masked by to_dict), and the precision
    autocast ran (``mixed_precision``, which to_dict leaves out); with the ``run`` resolved, its micro-batch (a
    --max_tokens_per_batch 0 sized to the device) and precision, else the arguments' own."""
    arguments = {
        **asdict(model_args),
        **asdict(data_args),
        **training_args.to_dict(),
        "mixed_precision": training_args.mixed_precision,
    }
    if run is not None:
        arguments.update(max_tokens_per_batch=run.micro_batch, mixed_precision=run.precision)
    return arguments


def recorded_precision(arguments: dict) -> str | None:
    """The precision of a run by its resolved ``arguments``: what autocast ran, or in a record written before they
    held it, its --bf16; None in one without either."""
    if "mixed_precision" in arguments:
        return precision(arguments["mixed_precision"])
    return precision("bf16" if arguments["bf16"] else "no") if "bf16" in arguments else None


RUN_SCHEMA = 1
# run_record's fields and their JSON types; None where a run was recorded before the field was (the precision before
# 2026-11-24, the steps reached before 2026-11-25)
RUN_FIELDS = {
    "schema": int,
    "code": dict,
    "machine": dict,
    "device": dict,
    "precision": (str, type(None)),
    "budget": dict,
    "seed": int,
    "steps": (int, type(None)),
}
BUDGET_FIELDS = ("max_steps", "num_train_epochs", "max_train_minutes", "tokens_per_step")


def run_budget(arguments: dict, processes: int = 1) -> dict:
    """What a run was allowed to train, from its resolved arguments: ``max_steps`` optimizer steps (Trainer then
    ignores the epochs), else ``num_train_epochs``; at most ``max_train_minutes`` where set (a budget that depends on
    the machine); each step of ``tokens_per_step`` tokens a side (the per-device budget x processes x accumulation)."""
    steps = arguments["max_steps"] if arguments["max_steps"] > 0 else None
    return {
        "max_steps": steps,
        "num_train_epochs": None if steps else arguments["num_train_epochs"],
        "max_train_minutes": arguments.get("max_train_minutes") or None,
        "tokens_per_step": arguments["max_tokens_per_batch"] * processes * arguments["gradient_accumulation_steps"],
    }


def run_device(device_type: str, host: dict) -> dict:
    """The device a run trained on: its type (cpu, cuda) and name (the GPU's, or the processor's)."""
    name = host["gpus"][0] if device_type == "cuda" and host.get("gpus") else host.get("processor")
    return {"type": device_type, "name": name}


def run_record(
    arguments: dict,
    steps: int,
    device_type: str,
    processes: int = 1,
    code: dict | None = None,
    host: dict | None = None,
    launches: list[dict] | None = None,
    micro_batch: dict | None = None,
) -> dict:
    """The run as every reader sees it (RUN_FIELDS): ``arguments`` resolved (``resolved_arguments``), ``steps``
    reached; ``code`` and ``host`` measured now unless given (the last launch's); with ``launches``
    (``launches.Launches.history``), each launch's steps, minutes and what it ran on; with ``micro_batch``
    (``resolved.ResolvedRun.micro_batch_record``), the tokens a device took at once, the micro-batches a step, and
    what sized them (not part of the budget: the same tokens a step in fewer micro-batches is the same recipe)."""
    host = machine() if host is None else host
    return {
        "schema": RUN_SCHEMA,
        "code": git_commit() if code is None else code,
        "machine": host,
        "device": run_device(device_type, host),
        "precision": recorded_precision(arguments),
        "budget": run_budget(arguments, processes),
        "seed": arguments["seed"],
        "steps": steps,
        **({"launches": launches} if launches is not None else {}),
        **({"micro_batch": micro_batch} if micro_batch is not None else {}),
    }


def check_run_record(run: dict) -> None:
    """Raises ValueError naming the first field of ``run`` missing or of the wrong type (RUN_FIELDS)."""
    for name, kind in RUN_FIELDS.items():
        if name not in run:
            raise ValueError(f"run record: no {name!r}")
        if not isinstance(run[name], kind) or isinstance(run[name], bool):
            raise ValueError(f"run record: {name!r} is {run[name]!r}")
    missing = [name for name in BUDGET_FIELDS if name not in run["budget"]]
    if missing or not any(run["budget"][name] for name in BUDGET_FIELDS[:3]):
        raise ValueError(f"run record: budget {run['budget']} lacks {missing or 'a length'}")
    if not isinstance(run.get("launches", []), list):
        raise ValueError(f"run record: 'launches' is {run['launches']!r}")
    if run["schema"] != RUN_SCHEMA:
        raise ValueError(f"run record: schema {run['schema']}, this code reads {RUN_SCHEMA}")


@dataclass(frozen=True)
class PhaseMinutes:
    """Where a launch's minutes went (the record's ``phase_minutes``, docs/training.md; ``make demo``'s profile):
    preparing the run (arguments, data and tokenizer, the model and trainer), training (Trainer's loop and the final
    model's loading: ``train_minutes``), of which the evaluations during training, the final evaluation (§6.1's
    decodes of the final splits, scored), and the rest (saving the final model)."""

    prepare: float
    train: float
    evaluations_in_training: float
    final_evaluation: float
    rest: float

    def as_record(self) -> dict[str, float]:
        return {name: round(minutes, 2) for name, minutes in vars(self).items()}


def evaluation_minutes(log_history: list[dict], first_step: int) -> float:
    """The minutes of the evaluations Trainer logged (their ``eval_runtime``) after ``first_step``: this launch's."""
    return (
        sum(entry["eval_runtime"] for entry in log_history if "eval_runtime" in entry and entry["step"] > first_step)
        / 60
    )


@dataclass(frozen=True)
class RunReport:
    """What a trained run's files and record are written from (``write_summary``, ``finish.write_run_files``): its
    ``arguments`` as parsed (model, data, training) and the ``run`` resolved from them, the command (``argv``; None:
    this process's), the ``results`` (eval_results.json's), the ``decoding`` its final evaluation chose (the saved
    model's), the trained ``model``, its ``train_minutes`` (this launch's training) and ``wall_minutes`` (the whole
    command), the machine's ``speed`` (fp32 GFLOP/s before and after this launch's training: ``machine_speed``), the
    run's ``launches``, where this launch's minutes went (``phases``) and its ``train_tokens`` (``text_tokens``; None
    for a stream): what tokens a second are counted from, so a record says them from what ran."""

    arguments: tuple
    run: ResolvedRun
    argv: list[str] | None
    results: dict
    decoding: Decoding
    model: torch.nn.Module
    train_minutes: float
    wall_minutes: float
    speed: dict
    launches: list[dict]
    phases: PhaseMinutes
    train_tokens: dict[str, int] | None = None  # the training set's source and target tokens (an epoch's text)


@contextmanager
def machine_speed(device: str, measure: bool) -> Iterator[dict]:
    """The machine's speed around what runs inside (training), where ``measure`` (a run with a record, its first
    process): fp32 GFLOP/s before and after. A record keeps it: a time-bounded run's steps depend on it, and a drop
    from before to after says other work shared the cores."""
    speed = {}
    if measure:
        speed["fp32_gflops_before"] = fp32_gflops(device)
        logger.info("%s before training: %.1f GFLOP/s fp32 (1024^3 matrix product)", device, *speed.values())
    yield speed
    if measure:
        speed["fp32_gflops_after"] = fp32_gflops(device)


def write_summary(folder: Path, report: RunReport, output_dir: Path) -> None:
    """summary.json, the record of the run: its test and validation scores, its beam (the final evaluation's
    decoding), minutes (of this launch), parameters, the command and every argument it resolved to, the training
    corpora of --dataset files (``corpus.corpora_record``: files, lines, tag, weight), the run
    (``run_record``: code, machine, device, precision, budget, seed, steps, its launches and micro-batch) and the
    machine's speed; and the learning curve (from ``output_dir``)."""
    folder.mkdir(parents=True, exist_ok=True)
    model_args, data_args, training_args = report.arguments
    resolved = resolved_arguments(model_args, data_args, training_args, report.run)
    results, decoding, run = report.results, report.decoding, report.run

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
        "beam": {"num_beams": decoding.num_beams, "length_penalty": decoding.length_penalty},
        **{
            key: results[key]
            for key in ("length_penalty_search", "averaged_checkpoints", "final_model")
            if key in results
        },
        "epochs": round(results["train"]["epoch"], 2),
        **({"train_tokens": report.train_tokens} if report.train_tokens else {}),
        "train_minutes": round(report.train_minutes, 2),
        "wall_clock_minutes": round(report.wall_minutes, 2),  # the whole command: data, training, final evaluation
        "phase_minutes": report.phases.as_record(),
        "parameters": sum(p.numel() for p in report.model.parameters()),
        "command": "vanilla-train " + " ".join(sys.argv[1:] if report.argv is None else report.argv),
        "arguments": resolved,
        "run": run_record(
            resolved,
            results["train"]["steps"],
            run.device,
            run.processes,
            **this_launch(report.launches),
            micro_batch=run.micro_batch_record,
        ),
        "machine_speed": report.speed,
        **({"text": text} if (text := text_description(run.text_form)) else {}),
        **({"corpora": corpora_record(run.corpora, data_args)} if data_args.dataset == "files" else {}),
    }
    for name in ("learning_curve.csv", "learning_curve.json"):
        if (output_dir / name).is_file():
            shutil.copy(output_dir / name, folder / name)
    write_json(folder / "summary.json", summary)  # last, and whole: the record is there once complete


def text_tokens(splits: dict) -> dict[str, int] | None:
    """The training split's source and target tokens as the run's tokenizer cut them (``</s>`` included): the text
    an epoch reads; None where the run streams its training text (no split to count)."""
    if "train" not in splits:
        return None
    source, target = lengths(splits["train"])
    return {"source": int(source.sum()), "target": int(target.sum())}


def this_launch(launches: list[dict] | None) -> dict:
    """run_record's ``code`` and ``host`` as the last of ``launches`` measured them when it began (the tree that
    trained, though it may have been edited since), and the ``launches``; nothing without them."""
    if not launches:
        return {}
    return {"code": launches[-1]["code"], "host": launches[-1]["machine"], "launches": launches}


def run_launches(summary: dict) -> list[dict]:
    """The launches a run's summary.json lists (one for each time the command ran it; none in records written
    before launches were recorded)."""
    return summary["run"].get("launches") or []


def run_train_minutes(summary: dict) -> float:
    """A run's training minutes from its summary.json: its launches' together (the summary's own ``train_minutes``
    are its last launch's, as the command that wrote it measured them)."""
    launches = run_launches(summary)
    return round(sum(launch["train_minutes"] for launch in launches), 2) if launches else summary["train_minutes"]


def write_recipe(
    output_dir: Path, model_args, data_args, training_args, model, decoding: Decoding, run: ResolvedRun
) -> None:
    """training_recipe.json: the recipe actually used (``run``: as resolved), as the model card reports it, and
    ``decoding``, the one the model was evaluated and saved with (its alpha the length penalty search's)."""
    schedule = describe_schedule(model_args, training_args)
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
            "data": f"{data_args.dataset} {data_args.source_lang}->{data_args.target_lang}"
            + (f", {text}" if (text := text_description(run.text_form)) else ""),
            "vocabulary": f"shared BPE, {model.config.vocab_size} tokens"
            + (f" (the tokenizer of {data_args.tokenizer})" if data_args.tokenizer else "")
            + (f", BPE-dropout {data_args.bpe_dropout} in training" if data_args.bpe_dropout else ""),
            "batches": f"{run.micro_batch} tokens per side per device, x{run.processes} devices, "
            f"x{run.accumulation} accumulation",
            "optimizer": f"Adam(beta1={training_args.adam_beta1}, beta2={training_args.adam_beta2}, "
            f"eps={training_args.adam_epsilon}), weight decay {training_args.weight_decay}",
            "learning rate": schedule,
            "label smoothing": training_args.label_smoothing_factor,
            "dropout": model_args.dropout,
            "length": (
                f"{training_args.max_steps} steps"
                if training_args.max_steps > 0
                else f"{training_args.num_train_epochs} epochs"
            )
            + (f", at most {model_args.max_train_minutes} minutes" if model_args.max_train_minutes else ""),
            "precision": precision(run.precision),
            "seed": training_args.seed,
        },
    ).write(output_dir)


def text_description(form: TextForm) -> str | None:
    """What text the model reads and writes (the run's text ``form``, ``ResolvedRun.text_form``) where it is not the
    corpus's own (None): --moses_lowercase_tokenize's lowercased, Moses-tokenized text, on which its references and
    both its BLEU scores are counted."""
    if form.raw:
        return None
    return (
        "lowercased and Moses-tokenized (sacremoses) before the BPE: the model reads and writes lowercased, "
        "tokenized text, and its references and scores (sacreBLEU and the lowercased, tokenized BLEU) are of "
        "that text"
    )
