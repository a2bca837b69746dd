"""`python -m training.table3`: the paper's Table 3 (variations on the base model), scaled to the Multi30k preset,
each row trained for the same number of steps, and docs/table3.md generated from the records.

    python -m training.table3                 # every row not yet recorded (resumable: recorded rows are skipped)
    python -m training.table3 --rows base-seed1 A-heads-1 --steps 1000
    python -m training.table3 --report        # docs/table3.md from results/table3/*/table3.json, nothing trained

Each row is one vanilla-train process; stopping the command (or the machine) loses at most the row in progress,
and the next call goes on from there.

The base row is the multi30k preset (d_model 256, N = 3, h = 4, d_k = 64, d_ff 1024, P_drop 0.1, eps_ls 0.1,
BPE-dropout 0.1), trained for ``--steps`` steps instead of its 54 minutes, with three seeds for the noise band. Each
variation changes what its row of the paper changes, scaled by the same factor where the paper's value is a size
(N, d_model, d_ff: the paper's base is N = 6, ours N = 3). As in §6.2: beam search (4, alpha 0.6), no checkpoint
averaging, scores on the development (validation) set only; the test set is not decoded. Each row records the
validation perplexity per token of our BPE (cross-entropy without label smoothing, teacher-forced, ``</s>``
counted), the validation BLEU, the parameters and the minutes, in results/table3/ROW/ (summary.json from
vanilla-train, table3.json here).
"""

import argparse
import json
import logging
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.nn import functional as F
from transformers import AutoModelForSeq2SeqLM

from vanilla_tools.cli import UsageError, console_script, load_tokenizer
from vanilla_tools.provenance import git_commit, machine

from .arguments import parse_args
from .data import load_parallel_data, tokenize_splits

logger = logging.getLogger("table3")
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results" / "table3"
PAGE = ROOT / "docs" / "table3.md"
RECORD = "table3.json"
STEPS = 1000  # ~7 minutes of the base row on this CPU: the 24 rows in about 4 hours (docs/table3.md)
# What every row shares: the multi30k preset, stopped after a number of steps, evaluated as §6.2 evaluated Table 3
# (beam search, no checkpoint averaging, the development set only).
# (--length_penalty_candidates 0.6: alpha fixed, not chosen on the very set the row is scored on.)
COMMON = ["--max_train_minutes", "0", "--save_strategy", "no", "--eval_strategy", "no", "--average_last", "0",
          "--num_beams", "4", "--length_penalty", "0.6", "--length_penalty_candidates", "0.6",
          "--final_splits", "validation"]  # fmt: skip
PAPER_BASE = {"ppl": 4.92, "bleu": 25.8, "params_m": 65}


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
    *(Row(f"base-seed{seed}", "base", f"the preset, seed {seed}", ("--seed", str(seed)),
          _paper("base", 4.92, 25.8, 65)) for seed in (1, 2, 3)),
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
)  # fmt: skip


def command(row: Row, steps: int, preset: str, output_dir: Path, record_dir: Path) -> list[str]:
    # a row without its record is trained whole (it writes no checkpoints): a run of it there is started over
    return ["--config", preset, *COMMON, "--max_steps", str(steps), "--overwrite_output_dir", *row.flags,
            "--output_dir", str(output_dir), "--summary_dir", str(record_dir)]  # fmt: skip


def validation_perplexity(model_dir: Path, argv: list[str], batch_size: int = 64) -> tuple[float, int]:
    """exp(mean cross-entropy per target token) of the validation set, teacher-forced, without label smoothing,
    ``</s>`` counted; and the number of tokens. The data and its limits are the run's own (``argv``)."""
    _, data_args, _ = parse_args(argv)
    tokenizer = load_tokenizer(str(model_dir))
    validation = tokenize_splits(load_parallel_data(data_args, include_train=False), tokenizer, data_args)
    validation = validation["validation"]
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


def recorded(row: Row, steps: int, results: Path) -> dict | None:
    """The row's record if it was trained as ``row`` and ``steps`` say now (else it is trained again)."""
    path = results / row.name / RECORD
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if record.get("flags") != list(row.flags) or record.get("steps") != steps:
        logger.warning("%s was recorded with other settings (%s, %s steps): training it again", row.name,
                       record.get("flags"), record.get("steps"))  # fmt: skip
        return None
    return record


