"""`python -m experiments.table3`: the paper's Table 3 (variations on the base model), scaled to the Multi30k
preset, every row trained with several seeds for the same number of steps, and docs/table3.md generated from the
records (experiments/table3_page.py, with the verdict rule of experiments/verdict.py).

    python -m experiments.table3                             # the sweep: seeds 1-3 of every row, 1,000 steps
    python -m experiments.table3 --steps 3000 --rows longer  # the longer budget: base, (C), rows opposite at 1,000
    python -m experiments.table3 --rows base A --seeds 4 5   # rows by name or group letter, more seeds
    python -m experiments.table3 --report                    # docs/table3.md from the records, nothing trained

The order spends the compute where it decides something: the base first, then the rows that had a verdict under
the first sweep's single-seed rule (``PRIORITY``), then the rest, each row's seeds together. Each run is one
vanilla-train process; a run recorded with the same settings is skipped, so stopping the command (or the machine)
loses at most the run in progress and the sweep goes on over several days. A verdict compares runs of one code
only (``code_tree``, vanilla_tools/provenance.py): ``--rerun_other_code`` trains again the runs recorded at other
code than the checkout's.

Beside the paper's rows, the schedule rows halve the §5.3 learning rate (``--lr_scale 0.5``) of the base and of
N = 4: whether the (C) rows that lag the base lag for their size or for the preset's peak learning rate.

The base row is the multi30k preset (d_model 256, N = 3, h = 4, d_k = 64, d_ff 1024, P_drop 0.1, eps_ls 0.1,
BPE-dropout 0.1), trained for ``--steps`` steps instead of its 54 minutes. Each variation changes what its row of
the paper changes, scaled by the same factor where the paper's value is a size (N, d_model, d_ff: the paper's base
is N = 6, ours N = 3). As in §6.2: beam search (4, alpha 0.6), no checkpoint averaging, scores on the development
(validation) set only; the test set is not decoded. Each run records, in results/table3/STEPS-steps/ROW/seed-SEED/
(summary.json from vanilla-train, table3.json here): the validation perplexity per token of our BPE (cross-entropy
without label smoothing, teacher-forced, ``</s>`` counted) every ``--curve_steps`` steps (measured on checkpoints
written for it, removed once measured) and at the end, the validation BLEU, the parameters, the minutes, the
command, the commit (and every file the tree differed in) and the machine. The first sweep's records (one seed a
row, results/table3/ROW/table3.json, kept as they are) are read with them.
"""

import argparse
import json
import logging
import math
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.nn import functional as F
from transformers import AutoModelForSeq2SeqLM

from training.arguments import parse_args
from training.checkpoints import checkpoint_step, complete_checkpoints
from training.data import load_parallel_data, tokenize_splits
from vanilla_tools.cli import UsageError, console_script, load_tokenizer
from vanilla_tools.provenance import git_commit, machine

from . import table3_page

logger = logging.getLogger("table3")
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "table3"
PAGE = ROOT / "docs" / "table3.md"
RECORD = "table3.json"
STEPS = 1000  # ~8 minutes of the base row on this CPU
LONGER = 3000  # issue 41: the (C) rows and the rows opposite at STEPS: a slower start, or stays at the end
SEEDS = (1, 2, 3)
CURVE_STEPS = 100
# What every run shares: the multi30k preset, stopped after a number of steps, evaluated as §6.2 evaluated Table 3
# (beam search, no checkpoint averaging, the development set only); weights alone saved every --curve_steps for the
# learning curve (Trainer's own evaluation would report the label-smoothed loss, which differs between the (D) rows).
# (--length_penalty_candidates 0.6: alpha fixed, not chosen on the very set the row is scored on.)
COMMON = ["--max_train_minutes", "0", "--save_strategy", "steps", "--save_only_model", "true", "--eval_strategy", "no",
          "--average_last", "0", "--num_beams", "4", "--length_penalty", "0.6", "--length_penalty_candidates", "0.6",
          "--final_splits", "validation"]  # fmt: skip
