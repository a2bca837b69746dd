"""docs/table3.md from the records of experiments.table3: each row's seeds against the base's, cell by cell with the
rule of experiments.verdict (stated at the top of the page), the learning curves of each group against the base,
and whether a disagreement with the paper is a slower start or stays at the end of a longer budget."""

import json
import statistics
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from vanilla_tools.cli import pyplot

from . import comparable, lr_walk
from .comparable import BF16, CRITERIA, FP32, code_key, groups, precisions_agree, why_not
from .verdict import (
    DISAGREES,
    HIGHER,
    HOLDS,
    LOWER,
    MIN_SEEDS,
    NO_CHANGE,
    NONE_FOUND,
    TOO_FEW,
    Difference,
    difference,
    paper_direction,
    verdict,
    verdict_rate,
)

PAPER_BASE = {"ppl": 4.92, "bleu": 25.8}
METRICS = {"ppl": "validation_ppl", "bleu": "validation_bleu"}
# a cell's word where experiments/comparable.py keeps the row's runs apart from the base's
APART = {criterion: f"base at other {criterion}" for criterion in CRITERIA}
OTHER_CODE, OTHER_PRECISION = APART["code"], APART["precision"]
CURVES = "table3-curves"  # beside the page: one plot per budget and group
OWN_RATES = "own-rates"  # the plot of each size at its rate
FIGURE_RECORD = "Description"  # the PNG text key a figure's record is saved under


def normalized(record: dict) -> dict:
    """A record of either sweep in today's terms: the first named its base runs base-seed1..3 and ran every other row
    at the preset's seed, 1."""
    flags = record.get("flags", [])
    seed = record.get("seed") or (int(flags[flags.index("--seed") + 1]) if "--seed" in flags else 1)
    base = record["group"] == "base"
    return {
        **record,
        "row": "base" if base else record["row"],
        "change": "the preset" if base else record["change"],
        "seed": seed,
        "code_key": code_key(record["run"]),
    }


def newest(runs: list[dict]) -> str:
    return max(run.get("date", "") for run in runs)


def base_group(base: list[dict], others: list[dict]) -> list[dict]:
    """Of the base's runs at one budget, those that may be compared with each other (experiments/comparable.py) and
    with the most of the other rows' runs (the seeds, then the newest, of a tie): the base every cell reads."""

    def reach(group: list[dict]) -> tuple:
        return sum(not why_not(group[0]["run"], r["run"]) for r in others), len(group), newest(group)

    return max(groups(base), key=reach)


def like(runs: list[dict], reference: dict) -> list[dict]:
    """A row's runs that may be compared with ``reference`` (a base run), else its largest comparable group."""
    same = [r for r in runs if not why_not(reference["run"], r["run"])]
    return same or max(groups(runs), key=lambda group: (len(group), newest(group)))


@dataclass
class Comparison:
    """One row against the base at one budget: the runs compared, and each metric's difference and word."""

    runs: list[dict]
    base: list[dict]
    differences: dict[str, Difference]
    words: dict[str, str]


def compare(runs: list[dict], base: list[dict], paper: dict | None = None) -> Comparison:
    """``runs`` against ``base``, each metric's word in the direction of ``paper`` (the paper's row: the runs' own
    unless given)."""
    paper = (runs[0].get("paper") if paper is None else paper) or {}
    differences, words = {}, {}
    for metric, key in METRICS.items():
        diff = difference([r[key] for r in runs], [r[key] for r in base])
        paper_delta = paper[metric] - PAPER_BASE[metric] if paper.get(metric) is not None else None
        word = verdict(diff, paper_delta, metric)
        apart = why_not(base[0]["run"], runs[0]["run"])
        if word != TOO_FEW and apart:
            word = APART[apart[0].criterion]
        differences[metric], words[metric] = diff, word
    return Comparison(runs, base, differences, words)


