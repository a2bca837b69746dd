"""The learning rate for each size (experiments/lr_walk.py): the walk's next point and its stop, the rows that join
a size's walk, and docs/table3.md's table of the walks."""

import pytest
from test_table3 import line, record

from experiments import lr_walk, table3, table3_page
from experiments.lr_walk import Walk


def walk(**points: float) -> Walk:
    """A walk with one seed at each point, named x1=16.0, x0_5=14.7 ..."""
    return Walk("base", {float(name[1:].replace("_", ".")): [ppl] for name, ppl in points.items()})


def seeds(
    name: str, ppls: tuple[float, ...], bleus: tuple[float, ...], steps: int = 1000, **paper: object
) -> list[dict]:
    """Row ``name``'s runs at ``steps``, one a seed (seeds 1, 2, ...: a PPL and a BLEU each), carrying the paper's row
    ``paper`` where given."""
    runs = [
        record(
            name,
            seed,
            ppl,
            bleu,
            steps=steps,
            group="schedule" if name.startswith("schedule") else None,
            curve=((100, 10 * ppl), (200, 2 * ppl)),
        )
        for seed, (ppl, bleu) in enumerate(zip(ppls, bleus, strict=True), start=1)
    ]
    return [{**run, "paper": paper} if paper else run for run in runs]


@pytest.mark.parametrize(
    ("points", "upcoming", "chosen"),
    [
        ({}, 1.0, None),
        ({"x1": 16.0}, 0.5, None),
        ({"x1": 16.0, "x0_5": 14.7}, 0.25, None),  # lower: halve again
        ({"x1": 16.0, "x0_5": 14.7, "x0_25": 15.1}, None, 0.5),  # higher at x1/4: stopped, x1/2 is the lowest
        ({"x1": 16.0, "x0_5": 14.7, "x0_25": 14.0, "x0_125": 13.9}, None, 0.125),  # stopped at the bound
        ({"x1": 13.9, "x0_5": 14.2}, 2.0, None),  # not lower at x1/2: double from x1
        ({"x1": 13.9, "x0_5": 14.2, "x2": 13.0, "x4": 12.9}, None, 4.0),  # the upper bound
        ({"x1": 13.9, "x0_5": 13.9, "x2": 14.5}, None, 1.0),  # a tie is not lower
    ],
)
def test_the_walk_halves_while_perplexity_falls_or_doubles_and_stops_at_its_bounds(points, upcoming, chosen):
    assert walk(**points).next_scale() == upcoming
    assert walk(**points).chosen() == chosen


def test_a_point_is_the_mean_of_its_seeds():
    one = Walk("C-layers-4", {1.0: [28.4, 34.2, 24.1], 0.5: [17.7, 17.7, 18.2]})
    assert one.points() == pytest.approx({1.0: 28.9, 0.5: 17.8667}, abs=1e-4)
    assert one.next_scale() == 0.25


def test_a_row_joins_the_walk_of_the_size_it_has_but_for_the_scale():
    rows = {
        "base": ((), [16.0]),
        "C-layers-4": (("--encoder_layers", "4", "--decoder_layers", "4"), [28.9]),
        "schedule-layers-4-lr-half": (("--decoder_layers", "4", "--encoder_layers", "4", "--lr_scale", "0.5"), [17.9]),
        "schedule-lr-half": (("--lr_scale", "0.5"), [14.7]),
        "A-heads-1": (("--num_attention_heads", "1"), [17.5]),  # a size not walked: in no walk
    }
    found = lr_walk.walks(rows, ["base", "C-layers-4"])
    assert list(found) == ["base", "C-layers-4"]
    assert found["C-layers-4"].rows == {1.0: "C-layers-4", 0.5: "schedule-layers-4-lr-half"}
    assert found["base"].points() == {1.0: 16.0, 0.5: 14.7}
    assert lr_walk.size_and_scale(["--lr_scale", "0.25", "--d_model", "512"]) == (("--d_model", "512"), 0.25)
    assert [lr_walk.scale_text(s) for s in (4.0, 1.0, 0.5, 0.125)] == ["x4", "x1", "x1/2", "x1/8"]


