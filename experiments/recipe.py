"""`python -m experiments.recipe`: the Multi30k preset's recipe chosen on the validation set, candidate by candidate.

    python -m experiments.recipe                                     # every candidate not yet recorded, in order
    python -m experiments.recipe --candidates preset warmup-1200     # some of them
    python -m experiments.recipe --report                            # docs/recipe.md from the records

Each candidate is the multi30k preset (``vanilla-train --config multi30k``: its 54-minute budget, checkpoint
averaging, the length penalty chosen on validation) with a few flags changed, trained in its own process and scored
on the validation set alone (``--final_splits validation``: test2016 is decoded once, by the preset that is chosen,
in its own runs). The budget is time, so a candidate's steps depend on the machine's speed that day: each record
keeps its steps, epochs and the fp32 matrix-product peak measured before it trained, and the page shows them.

The choice follows ``RULE``, stated before the candidates ran and printed at the top of the page: one run of a
candidate against the preset's own spread over its recorded runs (``Band``, ``chosen``).

A candidate recorded with the same settings is skipped, so the command goes on where it stopped, over several
sessions (each run is an hour of the machine alone). Records: results/recipe/NAME/ (vanilla-train's summary.json
and learning curve, recipe.json here: the validation BLEU, steps, command, commit and machine).
"""

import argparse
import json
import logging
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.bench import matmul_peak
from training.plot_curve import curve_columns
from vanilla_tools.cli import UsageError, console_script, require
from vanilla_tools.provenance import git_commit, machine

from .table3 import ROOT, matching_record, shown
from .verdict import CONFIDENCE, t_quantile

logger = logging.getLogger("recipe")
RESULTS = ROOT / "results" / "recipe"
PAGE = ROOT / "docs" / "recipe.md"
CURVES = "recipe-curves.png"  # beside the page: every candidate's validation check against training minutes
RECORD = "recipe.json"
RULE = (
    "a candidate runs once, and one run is read against the preset's own spread, the 95% prediction interval for one "
    "more run of the preset (mean +- t * s * sqrt(1 + 1/n) over its n recorded runs: the canonical run and repeats "
    "in [results.md](results.md), and the preset candidate here). The preset changes only for a candidate above that "
    "band, the best of them; a candidate within it is not told apart from the preset by one run."
)
REPEATS = ROOT / "results"  # the preset's full runs: summary.json with role "canonical" or "seed" (results_index)
COMMON = ["--final_splits", "validation", "--translate_examples", "0"]  # validation only; test2016 is not decoded


@dataclass(frozen=True)
class Candidate:
    name: str
    change: str  # what differs from the preset, and why it is worth an hour
    flags: tuple[str, ...] = ()

    def settings(self, preset: str) -> list[str]:
        """vanilla-train's arguments but the output folders: what a record must match to be skipped."""
        return ["--config", preset, *COMMON, *self.flags]


# The order: the preset as it is (the steps it reaches with the compiled step), a published small-model recipe for
# this corpus, then size and depth with the regularization they need (the paper's big model: dropout 0.3), then
# warmup, segmentation and averaging. Tried at the eager step and not repeated here: 4,096-token batches, dropout 0.2
# alone, half the learning rate, a 5k vocabulary (docs/results.md, "Ablations that chose the preset").
CANDIDATES = (
    Candidate("preset", "the preset as it is"),
    # Wu et al. (ACL 2021)'s text-only Transformer-Tiny, 41.02 BLEU on their tokenized test2016 (the authors' repo,
    # LividWo/Revisit-MMT, README-baseline.md): 4+4 layers, d_model 128, 4 heads, d_ff 256, dropout 0.3, peak
    # learning rate 0.005 after 2,000 warmup steps (lr_scale = 0.005 * (128 * 2000)^0.5), 8,192-token steps (4,096
    # on each of 2 GPUs) for 8,000 updates, the last 10 epochs averaged (here 75-step checkpoints, ~73 steps an epoch).
    # Not the same as the smaller, deeper model that did not help (37.44): that one kept the preset's lr and dropout.
    Candidate("tiny-wu2021", "Wu et al. 2021's Transformer-Tiny: 4+4 layers, d_model 128, d_ff 256, dropout 0.3, "
              "peak lr 0.005 at step 2,000, 8,192-token steps, 8,000 steps at most, about 10 epochs averaged",
              ("--encoder_layers", "4", "--decoder_layers", "4", "--d_model", "128", "--num_attention_heads", "4",
               "--ffn_dim", "256", "--dropout", "0.3", "--warmup_steps", "2000", "--lr_scale", "2.53",
               "--max_tokens_per_batch", "8192", "--max_steps", "8000", "--eval_strategy", "steps",
               "--eval_steps", "375", "--save_steps", "75", "--save_total_limit", "10", "--average_last", "10")),
    Candidate("layers-4-dropout-0.2", "4+4 layers, dropout 0.2", ("--encoder_layers", "4", "--decoder_layers", "4",
                                                                 "--dropout", "0.2")),
    Candidate("dmodel-384-dropout-0.3", "d_model 384, 6 heads, d_ff 1536, dropout 0.3",
              ("--d_model", "384", "--num_attention_heads", "6", "--ffn_dim", "1536", "--dropout", "0.3")),
    Candidate("dmodel-384-dropout-0.2", "d_model 384, 6 heads, d_ff 1536, dropout 0.2",
              ("--d_model", "384", "--num_attention_heads", "6", "--ffn_dim", "1536", "--dropout", "0.2")),
    Candidate("warmup-1200", "warmup 1,200 steps: a lower, later peak", ("--warmup_steps", "1200")),
    Candidate("bpe-dropout-0.2", "BPE-dropout 0.2", ("--bpe_dropout", "0.2")),
    Candidate("average-20", "the last 20 checkpoints averaged, about 8 epochs",
              ("--average_last", "20", "--save_total_limit", "20")),
)  # fmt: skip
NAMES = [candidate.name for candidate in CANDIDATES]