def one_per_seed(runs: list[dict]) -> list[dict]:
    """A row's runs with each seed once at each code and kind of device: seeds are the replicates, and a seed trained
    in both precisions (the base's, for the precision check) is one replicate twice, not two. Its first record counts
    (by date): the run the row was recorded with before the precision was checked."""
    first: dict[tuple, dict] = {}

    def replicate(run: dict) -> tuple:  # a seed on another kind of device is another replicate, kept apart
        return run["code_key"], run["run"]["device"]["type"], run["seed"]

    for run in sorted(runs, key=lambda run: run.get("date", "")):
        first.setdefault(replicate(run), run)
    return [run for run in runs if first[replicate(run)] is run]


def budget(records: list[dict], steps: int) -> tuple[list[dict], dict[str, Comparison]]:
    """The base's runs at ``steps`` (at the code of most base seeds) and each other row's comparison with them."""
    rows = defaultdict(list)
    for record in records:
        if record["steps"] == steps:
            rows[record["row"]].append(record)
    rows = {name: one_per_seed(runs) for name, runs in rows.items()}
    if "base" not in rows:
        return [], {}
    base = base_group(rows.pop("base"), [r for runs in rows.values() for r in runs])
    return base, {name: compare(like(runs, base[0]), base) for name, runs in rows.items()}


def longer_rows(records: list[dict], steps: int, rows: dict[str, str]) -> list[str]:
    """What the longer budget runs (issue 41), in the order of ``rows`` (name: group): the base, the (C) rows, and
    the rows with a cell that disagrees with the paper (*opposite* or *differs*) at ``steps``."""
    _, comparisons = budget(records, steps)
    disagree = {name for name, c in comparisons.items() if set(DISAGREES) & set(c.words.values())}
    return [name for name, group in rows.items() if group in ("base", "(C)") or name in disagree]


