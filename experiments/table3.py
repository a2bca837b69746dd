"""`python -m experiments.table3`: the paper's Table 3 (variations on the base model), scaled to the Multi30k
preset, every row trained with several seeds for the same number of steps, and docs/table3.md generated from the
records (experiments/table3_page.py, with the verdict rule of experiments/verdict.py).

    python -m experiments.table3                             # the sweep: seeds 1-3 of every row, 1,000 steps
    python -m experiments.table3 --steps 3000 --rows longer  # the longer budget: base, (C), rows that disagree at 1,000
    python -m experiments.table3 --rows base A --seeds 4 5   # rows by name or group letter, more seeds
    python -m experiments.table3 --report                    # docs/table3.md from the records, nothing trained
    python -m experiments.table3 --adopt ../table3/results/table3/1000-steps/ROW  # a run made at the base's code

The order spends the compute where it decides something: the base first, then the rows that had a verdict under the
first sweep's single-seed rule (``PRIORITY``), then the rest, each row's seeds together. Each run is one vanilla-train
process; a run recorded with the same settings is skipped, so stopping the command (or the machine) loses at most the
run in progress (a run stopped while its curve is measured goes on there), and the sweep goes on over several days on
whatever machine is at hand: every run is bounded by steps, and its precision is the sweep's (``--precision``, default
``experiment_precision()``: the one the machine runs fast, now that bf16 autocast and fp32 are measured to train alike),
a setting recorded with it. A verdict compares only runs that experiments/comparable.py lets be compared (the same code,
budget and device, and a precision measured alike); ``--rerun_other_code`` trains again the runs recorded at other code
than the checkout's.

Beside the paper's rows, the schedule rows scale the §5.3 learning rate (``--lr_scale``) of the base and of the (C)
rows: whether the (C) rows that lag the base lag for their size or for the preset's peak learning rate. Each size
gets its own rate by a walk over the scale (experiments/lr_walk.py, its rule stated before its runs; the page gives
each walk's points and its next one, one seed each: ``--rows ROW --seeds 1``).

A run is compared only with base runs of the same code, and the base's ran at code tree 4f460c9263c5 (commits
d879cda to 2d758cf: the preset's warmup was 600 then). So a row added since runs from a checkout of that code with
the row added, branch ``table3-lr-walk`` (``git worktree add ../table3 table3-lr-walk``, the row added to that
runner's ``ROWS`` and committed, ``python -m experiments.table3 --rows ROW --seeds 1`` there), and ``--adopt`` here
files its records: that runner predates the run record, which is built from each run's summary.

The base row is the multi30k preset (d_model 256, N = 3, h = 4, d_k = 64, d_ff 1024, P_drop 0.1, eps_ls 0.1, BPE-dropout
0.1), trained for ``--steps`` steps instead of its budget. Each variation changes what its row of the paper changes,
scaled by the same factor where the paper's value is a size (N, d_model, d_ff: the paper's base is N = 6, ours N = 3).
As in §6.2: beam search (4, alpha 0.6), no checkpoint averaging, scores on the development (validation) set only; the
test set is not decoded. Each run records (summary.json from vanilla-train, table3.json here): the validation perplexity
per token of our BPE (cross-entropy without label smoothing, teacher-forced, ``</s>`` counted) every ``--curve_steps``
steps (measured on checkpoints written for it, each removed once its point is kept) and at the end, the validation BLEU,
the parameters, the minutes, the command, and the run record of its summary (training/run/record.py: the code, machine,
device, precision, budget, seed and steps), in results/table3/STEPS-steps/PRECISION[-DEVICE]/ROW/seed-SEED/. The first
sweep's records (one seed a row, results/table3/ROW/table3.json, kept as they are) are read with them.
"""

import argparse
import json
import logging
import math
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml
from transformers import AutoModelForSeq2SeqLM

from inference.engine import forced_log_probs
from training.api import (
    check_run_record,
    checkpoint_step,
    complete_checkpoints,
    load_parallel_data,
    parse_args,
    run_record,
    text_form,
    tokenize_splits,
)
from vanilla_tools.cli import UsageError, console_script, load_tokenizer
from vanilla_tools.decoding import PAPER_LENGTH_PENALTY, PAPER_NUM_BEAMS
from vanilla_tools.hardware import device_type
from vanilla_tools.provenance import git_commit
from vanilla_tools.run_files import read_json, write_json

from . import comparable, launch, table3_page
from .comparable import BF16, FP32, code_key, experiment_precision, precision_flags
from .launch import ROOT, shown