# The rows with a verdict in at least one cell under the first sweep's rule (one seed against the base's range:
# 21 of 42 cells, docs/table3.md at 33791aa): their seeds come right after the base's.
PRIORITY = ("A-heads-1", "B-dk-16", "B-dk-32", "C-layers-1", "C-layers-2", "C-layers-4", "C-dmodel-512",
            "D-dropout-0.0", "D-dropout-0.2", "D-smoothing-0.0", "D-smoothing-0.2", "E-learned-positions")  # fmt: skip


@dataclass(frozen=True)
class Row:
    name: str
    group: str  # the paper's row group: base, (A) ... (E), or restricted (Table 1)
    change: str  # what differs from the base, in the paper's terms
    flags: tuple[str, ...] = ()
    paper: dict = field(default_factory=dict)  # the paper's row this one scales: its change, PPL, BLEU, params (M)


def _paper(change: str, ppl: float, bleu: float, params_m: float | None = None) -> dict:
    return {"change": change, "ppl": ppl, "bleu": bleu, "params_m": params_m}


ROWS = (
    Row("base", "base", "the preset", (), _paper("base", 4.92, 25.8, 65)),
    Row("A-heads-1", "(A)", "h = 1, d_k = 256", ("--num_attention_heads", "1"), _paper("h = 1, d_k = 512", 5.29, 24.9)),
    Row("A-heads-2", "(A)", "h = 2, d_k = 128", ("--num_attention_heads", "2"), _paper("h = 4, d_k = 128", 5.00, 25.5)),
    Row("A-heads-8", "(A)", "h = 8, d_k = 32", ("--num_attention_heads", "8"), _paper("h = 16, d_k = 32", 4.91, 25.8)),
    Row("A-heads-16", "(A)", "h = 16, d_k = 16", ("--num_attention_heads", "16"),
        _paper("h = 32, d_k = 16", 5.01, 25.4)),
    Row("B-dk-16", "(B)", "d_k = 16", ("--head_dim", "16"), _paper("d_k = 16", 5.16, 25.1, 58)),
    Row("B-dk-32", "(B)", "d_k = 32", ("--head_dim", "32"), _paper("d_k = 32", 5.01, 25.4, 60)),
    Row("C-layers-1", "(C)", "N = 1", ("--encoder_layers", "1", "--decoder_layers", "1"),
        _paper("N = 2", 6.11, 23.7, 36)),
    Row("C-layers-2", "(C)", "N = 2", ("--encoder_layers", "2", "--decoder_layers", "2"),
        _paper("N = 4", 5.19, 25.3, 50)),
    Row("C-layers-4", "(C)", "N = 4", ("--encoder_layers", "4", "--decoder_layers", "4"),
        _paper("N = 8", 4.88, 25.5, 80)),
    Row("C-layers-6", "(C)", "N = 6", ("--encoder_layers", "6", "--decoder_layers", "6")),
    Row("C-dmodel-128", "(C)", "d_model = 128, d_k = 32", ("--d_model", "128"),
        _paper("d_model = 256, d_k = 32", 5.75, 24.5, 28)),
    Row("C-dmodel-512", "(C)", "d_model = 512, d_k = 128", ("--d_model", "512"),
        _paper("d_model = 1024, d_k = 128", 4.66, 26.0, 168)),
    Row("C-dff-512", "(C)", "d_ff = 512", ("--ffn_dim", "512"), _paper("d_ff = 1024", 5.12, 25.4, 53)),
    Row("C-dff-2048", "(C)", "d_ff = 2048", ("--ffn_dim", "2048"), _paper("d_ff = 4096", 4.75, 26.2, 90)),
    Row("D-dropout-0.0", "(D)", "P_drop = 0.0", ("--dropout", "0.0"), _paper("P_drop = 0.0", 5.77, 24.6)),
    Row("D-dropout-0.2", "(D)", "P_drop = 0.2", ("--dropout", "0.2"), _paper("P_drop = 0.2", 4.95, 25.5)),
    Row("D-smoothing-0.0", "(D)", "eps_ls = 0.0", ("--label_smoothing_factor", "0.0"),
        _paper("eps_ls = 0.0", 4.67, 25.3)),
    Row("D-smoothing-0.2", "(D)", "eps_ls = 0.2", ("--label_smoothing_factor", "0.2"),
        _paper("eps_ls = 0.2", 5.47, 25.7)),
    Row("E-learned-positions", "(E)", "learned positions", ("--position_embedding_type", "learned"),
        _paper("positional embedding instead of sinusoids", 4.92, 25.7)),
    Row("restricted-r-4", "restricted", "self-attention restricted to r = 4", ("--attention_window", "4")),
    Row("restricted-r-8", "restricted", "self-attention restricted to r = 8", ("--attention_window", "8")),
    # not in the paper: whether the deeper and wider (C) rows lag the base for their size or for the preset's peak
    # learning rate (2.55e-3, 3.6x the paper's base; post-LN tolerates less the deeper it is: Xiong et al. 2020)
    Row("schedule-layers-4-lr-half", "schedule", "N = 4, learning rate x 0.5",
        ("--encoder_layers", "4", "--decoder_layers", "4", "--lr_scale", "0.5")),
    Row("schedule-lr-half", "schedule", "learning rate x 0.5", ("--lr_scale", "0.5")),
    # The learning rate for each size, by a walk stated before its runs (2026-11-28): lr_scale in powers of two from
    # the preset's x1, 1,000 steps, read on validation PPL (the mean of a point's recorded seeds); from x1 to x1/2,
    # halving again while PPL falls (doubling from x1 instead where x1/2 is not lower), between x1/8 and x4; the
    # size's rate is the point of lowest PPL, then run with three seeds. These are the walk's next points.
    Row("schedule-lr-quarter", "schedule", "learning rate x 0.25", ("--lr_scale", "0.25")),
    Row("schedule-layers-4-lr-quarter", "schedule", "N = 4, learning rate x 0.25",
        ("--encoder_layers", "4", "--decoder_layers", "4", "--lr_scale", "0.25")),
    Row("schedule-layers-6-lr-half", "schedule", "N = 6, learning rate x 0.5",
        ("--encoder_layers", "6", "--decoder_layers", "6", "--lr_scale", "0.5")),
    Row("schedule-layers-6-lr-quarter", "schedule", "N = 6, learning rate x 0.25",
        ("--encoder_layers", "6", "--decoder_layers", "6", "--lr_scale", "0.25")),
    Row("schedule-layers-1-lr-half", "schedule", "N = 1, learning rate x 0.5",
        ("--encoder_layers", "1", "--decoder_layers", "1", "--lr_scale", "0.5")),
    Row("schedule-layers-1-lr-double", "schedule", "N = 1, learning rate x 2",
        ("--encoder_layers", "1", "--decoder_layers", "1", "--lr_scale", "2")),
    Row("schedule-layers-2-lr-half", "schedule", "N = 2, learning rate x 0.5",
        ("--encoder_layers", "2", "--decoder_layers", "2", "--lr_scale", "0.5")),
    Row("schedule-layers-2-lr-double", "schedule", "N = 2, learning rate x 2",
        ("--encoder_layers", "2", "--decoder_layers", "2", "--lr_scale", "2")),
    Row("schedule-dmodel-128-lr-half", "schedule", "d_model = 128, learning rate x 0.5",
        ("--d_model", "128", "--lr_scale", "0.5")),
    Row("schedule-dmodel-128-lr-double", "schedule", "d_model = 128, learning rate x 2",
        ("--d_model", "128", "--lr_scale", "2")),
    Row("schedule-dmodel-512-lr-half", "schedule", "d_model = 512, learning rate x 0.5",
        ("--d_model", "512", "--lr_scale", "0.5")),
    Row("schedule-dmodel-512-lr-quarter", "schedule", "d_model = 512, learning rate x 0.25",
        ("--d_model", "512", "--lr_scale", "0.25")),
    Row("schedule-dff-512-lr-double", "schedule", "d_ff = 512, learning rate x 2",
        ("--ffn_dim", "512", "--lr_scale", "2")),
    Row("schedule-dff-512-lr-half", "schedule", "d_ff = 512, learning rate x 0.5", ("--ffn_dim", "512", "--lr_scale", "0.5")),
    Row("schedule-dff-512-lr-quarter", "schedule", "d_ff = 512, learning rate x 0.25",
        ("--ffn_dim", "512", "--lr_scale", "0.25")),
    Row("schedule-dff-2048-lr-half", "schedule", "d_ff = 2048, learning rate x 0.5",
        ("--ffn_dim", "2048", "--lr_scale", "0.5")),
    Row("schedule-dff-2048-lr-quarter", "schedule", "d_ff = 2048, learning rate x 0.25",
        ("--ffn_dim", "2048", "--lr_scale", "0.25")),
)  # fmt: skip