def mean_and_range(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def commits(runs: list[dict]) -> str:
    return ", ".join(sorted({(r["run"]["code"].get("commit") or "?")[:7] for r in runs}))


def paper_cell(paper: dict, metric: str) -> str:
    """The paper's value, and for a variation its difference from the paper's base (or its "no change")."""
    if paper.get(metric) is None:
        return "—"
    if paper.get("change") == "base":
        return str(paper[metric])
    delta = paper[metric] - PAPER_BASE[metric]
    return f"{paper[metric]} ({delta:+.2f}{', no change' if not paper_direction(delta, metric) else ''})"


def difference_text(diff: Difference) -> str:
    """The difference, and its interval where each side has two seeds."""
    interval = diff.interval()
    return f"{diff.delta:+.2f}" + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")


def verdict_cell(diff: Difference, word: str) -> str:
    return f"{difference_text(diff)}: {word}"


def row_cells(runs: list[dict], name: str) -> list[str]:
    """A row's own columns: name, change, parameters, seeds, commits, PPL and BLEU over the seeds, the paper's row."""
    first, paper = runs[0], runs[0].get("paper") or {}
    label = name if first["group"] == "base" else f"{first['group']} {name}"
    seeds = ", ".join(str(seed) for seed in sorted(r["seed"] for r in runs))
    return [
        label,
        first["change"],
        f"{first['parameters'] / 1e6:.1f}M",
        seeds,
        commits(runs),
        *(mean_and_range([r[key] for r in runs]) for key in METRICS.values()),
        paper.get("change", "—"),
        paper_cell(paper, "ppl"),
        paper_cell(paper, "bleu"),
    ]


def mean_curve(runs: list[dict]) -> list[tuple[int, float]]:
    """Validation PPL against steps, the mean over the runs, at the steps every one of them recorded."""
    curves = [{point["step"]: point["validation_ppl"] for point in r.get("curve", [])} for r in runs]
    steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    return [(step, statistics.mean(c[step] for c in curves)) for step in steps]


def curve_file(steps: int, group: str) -> str:
    return f"{CURVES}/{steps}-steps-{group.strip('()')}.png"


def curve_groups(base: list[dict], comparisons: dict[str, Comparison]) -> dict[str, dict[str, list[dict]]]:
    """Per group with curves: the runs of the base and of each row whose mean curve it plots (issue 41: base against
    row, group by group)."""
    if not mean_curve(base):
        return {}
    by_group = defaultdict(dict)
    for name, comparison in comparisons.items():
        if mean_curve(comparison.runs):
            by_group[comparison.runs[0]["group"]][name] = comparison.runs
    return {group: {"base": base, **rows} for group, rows in sorted(by_group.items())}


def figure_runs(records: list[dict], sizes: "SizeWalks | None" = None) -> dict[tuple[int, str], dict[str, list]]:
    """Each figure, by budget and group, and per curve the runs it averages: the base against each of the group's
    rows; with ``sizes`` (the walks at one budget), each size at its rate against the base at its rate, at every
    budget."""
    figures = {
        (steps, group): curves
        for steps in sorted({r["steps"] for r in records})
        for group, curves in curve_groups(*budget(records, steps)).items()
    }
    for steps in sorted({r["steps"] for r in records}) if sizes is not None else ():
        if curves := sizes.at(records, steps).curve_runs():
            figures[steps, OWN_RATES] = curves
    return figures


def source(run: dict) -> str:
    """A run as its record names it: row, seed, commit, precision and device (the record holds the rest)."""
    code, precision = run["run"]["code"], run["run"]["precision"] or "precision not recorded"
    return (
        f"{run['row']} seed {run['seed']}: {(code.get('commit') or '?')[:7]}, {precision}, "
        f"{run['run']['device']['name']}"
    )


def figure_record(curves: dict[str, list[dict]]) -> dict:
    """What a figure draws and from which runs: per curve, the runs' sources and the mean curve (validation PPL by
    step). The figure carries it (its PNG's Description), so that a figure can be held to the records it came from."""
    return {
        name: {"runs": [source(r) for r in runs], "validation_ppl": [[s, round(p, 3)] for s, p in mean_curve(runs)]}
        for name, runs in curves.items()
    }


def recorded_in(path: Path) -> dict:
    """The figure record a plot was saved with (``figure_record``); {} for a PNG without one."""
    from PIL import Image  # matplotlib's own dependency, so there wherever a figure could be drawn

    with Image.open(path) as image:
        return json.loads(image.text.get(FIGURE_RECORD, "{}"))


def plot_curves(records: list[dict], folder: Path, sizes: "SizeWalks | None" = None) -> list[Path]:
    """The figures of ``figure_runs`` beside ``folder``'s page: validation PPL against steps, each curve the mean over
    its runs, each figure saved with its figure record."""
    plt = pyplot("python -m experiments.table3")
    written = []
    for (steps, group), curves in figure_runs(records, sizes).items():
        drawn = figure_record(curves)
        figure, axis = plt.subplots(figsize=(6, 4))
        for name, curve in drawn.items():
            style = {"color": "black", "linewidth": 2.5} if name.startswith("base") else {}
            axis.plot(*zip(*curve["validation_ppl"], strict=True), label=name, **style)
        axis.set(
            yscale="log",
            xlabel="step",
            ylabel="validation PPL (mean over seeds)",
            title=f"Table 3 {'sizes, each at its rate' if group == OWN_RATES else group} on Multi30k, {steps:,} steps",
        )
        axis.legend()
        path = folder.parent / curve_file(steps, group)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=100, bbox_inches="tight", metadata={FIGURE_RECORD: json.dumps(drawn)})
        plt.close(figure)
        written.append(path)
    return written


def paragraph(text: str, bullet: bool = False) -> list[str]:
    """``text`` wrapped to the page's width (a list item's lines indented under its dash)."""
    return textwrap.wrap(text, 115, initial_indent="- " if bullet else "", subsequent_indent="  " if bullet else "")


