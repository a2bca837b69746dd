"""The back-translation round's intervals: each seed's BLEU statistics per test sentence, and the bootstrap of the
fraction of the gap between A alone and the upper bound that a condition recovers."""

from pathlib import Path

import numpy as np

from vanilla_tools.cli import UsageError
from vanilla_tools.metrics import statistics_bleu, tokenized_bleu_statistics

from .backtranslation_round import REMEDY, TRANSLATIONS, Budget, Condition, Run, read_bundled
from .launch import shown

BOOTSTRAP_DRAWS = 1000


def seed_statistics(budget: Budget, results: Path, condition: Condition, done: dict[Run, dict]) -> list[np.ndarray]:
    """Each recorded seed's sentence statistics on test2016 (a rehearsal's: its first lines), from its translations;
    a file of another length than the references it was made from is refused, naming both."""
    references = read_bundled("test_2016_flickr.de", budget.held_out)
    statistics = []
    for run in (r for r in done if r.name == condition.name):
        path = results / budget.folder / run.folder / TRANSLATIONS
        translations = path.read_text(encoding="utf-8").splitlines()
        if len(translations) != len(references):
            raise UsageError(
                f"{shown(path)}: {len(translations)} translations of test2016's {len(references)} sentences; {REMEDY}"
            )
        statistics.append(tokenized_bleu_statistics(translations, references, "de"))
    return statistics


def gap_fraction(a: list[np.ndarray], treatment: list[np.ndarray], upper: list[np.ndarray]) -> dict:
    """How much of the gap from A alone to the upper bound ``treatment`` recovers, (T - A) / (U - A) on seed means,
    and its 95% interval: ``BOOTSTRAP_DRAWS`` draws of the test sentences and of each condition's seeds."""

    def mean(runs: list[np.ndarray], rows: np.ndarray, seeds: np.ndarray) -> float:
        return float(np.mean([statistics_bleu(runs[s][rows]) for s in seeds]))

    every = np.arange(len(a[0]))
    values = [mean(c, every, np.arange(len(c))) for c in (a, treatment, upper)]
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(BOOTSTRAP_DRAWS):
        rows = rng.integers(0, len(every), len(every))
        base, bt, top = (mean(c, rows, rng.integers(0, len(c), len(c))) for c in (a, treatment, upper))
        if top != base:
            draws.append((bt - base) / (top - base))
    point = (values[1] - values[0]) / (values[2] - values[0]) if values[2] != values[0] else None
    low, high = np.percentile(draws, [2.5, 97.5]) if draws else (None, None)
    return {"fraction": point, "low": low, "high": high, "draws": len(draws)}
