"""The length penalty chosen on validation (§6.1): a best on the edge of the grid widens it (issue 101, item 3)."""

from types import SimpleNamespace

import pytest

from training.step.evaluation import choose_length_penalty, wider_length_penalty
from vanilla_tools.decoding import Decoding

GRID = [0.6, 1.0, 1.5, 2.0, 2.5]  # the multi30k preset's


class ValidationBleu:
    """A trainer whose ``predict`` scores each alpha by ``bleu(alpha)`` and keeps the alphas it decoded with."""

    def __init__(self, bleu):
        self.bleu, self.decoded = bleu, []

    def predict(self, dataset, metric_key_prefix: str, decoding: Decoding):
        self.decoded.append(decoding.length_penalty)
        return SimpleNamespace(metrics={f"{metric_key_prefix}_bleu": self.bleu(decoding.length_penalty)})


def choose(bleu) -> tuple[float, dict, list[float]]:
    trainer = ValidationBleu(bleu)
    decoding, prediction, search = choose_length_penalty(trainer, None, Decoding.paper(4, 0.6), GRID)
    assert prediction.metrics["validation_bleu"] == bleu(decoding.length_penalty)
    return decoding.length_penalty, search, trainer.decoded


def test_a_best_on_the_top_edge_widens_the_grid_by_its_last_step_until_the_best_is_inside():
    """The fresh-clone run's case: validation still rising at 2.5, the grid's top. The grid goes on by 0.5 until
    the best has a worse alpha on each side: here the peak at 3.5, found by 3.0, 3.5 and 4.0."""
    alpha, search, decoded = choose(lambda alpha: 41.0 - (alpha - 3.5) ** 2)
    assert alpha == 3.5
    assert decoded == [*GRID, 3.0, 3.5, 4.0]
    assert list(search) == ["0.6", "1.0", "1.5", "2.0", "2.5", "3.0", "3.5", "4.0"]


def test_a_best_inside_the_grid_decodes_the_grid_alone():
    alpha, search, decoded = choose(lambda alpha: 40.0 - abs(alpha - 1.5))
    assert alpha == 1.5 and decoded == GRID and list(search) == ["0.6", "1.0", "1.5", "2.0", "2.5"]


def test_a_best_on_the_bottom_edge_widens_down_to_zero_at_most():
    """Falling validation BLEU: 0.6 - 0.4 = 0.2 is tried, then 0.2 - 0.4 would be negative: 0.2 is kept."""
    alpha, _, decoded = choose(lambda alpha: 40.0 - alpha)
    assert alpha == 0.2 and decoded == [*GRID, 0.2]


def test_the_widened_grid_is_at_most_twice_the_grid():
    """Validation rising without end: five more alphas (twice the grid's five decodes), the last one chosen."""
    alpha, _, decoded = choose(lambda alpha: alpha)
    assert decoded == [*GRID, 3.0, 3.5, 4.0, 4.5, 5.0] and alpha == 5.0


@pytest.mark.parametrize(
    ("bleu", "wider"),
    [
        ({1.0: 40.0, 2.0: 41.0}, 3.0),  # best on top: one step up
        ({1.0: 41.0, 2.0: 40.0}, 0.0),  # best at the bottom: one step down, to 0 at most
        ({1.0: 40.0, 2.0: 41.0, 3.0: 41.0}, None),  # a tie: the first tried, 2.0, is inside
        ({1.0: 40.0}, None),  # a single alpha has no step
    ],
)
def test_wider_length_penalty(bleu, wider):
    assert wider_length_penalty(bleu, sorted(bleu) if len(bleu) > 1 else [1.0]) == wider
