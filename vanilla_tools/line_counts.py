"""Files that go line by line together (a parallel corpus' two sides; vanilla-translate's input and its --references,
--prefix or --score file): their line counts compared, and refused in one line naming both, by count, wherever the
lines are read (counted beforehand, or as they are read where they cannot be: stdin, a gzip file)."""

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

from .cli import UsageError

First, Second = TypeVar("First"), TypeVar("Second")
_MISSING = object()


def unequal_lines(names: tuple[str, str], counts: tuple[int, int], rule: str) -> UsageError:
    """The refusal of two files, by ``names``, of ``counts`` lines, which must go together as ``rule`` says."""
    return UsageError(f"{names[0]} has {counts[0]} lines but {names[1]} has {counts[1]}: {rule}")


def check_counts(names: tuple[str, str], counts: tuple[int, int], rule: str) -> None:
    """Refused (``unequal_lines``) unless the two files have as many lines."""
    if counts[0] != counts[1]:
        raise unequal_lines(names, counts, rule)


def zip_lines(
    first: Iterable[First], second: Iterable[Second], names: tuple[str, str], rule: str
) -> Iterator[tuple[First, Second]]:
    """The lines of two files side by side, counted as they are read: where one ends first, the rest of the other is
    counted and both counts refused (``unequal_lines``) once the last pair is yielded."""
    counts = [0, 0]
    for a, b in itertools.zip_longest(first, second, fillvalue=_MISSING):
        counts[0] += a is not _MISSING
        counts[1] += b is not _MISSING
        if a is not _MISSING and b is not _MISSING:  # once one file ends, the other is only counted
            yield a, b
    check_counts(names, (counts[0], counts[1]), rule)
