"""`python -m experiments.reproduce`: Wu et al. (ACL 2021)'s Transformer-Tiny recipe on Multi30k, run through this
package seed by seed, against their 41.02 on test2016 (issue 101; docs/multi30k.md).

    python -m experiments.reproduce                   # seeds 1, 2 and 3 not yet recorded, one after another
    python -m experiments.reproduce --seeds 2         # one of them
    python -m experiments.reproduce --seeds 1 --tokenizer DIR   # a control: the recipe with another tokenizer

Each seed is ``vanilla-train --config multi30k-tiny --seed N`` in its own process, in the precision vanilla-train
chooses for the machine (bf16 autocast where it runs fast, else fp32: measured to train alike,
experiments/comparable.py), which the record states. A seed is a run of 8,000 steps, hours on a 2-core CPU: one
stopped while it trains (a signal, a session's end) goes on from its newest checkpoint when the command runs again
(vanilla-train's relaunch, training/run/relaunch.py), and its record lists the launches. A seed recorded with the same
settings is skipped, so the command goes on where it stopped, over sessions and machines.

Where things go: the model in ``--runs``/seed-N, vanilla-train's summary beside it in seed-N-record, and, once the
run has finished, the record filed as results/DATE-multi30k-tiny-seedN/ (DATE: the day it is filed): its summary.json
with role ``reproduction``, the settings, the run's tokens a second and a note written from the record. Then
docs/results.md is generated again (experiments/results_index.py: the seeds' mean, its 95% interval and where 41.02
lies). A control (``--tokenizer``: the recipe cutting its text with another tokenizer, such as Wu et al.'s own BPE,
experiments/subword_nmt.py) trains in seed-N-NAME (NAME: the tokenizer's folder) and is filed with role ``control``,
outside the seeds' mean."""

import argparse
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from training.api import run_launches, run_train_minutes
from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.run_files import write_json

from . import launch, results_index
from .launch import ROOT, SUMMARY, shown
from .results_index import test_scores

logger = logging.getLogger("reproduce")
CONFIG = "multi30k-tiny"  # Wu et al.'s recipe (training/configs/multi30k-tiny.yaml names their files)
SEEDS = (1, 2, 3)
ROLE = "reproduction"  # results_index's section for these records
CONTROL_ROLE = "control"  # and for a seed trained with another tokenizer
REMEDY = "restore it from git, or delete its folder and run again what wrote it"


@dataclass(frozen=True)
class Seed:
    """One run of the recipe: its preset, its seed and, for a control, the tokenizer it cuts the text with."""

    config: str
    seed: int
    tokenizer: str | None = None  # a folder, as given (relative to the repository or absolute)

    def settings(self) -> list[str]:
        """vanilla-train's arguments but the output folders: what a record must match to be skipped."""
        control = ["--tokenizer", self.tokenizer] if self.tokenizer else []
        return ["--config", self.config, "--seed", str(self.seed), *control]

    @property
    def role(self) -> str:
        return CONTROL_ROLE if self.tokenizer else ROLE

    @property
    def name(self) -> str:
        """seed-N, or seed-N-NAME for a control with the tokenizer of folder NAME."""
        return f"seed-{self.seed}" + (f"-{Path(self.tokenizer).name}" if self.tokenizer else "")

    def __str__(self) -> str:
        return f"seed {self.seed}" + (f" with the tokenizer of {self.tokenizer}" if self.tokenizer else "")


def recorded(run: Seed, results: Path) -> Path | None:
    """The folder under ``results`` that records this run with these settings; None where none does."""
    return next(
        (
            path.parent
            for path in sorted(results.glob(f"*/{SUMMARY}"))
            if launch.recorded(path, run.settings(), REMEDY, role=run.role) is not None
        ),
        None,
    )


def train(run: Seed, output_dir: Path) -> dict:
    """vanilla-train in its own process: from scratch, from the newest checkpoint of a stopped run in
    ``output_dir``, or nothing where the run there has finished; returns its summary."""
    _, summary = launch.train(
        run.settings(),
        output_dir,
        str(run),
        remedy=f"delete {shown(output_dir)} and the seed is trained again",
        after_stop=f", with a complete checkpoint in {shown(output_dir)}; the same command goes on from it",
    )
    return summary


def throughput(summary: dict) -> dict[str, int]:
    """Tokens a second over the run's training minutes (every launch's), from its record: of its batches (their
    token slots, padding included, as fairseq's --max-tokens counts them: ``tokens_per_step`` a step) and of the text
    (the training set's source and target tokens, </s> included, as the run's tokenizer cut them: its summary's
    ``train_tokens``, times the epochs trained; fairseq's words a second count the target's). A run trained before
    vanilla-train counted its text has the batches' alone."""
    seconds = run_train_minutes(summary) * 60
    record = summary["run"]
    speed = {"batch_tokens_per_second": round(record["budget"]["tokens_per_step"] * record["steps"] / seconds)}
    for side, tokens in summary.get("train_tokens", {}).items():
        speed[f"{side}_tokens_per_second"] = round(tokens * summary["epochs"] / seconds)
    return speed


