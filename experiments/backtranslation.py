"""`python -m experiments.backtranslation`: one round of back-translation (Sennrich et al. 2016; sampling, Edunov et
al. 2018; tagged, Caswell et al. 2019) measured on the bundled Multi30k en->de, and docs/backtranslation.md written
from its records (issue 113).

    python -m experiments.backtranslation            # every run not yet recorded, in order; then the page
    python -m experiments.backtranslation --report   # the page from the records, nothing trained

The data: Multi30k's 29,000 training pairs split in two halves by a fixed permutation (``SPLIT_SEED``): A (14,500
pairs) and B (14,500), whose English is set aside but for the upper bound. The reverse model (de->en) trains on A and
translates B's German twice: by beam search (beam 5) and by sampling (the full distribution, ``--seed 1``), its output
detokenized as a user's files would be. The forward models (en->de) then train on:

- A alone (3 seeds);
- A + B back-translated by sampling, tagged ``<BT>`` (3 seeds), and untagged (1 seed);
- A + B back-translated by beam search, tagged and untagged (1 seed each);
- A + B's real English: the upper bound (1 seed).

The budget, stated before any run (issue 113 allows the preset's or a smaller one): Wu et al.'s Transformer-Tiny
recipe (``--config multi30k-tiny``: lowercased, Moses-tokenized text, 10k BPE, beam 5) for ``STEPS`` steps of
``TOKENS_PER_STEP`` tokens (one batch a step) instead of 8,000 of 8,192, warm-up ``WARMUP`` steps (the recipe's 2,000
would end the run at its peak), fp32 on every machine (so that any session continues the sweep with runs that compare),
no evaluation while training, a checkpoint every ``SAVE_STEPS`` steps and the last ``AVERAGE`` averaged: the same
window of steps whatever the size of the training set (the preset's last 10 epochs would average a run on A + B over
twice the steps of a run on A). Each run is scored on test2016 by vanilla-train and its translations written again by
vanilla-translate (generate(), beam 5) for the page's intervals.

The page reports, per condition, each seed's sacreBLEU and lowercased, tokenized BLEU (vanilla-train's record), and
the fraction of the gap between A alone and the upper bound that back-translation recovers, ``(BT - A) / (A+B - A)``,
with a 95% interval from a bootstrap that draws both the test sentences and, where a condition has several, its seeds
(the upper bound's one seed is drawn over sentences only: its seed variance is not in the interval).

Resumable: a run recorded with the same settings is skipped; a run stopped while training goes on from its newest
checkpoint (vanilla-train's relaunch); the synthetic English is kept in the results (gzipped), so a later session on a
fresh clone needs neither the reverse model nor its runs folder. Each run's record holds vanilla-train's summary (the
code, machine, device, precision, steps and seed) with the experiment's settings and the test translations.

A rehearsal (``--pairs N``: the first N training pairs, N // 10 of validation and test2016) names its data in its
runs' settings and keeps its data, models and records apart (STEPS-steps-N-pairs/, data-N-pairs/): no record of it
stands for a run of the round. ``--report --pairs N`` writes its page.
"""

import argparse
import gzip
import logging
from pathlib import Path

import numpy as np

from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.run_files import read_json, write_json

from . import launch
from .backtranslation_page import page
from .backtranslation_round import (
    BACK_TRANSLATIONS,
    BEAMS,
    BY_NAME,
    REMEDY,
    SPLIT_SEED,
    STEPS,
    TRANSLATIONS,
    Budget,
    Run,
    plan,
    read_bundled,
    recorded,
)
from .launch import ROOT, SUMMARY, shown

logger = logging.getLogger("backtranslation")
RESULTS = ROOT / "results" / "backtranslation"
PAGE = ROOT / "docs" / "backtranslation.md"


# The data