def test_the_page_gives_each_size_its_points_its_next_row_and_its_rate():
    runs = [record("base", seed, ppl, 22.0) for seed, ppl in ((1, 16.3), (2, 15.3), (3, 16.4))]
    runs += [record("schedule-lr-half", 1, 14.7, 25.0, group="schedule")]
    runs += [record("C-layers-4", seed, 28.9, 10.0) for seed in (1, 2, 3)]
    runs += [
        record(name, 1, ppl, 20.0, group="schedule")
        for name, ppl in (("schedule-layers-4-lr-half", 17.9), ("schedule-layers-4-lr-quarter", 18.5))
    ]
    runs += [record("schedule-layers-6-lr-half", 1, 20.0, 18.0, group="schedule", code="older")]  # other code
    page = table3.report(runs)
    section = "## The learning rate for each size"
    assert line(page, "| size |", section) == "| size | x1 | x1/2 | x1/4 | next point | the size's rate |"
    assert (
        line(page, "| base |", section)
        == "| base | 16.00 (3) | 14.70 (1) |  | x1/4: row schedule-lr-quarter | not yet |"
    )
    assert (
        line(page, "| C-layers-4 |", section) == "| C-layers-4 | 28.90 (3) | 17.90 (1) | 18.50 (1) | stopped | x1/2 |"
    )
    assert line(page, "| C-layers-6 |", section).endswith("|  |  |  | x1: row C-layers-6 | not yet |")


def test_each_size_at_its_rate_is_compared_with_the_base_at_its_rate_in_the_direction_of_the_papers_row(tmp_path):
    runs = [
        *seeds("base", (16.3, 15.3, 16.4), (22.0, 22.0, 22.0)),
        *seeds("schedule-lr-half", (14.5, 14.7, 14.9), (25.0, 24.6, 25.2)),
        *seeds("C-layers-4", (28.9, 28.9, 28.9), (10.0, 10.0, 10.0), change="N = 8", ppl=4.88, bleu=25.5),
        *seeds("schedule-layers-4-lr-half", (17.7, 17.9, 18.2), (20.6, 21.0, 20.9)),
        *seeds("C-layers-6", (55.8, 55.8, 55.8), (3.0, 3.0, 3.0)),
    ]
    section = "### Each size at its rate against the base at its rate"
    waiting = [*runs, *seeds("schedule-lr-quarter", (14.0,), (25.0,))]  # lower at x1/4: the base's walk goes on
    assert line(table3.report(waiting), "Once the base's walk", section) == "Once the base's walk has stopped."

    stopped = [
        *runs,
        *seeds("schedule-lr-quarter", (21.0,), (18.0,)),
        *seeds("schedule-layers-4-lr-quarter", (22.1,), (17.0,)),
    ]
    page = table3.report(stopped)
    # 17.93 - 14.70 and 20.83 - 24.93 by Welch's t (df 3.8 and 3.5, by hand): N = 8's PPL is the paper's base's
    # within 0.1 (no change), its BLEU lower
    assert line(page, "| C-layers-4 |", section) == (
        "| C-layers-4 | x1/2: schedule-layers-4-lr-half (3) | x1/2: schedule-lr-half (3) | N = 8 | "
        "+3.23 [+2.71, +3.76]: differs (paper: no change) | -4.10 [-4.73, -3.47]: holds | "
        "differs (paper: no change), differs (paper: no change): **the size** | holds, holds: **no disagreement** |"
    )  # at x1 too its PPL differs and its BLEU holds: the PPL's disagreement is the size's
    assert "| C-layers-6 |" not in page.split(section)[1].split("##")[0]  # its walk has not stopped: no cell yet
    figure = "![each size at its rate, 1,000 steps](table3-curves/1000-steps-own-rates.png)"
    assert line(page, "![each size", section) == figure
    assert "![each size" not in table3.report(waiting)  # nothing to draw before the base's walk stops
    sizes = table3.size_walks(stopped)
    curves = table3_page.figure_record(sizes.curve_runs())
    assert {name: curve["validation_ppl"] for name, curve in curves.items()} == {
        "base at x1/2": [[100, 147.0], [200, 29.4]],  # the mean over schedule-lr-half's seeds
        "C-layers-4 at x1/2": [[100, 179.333], [200, 35.867]],
    }
    written = table3_page.plot_curves([table3_page.normalized(r) for r in stopped], tmp_path / "table3.md", sizes)
    assert tmp_path / "table3-curves/1000-steps-own-rates.png" in written
    assert table3_page.recorded_in(tmp_path / "table3-curves/1000-steps-own-rates.png") == curves