logger = logging.getLogger("table3")
RESULTS = ROOT / "results" / "table3"
PAGE = ROOT / "docs" / "table3.md"
# A stopped run's checkpoint is not the sweep's way on: each run trains in one launch (--overwrite_output_dir)
AFTER_STOP = "; a Table 3 run trains in one launch, so the sweep trains it again from its start when it runs again"
RECORD = "table3.json"
STEPS = 1000  # the first budget: every row, three seeds
# the (C) rows and the rows that disagree with the paper at STEPS: whether a lag is a slower start, or stays at the end
LONGER = 3000
SEEDS = (1, 2, 3)
CURVE_STEPS = 100
# What every run shares: the multi30k preset, stopped after a number of steps, evaluated as §6.2 evaluated Table 3
# (beam search, no checkpoint averaging, the development set only); weights alone saved every --curve_steps for the
# learning curve (Trainer's own evaluation would report the label-smoothed loss, which differs between the (D) rows).
# (--length_penalty_candidates 0.6: alpha fixed, not chosen on the very set the row is scored on.)
COMMON = [
    "--save_strategy",
    "steps",
    "--save_only_model",
    "true",
    "--eval_strategy",
    "no",
    "--average_last",
    "0",
    "--num_beams",
    str(PAPER_NUM_BEAMS),
    "--length_penalty",
    str(PAPER_LENGTH_PENALTY),
    "--length_penalty_candidates",
    str(PAPER_LENGTH_PENALTY),
    "--final_splits",
    "validation",
]
# In a run's output folder: the argv and code it finished training with and the minutes that took (TRAINED), then each
# curve point as it is measured (CURVE_POINTS), so a measurement cut short goes on without training the run again. A run
# stopped while training starts over: its checkpoints hold the weights alone (--save_only_model: full ones at every
# curve point would hold Adam's moments too, three times the disk), which vanilla-train does not resume from. The code
# is the runner's to compare: vanilla-train's settings do not name it, so at other code (--rerun_other_code) its
# relaunch would take the finished run of the same flags for this one.
TRAINED = "table3-trained.json"
CURVE_POINTS = "table3-curve.json"
REMEDY = "delete {} and the run is trained again whole"  # for a damaged TRAINED or CURVE_POINTS
ROWS_FILE = Path(__file__).with_name("table3_rows.yaml")  # the rows: what each changes, the paper's row it scales


@dataclass(frozen=True)
class Row:
    name: str
    group: str  # the paper's row group: base, (A) ... (E), or restricted (Table 1)
    change: str  # what differs from the base, in the paper's terms
    flags: tuple[str, ...] = ()
    paper: dict = field(default_factory=dict)  # the paper's row this one scales: its change, PPL, BLEU, params (M)
    priority: bool = False  # a verdict under the first sweep's single-seed rule: its seeds come after the base's


def load_rows(path: Path = ROWS_FILE) -> tuple[Row, ...]:
    """The rows of ``path`` (table3_rows.yaml), in its order."""
    return tuple(
        Row(
            one["name"],
            one["group"],
            one["change"],
            tuple(one.get("flags", ())),
            one.get("paper") or {},
            one.get("priority", False),
        )
        for one in yaml.safe_load(path.read_text())["rows"]
    )


ROWS = load_rows()
PRIORITY = tuple(row.name for row in ROWS if row.priority)

GROUP_OF = {row.name: row.group for row in ROWS}
FLAGS = {row.name: row.flags for row in ROWS}
PRECISIONS = {"bf16": BF16, "fp32": FP32}  # --precision's names, and the folders that keep each precision's runs apart
FOLDER_OF = {name: folder for folder, name in PRECISIONS.items()}
GROUPS = sorted({group.strip("()") for group in GROUP_OF.values()} - {"base"})  # A ... E, restricted, schedule


