"""The verdict rule of Table 3 (experiments.verdict) on synthetic rows: Student's t against its table, Welch's
interval on a worked example, each word of the rule, the paper's "no change" band, and how often the rule speaks
when there is no effect and when there is one."""

import random

import pytest

from experiments.verdict import (
    NONE_FOUND,
    TOO_FEW,
    difference,
    mean_interval,
    paper_direction,
    t_quantile,
    t_tail,
    verdict,
    verdict_rate,
)


@pytest.mark.parametrize(
    ("df", "quantile"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (10, 2.2281), (30, 2.0423)]
)
def test_student_t_quantiles_match_the_table(df, quantile):
    assert t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-4)
    assert 2 * t_tail(t_quantile(0.975, df), df) == pytest.approx(0.05, abs=1e-12)
    assert t_quantile(0.975, df + 0.5) < t_quantile(0.975, df)  # fractional Welch df: between the table's rows


def test_welch_interval_of_a_worked_example():
    """Row 1, 2, 3 against base 0, 1, 2: difference 1, standard error sqrt(1/3 + 1/3), df 4, t 2.7764."""
    diff = difference([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    assert diff.delta == 1.0 and diff.df == pytest.approx(4.0) and diff.standard_error == pytest.approx(0.8165, 1e-4)
    assert diff.interval() == pytest.approx((-1.2670, 3.2670), abs=1e-4)
    assert not diff.excludes_zero()


def test_the_interval_of_a_mean_of_seeds():
    """40, 41, 42: mean 41, s = 1, t(0.975, 2) = 4.3027: 41 -+ 4.3027 / sqrt(3) = 41 -+ 2.4842."""
    assert mean_interval([40.0, 41.0, 42.0]) == pytest.approx((41.0, 38.5158, 43.4842), abs=1e-4)
    assert mean_interval([40.0, 41.0]) is None  # too few seeds


def test_excluding_zero_is_the_interval_leaving_zero_out():
    rng = random.Random(3)
    for _ in range(300):
        row = [rng.gauss(rng.uniform(-3, 3), rng.uniform(0.2, 2)) for _ in range(rng.randint(2, 5))]
        base = [rng.gauss(0, 1) for _ in range(rng.randint(2, 5))]
        diff = difference(row, base)
        low, high = diff.interval()
        assert diff.excludes_zero() == (low > 0 or high < 0)


def test_the_words_of_the_rule_on_synthetic_rows():
    base = [16.41, 16.44, 15.66]  # the base's three seeds of PPL at 1,000 steps
    worse, better, same = [18.2, 18.9, 18.5], [14.1, 14.6, 14.3], [16.3, 16.0, 16.5]
    assert verdict(difference(worse, base), paper_delta=+0.37, metric="ppl") == "holds"
    assert verdict(difference(better, base), paper_delta=+0.37, metric="ppl") == "opposite"
    assert verdict(difference(same, base), paper_delta=+0.37, metric="ppl") == NONE_FOUND
    assert verdict(difference(worse, base), paper_delta=+0.03, metric="ppl") == "differs (paper: no change)"
    assert verdict(difference(same, base), paper_delta=0.0, metric="ppl") == NONE_FOUND
    assert verdict(difference(better, base), paper_delta=None, metric="ppl") == "lower"  # no paper row
    assert verdict(difference(worse, base), paper_delta=None, metric="ppl") == "higher"


def test_fewer_than_three_seeds_give_no_word_however_large_the_difference():
    base = [16.41, 16.44, 15.66]
    one = difference([60.09], base)  # N = 6 at 1,000 steps: far outside, and still one seed
    assert one.delta == pytest.approx(43.92) and one.interval() is None
    assert verdict(one, paper_delta=-0.5, metric="ppl") == TOO_FEW
    two = difference([60.09, 58.0], base)
    assert two.interval() is not None and verdict(two, paper_delta=-0.5, metric="ppl") == TOO_FEW
    assert verdict(difference([60.09, 58.0, 59.1], base[:2]), paper_delta=-0.5, metric="ppl") == TOO_FEW


def test_the_papers_no_change_band():
    assert paper_direction(4.95 - 4.92, "ppl") == 0  # P_drop 0.2: +0.03 is no change, not a direction
    assert paper_direction(4.92 - 4.92, "ppl") == paper_direction(25.7 - 25.8, "bleu") == 0  # (E): "nearly identical"
    assert paper_direction(26.0 - 25.8, "bleu") == 0  # d_model 1024: +0.2, at the band's edge
    assert paper_direction(4.88 - 4.92, "ppl") == 0  # N = 8
    assert paper_direction(5.00 - 4.92, "ppl") == +1 and paper_direction(25.5 - 25.8, "bleu") == -1


def test_how_often_the_rule_speaks():
    """No effect: 2.9% of 4,000 simulated cells get a (false) verdict with three seeds a side, under the 5% the
    interval promises (Welch's df is conservative at so few seeds); five seeds bring it to 5%. A real difference of 2
    or 3 standard deviations of the seeds is found 38% or 68% of the time."""
    assert verdict_rate() == pytest.approx(0.029, abs=0.001)
    assert verdict_rate(seeds=5) == pytest.approx(0.051, abs=0.001)
    assert verdict_rate(effect=2.0) == pytest.approx(0.375, abs=0.001)
    assert verdict_rate(effect=3.0) == pytest.approx(0.676, abs=0.001)