@pytest.mark.parametrize(
    ("at_preset", "at_rate", "owner"),
    [
        ("opposite", "opposite", "the size"),
        ("differs (paper: no change)", "opposite", "the size"),
        ("opposite", "holds", "the rate"),
        ("differs (paper: no change)", "no change found", "the rate"),
        ("holds", "differs (paper: no change)", "only at its rate"),
        ("no change found", "holds", "no disagreement"),
        ("opposite", "too few seeds", "undecided"),
        ("base at other code", "holds", "undecided"),
        ("higher", "higher", "no paper row"),
    ],
)
def test_a_disagreement_kept_at_the_sizes_own_rate_is_the_sizes_and_one_gone_there_the_rates(at_preset, at_rate, owner):
    assert table3_page.belongs_to(at_preset, at_rate) == owner


def test_at_the_longer_budget_each_size_is_read_at_the_rate_its_walk_chose_at_the_sweeps():
    """The longer budget has its own section, at the rates the walks chose at the sweep's budget: it waits for the base
    at its rate, a size has a line once its rows at x1 and at its rate have run for 3,000 steps, and its words there
    stand beside its row's at x1 at 3,000; its curves are drawn as the sweep's are."""
    n_8 = {"change": "N = 8", "ppl": 4.88, "bleu": 25.5}
    walked = [
        *seeds("base", (16.3, 15.3, 16.4), (22.0, 22.0, 22.0)),
        *seeds("schedule-lr-half", (14.5, 14.7, 14.9), (25.0, 24.6, 25.2)),
        *seeds("schedule-lr-quarter", (21.0,), (18.0,)),
        *seeds("C-layers-4", (28.9, 28.9, 28.9), (10.0, 10.0, 10.0), **n_8),
        *seeds("schedule-layers-4-lr-half", (17.7, 17.9, 18.2), (20.6, 21.0, 20.9)),
        *seeds("schedule-layers-4-lr-quarter", (22.1,), (17.0,)),
        *seeds("base", (7.2, 7.0, 7.3), (34.0, 33.0, 34.5), steps=3000),
        *seeds("C-layers-4", (11.7, 9.7, 14.2), (23.0, 28.0, 17.5), steps=3000, **n_8),
    ]
    section = "### Each size at its rate against the base at its rate, 3,000 steps"
    assert line(table3.report(walked), "Once", section) == "Once the base at its rate has run for 3,000 steps."
    base_at_rate = seeds("schedule-lr-half", (6.6, 6.7, 6.8), (35.5, 36.5, 35.0), steps=3000)
    page = table3.report([*walked, *base_at_rate])
    assert line(page, "| no size", section) == "| no size at its rate at 3,000 steps yet | | | | | | | |"
    at_rate = seeds("schedule-layers-4-lr-half", (6.9, 7.1, 7.1), (34.0, 35.0, 35.5), steps=3000)
    page = table3.report([*walked, *base_at_rate, *at_rate])
    # by Welch's t, by hand: 7.033 - 6.700 = +0.33 +- 2.79 x 0.088 (df 3.9), and 34.83 - 35.67 = -0.83 +- 2.78 x 0.62
    # (df 4.0)
    assert line(page, "| C-layers-4 |", section) == (
        "| C-layers-4 | x1/2: schedule-layers-4-lr-half (3) | x1/2: schedule-lr-half (3) | N = 8 | "
        "+0.33 [+0.09, +0.58]: differs (paper: no change) | -0.83 [-2.56, +0.90]: no change found | "
        "no change found, differs (paper: no change): **only at its rate** | "
        "no change found, no change found: **no disagreement** |"
    )  # at x1 its seeds spread too widely for a word; at its rate the PPL's gap is found
    assert line(page, "![each size", section) == (
        "![each size at its rate, 3,000 steps](table3-curves/3000-steps-own-rates.png)"
    )
    found = [table3_page.normalized(r) for r in [*walked, *base_at_rate, *at_rate]]
    curves = table3_page.figure_runs(found, table3.size_walks(found))[3000, table3_page.OWN_RATES]
    assert {name: [r["seed"] for r in runs] for name, runs in curves.items()} == {
        "base at x1/2": [1, 2, 3],
        "C-layers-4 at x1/2": [1, 2, 3],
    }