def rule(cells: int) -> list[str]:
    """The rule, as the page states it, with its rates measured on synthetic rows."""
    null, two, three = verdict_rate(), verdict_rate(effect=2.0), verdict_rate(effect=3.0)
    items = [
        f"A word needs at least {MIN_SEEDS} seeds of the row and {MIN_SEEDS} of the base whose runs may be compared "
        "(`experiments/comparable.py`, over each record's run record): the same code (the git trees of the installed "
        "packages and `data/`, `code_tree`, which commits of records or docs alone keep; the first sweep's records, "
        "made before it was recorded, count by commit), the same budget in steps, the same kind of device, and the "
        "same precision"
        + (
            f" (bf16 autocast and fp32 train alike: {comparable.PRECISION_EVIDENCE})"
            if comparable.PRECISION_EVIDENCE
            else " (bf16 autocast and fp32 are not yet measured to train alike: the section on precision below)"
        )
        + ". Otherwise the cell says "
        f"*{TOO_FEW}* or *base at other ...* (code, budget, device, precision), with the difference, and its "
        "interval where each side has two.",
        "*holds* / *opposite*: the interval excludes zero, in the paper's direction or against it. *no change found*: "
        "the interval holds zero (which does not show that there is no difference). *differs (paper: no change)*, "
        "and *higher* / *lower* on rows the paper does not have.",
        f"The paper's difference (its row less its base, {PAPER_BASE['ppl']} PPL / {PAPER_BASE['bleu']} BLEU) is *no "
        f"change* within ±{NO_CHANGE['ppl']} PPL and ±{NO_CHANGE['bleu']} BLEU: the paper calls (E)'s 4.92 / 25.7 "
        '"nearly identical" to the base.',
        f"Tested on synthetic rows (`tests/test_experiments/test_verdict.py`): with no real difference, {null:.1%} of "
        f"4,000 simulated cells get a word with {MIN_SEEDS} seeds a side (the interval allows 5%), so about "
        f"{cells * null:.0f} of these {cells} cells may carry a word by chance; a real difference of 2 or 3 standard "
        f"deviations of the seeds gets its word {two:.0%} or {three:.0%} of the time.",
        "Perplexity is per token of our 8k BPE (the paper's per wordpiece of its 37k), so only directions compare.",
    ]
    return [
        "## The rule",
        "",
        *paragraph(
            "A cell compares a row with the base on one metric at one budget: the difference of their means "
            "over seeds (row less base) with its 95% interval by Welch's t (`experiments/verdict.py`)."
        ),
        "",
        *(line for item in items for line in paragraph(item, bullet=True)),
        "",
    ]