def note(seed: Seed, summary: dict, speed: dict[str, int], extra: str | None) -> str:
    """The record's note, written from the record: what ran where, how long and how fast, and what it scored."""
    run, test, validation = summary["run"], test_scores(summary), summary["validation"]
    control = f", with the tokenizer of {seed.tokenizer} (a control)" if seed.tokenizer else ""
    launches = len(run_launches(summary))
    machine, gflops = run["machine"], summary.get("machine_speed") or {}
    text = (
        f"Seed {run['seed']} of Wu et al.'s recipe (`--config {seed.config}`{control}) at "
        f"{run['code']['commit'][:7]}, in "
        f"{run['precision']} on {run['device']['name']} ({machine['cpu_cores']} CPU cores; a 1024^3 fp32 matrix "
        f"product at {gflops.get('fp32_gflops_before')} GFLOP/s before its last launch, "
        f"{gflops.get('fp32_gflops_after')} after): {run['steps']:,} steps of {run['budget']['tokens_per_step']:,} "
        f"tokens ({summary['epochs']} epochs) in {run_train_minutes(summary):.1f} training minutes, "
        f"{launches} launch{'es' if launches > 1 else ''}; {speed['batch_tokens_per_second']:,} batch tokens a second "
        f"(padding included){text_speed(speed)}. test2016 {test.get('bleu_lc_tok')} lowercased and tokenized "
        f"({test.get('bleu')} sacreBLEU of that text), validation {validation.get('bleu_lc_tok')}."
    )
    return f"{text} {extra}" if extra else text


def text_speed(speed: dict[str, int]) -> str:
    """The text's tokens a second, as the note says them; nothing for a run that did not count its text."""
    if "target_tokens_per_second" not in speed:
        return ""
    return (
        f", {speed['target_tokens_per_second']:,} target and {speed['source_tokens_per_second']:,} source tokens a "
        "second"
    )


def file(run: Seed, summary: dict, results: Path, summary_dir: Path, extra: str | None) -> Path:
    """The finished run's record (``summary``, from ``summary_dir``) filed under ``results``, with its role,
    settings, speed and note; summary.json is written last, so a folder cut short is no record and is filed again."""
    target = results / f"{time.strftime('%Y-%m-%d')}-{Path(run.config).stem}-{run.name.replace('-', '', 1)}"
    if (target / SUMMARY).exists():
        raise UsageError(f"{run}: {shown(target)} holds another record; move it and run again")
    speed = throughput(summary)
    target.mkdir(parents=True, exist_ok=True)
    for path in summary_dir.iterdir():
        if path.is_file() and path.name != SUMMARY:
            shutil.copy2(path, target / path.name)
    record = {
        **summary,
        "role": run.role,
        "settings": run.settings(),
        "throughput": speed,
        "note": note(run, summary, speed, extra),
    }
    write_json(target / SUMMARY, record)
    return target


def write_page(results: Path, page: Path) -> None:
    page.write_text(results_index.index(results))


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.reproduce",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="default: 1 2 3")
    parser.add_argument("--config", default=CONFIG, help="the recipe (a preset's name or a YAML file)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "reproduction"), help="where the seeds' models go")
    parser.add_argument("--results", default=str(ROOT / "results"), help="where the records are filed")
    parser.add_argument("--page", default=str(ROOT / "docs" / "results.md"), help="the page generated from them")
    parser.add_argument("--note", help="said in the note of every seed this call files (what the record cannot say)")
    parser.add_argument(
        "--tokenizer", help="a control: cut the text with the tokenizer of this folder (experiments/subword_nmt.py)"
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, runs, page = Path(args.results).resolve(), Path(args.runs).resolve(), Path(args.page).resolve()
    tokenizer = args.tokenizer and Path(args.tokenizer).resolve()
    if tokenizer and not (tokenizer / "tokenizer.json").is_file():
        raise UsageError(
            f"--tokenizer {args.tokenizer}: no tokenizer.json there (experiments/subword_nmt.py writes one)"
        )
    for seed in (Seed(args.config, n, tokenizer and shown(tokenizer)) for n in args.seeds):
        if (found := recorded(seed, results)) is not None:
            logger.info("%s: recorded in %s, skipped", seed, shown(found))
            continue
        output_dir = runs / seed.name
        summary = train(seed, output_dir)
        folder = file(seed, summary, results, launch.record_folder(output_dir), args.note)
        logger.info("%s: filed in %s", seed, shown(folder))
    write_page(results, page)
    print(f"wrote {page}")


main = console_script(run)

if __name__ == "__main__":
    main()
