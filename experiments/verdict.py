"""The rule that gives a cell of Table 3 a verdict (docs/table3.md states it at its top; tested on synthetic rows in
tests/test_experiments/test_verdict.py).

A cell compares the seeds of a row with those of the base on one metric: the difference of their means (row less
base) with a 95% interval by Welch's t (each side its own variance; the Welch-Satterthwaite degrees of freedom).
Welch rather than a bootstrap: three seeds a side give a bootstrap ten distinct resampled means and an interval too
narrow for its 95%, while the t interval is exact for normal noise at any number of seeds. Student's t comes from
the regularized incomplete beta function (a continued fraction) rather than from scipy, which the project does not
otherwise need.

- *too few seeds*: fewer than ``MIN_SEEDS`` seeds of the row or of the base (no word, whatever the difference).
- The paper's own difference is *no change* within ``NO_CHANGE`` (its (E) row, 4.92 / 25.7 against the base's
  4.92 / 25.8, is "nearly identical"), else a direction.
- *holds* / *opposite*: the interval excludes zero, in the paper's direction or against it; *differs (paper: no
  change)*: it excludes zero where the paper saw no change; *higher* / *lower*: it excludes zero on a row the paper
  does not have; *no change found*: the interval holds zero (which does not show that there is none).
"""

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_SEEDS = 3
CONFIDENCE = 0.95
NO_CHANGE = {"ppl": 0.05, "bleu": 0.2}  # the paper's "no change": |its row less its base| up to these
TOO_FEW = "too few seeds"
NONE_FOUND = "no change found"
HOLDS, OPPOSITE, DIFFERS = "holds", "opposite", "differs (paper: no change)"
HIGHER, LOWER = "higher", "lower"  # the words of a row the paper does not have
DISAGREES = (OPPOSITE, DIFFERS)  # the words that contradict the paper


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300

    def floor(value: float) -> float:
        return value if abs(value) > tiny else tiny

    c, d = 1.0, 1.0 / floor(1.0 - (a + b) * x / (a + 1.0))
    fraction = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 / floor(1.0 + numerator * d)
            c = floor(1.0 + numerator / c)
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return fraction


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom, t >= 0."""
    return 0.5 * regularized_beta(df / (df + t * t), df / 2.0, 0.5)


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for p in (0.5, 1). Newton's method from the normal quantile, which lies below it:
    the distribution function is concave there, so every step stays below the root and closes in on it."""
    t = statistics.NormalDist().inv_cdf(p)
    log_density = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(200):
        density = math.exp(log_density - (df + 1) / 2 * math.log1p(t * t / df))
        step = (p - (1.0 - t_tail(t, df))) / density
        t += step
        if step < 1e-12 * t:
            break
    return t


@dataclass(frozen=True)
class Difference:
    """The row's mean less the base's on one metric, with what Welch's interval needs (None where a side has a
    single seed: its variance is unknown)."""

    delta: float
    row_seeds: int
    base_seeds: int
    standard_error: float | None = None
    df: float | None = None

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        if self.standard_error is None:
            return None
        half = t_quantile(0.5 + confidence / 2, self.df) * self.standard_error if self.standard_error else 0.0
        return self.delta - half, self.delta + half

    def excludes_zero(self, confidence: float = CONFIDENCE) -> bool:
        """Whether the interval leaves out zero, tested as its two-sided p-value below 1 - confidence (the same test
        without computing the quantile)."""
        if self.standard_error is None:
            return False
        if not self.standard_error:
            return self.delta != 0
        return 2 * t_tail(abs(self.delta) / self.standard_error, self.df) < 1 - confidence


def difference(row: Sequence[float], base: Sequence[float]) -> Difference:
    """Row less base, with Welch's standard error and degrees of freedom where each side has two seeds or more."""
    delta = statistics.mean(row) - statistics.mean(base)
    if min(len(row), len(base)) < 2:
        return Difference(delta, len(row), len(base))
    row_var, base_var = statistics.variance(row) / len(row), statistics.variance(base) / len(base)
    variance = row_var + base_var
    df = variance**2 / (row_var**2 / (len(row) - 1) + base_var**2 / (len(base) - 1)) if variance else None
    return Difference(delta, len(row), len(base), math.sqrt(variance), df)


def mean_interval(scores: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """The mean of seeds' ``scores`` and its t interval, mean -+ t(n - 1) * s / sqrt(n), as (mean, low, high); None
    with fewer than ``MIN_SEEDS`` seeds."""
    if len(scores) < MIN_SEEDS:
        return None
    mean = statistics.mean(scores)
    half = t_quantile(0.5 + confidence / 2, len(scores) - 1) * statistics.stdev(scores) / math.sqrt(len(scores))
    return mean, mean - half, mean + half


def paper_direction(paper_delta: float, metric: str) -> int:
    """+1 or -1, the sign of the paper's difference, or 0 where it is within the paper's "no change"."""
    if abs(round(paper_delta, 9)) <= NO_CHANGE[metric]:  # rounded: 26.0 - 25.8 is 0.2000000000000028
        return 0
    return 1 if paper_delta > 0 else -1


def verdict(diff: Difference, paper_delta: float | None, metric: str) -> str:
    """The cell's word (the module's docstring); ``paper_delta`` is the paper's row less its base, None where the
    paper has no such row."""
    if min(diff.row_seeds, diff.base_seeds) < MIN_SEEDS:
        return TOO_FEW
    if not diff.excludes_zero():
        return NONE_FOUND
    ours = 1 if diff.delta > 0 else -1
    if paper_delta is None:
        return HIGHER if ours > 0 else LOWER
    paper = paper_direction(paper_delta, metric)
    if not paper:
        return DIFFERS
    return HOLDS if ours == paper else OPPOSITE


def verdict_rate(effect: float = 0.0, seeds: int = MIN_SEEDS, trials: int = 4000, seed: int = 0) -> float:
    """The share of simulated cells whose interval excludes zero: a base and a row of ``seeds`` seeds each, normal
    noise of standard deviation 1, the row shifted by ``effect``. With no effect, each of them is a false verdict."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        base = [rng.gauss(0.0, 1.0) for _ in range(seeds)]
        row = [rng.gauss(effect, 1.0) for _ in range(seeds)]
        hits += difference(row, base).excludes_zero()
    return hits / trials