def counted(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def budget_section(records: list[dict], steps: int, rows: dict[str, str]) -> list[str]:
    base, comparisons = budget(records, steps)
    lines = [f"## {steps:,} steps", ""]
    if not base:
        return [*lines, "No base run recorded at this budget yet.", ""]
    runs = [r for r in records if r["steps"] == steps]
    words = Counter(word for c in comparisons.values() for word in c.words.values())
    cells = ", ".join(f"{count} *{word}*" for word, count in sorted(words.items(), key=lambda w: (-w[1], w[0])))
    precision = base[0]["run"]["precision"] or "precision not recorded"
    lines += [
        f"{counted(len(runs), 'run')} recorded, {sum(r['row_minutes'] for r in runs):.0f} minutes in all. The base: "
        f"{counted(len(base), 'seed')} at commit {commits(base)}, {precision}."
        + (f" Cells: {cells}." if cells else ""),
        "",
        "| row | change | params | seeds | commit | val PPL | val BLEU | paper's row | paper PPL | paper BLEU |"
        " PPL: row less base [95%] | BLEU: row less base [95%] |",
        "| --- | --- | ---: | --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- |",
        "| " + " | ".join([*row_cells(base, "base"), "", ""]) + " |",
    ]
    for name in sorted(comparisons, key=lambda name: list(rows).index(name) if name in rows else len(rows)):
        c = comparisons[name]
        cells = [verdict_cell(c.differences[metric], c.words[metric]) for metric in METRICS]
        lines.append("| " + " | ".join([*row_cells(c.runs, name), *cells]) + " |")
    lines += [
        "",
        "Learning curves (validation PPL every 100 steps, the mean over seeds; base in black; each figure's "
        "PNG Description names the runs it draws, by row, seed, commit, precision and device):",
        "",
    ]
    groups = curve_groups(base, comparisons)
    if not groups:
        lines.append("none yet: a group's plot needs the base's curve and a row's at this budget.")
    lines += [f"![{group}, {steps:,} steps]({curve_file(steps, group)})" for group in groups]
    return [*lines, ""]


def start_or_end(short: str | None, long: str | None) -> str:
    """Whether a disagreement with the paper at the short budget (*opposite*, or *differs* where the paper found no
    change) is gone at the long one (a slower start) or stays there (whichever side of the paper it is on: a
    shallower model still ahead is not worse at the end)."""
    if short not in DISAGREES:
        return ""
    if long in (None, TOO_FEW, *APART.values()):
        return f"undecided ({long or 'not run'} at the longer budget)"
    return "stays at the end" if long in DISAGREES else "slower to start"


def longer_section(records: list[dict], short: int, long: int, rows: dict[str, str]) -> list[str]:
    _, at_short = budget(records, short)
    base, at_long = budget(records, long)
    curve = mean_curve(base)
    late = [(s, p) for s, p in curve if s >= long - 500]
    tail = (
        f"the base's validation PPL went from {late[0][1]:.2f} at step {late[0][0]:,} to {late[-1][1]:.2f} at "
        f"step {late[-1][0]:,}"
        if len(late) > 1
        else "no base curve at the longer budget yet"
    )
    lines = [
        "## Slower to start, or stays at the end?",
        "",
        *paragraph(
            f"The paper trained every row for 100k steps; {short:,} steps measure how fast a row starts. The "
            f"(C) rows and the rows with a cell *opposite* or *differs* at {short:,} steps also run for {long:,} "
            f"(`--steps {long} --rows longer`), with the same seeds and rule: a disagreement gone there was a *slower "
            f"start*; one that *stays at the end* of that budget is not explained by the start, on whichever side of "
            f"the paper it lies ({tail})."
        ),
        "",
        f"| row | PPL at {short:,} | PPL at {long:,} | | BLEU at {short:,} | BLEU at {long:,} | |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in longer_rows(records, short, rows)[1:]:
        cells = []
        for metric in METRICS:
            words = [at.get(name).words[metric] if name in at else None for at in (at_short, at_long)]
            cells += [words[0] or "not run", words[1] or "not run", start_or_end(*words)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def precision_section(records: list[dict]) -> list[str]:
    """The base's runs in fp32 against those in bf16 autocast at one code and budget, under the rule of
    experiments/comparable.py, stated here before its runs: whether the two precisions train alike."""
    lines = [
        "## Precision: fp32 against bf16 autocast",
        "",
        *paragraph(
            "Whether runs of either precision may be compared, by a rule stated before its runs: the base "
            "row in fp32 and in bf16 autocast, three seeds each at one code and budget; the two *agree* where, on "
            "both metrics, the 95% Welch interval of fp32 less bf16 holds zero and the difference of the means is "
            "smaller than the seeds' own spread (the larger standard deviation of the two sides). Until they agree, "
            "runs of the two precisions are not compared, and a sweep trains in fp32 on every machine."
        ),
        "",
    ]
    pairs = []
    for steps in sorted({r["steps"] for r in records}):
        base = [r for r in records if r["steps"] == steps and r["row"] == "base"]
        for group in groups(base, ignoring=("precision",)):
            sides = {p: [r for r in group if r["run"]["precision"] == p] for p in (FP32, BF16)}
            if all(sides.values()):
                pairs.append((steps, sides))
    if not pairs:
        return [*lines, "No budget has base runs of both precisions at one code yet.", ""]
    lines += [
        "| budget | commit | fp32 seeds | bf16 seeds | PPL: fp32 less bf16 [95%] | BLEU: fp32 less bf16 [95%] "
        "| agree |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    words = []
    for steps, sides in pairs:
        cells, agreed = [], []
        for key in METRICS.values():
            values = {p: [r[key] for r in runs] for p, runs in sides.items()}
            cells.append(difference_text(difference(values[FP32], values[BF16])))
            agreed.append(precisions_agree(values[FP32], values[BF16]))
        word = "too few seeds" if None in agreed else "yes" if all(agreed) else "no"
        seeds = [", ".join(str(r["seed"]) for r in sorted(sides[p], key=lambda r: r["seed"])) for p in (FP32, BF16)]
        lines.append(
            f"| {steps:,} steps | {commits(sides[FP32] + sides[BF16])} | {seeds[0]} | {seeds[1]} | "
            f"{cells[0]} | {cells[1]} | {word} |"
        )
        words.append(word)
    if comparable.PRECISION_EVIDENCE:
        after = f"Runs of either precision are compared: {comparable.PRECISION_EVIDENCE}."
    elif "yes" in words:
        after = (
            "They agree by this rule. The runners still keep the two apart until the multi30k preset at its "
            "budget has also been trained once in each precision (`experiments/comparable.py`, "
            "`PRECISION_EVIDENCE`)."
        )
    else:
        after = "The runners keep the two apart."
    return [*lines, "", *paragraph(after), ""]


@dataclass
class SizeWalks:
    """Each size's learning-rate walk at one budget (experiments/lr_walk.py), over the runs that may be compared with
    the base's, and the runs it reads: the base's and each row's comparison with them."""

    steps: int
    walks: dict[str, lr_walk.Walk]
    base: list[dict]
    comparisons: dict[str, Comparison]

    @classmethod
    def of(
        cls, records: list[dict], steps: int, rows: dict[str, str], flags: dict[str, tuple[str, ...]]
    ) -> "SizeWalks":
        base, comparisons = budget(records, steps)
        runs = {name: [r for r in c.runs if not why_not(base[0]["run"], r["run"])] for name, c in comparisons.items()}
        perplexities = {name: [r["validation_ppl"] for r in found] for name, found in {"base": base, **runs}.items()}
        walks = lr_walk.walks(
            {name: (flags[name], perplexities.get(name, [])) for name in flags},
            [name for name, group in rows.items() if group in ("base", "(C)")],
        )
        return cls(steps, walks, base, comparisons)

    def at(self, records: list[dict], steps: int) -> "SizeWalks":
        """The same walks (each size's rate, chosen at their budget) over the runs at ``steps``: the longer budget's
        answer to whether a size's disagreement at its rate stays."""
        base, comparisons = budget(records, steps)
        return replace(self, steps=steps, base=base, comparisons=comparisons)

    def at_rate(self, walk: lr_walk.Walk) -> tuple[str, list[dict]]:
        """The row that trains ``walk``'s size at its rate (its walk stopped), and that row's runs at this budget
        (none where it has not run at it)."""
        row = walk.rows[walk.chosen()]
        if row == "base":
            return row, self.base
        return row, self.comparisons[row].runs if row in self.comparisons else []

    def base_walk(self) -> lr_walk.Walk | None:
        """The base's walk once it has stopped and its rate has runs at this budget (every size is read against the
        base at its rate), else None."""
        walk = self.walks.get("base")
        return walk if walk is not None and walk.chosen() is not None and self.at_rate(walk)[1] else None

    def stopped(self) -> list[lr_walk.Walk]:
        """The sizes whose walk has stopped and whose rows at x1 and at its rate have runs at this budget, once the
        base's has (none before)."""
        if self.base_walk() is None:
            return []
        return [
            walk
            for name, walk in self.walks.items()
            if name != "base" and walk.chosen() is not None and name in self.comparisons and self.at_rate(walk)[1]
        ]

    def curve_runs(self) -> dict[str, list[dict]]:
        """The runs of the base at its rate and of each stopped size at its rate that have learning curves, labelled
        by size and rate; {} unless the base and at least one size have."""
        stopped = self.stopped()
        if not stopped:
            return {}
        runs = {
            f"{walk.size} at {lr_walk.scale_text(walk.chosen())}": self.at_rate(walk)[1]
            for walk in [self.base_walk(), *stopped]
        }
        runs = {name: found for name, found in runs.items() if mean_curve(found)}
        return runs if len(runs) > 1 else {}


def walk_section(sizes: SizeWalks) -> list[str]:
    """Each size's learning-rate walk (experiments/lr_walk.py) over the rows' runs at its budget that may be compared
    with the base's: its points, the point the rule trains next (and the row that trains it), and the size's rate."""
    steps = sizes.steps
    scales = sorted({scale for walk in sizes.walks.values() for scale in walk.points()} | {1.0, 0.5}, reverse=True)
    lines = [
        "## The learning rate for each size",
        "",
        *paragraph(
            f"The rule, stated before its runs (`experiments/lr_walk.py`): {lr_walk.RULE} Each cell: the "
            f"validation PPL at {steps:,} steps, the mean over the point's seeds (how many), runs at the base's "
            "code only."
        ),
        "",
        "| size | " + " | ".join(map(lr_walk.scale_text, scales)) + " | next point | the size's rate |",
        "| --- | " + " | ".join("---:" for _ in scales) + " | --- | --- |",
    ]
    for walk in sizes.walks.values():
        points = walk.points()
        cells = [f"{points[s]:.2f} ({len(walk.perplexities[s])})" if s in points else "" for s in scales]
        scale = walk.next_scale()
        if scale is None:
            upcoming, rate = "stopped", lr_walk.scale_text(walk.chosen())
        else:
            row = walk.rows.get(scale)
            upcoming, rate = f"{lr_walk.scale_text(scale)}: {f'row {row}' if row else 'no row yet'}", "not yet"
        lines.append(f"| {walk.size} | " + " | ".join(cells) + f" | {upcoming} | {rate} |")
    return [*lines, "", *at_own_rates(sizes, steps)]


def belongs_to(at_preset: str, at_rate: str) -> str:
    """Whether a size's disagreement with the paper on one metric belongs to its size or to the learning rate: its
    word at the preset's rate (its row against the base, both at x1) beside its word at its own rate (against the
    base at the base's). Kept at both, the size's; gone at its rate, the rate's."""
    if {HIGHER, LOWER} & {at_preset, at_rate}:
        return "no paper row"
    if not {at_preset, at_rate} <= {HOLDS, NONE_FOUND, *DISAGREES}:
        return "undecided"
    if at_preset in DISAGREES:
        return "the size" if at_rate in DISAGREES else "the rate"
    return "only at its rate" if at_rate in DISAGREES else "no disagreement"


def at_own_rates(sizes: SizeWalks, walked_at: int) -> list[str]:
    """Each size whose walk has stopped, at its rate, against the base at the base's rate, by the rule of the cells
    above in the direction of the size's row of the paper: whether a disagreement belongs to the size or to the rate
    it trained at; and their learning curves. Waits for the base's walk. ``sizes`` holds the runs at one budget, the
    walks ``walked_at`` theirs or a shorter one."""
    longer = sizes.steps != walked_at
    heading = "### Each size at its rate against the base at its rate"
    lines = [f"{heading}, {sizes.steps:,} steps" if longer else heading, ""]
    base_walk, stopped = sizes.base_walk(), sizes.stopped()
    if base_walk is None:
        waiting = f"the base at its rate has run for {sizes.steps:,} steps" if longer else "the base's walk has stopped"
        return [*lines, f"Once {waiting}.", ""]
    base_row, base_runs = sizes.at_rate(base_walk)
    lines += [
        *paragraph(
            "The last two columns put each metric's word at the preset's rate (the size's row against the base, "
            f"both at x1, {f'at {sizes.steps:,} steps' if longer else 'above'}) beside its word here: a "
            "disagreement with the paper (*opposite*, *differs*) kept at the size's own rate belongs to *the size*; "
            "one gone there belongs to *the rate*."
            + (
                f" The rates are the walks' at {walked_at:,} steps; a size has a line once its rows at x1 and at its "
                f"rate have run for {sizes.steps:,}."
                if longer
                else ""
            )
        ),
        "",
        "| size | its rate: row (seeds) | the base's rate: row (seeds) | paper's row | PPL: size less base [95%] | "
        "BLEU: size less base [95%] | PPL: at x1, here: belongs to | BLEU: at x1, here: belongs to |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for walk in stopped:
        row, runs = sizes.at_rate(walk)
        at_preset = sizes.comparisons[walk.size]
        paper = at_preset.runs[0].get("paper") or {}
        c = compare(runs, base_runs, paper)
        lines.append(
            f"| {walk.size} | {lr_walk.scale_text(walk.chosen())}: {row} ({len(runs)}) | "
            f"{lr_walk.scale_text(base_walk.chosen())}: {base_row} ({len(base_runs)}) | {paper.get('change', '—')}"
            " | "
            + " | ".join(verdict_cell(c.differences[m], c.words[m]) for m in METRICS)
            + " | "
            + " | ".join(
                f"{at_preset.words[m]}, {c.words[m]}: **{belongs_to(at_preset.words[m], c.words[m])}**" for m in METRICS
            )
            + " |"
        )
    if not stopped:
        empty = f"no size at its rate at {sizes.steps:,} steps yet" if longer else "no size's walk has stopped yet"
        lines.append(f"| {empty} | | | | | | | |")
    if sizes.curve_runs():
        lines += ["", f"![each size at its rate, {sizes.steps:,} steps]({curve_file(sizes.steps, OWN_RATES)})"]
    return [*lines, ""]


def report(records: list[dict], rows: dict[str, str], budgets: tuple[int, int], sizes: SizeWalks) -> str:
    """docs/table3.md: the rule, then each budget's rows beside the paper's, then the longer budget's answer, then
    each size's learning rate and each size at its rate at both budgets. ``rows`` are the table's (name: group, in
    the page's order), ``budgets`` the sweep's and the longer one, ``sizes`` the walks at the sweep's."""
    records = [normalized(r) for r in records]
    lines = [
        "# Table 3 on Multi30k",
        "",
        "<!-- Generated by `python -m experiments.table3 --report` from results/table3/: do not edit. -->",
        "",
        *paragraph(
            "The paper's variations of its base model (Table 3, newstest2013 perplexity per wordpiece and "
            "BLEU), scaled to the Multi30k preset and run by `python -m experiments.table3` (how each row is "
            "scaled: its docstring), several seeds a row, each row's seeds against the base's. The records "
            'and this page are outputs, not code: they do not make a later record\'s tree "uncommitted" '
            "(excluded by rule, `vanilla_tools/provenance.py`), so the page is rewritten after every run."
        ),
        "",
        "```bash",
        "python -m experiments.table3                             # the sweep: 3 seeds of every row (resumable)",
        f"python -m experiments.table3 --steps {budgets[1]} --rows longer  # base, (C), the rows that disagree at "
        f"{budgets[0]:,}",
        "python -m experiments.table3 --rows base C-layers-6 --seeds 4 5",
        "python -m experiments.table3 --report                    # this page, from the records",
        "bash benchmarks/gpu_experiments.sh --rows base --seeds 1 2 3  # on a lent GPU: what fits in one call",
        "```",
        "",
        *rule(2 * (len(rows) - 1)),
    ]
    for steps in sorted({r["steps"] for r in records} | set(budgets)):
        lines += budget_section(records, steps, rows)
    longer = at_own_rates(sizes.at(records, budgets[1]), sizes.steps)
    return "\n".join(
        [*lines, *longer_section(records, *budgets, rows), *walk_section(sizes), *longer, *precision_section(records)]
    )