GROUP_OF = {row.name: row.group for row in ROWS}
GROUPS = sorted({group.strip("()") for group in GROUP_OF.values()} - {"base"})  # A ... E, restricted, schedule


@dataclass(frozen=True)
class Run:
    """One seed of one row at one budget, and where it goes."""

    row: Row
    seed: int
    steps: int
    curve_steps: int = CURVE_STEPS

    @property
    def folder(self) -> str:
        return f"{self.steps}-steps/{self.row.name}/seed-{self.seed}"

    def settings(self, preset: str) -> list[str]:
        """vanilla-train's arguments but the output folders: what a record must match to be skipped."""
        return ["--config", preset, *COMMON, "--save_steps", str(self.curve_steps), "--save_total_limit",
                str(self.steps // self.curve_steps + 1), "--max_steps", str(self.steps), "--seed", str(self.seed),
                *self.row.flags]  # fmt: skip


def plan(rows: list[Row], seeds: list[int], steps: int, curve_steps: int = CURVE_STEPS) -> list[Run]:
    """The runs in the order that decides most first: the base, then PRIORITY, then the rest (ROWS' order within
    each), every seed of a row before the next row."""
    tier = {row.name: 0 if row.group == "base" else 1 if row.name in PRIORITY else 2 for row in rows}
    return [Run(row, seed, steps, curve_steps) for row in sorted(rows, key=lambda r: tier[r.name]) for seed in seeds]


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


def shown(path: Path) -> str:
    """A path as the record shows it: relative to the repository where it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def validation_set(argv: list[str], tokenizer):
    """The run's validation set (its own data arguments), tokenized as the run tokenized it."""
    _, data_args, _ = parse_args(argv)
    return tokenize_splits(load_parallel_data(data_args, include_train=False), tokenizer, data_args)["validation"]


def validation_perplexity(model_dir: Path, validation, tokenizer, batch_size: int = 64) -> tuple[float, int]:
    """exp(mean cross-entropy per target token) of the validation set, teacher-forced, without label smoothing,
    ``</s>`` counted; and the number of tokens."""
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(validation), batch_size):
            rows = validation[start : start + batch_size]
            batch = tokenizer.pad({"input_ids": rows["input_ids"]}, return_tensors="pt")
            labels = tokenizer.pad({"input_ids": rows["labels"]}, return_tensors="pt")
            labels = labels["input_ids"].masked_fill(labels["attention_mask"] == 0, -100)
            logits = model(**batch, labels=labels, skip_logits=False).logits  # (B, T, V)
            total += F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="sum").item()
            tokens += int((labels != -100).sum())
    return math.exp(total / tokens), tokens


