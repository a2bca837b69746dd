"""vanilla_tools.line_counts: the one check that files going line by line together have as many lines, for
vanilla-translate's side files and a parallel corpus alike, counted beforehand or as the lines are read."""

import pytest

from vanilla_tools.cli import UsageError
from vanilla_tools.line_counts import check_counts, zip_lines

NAMES, RULE = ("a.en", "a.de"), "one line each"


def test_equal_counts_pass_and_unequal_ones_are_named_by_count():
    check_counts(NAMES, (3, 3), RULE)
    with pytest.raises(UsageError) as refused:
        check_counts(NAMES, (3, 2), RULE)
    assert str(refused.value) == "a.en has 3 lines but a.de has 2: one line each"


def test_zipped_lines_come_in_pairs_in_order():
    assert list(zip_lines(["a", "b"], [b"1", b"2"], NAMES, RULE)) == [("a", b"1"), ("b", b"2")]


@pytest.mark.parametrize(("first", "second", "counts"), [(4, 1, (4, 1)), (1, 3, (1, 3)), (0, 2, (0, 2))])
def test_a_file_that_ends_first_is_refused_with_both_whole_counts_after_the_pairs(first, second, counts):
    """The rest of the longer file is counted (stdin or a gzip file cannot be counted beforehand)."""
    pairs = zip_lines(iter(["x"] * first), iter(["y"] * second), NAMES, RULE)
    taken = [next(pairs) for _ in range(min(first, second))]
    assert len(taken) == min(first, second)
    with pytest.raises(UsageError) as refused:
        next(pairs)
    assert str(refused.value) == f"a.en has {counts[0]} lines but a.de has {counts[1]}: one line each"


def test_empty_line_is_a_line():
    assert list(zip_lines(["", ""], ["", ""], NAMES, RULE)) == [("", ""), ("", "")]