def train_row(row: Row, steps: int, preset: str, runs: Path, results: Path) -> dict:
    """Train and evaluate one row (vanilla-train in its own process), then measure its validation perplexity."""
    output_dir, record_dir = runs / row.name, results / row.name
    argv = command(row, steps, preset, output_dir, record_dir)
    logger.info("%s: vanilla-train %s", row.name, " ".join(argv))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "training.train", *argv], cwd=ROOT)
    if done.returncode:
        raise UsageError(f"{row.name}: vanilla-train exited with status {done.returncode} (command above)")
    summary = json.loads((record_dir / "summary.json").read_text())
    ppl, tokens = validation_perplexity(output_dir, argv)
    record = {
        "row": row.name, "group": row.group, "change": row.change, "flags": list(row.flags), "steps": steps,
        "paper": row.paper, "validation_ppl": round(ppl, 3), "validation_tokens": tokens,
        "validation_bleu": summary["validation"]["bleu"], "parameters": summary["parameters"],
        "train_minutes": summary["train_minutes"], "row_minutes": round((time.monotonic() - start) / 60, 2),
        "command": "python -m training.train " + " ".join(argv), "code": git_commit(), "machine": machine(),
    }  # fmt: skip
    (record_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def verdict(ours: float, base: list[float], paper_delta: float | None) -> str:
    """Whether the paper's direction (``paper_delta``: the paper's row less its base) holds here: outside the
    base's noise band (the spread of its seeds) in the same direction, in the other, or within the noise."""
    if paper_delta is None or len(base) < 2:
        return "n/a"
    delta, noise = ours - statistics.mean(base), max(base) - min(base)
    if abs(delta) <= noise:
        return "within the noise"
    if paper_delta == 0:
        return "paper: no change; here outside the noise"
    return "holds" if (delta > 0) == (paper_delta > 0) else "opposite"


def report(records: list[dict]) -> str:
    """docs/table3.md: each row beside the paper's, with the verdicts."""
    base = [r for r in records if r["group"] == "base"]
    base_ppl, base_bleu = [r["validation_ppl"] for r in base], [r["validation_bleu"] for r in base]
    lines = [
        "# Table 3 on Multi30k",
        "",
        "<!-- Generated by `python -m training.table3 --report` from results/table3/*/table3.json: do not edit. -->",
        "",
        "The paper's variations of its base model (Table 3, newstest2013 perplexity per wordpiece and BLEU), scaled",
        "to the Multi30k preset and run by `python -m training.table3` (how each row is scaled: its docstring). A",
        "verdict compares a row's difference from the base with the paper's: *holds* (same direction, outside the",
        "base's noise band, the spread of its three seeds), *opposite*, or *within the noise*. Perplexity is per token",
        "of our 8k BPE (the paper's per wordpiece of its 37k), so only directions compare, not values.",
        "",
        "```bash",
        "python -m training.table3             # the rows not yet recorded (resumable)",
        "python -m training.table3 --rows base-seed1 C-layers-6",
        "python -m training.table3 --report    # this page, from the records",
        "```",
        "",
    ]
    if not records:
        return "\n".join([*lines, "No row is recorded yet.", ""])
    steps = sorted({r["steps"] for r in records})
    minutes = sum(r["row_minutes"] for r in records)
    lines += [
        f"{len(records)} of {len(ROWS)} rows recorded, {', '.join(map(str, steps))} steps each, {minutes:.0f} minutes "
        f"in all. Base: validation PPL {statistics.mean(base_ppl):.2f} (seeds {min(base_ppl):.2f}-{max(base_ppl):.2f})"
        f", BLEU {statistics.mean(base_bleu):.2f} ({min(base_bleu):.2f}-{max(base_bleu):.2f}).",
        "",
        "| row | change | params | val PPL | val BLEU | paper's row | paper PPL | paper BLEU | paper params |"
        " PPL: paper's direction | BLEU: paper's direction |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    order = {row.name: i for i, row in enumerate(ROWS)}
    for r in sorted(records, key=lambda r: order.get(r["row"], len(order))):
        paper = r["paper"] or {}
        has_paper = r["group"] != "base" and "ppl" in paper
        ppl_delta = paper["ppl"] - PAPER_BASE["ppl"] if has_paper else None
        bleu_delta = paper["bleu"] - PAPER_BASE["bleu"] if has_paper else None
        cells = [
            f"{r['group']} {r['row']}", r["change"], f"{r['parameters'] / 1e6:.1f}M", f"{r['validation_ppl']:.2f}",
            f"{r['validation_bleu']:.2f}", paper.get("change", "—"),
            *(f"{paper[k]}" if paper.get(k) is not None else "—" for k in ("ppl", "bleu", "params_m")),
            verdict(r["validation_ppl"], base_ppl, ppl_delta) if r["group"] != "base" else "",
            verdict(r["validation_bleu"], base_bleu, bleu_delta) if r["group"] != "base" else "",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, ""])


def records(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(results.glob(f"*/{RECORD}"))]


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m training.table3", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--rows", nargs="+", choices=[row.name for row in ROWS], help="default: every row")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps of every row")
    parser.add_argument("--config", default="multi30k", help="the base row's preset (a name or a YAML file)")
    parser.add_argument("--runs", default="runs/table3", help="where the rows' model directories go")
    parser.add_argument("--results", default=str(RESULTS), help="where the rows' records go")
    parser.add_argument("--page", default=str(PAGE), help="the page generated from the records")
    parser.add_argument("--report", action="store_true", help="only write the page from the records")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, page = Path(args.results), Path(args.page)
    for row in [] if args.report else [row for row in ROWS if not args.rows or row.name in args.rows]:
        if recorded(row, args.steps, results):
            logger.info("%s: recorded, skipped", row.name)
            continue
        record = train_row(row, args.steps, args.config, Path(args.runs), results)
        logger.info("%s: validation PPL %.2f, BLEU %.2f", row.name, record["validation_ppl"],
                    record["validation_bleu"])  # fmt: skip
        page.write_text(report(records(results)))  # after every row: an interrupted table still has its page
    page.write_text(report(records(results)))
    print(f"wrote {page}")


main = console_script(run)

if __name__ == "__main__":
    main()