def halves(pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of A and of B: a fixed permutation of the ``pairs`` training pairs cut in two, each half in file order."""
    order = np.random.default_rng(SPLIT_SEED).permutation(pairs)
    return np.sort(order[: pairs // 2]), np.sort(order[pairs // 2 :])


def write_if_changed(path: Path, lines: list[str]) -> None:
    """Write ``lines`` unless ``path`` holds them already (datasets' cache keys on the file's time: a rewrite of the
    same text would tokenize it again)."""
    text = "".join(f"{line}\n" for line in lines)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def prepare_data(data: Path, budget: Budget) -> None:
    """The halves, validation and test2016 as vanilla-train's files in ``data`` (a rehearsal's budget: the first N
    training pairs, and the first N // 10 lines of validation and test2016)."""
    data.mkdir(parents=True, exist_ok=True)
    train = {lang: read_bundled(f"train.{lang}", budget.pairs) for lang in ("en", "de")}
    a, b = halves(len(train["en"]))
    held_out = budget.held_out
    for lang, lines in train.items():
        write_if_changed(data / f"A.{lang}", [lines[i] for i in a])
        write_if_changed(data / f"B.{lang}", [lines[i] for i in b])
        write_if_changed(data / f"validation.{lang}", read_bundled(f"val.{lang}", held_out))
        write_if_changed(data / f"test.{lang}", read_bundled(f"test_2016_flickr.{lang}", held_out))


# The runs


def vanilla(module: str, argv: list[str], what: str) -> list[str]:
    """One program of the round, and the command that ran; stopped by a signal, the same command goes on where it
    stopped."""
    return launch.launch(module, argv, what, after_stop=AFTER_STOP)


AFTER_STOP = "; the same command goes on where it stopped"


def train(run: Run, budget: Budget, runs: Path, results: Path) -> None:
    """vanilla-train for ``run`` (from its newest checkpoint where one stopped), its test2016 translated again for
    the page, and the record filed; summary.json last, so a folder cut short is no record."""
    output_dir = runs / budget.folder / run.folder
    data = runs / budget.data_folder
    argv = [arg.replace(budget.data, str(data)) for arg in run.settings(budget)]
    _, summary = launch.train(
        argv, output_dir, str(run), remedy=f"delete {shown(output_dir)} and run again", after_stop=AFTER_STOP
    )
    target = results / budget.folder / run.folder
    target.mkdir(parents=True, exist_ok=True)
    source, _ = run.direction
    if run.direction == ("en", "de"):
        translations = [
            str(data / f"test.{source}"),
            "--model",
            str(output_dir),
            "--output",
            str(target / TRANSLATIONS),
        ]
        vanilla(
            "inference.translate", [*translations, "--engine", "generate", "--num_beams", str(BEAMS)], f"{run}: test"
        )
    write_json(target / SUMMARY, {**summary, "experiment": "backtranslation", "settings": run.settings(budget)})


# The back-translations


def back_translate(budget: Budget, runs: Path, results: Path) -> None:
    """B's German in English by the reverse model, by beam search and by sampling (CTranslate2, float32), each kept
    gzipped in the results with what made it, then written where the forward runs read it."""
    kept, data = results / budget.folder / "synthetic", runs / budget.data_folder
    model = runs / budget.folder / Run.reverse().folder
    for mode, flags in BACK_TRANSLATIONS.items():
        name = f"B.bt-{mode}.en"
        if not (kept / f"{name}.gz").is_file():
            if not (model / "config.json").is_file():
                raise UsageError(
                    f"the reverse model is recorded but {shown(model)} holds no model to back-translate with: delete "
                    f"{shown(results / budget.folder / Run.reverse().name)} and it is trained again"
                )
            output = data / f"{name}.part"
            options = ["--detokenize", "--engine", "ctranslate2", "--quantization", "float32", *flags]
            argv = [shown(data / "B.de"), "--model", shown(model), "--output", shown(output), *options]
            command = vanilla("inference.translate", argv, f"back-translation by {mode}")
            lines = output.read_text(encoding="utf-8").splitlines()
            kept.mkdir(parents=True, exist_ok=True)
            with gzip.open(kept / f"{name}.gz.part", "wt", encoding="utf-8") as f:
                f.writelines(f"{line}\n" for line in lines)
            reverse = read_json(results / budget.folder / Run.reverse().folder / SUMMARY, dict, REMEDY) or {}
            write_json(
                kept / f"{name}.json",
                {
                    "mode": mode,
                    "translate": command,
                    "lines": len(lines),
                    "reverse_model": reverse.get("run", {}).get("code"),
                    "test2016_en": reverse.get("test"),
                },
            )
            (kept / f"{name}.gz.part").rename(kept / f"{name}.gz")
            output.unlink()
        with gzip.open(kept / f"{name}.gz", "rt", encoding="utf-8") as f:
            write_if_changed(data / name, f.read().splitlines())


def synthetic_kept(budget: Budget, results: Path) -> bool:
    return all((results / budget.folder / "synthetic" / f"B.bt-{mode}.en.gz").is_file() for mode in BACK_TRANSLATIONS)


# The command


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.backtranslation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    launch.add_record_arguments(parser, runs=ROOT / "runs" / "backtranslation", results=RESULTS, page=PAGE)
    parser.add_argument("--steps", type=int, default=STEPS, help=f"each run's steps (default {STEPS}, the budget)")
    parser.add_argument(
        "--conditions",
        nargs="+",
        choices=list(BY_NAME),
        default=list(BY_NAME),
        help="the training sets to run (default: all; the reverse model runs where one needs it)",
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, runs = Path(args.results).resolve(), Path(args.runs).resolve()
    budget = Budget.of(args.steps, args.pairs)
    if not args.report:
        prepare_data(runs / budget.data_folder, budget)
        for planned in plan(budget, tuple(BY_NAME[name] for name in args.conditions)):
            if planned == Run.reverse():
                if synthetic_kept(budget, results):
                    back_translate(budget, runs, results)
                    continue
            if recorded(planned, budget, results) is not None:
                logger.info("%s: recorded, skipped", planned)
            else:
                train(planned, budget, runs, results)
            if planned == Run.reverse():
                back_translate(budget, runs, results)
    Path(args.page).write_text(page(budget, results), encoding="utf-8")
    print(f"wrote {args.page}")


main = console_script(run)

if __name__ == "__main__":
    main()