def recorded(candidate: Candidate, preset: str, results: Path) -> dict | None:
    """The candidate's record if it was trained with the settings it has now; else None (trained again)."""
    return matching_record(results / candidate.name / RECORD, candidate.settings(preset), candidate.name)


def train(candidate: Candidate, preset: str, runs: Path, results: Path) -> dict:
    """One candidate: vanilla-train in its own process, then its record."""
    output_dir, record_dir = runs / candidate.name, results / candidate.name
    argv = [*candidate.settings(preset), "--overwrite_output_dir", "--output_dir", shown(output_dir),
            "--summary_dir", shown(record_dir)]  # fmt: skip
    peak = matmul_peak(torch.float32)
    logger.info("%s: vanilla-train %s (fp32 peak %.0f GFLOP/s)", candidate.name, " ".join(argv), peak / 1e9)
    done = subprocess.run([sys.executable, "-m", "training.train", *argv], cwd=ROOT)
    if done.returncode:
        raise UsageError(f"{candidate.name}: vanilla-train exited with status {done.returncode} (command above)")
    summary = json.loads((record_dir / "summary.json").read_text())
    record = {
        "candidate": candidate.name, "change": candidate.change, "flags": list(candidate.flags),
        "settings": candidate.settings(preset), "validation_bleu": summary["validation"]["bleu"],
        "validation_bleu_lc_tok": summary["validation"].get("bleu_lc_tok"), "beam": summary.get("beam"),
        "steps": summary["steps"], "epochs": summary["epochs"], "parameters": summary["parameters"],
        "train_minutes": summary["train_minutes"], "fp32_gflops_before": round(peak / 1e9, 1),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": "python -m training.train " + " ".join(argv),
        "code": git_commit(), "machine": machine(),
    }  # fmt: skip
    (record_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def preset_runs(records: list[dict], repeats: Path) -> list[float]:
    """The validation BLEU of every recorded run of the preset: its canonical run and repeats in ``repeats``, and the
    preset candidate. Runs of earlier code are among them: their spread is the wider for it, the rule the stricter."""
    summaries = [json.loads(p.read_text()) for p in sorted(repeats.glob("*/summary.json"))]
    scores = [s["validation"]["bleu"] for s in summaries if s.get("role") in ("canonical", "seed")]
    return scores + [r["validation_bleu"] for r in records if r["candidate"] == "preset"]


@dataclass(frozen=True)
class Band:
    """The 95% prediction interval for the validation BLEU of one more run of the preset."""

    mean: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, scores: list[float]) -> "Band | None":
        """mean +- t(n - 1) * s * sqrt(1 + 1/n); None below 3 runs (no spread worth the name)."""
        if len(scores) < 3:
            return None
        mean, n = statistics.mean(scores), len(scores)
        half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * statistics.stdev(scores) * math.sqrt(1 + 1 / n)
        return cls(mean, mean - half, mean + half, n)

    def place(self, score: float) -> str:
        return "above" if score > self.high else "below" if score < self.low else "within"


def chosen(records: list[dict], band: Band | None) -> str:
    """The module's rule: the best candidate above the preset's band, else the preset."""
    if band is None:
        return "preset"
    above = [r for r in records if r["candidate"] != "preset" and band.place(r["validation_bleu"]) == "above"]
    return max(above, key=lambda r: r["validation_bleu"])["candidate"] if above else "preset"


