"""The peak learning rate for each model size, by a walk over the §5.3 schedule's scale (``--lr_scale``), the rule
stated (2026-11-28) before its runs.

Table 3's (C) rows trained at the preset's peak whatever their size, and the deeper and wider ones collapsed (N = 6:
validation BLEU 3.41 at 1,000 steps) where N = 4 at half the rate trained smoothly: post-LN tolerates a lower peak
the deeper it is (Xiong et al. 2020; Liu et al. 2020). So each size gets its own rate, found the same way for every
size, and its rows run again at that rate: whether a disagreement with the paper belongs to the size or to the rate.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean

LOWEST, HIGHEST = 1 / 8, 4.0  # the walk's bounds, as multiples of the preset's rate


def scale_text(scale: float) -> str:
    """x2, x1, x1/2, x1/4 ..."""
    return f"x{scale:g}" if scale >= 1 else f"x1/{1 / scale:g}"


RULE = (
    "the scale of the schedule (`--lr_scale`) walks in powers of two from the preset's x1, each point one seed "
    "(seed 1) trained for the sweep's first budget and read on validation perplexity (the mean over a point's "
    "recorded seeds): from x1 to x1/2, halving again while perplexity falls, or, where x1/2 is not lower than x1, "
    f"doubling from x1 while it falls, between {scale_text(LOWEST)} and {scale_text(HIGHEST)}. The size's rate is "
    "the walk's point of lowest perplexity once the walk has stopped; its rows then run with three seeds at that "
    "rate."
)
SCALE_FLAG = "--lr_scale"


def size_and_scale(flags: Iterable[str]) -> tuple[tuple[str, ...], float]:
    """A row's vanilla-train flags split into its size (every other flag, as sorted (flag, value) pairs flattened)
    and its learning-rate scale (1 where the row does not set one)."""
    pairs = dict(zip(*[iter(flags)] * 2, strict=True))
    scale = float(pairs.pop(SCALE_FLAG, 1.0))
    return tuple(part for pair in sorted(pairs.items()) for part in pair), scale


@dataclass
class Walk:
    """One size's points: the validation perplexities of its seeds at each scale, and the row that ran each."""

    size: str  # the row that is the size at the preset's rate (base, a (C) row)
    perplexities: dict[float, list[float]] = field(default_factory=dict)
    rows: dict[float, str] = field(default_factory=dict)

    def points(self) -> dict[float, float]:
        return {scale: mean(values) for scale, values in self.perplexities.items() if values}

    def next_scale(self) -> float | None:
        """The point the rule trains next; None once the walk has stopped."""
        points = self.points()
        for start in (1.0, 0.5):
            if start not in points:
                return start
        step = 0.5 if points[0.5] < points[1.0] else 2.0
        scale = 0.5 if step < 1 else 1.0
        while LOWEST <= scale * step <= HIGHEST:
            if scale * step not in points:
                return scale * step
            if points[scale * step] >= points[scale]:
                return None
            scale *= step
        return None

    def chosen(self) -> float | None:
        """The size's rate (a scale), once the walk has stopped; None before."""
        if self.next_scale() is not None:
            return None
        points = self.points()
        return min(points, key=points.get)


def walks(rows: dict[str, tuple[tuple[str, ...], list[float]]], sizes: Iterable[str]) -> dict[str, Walk]:
    """The walk of each row in ``sizes`` (the rows that are sizes at the preset's rate), from ``rows``: name ->
    (vanilla-train flags, validation perplexity of each recorded seed). A row joins the walk of the size whose flags
    it has but for ``--lr_scale``."""
    found = {size_and_scale(rows[name][0])[0]: Walk(name) for name in sizes if name in rows}
    for name, (flags, perplexities) in rows.items():
        size, scale = size_and_scale(flags)
        if size in found:
            found[size].perplexities[scale] = perplexities
            found[size].rows[scale] = name
    return {walk.size: walk for walk in found.values()}