def learning_curve(output_dir: Path, validation, tokenizer) -> list[dict]:
    """Validation perplexity at each checkpoint the run wrote, oldest first; each checkpoint removed once measured
    (they are written for this alone)."""
    curve = []
    for checkpoint in complete_checkpoints(output_dir):
        ppl, _ = validation_perplexity(checkpoint, validation, tokenizer)
        curve.append({"step": checkpoint_step(checkpoint), "validation_ppl": round(ppl, 3)})
        shutil.rmtree(checkpoint)
    return curve


def matching_record(path: Path, settings: list[str], name: str) -> dict | None:
    """The record at ``path`` if its run was trained with ``settings``; else None (the run ``name`` is trained
    again)."""
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if record.get("settings") != settings:
        logger.warning("%s was recorded with other settings: training it again", name)
        return None
    return record


def recorded(run: Run, preset: str, results: Path, code: str | None = None) -> dict | None:
    """The run's record if it was trained with the settings ``run`` has now (and, given ``code``, at that code);
    else None, and it is trained again."""
    record = matching_record(results / run.folder / RECORD, run.settings(preset), run.folder)
    if record is None:
        return None
    if code is not None and table3_page.code_key(record) != code:
        logger.warning(
            "%s was recorded at other code (%s): training it again", run.folder, table3_page.code_key(record)
        )
        return None
    return record