def report(records: list[dict], runs: list[float]) -> str:
    """docs/recipe.md: the rule, every recorded candidate (best validation BLEU first) against the preset's band
    (``runs``: preset_runs), the choice so far, then the candidates not yet recorded."""
    band = Band.of(runs)
    spread = (
        f"Over its {band.runs} recorded runs the preset scored {band.mean:.2f} on validation ({min(runs):.2f}-"
        f"{max(runs):.2f}), so one more run of it falls in **{band.low:.2f}-{band.high:.2f}** (95%)."
        if band else f"The preset has {len(runs)} recorded runs, too few for a band: nothing replaces it yet."
    )  # fmt: skip
    lines = [
        "# The Multi30k recipe, chosen on validation",
        "",
        "Generated by `python -m experiments.recipe --report` from the records in `results/recipe/NAME/recipe.json` "
        "([experiments/recipe.py](../experiments/recipe.py) trains them). Every candidate is `vanilla-train --config "
        "multi30k` with a few flags changed, scored on the validation set only (beam 4, the length penalty chosen on "
        "validation, the preset's checkpoint averaging). The budget is 54 minutes, so the steps a candidate reached "
        "depend on the machine's speed that day (the fp32 peak measured before it).",
        "",
        f"**The rule**, stated before the candidates ran: {RULE} {spread}",
        "",
        "| candidate | change | validation BLEU | against the preset's band | lc-tok | steps | epochs | parameters "
        "| fp32 GFLOP/s | commit |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in sorted(records, key=lambda r: -r["validation_bleu"]):
        commit = r["code"]["commit"][:7]
        lc_tok = f"{r['validation_bleu_lc_tok']:.2f}" if r.get("validation_bleu_lc_tok") is not None else ""
        place = "one of its runs" if r["candidate"] == "preset" else band.place(r["validation_bleu"]) if band else ""
        lines.append(
            f"| {r['candidate']} | {r['change']} | {r['validation_bleu']:.2f} | {place} | {lc_tok} | {r['steps']} "
            f"| {r['epochs']:.1f} | {r['parameters'] / 1e6:.1f}M | {r['fp32_gflops_before']} | {commit} |"
        )
    lines += ["", f"Chosen so far: **{chosen(records, band)}**."]
    if records:
        lines += ["", "Each candidate's validation check while it trained (greedy decoding of the preset's 200 "
                  "validation sentences at each evaluation; the table's scores are the whole validation set, beam 4, "
                  "after averaging), against training minutes:", "",
                  f"![The validation check of every candidate against training minutes]({CURVES})"]  # fmt: skip
    done = {r["candidate"] for r in records}
    waiting = [f"{c.name} ({c.change})" for c in CANDIDATES if c.name not in done]
    if waiting:
        lines += ["", "Not yet recorded: " + "; ".join(waiting) + "."]
    return "\n".join(lines) + "\n"


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.recipe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--candidates", nargs="+", choices=NAMES, help="default: every candidate, in order")
    parser.add_argument("--config", default="multi30k", help="the preset the candidates change (a name or a YAML)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "recipe"), help="where the candidates' models go")
    parser.add_argument("--results", default=str(RESULTS), help="where the candidates' records go")
    parser.add_argument("--page", default=str(PAGE), help="the page generated from the records")
    parser.add_argument("--repeats", default=str(REPEATS), help="the preset's full runs (results/DATE-SLUG folders)")
    parser.add_argument("--report", action="store_true", help="only write the page from the records")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, runs, page = Path(args.results).resolve(), Path(args.runs).resolve(), Path(args.page).resolve()
    repeats = Path(args.repeats).resolve()
    todo = [] if args.report else [c for c in CANDIDATES if not args.candidates or c.name in args.candidates]
    for candidate in todo:
        if recorded(candidate, args.config, results):
            logger.info("%s: recorded, skipped", candidate.name)
            continue
        record = train(candidate, args.config, runs, results)
        logger.info("%s: validation BLEU %.2f", candidate.name, record["validation_bleu"])
        write_page(results, repeats, page)  # after every run: an interrupted sweep still has its page
    write_page(results, repeats, page)
    print(f"wrote {page}")


def read_records(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(results.glob(f"*/{RECORD}"))]


def write_page(results: Path, repeats: Path, page: Path) -> None:
    """The page and, beside it, its figure of the candidates' curves."""
    records = read_records(results)
    page.write_text(report(records, preset_runs(records, repeats)))
    if records:
        plot_curves(records, results, page.parent / CURVES)


def plot_curves(records: list[dict], results: Path, path: Path) -> None:
    """Each candidate's validation check (eval_bleu of its learning_curve.csv) against training minutes, the preset
    in black, the legend in the table's order."""
    matplotlib = require("matplotlib", "plot", "python -m experiments.recipe")
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for record in sorted(records, key=lambda r: -r["validation_bleu"]):
        name = record["candidate"]
        columns = curve_columns(results / name / "learning_curve.csv")
        style = {"color": "black", "linewidth": 2.5} if name == "preset" else {}
        axis.plot(columns["minutes"], columns["eval_bleu"], marker=".", label=name, **style)
    axis.set(xlabel="training minutes", ylabel="validation check: sacreBLEU, greedy, 200 sentences",
             title="Multi30k recipe candidates")  # fmt: skip
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


main = console_script(run)

if __name__ == "__main__":
    main()