@dataclass(frozen=True)
class Run:
    """One seed of one row at one budget, and where it goes."""

    row: Row
    seed: int
    steps: int
    precision: str = FP32
    curve_steps: int = CURVE_STEPS
    device: str = "cpu"  # the kind of device (a record of another kind does not stand for the run: comparable.py)

    @property
    def folder(self) -> str:
        kind = FOLDER_OF[self.precision] + ("" if self.device == "cpu" else f"-{self.device}")
        return f"{self.steps}-steps/{kind}/{self.row.name}/seed-{self.seed}"

    def settings(self, preset: str) -> list[str]:
        """vanilla-train's arguments but the output folders: what a record must match to be skipped."""
        return [
            "--config",
            preset,
            *COMMON,
            *precision_flags(self.precision),
            "--save_steps",
            str(self.curve_steps),
            "--save_total_limit",
            str(self.steps // self.curve_steps + 1),
            "--max_steps",
            str(self.steps),
            "--seed",
            str(self.seed),
            *self.row.flags,
        ]


def device_kind() -> str:
    """The kind of device this machine's runs train on: vanilla-train's default, a GPU where there is one. A run on
    another kind than the CPU is filed apart (``Run.folder``: bf16-cuda/)."""
    return device_type()


def plan(
    rows: list[Row],
    seeds: list[int],
    steps: int,
    precision: str = FP32,
    curve_steps: int = CURVE_STEPS,
    device: str = "cpu",
) -> list[Run]:
    """The runs in the order that decides most first: the base, then PRIORITY, then the rest (ROWS' order within
    each), every seed of a row before the next row."""
    tier = {row.name: 0 if row.group == "base" else 1 if row.name in PRIORITY else 2 for row in rows}
    return [
        Run(row, seed, steps, precision, curve_steps, device)
        for row in sorted(rows, key=lambda r: tier[r.name])
        for seed in seeds
    ]


def select(names: list[str] | None, records: list[dict]) -> list[Row]:
    """The rows that ``names`` name (rows, group letters, ``longer``), in ROWS' order; every row when none."""
    if not names:
        return list(ROWS)
    chosen = set()
    for name in names:
        if name == "longer":
            chosen.update(table3_page.longer_rows([table3_page.normalized(r) for r in records], STEPS, GROUP_OF))
        chosen.update(row.name for row in ROWS if name in (row.name, row.group.strip("()")))
    return [row for row in ROWS if row.name in chosen]


def validation_set(argv: list[str], tokenizer):
    """The run's validation set (its own data arguments), tokenized as the run tokenized it."""
    _, data_args, _ = parse_args(argv)
    return tokenize_splits(
        load_parallel_data(data_args, text_form(data_args), include_train=False), tokenizer, data_args
    )["validation"]


def validation_perplexity(model_dir: Path, validation, tokenizer, batch_size: int = 64) -> tuple[float, int]:
    """exp(mean cross-entropy per target token) of the validation set, teacher-forced, without label smoothing,
    ``</s>`` counted; and the number of tokens."""
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    total, tokens = 0.0, 0
    for start in range(0, len(validation), batch_size):
        rows = validation[start : start + batch_size]
        batch = tokenizer.pad({"input_ids": rows["input_ids"]}, return_tensors="pt")
        labels = tokenizer.pad({"input_ids": rows["labels"]}, return_tensors="pt")
        labels = labels["input_ids"].masked_fill(labels["attention_mask"] == 0, -100)
        total -= forced_log_probs(model, batch, labels).sum().item()
        tokens += int((labels != -100).sum())
    return math.exp(total / tokens), tokens


def learning_curve(output_dir: Path, validation, tokenizer) -> list[dict]:
    """Validation perplexity at each checkpoint the run wrote, oldest first. Each point goes to ``CURVE_POINTS``
    before its checkpoint is removed (they are written for this alone), so a measurement cut short goes on from the
    points kept there."""
    kept = output_dir / CURVE_POINTS
    curve = read_json(kept, list, REMEDY.format(output_dir)) or []
    measured = {point["step"] for point in curve}
    for checkpoint in complete_checkpoints(output_dir):
        if checkpoint_step(checkpoint) not in measured:  # measured, then cut short before its removal
            ppl, _ = validation_perplexity(checkpoint, validation, tokenizer)
            curve.append({"step": checkpoint_step(checkpoint), "validation_ppl": round(ppl, 3)})
            write_json(kept, curve)  # whole or not at all: a kill mid-write leaves the points before
        shutil.rmtree(checkpoint)
    return curve


def finished_training(output_dir: Path, argv: list[str], code: str) -> float | None:
    """The minutes the run's training took if it finished with ``argv`` at ``code`` (``TRAINED``, written once
    vanilla-train exits cleanly); else None."""
    record = read_json(output_dir / TRAINED, dict, REMEDY.format(output_dir)) or {}
    return record["minutes"] if record.get("argv") == argv and record.get("code") == code else None


def recorded(run: Run, preset: str, results: Path, code: str | None = None) -> dict | None:
    """The run's record if it was trained with the settings ``run`` has now (and, given ``code``, at that code);
    else None, and it is trained again. Once bf16 autocast and fp32 are measured to train alike
    (``comparable.PRECISION_EVIDENCE``), a record of the same run in the other precision stands for it: a machine
    continues a sweep that another began in its own precision."""
    twins = [run] + [replace(run, precision=other) for other in comparable.standing_in(run.precision)]
    record = next(
        (
            found
            for twin in twins
            if (
                found := launch.recorded(
                    results / twin.folder / RECORD,
                    twin.settings(preset),
                    f"delete it and {twin.folder} is trained again",
                    name=twin.folder,
                )
            )
            is not None
        ),
        None,
    )
    if record is None:
        return None
    if code is not None and code_key(record["run"]) != code:
        logger.warning("%s was recorded at other code (%s): training it again", run.folder, code_key(record["run"]))
        return None
    return record


def train(run: Run, preset: str, runs: Path, results: Path, code: str) -> dict:
    """Train one run at ``code`` (vanilla-train in its own process), then measure its learning curve and final
    perplexity."""
    output_dir, record_dir = runs / run.folder, results / run.folder
    flags = [*run.settings(preset), "--overwrite_output_dir"]
    argv = launch.trainer_argv(flags, output_dir, record_dir)
    remedy = REMEDY.format(shown(output_dir))
    start = time.monotonic()
    command_minutes = finished_training(output_dir, argv, code)
    if command_minutes is None:
        # trained whole: what an interrupted run left there (its checkpoints would join this run's curve, its finished
        # model would make the relaunch a no-op) is removed by vanilla-train, which names it; its points go here
        for stale in (TRAINED, CURVE_POINTS):
            (output_dir / stale).unlink(missing_ok=True)
        _, summary = launch.train(
            flags,
            output_dir,
            run.folder,
            summary_dir=record_dir,
            remedy=remedy,
            after_stop=AFTER_STOP,
            after_failure="command above",
        )
        command_minutes = (time.monotonic() - start) / 60
        write_json(output_dir / TRAINED, {"argv": argv, "code": code, "minutes": command_minutes})
    else:
        logger.info("%s: trained before (%s), measuring what it left", run.folder, shown(output_dir / TRAINED))
        summary = launch.summary_of(record_dir, output_dir, run.folder, remedy)
    start = time.monotonic()
    tokenizer = load_tokenizer(str(output_dir))
    validation = validation_set(argv, tokenizer)
    curve = learning_curve(output_dir, validation, tokenizer)
    ppl, tokens = validation_perplexity(output_dir, validation, tokenizer)
    row = run.row
    record = {
        "row": row.name,
        "group": row.group,
        "change": row.change,
        "seed": run.seed,
        "flags": list(row.flags),
        "steps": run.steps,
        "settings": run.settings(preset),
        "paper": row.paper,
        "validation_ppl": round(ppl, 3),
        "validation_tokens": tokens,
        "validation_bleu": summary["validation"]["bleu"],
        "curve": curve,
        "parameters": summary["parameters"],
        "train_minutes": summary["train_minutes"],
        "row_minutes": round(command_minutes + (time.monotonic() - start) / 60, 2),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": launch.as_module(argv),
        "run": summary["run"],
    }
    write_json(record_dir / RECORD, record)
    return record


def adopt(folder: Path, results: Path, preset: str) -> list[Path]:
    """The runs recorded under ``folder`` by this runner at an older checkout, filed as this checkout's runner files
    them: a row added after the code changed runs at the code of the base's runs (docs/table3.md says which), whose
    runner predates the run record. Each run's record gets the run record built from its summary's own fields (the
    resolved arguments, the steps reached, the code and the machine: training/run/record.py's ``run_record``) and
    ``Run.settings``' statement of its settings, checked to be the ones it trained with, under
    ``results``/STEPS-steps/PRECISION[-DEVICE]/ROW/seed-SEED/. A run already filed there is left as it is. Returns
    the folders written."""
    rows = {row.name: row for row in ROWS}
    written = []
    for path in sorted(folder.rglob(RECORD)):
        record, summary = json.loads(path.read_text()), json.loads((path.parent / "summary.json").read_text())
        if "run" in record or record["row"] not in rows:
            raise UsageError(
                f"{path}: {'already filed' if 'run' in record else 'a row this checkout lacks'} "
                f"({record['row']}): nothing to adopt"
            )
        arguments = summary["arguments"]
        device = device_type(bool(arguments.get("use_cpu")), cuda=bool(summary["machine"].get("gpus")))
        run_ = run_record(arguments, summary["steps"], device, code=summary["code"], host=summary["machine"])
        check_run_record(run_)
        one = Run(rows[record["row"]], record["seed"], record["steps"], run_["precision"], device=device)
        settings = one.settings(preset)
        at = settings.index("--bf16")  # the older runner stated no precision, and a budget in minutes of 0 (none)
        older = [*settings[:2], "--max_train_minutes", "0", *settings[2:at], *settings[at + 2 :]]
        if record["settings"] != older:
            raise UsageError(f"{path}: trained with {record['settings']}, not this checkout's {older}")
        target = results / one.folder
        if (target / RECORD).exists():
            continue
        target.mkdir(parents=True, exist_ok=True)
        summary = {**{k: v for k, v in summary.items() if k not in ("code", "machine", "steps")}, "run": run_}
        record = {
            **{k: v for k, v in record.items() if k not in ("code", "machine")},
            "settings": settings,
            "run": run_,
        }
        write_json(target / "summary.json", summary)
        write_json(target / RECORD, record)
        written.append(target)
    return written


def records(results: Path) -> list[dict]:
    """Every run's record: this sweep's (STEPS-steps/PRECISION[-DEVICE]/ROW/seed-SEED/) and the first sweep's (ROW/)."""
    return [json.loads(p.read_text()) for p in sorted(results.rglob(RECORD))]


def size_walks(found: list[dict]) -> table3_page.SizeWalks:
    """Each size's learning-rate walk at the sweep's budget, over the records."""
    return table3_page.SizeWalks.of([table3_page.normalized(r) for r in found], STEPS, GROUP_OF, FLAGS)


def report(found: list[dict], sizes: table3_page.SizeWalks | None = None) -> str:
    """docs/table3.md from the records (``sizes``: their walks, where the caller has them)."""
    return table3_page.report(found, GROUP_OF, (STEPS, LONGER), sizes or size_walks(found))


def write_page(results: Path, page: Path) -> None:
    found = [table3_page.normalized(r) for r in records(results)]
    sizes = size_walks(found)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(report(found, sizes))
    table3_page.plot_curves(found, page, sizes)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.table3", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        choices=[*(row.name for row in ROWS), *GROUPS, "longer"],
        help="rows, group letters (A ... E, restricted, schedule), or longer (base, (C), the rows "
        f"that disagree with the paper at {STEPS} steps); default: every row",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="the seeds of every row")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"training steps of every run (longer: {LONGER})")
    parser.add_argument("--curve_steps", type=int, default=CURVE_STEPS, help="validation PPL every this many steps")
    parser.add_argument(
        "--precision",
        choices=list(PRECISIONS),
        default=None,
        help="what every run trains in (default: experiments/comparable.py's experiment_precision(), "
        f"now {experiment_precision()}); a run records it, and runs of two precisions compare only "
        "once bf16 autocast and fp32 are measured to agree (experiments/comparable.py)",
    )
    parser.add_argument("--config", default="multi30k", help="the base row's preset (a name or a YAML file)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "table3"), help="where the runs' model folders go")
    parser.add_argument("--results", default=str(RESULTS), help="where the runs' records go")
    parser.add_argument("--page", default=str(PAGE), help="the page generated from the records (plots beside it)")
    parser.add_argument("--report", action="store_true", help="only write the page from the records")
    parser.add_argument(
        "--adopt",
        metavar="FOLDER",
        help="file the records an older checkout's runner wrote under FOLDER (a row run at the base's "
        "code: docs/table3.md), then write the page; nothing is trained",
    )
    parser.add_argument(
        "--rerun_other_code",
        action="store_true",
        help="train again the runs recorded at other code than the checkout's",
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, page, runs = Path(args.results).resolve(), Path(args.page).resolve(), Path(args.runs).resolve()
    code = git_commit()
    if args.rerun_other_code and not code.get("code_tree"):
        raise UsageError(
            f"--rerun_other_code: the checkout's code differs from its commit ({code.get('changed_files')})"
        )
    if args.adopt:
        for folder in adopt(Path(args.adopt), results, args.config):
            logger.info("adopted %s", shown(folder))
    found = records(results)
    precision = PRECISIONS[args.precision] if args.precision else experiment_precision()
    todo = (
        []
        if args.report or args.adopt
        else plan(select(args.rows, found), args.seeds, args.steps, precision, args.curve_steps, device_kind())
    )
    for one in todo:
        if recorded(one, args.config, results, code["code_tree"] if args.rerun_other_code else None):
            logger.info("%s: recorded, skipped", one.folder)
            continue
        record = train(one, args.config, runs, results, code_key({"code": code}))
        logger.info(
            "%s: validation PPL %.2f, BLEU %.2f", one.folder, record["validation_ppl"], record["validation_bleu"]
        )
        write_page(results, page)  # after every run: an interrupted sweep still has its page
    write_page(results, page)
    print(f"wrote {page}")


main = console_script(run)

if __name__ == "__main__":
    main()