def train(run: Run, preset: str, runs: Path, results: Path) -> dict:
    """Train one run (vanilla-train in its own process), then measure its learning curve and final perplexity."""
    output_dir, record_dir = runs / run.folder, results / run.folder
    # a run without its record is trained whole: what an interrupted one left there (its checkpoints would join this
    # run's curve, its finished model would make the relaunch a no-op) is removed by vanilla-train, which names it
    argv = [*run.settings(preset), "--overwrite_output_dir", "--output_dir", shown(output_dir),
            "--summary_dir", shown(record_dir)]  # fmt: skip
    logger.info("%s: vanilla-train %s", run.folder, " ".join(argv))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "training.train", *argv], cwd=ROOT)
    if done.returncode:
        raise UsageError(f"{run.folder}: vanilla-train exited with status {done.returncode} (command above)")
    summary = json.loads((record_dir / "summary.json").read_text())
    tokenizer = load_tokenizer(str(output_dir))
    validation = validation_set(argv, tokenizer)
    curve = learning_curve(output_dir, validation, tokenizer)
    ppl, tokens = validation_perplexity(output_dir, validation, tokenizer)
    row = run.row
    record = {
        "row": row.name, "group": row.group, "change": row.change, "seed": run.seed, "flags": list(row.flags),
        "steps": run.steps, "settings": run.settings(preset), "paper": row.paper, "validation_ppl": round(ppl, 3),
        "validation_tokens": tokens, "validation_bleu": summary["validation"]["bleu"], "curve": curve,
        "parameters": summary["parameters"], "train_minutes": summary["train_minutes"],
        "row_minutes": round((time.monotonic() - start) / 60, 2), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python -m training.train " + " ".join(argv), "code": git_commit(), "machine": machine(),
    }  # fmt: skip
    (record_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def records(results: Path) -> list[dict]:
    """Every run's record: this sweep's (STEPS-steps/ROW/seed-SEED/) and the first sweep's (ROW/)."""
    return [json.loads(p.read_text()) for p in sorted(results.rglob(RECORD))]


def report(found: list[dict]) -> str:
    return table3_page.report(found, GROUP_OF, (STEPS, LONGER))


def write_page(results: Path, page: Path) -> None:
    found = records(results)
    page.write_text(report(found))
    table3_page.plot_curves([table3_page.normalized(r) for r in found], page)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.table3", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--rows", nargs="+", choices=[*(row.name for row in ROWS), *GROUPS, "longer"],
                        help="rows, group letters (A ... E, restricted, schedule), or longer (base, (C), the rows "
                        f"opposite at {STEPS} steps); default: every row")  # fmt: skip
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="the seeds of every row")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"training steps of every run (longer: {LONGER})")
    parser.add_argument("--curve_steps", type=int, default=CURVE_STEPS, help="validation PPL every this many steps")
    parser.add_argument("--config", default="multi30k", help="the base row's preset (a name or a YAML file)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "table3"), help="where the runs' model folders go")
    parser.add_argument("--results", default=str(RESULTS), help="where the runs' records go")
    parser.add_argument("--page", default=str(PAGE), help="the page generated from the records (plots beside it)")
    parser.add_argument("--report", action="store_true", help="only write the page from the records")
    parser.add_argument("--rerun_other_code", action="store_true",
                        help="train again the runs recorded at other code than the checkout's")  # fmt: skip
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
    todo = [] if args.report else plan(select(args.rows, records(results)), args.seeds, args.steps, args.curve_steps)
    for one in todo:
        if recorded(one, args.config, results, code["code_tree"] if args.rerun_other_code else None):
            logger.info("%s: recorded, skipped", one.folder)
            continue
        record = train(one, args.config, runs, results)
        logger.info("%s: validation PPL %.2f, BLEU %.2f", one.folder, record["validation_ppl"],
                    record["validation_bleu"])  # fmt: skip
        write_page(results, page)  # after every run: an interrupted sweep still has its page
    write_page(results, page)
    print(f"wrote {page}")


main = console_script(run)

if __name__ == "__main__":
    main()
