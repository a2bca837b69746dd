"""`python -m experiments.recipe`: the Multi30k preset's recipe chosen on the validation set, candidate by candidate.

    python -m experiments.recipe                                     # every candidate not yet recorded, in order
    python -m experiments.recipe --candidates dmodel-512 layers-2-lr-2  # some of them
    python -m experiments.recipe --report                            # docs/recipe.md from the records

Each candidate is the multi30k preset (``vanilla-train --config multi30k``: its budget, checkpoint averaging, the
length penalty chosen on validation) with a few flags changed, trained in its own process in the experiment's
precision (experiments/comparable.py's ``experiment_precision``, a recorded setting) and scored on the validation set
alone (``--final_splits validation``: test2016 is decoded once, by the preset that is chosen, in its own runs). Round 1
ran when the preset's budget was 54 minutes, so its candidates' steps depended on the machine's speed that day (each
record keeps its steps, epochs and the fp32 matrix-product peak measured before it trained); the budget became
steps before round 2's candidates ran, which closed it, and round 3 changes the preset at that budget. A
candidate trains only where its run could be read against its preset's runs (``check_comparable``: the same budget,
kind of device and precision; experiments/comparable.py).

The choice follows ``RULE``, stated before the candidates ran and printed at the top of the page (with
``LEARNING_RATE_RULE``: the peak a candidate of another size trains at): one run of a candidate against the
preset's own spread over its recorded runs (``Band``, ``chosen``). Candidates come in ``ROUNDS``, data read
from recipe_rounds.yaml with the reasons for each: a round's choice goes into training/configs/multi30k.yaml and
the next round's candidates change that preset, read against its own runs; a round whose preset is no longer the
YAML's trains nothing more. A round may instead try another preset's recipe whole (a candidate's ``config``), read in
the score the round names (``score``: round 4 reads lowercased, tokenized BLEU, the text Wu et al.'s recipe writes)
against its preset's runs of another budget (``budget_apart``: the round says why).

A candidate recorded with the same settings is skipped, so the command goes on where it stopped, over several
sessions and machines (each run is the preset's whole budget). A candidate stopped while it trained (a signal, a
session's end, a killed process) goes on from its newest checkpoint when the command runs again: vanilla-train
resumes the run of the same settings in its --output_dir (training/run/relaunch.py), and its record lists the launches.
A folder holding a run of other settings (the candidate or its preset changed since) is refused there, naming the
settings; ``--start_over`` trains such candidates from scratch. Records: results/recipe/[ROUND/]NAME/
(vanilla-train's summary.json and learning curve, recipe.json here: the validation BLEU, steps, command, commit and
machine).
"""

import argparse
import json
import logging
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from training.api import (
    curve_columns,
    on_cpu,
    parse_args,
    resolved_arguments,
    run_launches,
    run_record,
    run_train_minutes,
)
from vanilla_tools.cli import UsageError, console_script, pyplot
from vanilla_tools.run_files import read_json

from . import comparable, launch
from .comparable import experiment_precision, precision_flags, why_not
from .launch import ROOT, shown
from .verdict import CONFIDENCE, t_quantile

logger = logging.getLogger("recipe")
RESULTS = ROOT / "results" / "recipe"
PAGE = ROOT / "docs" / "recipe.md"
CURVES = "recipe-curves-round-{}.png"  # beside the page, one per round: validation checks against training minutes
RECORD = "recipe.json"
REMEDY = "restore it from git, or delete it and run again what wrote it"  # a damaged record or summary
ROUNDS_FILE = Path(__file__).with_name("recipe_rounds.yaml")  # the rounds and their candidates, with their reasons
RULE = (
    "a candidate runs once, and one run is read against the preset's own spread, the 95% prediction interval for one "
    "more run of the preset (mean +- t * s * sqrt(1 + 1/n) over its n recorded runs: the canonical run and repeats "
    "in [results.md](results.md), and the preset candidate here). The preset changes only for a candidate above that "
    "band, the best of them; a candidate within it is not told apart from the preset by one run."
)
LEARNING_RATE_RULE = (
    "a candidate that changes the model's size (depth, d_model, d_ff) trains at the peak learning rate its size "
    "takes in Table 3's walk ([table3.md](table3.md#the-learning-rate-for-each-size), experiments/lr_walk.py) "
    "relative to the base's there: `--lr_scale` = the size's rate / the base's rate, on the preset's own schedule "
    "and warmup. A size the walk has not covered is first walked there (a row at the base's code), and the "
    "candidate waits for it. That the ratio carries from Table 3's 1,000 steps (warmup 600) to the preset's budget "
    "(warmup 1,200) is an assumption, stated here, that the candidate's own curve shows or refutes."
)
REPEATS = ROOT / "results"  # the presets' full runs: summary.json with a role in PRESET_ROLES (results_index)
PRESET_ROLES = ("canonical", "seed", "earlier", "superseded")
COMMON = ["--final_splits", "validation", "--translate_examples", "0"]  # validation only; test2016 is not decoded
SCORE_WORDS = {"bleu": "", "bleu_lc_tok": " in lowercased, tokenized BLEU (the lc-tok column)"}  # a round's score
NOT_DRAWN = (
    "No figure of the candidates' validation checks: each run checks itself on its own text (sacreBLEU of greedy "
    "decoding), which is not the preset's here."
)


@dataclass(frozen=True)
class Candidate:
    name: str
    change: str  # what differs from the preset, and why it is worth an hour
    flags: tuple[str, ...] = ()
    config: str | None = None  # another preset's recipe, trained in place of the round's (None: the round's)

    def settings(self, preset: str, precision: str) -> list[str]:
        """vanilla-train's arguments but the output folders: what a record must match to be skipped."""
        return ["--config", self.config or preset, *COMMON, *precision_flags(precision), *self.flags]


@dataclass(frozen=True)
class Round:
    """The candidates tried against one preset. ``preset``: the values that set that preset apart (as
    training/configs/multi30k.yaml resolves them while the round is open); ``reference``: the candidate record that is
    a run of it (a round's choice is the next round's preset); ``folder``: its records' place under results/recipe/."""

    number: int
    title: str
    preset: dict[str, int | float]
    reference: str
    folder: str
    candidates: tuple[Candidate, ...]
    score: str = "bleu"  # the validation score the band and the choice read: a key of summary.json's "validation"
    # why its candidates' budgets differ from the preset's on purpose; None: they may not
    budget_apart: str | None = None

    def of(self, record: dict) -> float:
        """A candidate record's validation score as the round reads it."""
        return record[f"validation_{self.score}"]


def read_rounds(path: Path) -> tuple[Round, ...]:
    """The rounds as data (ROUNDS_FILE: each with its reasons, ``why``)."""
    return tuple(
        Round(
            one["number"],
            one["title"],
            one["preset"],
            one["reference"],
            one["folder"],
            tuple(
                Candidate(c["name"], " ".join(c["change"].split()), tuple(c.get("flags", ())), c.get("config"))
                for c in one["candidates"]
            ),
            one.get("score", "bleu"),
            " ".join(one["budget_apart"].split()) if "budget_apart" in one else None,
        )
        for one in yaml.safe_load(path.read_text())
    )


ROUNDS = read_rounds(ROUNDS_FILE)
CANDIDATES = tuple(candidate for one in ROUNDS for candidate in one.candidates)
NAMES = [candidate.name for candidate in CANDIDATES]


def recorded(candidate: Candidate, preset: str, precision: str, results: Path) -> dict | None:
    """The candidate's record if it was trained with the settings it has now; else None (trained again). Once bf16
    autocast and fp32 are measured to train alike (``comparable.PRECISION_EVIDENCE``), its record in the other
    precision stands for it: a machine goes on with a round that another began in its own precision."""
    return launch.recorded(
        results / candidate.name / RECORD,
        candidate.settings(preset, precision),
        f"delete it and {candidate.name} is trained again",
        alike=tuple(candidate.settings(preset, other) for other in comparable.standing_in(precision)),
        name=candidate.name,
    )


def train(candidate: Candidate, preset: str, precision: str, runs: Path, results: Path, start_over: bool) -> dict:
    """One candidate: vanilla-train in its own process, then its record. Without ``start_over`` it resumes the
    candidate's run in its folder, if one is there."""
    output_dir, record_dir = runs / candidate.name, results / candidate.name
    command, summary = launch.train(
        [*candidate.settings(preset, precision), *(["--overwrite_output_dir"] if start_over else [])],
        output_dir,
        candidate.name,
        summary_dir=record_dir,
        remedy="--start_over trains it again",
        after_stop=f", with a complete checkpoint in {shown(output_dir)}; the same command goes on from it",
        after_failure=(
            f"its command and message above; where it refused the run in {shown(output_dir)}, --start_over trains "
            "the candidate again from scratch"
        ),
    )
    record = {
        "candidate": candidate.name,
        "change": candidate.change,
        "flags": list(candidate.flags),
        "settings": candidate.settings(preset, precision),
        "validation_bleu": summary["validation"]["bleu"],
        "validation_bleu_lc_tok": summary["validation"].get("bleu_lc_tok"),
        "beam": summary.get("beam"),
        "steps": summary["run"]["steps"],
        "epochs": summary["epochs"],
        "parameters": summary["parameters"],
        "train_minutes": run_train_minutes(summary),
        **summary["machine_speed"],
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": launch.as_module(command[1:]),
        "run": summary["run"],
    }
    (record_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def of_preset(arguments: dict, preset: dict) -> bool:
    """Whether a run's resolved arguments hold a round's preset values."""
    return all(arguments.get(key) == value for key, value in preset.items())


def reference_record(round_: Round, records: dict[int, list[dict]]) -> tuple[Round, dict] | None:
    """The record that ran the round's preset, and the round that made it (a round's choice is the next one's
    preset); None where it is not recorded."""
    for other in ROUNDS:
        for record in records.get(other.number, []):
            if record["candidate"] == round_.reference:
                return other, record
    return None


def preset_summaries(round_: Round, summaries: list[dict]) -> list[dict]:
    """The full runs among ``summaries`` (role canonical, seed, earlier or superseded, results_index) with the round's
    preset values."""
    return [s for s in summaries if s.get("role") in PRESET_ROLES and of_preset(s.get("arguments", {}), round_.preset)]


def preset_runs(round_: Round, records: dict[int, list[dict]], summaries: list[dict]) -> list[float]:
    """The validation score (the round's) of every recorded run of the round's preset: its full runs among
    ``summaries`` and its reference candidate. Runs of earlier code are among them: their spread is the wider for it,
    the rule the stricter."""
    reference = reference_record(round_, records)
    full = [s["validation"][round_.score] for s in preset_summaries(round_, summaries)]
    return full + ([round_.of(reference[1])] if reference else [])


def preset_run_records(round_: Round, records: dict[int, list[dict]], summaries: list[dict]) -> list[dict]:
    """The run records (training/run/record.py) of the round's preset runs: its full runs and its reference
    candidate."""
    reference = reference_record(round_, records)
    return [s["run"] for s in preset_summaries(round_, summaries)] + ([reference[1]["run"]] if reference else [])


def planned_run(settings: list[str]) -> dict:
    """The run record a candidate trained with ``settings`` here would have, but its code and steps (unknown until
    it runs)."""
    model_args, data_args, training_args = parse_args([*settings, "--output_dir", "unused"])
    resolved = resolved_arguments(model_args, data_args, training_args)
    return run_record(resolved, None, "cpu" if on_cpu(training_args) else "cuda", training_args.world_size, code={})


def check_comparable(round_: Round, planned: dict, preset_runs_: list[dict]) -> None:
    """Refuses to train a candidate whose run could not be read against its preset's runs (experiments/comparable.py;
    their code aside: the band holds runs of earlier code on purpose, ``preset_runs``; and their budget where the
    round compares budgets on purpose, ``budget_apart``): its one run would be read against a band of runs that
    trained otherwise."""
    ignoring = ("code", "budget") if round_.budget_apart else ("code",)
    for preset_run in preset_runs_:
        apart = why_not(planned, preset_run, ignoring=ignoring)
        if apart:
            raise UsageError(
                f"round {round_.number}: a candidate run here could not be read against its preset's "
                f"runs: {'; '.join(map(str, apart))}"
            )


@dataclass(frozen=True)
class Band:
    """The 95% prediction interval for the validation BLEU of one more run of the preset."""

    mean: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, scores: list[float]) -> "Band | None":
        """mean +- t(n - 1) * s * sqrt(1 + 1/n); None below 3 runs (no spread worth the name)."""
        if len(scores) < 3:
            return None
        mean, n = statistics.mean(scores), len(scores)
        half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * statistics.stdev(scores) * math.sqrt(1 + 1 / n)
        return cls(mean, mean - half, mean + half, n)

    def place(self, score: float) -> str:
        return "above" if score > self.high else "below" if score < self.low else "within"


def chosen(round_: Round, records: list[dict], band: Band | None) -> str:
    """The module's rule: the round's best candidate above its preset's band, else its preset (``reference``)."""
    if band is None:
        return round_.reference
    above = [r for r in records if r["candidate"] != round_.reference and band.place(round_.of(r)) == "above"]
    return max(above, key=round_.of)["candidate"] if above else round_.reference


def round_section(round_: Round, records: list[dict], runs: list[float], closed_why: str | None) -> list[str]:
    """One round: its preset's band (``runs``: preset_runs), every recorded candidate against it (best validation
    BLEU first), the choice (so far, while candidates wait), the figure of their curves and the candidates not yet
    recorded (``closed_why``: why they never will be, where the round is closed)."""
    band = Band.of(runs)
    spread = (
        f"Over its {band.runs} recorded runs the preset scored {band.mean:.2f} on validation"
        f"{SCORE_WORDS[round_.score]} ({min(runs):.2f}-{max(runs):.2f}), so one more run of it falls in "
        f"**{band.low:.2f}-{band.high:.2f}** (95%)."
        if band
        else f"The preset has {len(runs)} recorded run{'' if len(runs) == 1 else 's'}, too few for a band: "
        "nothing replaces it yet."
    )
    lines = [
        f"## Round {round_.number}: {round_.title}",
        "",
        f"The preset: training/configs/multi30k.yaml with {settings_text(round_.preset)}. Its runs: the full runs in "
        f"[results.md](results.md) ({', '.join(PRESET_ROLES)}) with those values, and the record of "
        f"`{round_.reference}`. " + spread,
        "",
    ]
    if round_.budget_apart:
        lines += [f"Its candidates' budgets are not the preset's, on purpose: {round_.budget_apart}", ""]
    if records:
        lines += [
            "| candidate | change | validation BLEU | against the preset's band | lc-tok | steps | epochs | "
            "parameters | fp32 GFLOP/s | commit |",
            "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
    for r in sorted(records, key=lambda r: -round_.of(r)):
        commit = r["run"]["code"]["commit"][:7]
        lc_tok = f"{r['validation_bleu_lc_tok']:.2f}" if r.get("validation_bleu_lc_tok") is not None else ""
        place = band.place(round_.of(r)) if band else ""
        if r["candidate"] == round_.reference:
            place = "one of its runs"
        lines.append(
            f"| {r['candidate']} | {r['change']} | {r['validation_bleu']:.2f} | {place} | {lc_tok} | {r['steps']} "
            f"| {r['epochs']:.1f} | {r['parameters'] / 1e6:.1f}M | {machine_speed(r)} | {commit} |"
        )
    done = {r["candidate"] for r in records}
    waiting = [f"{c.name} ({c.change})" for c in round_.candidates if c.name not in done]
    so_far = " so far" if waiting and not closed_why else ""  # final once every candidate ran or the round closed
    lines += ["", f"Chosen in this round{so_far}: **{chosen(round_, records, band)}**."]
    if records and not drawn(round_):
        lines += ["", NOT_DRAWN]
    elif records:
        lines += [
            "",
            "Each candidate's validation check while it trained (greedy decoding of the preset's 200 "
            "validation sentences at each evaluation; the table's scores are the whole validation set, beam 4, "
            "after averaging), against training minutes:",
            "",
            f"![Round {round_.number}: the validation check of every candidate against training minutes]"
            f"({curves_file(round_)})",
        ]
    if waiting:
        lines += [
            "",
            (f"Closed before these ran ({closed_why}): " if closed_why else "Not yet recorded: ")
            + "; ".join(waiting)
            + ".",
        ]
    return [*lines, ""]


def drawn(round_: Round) -> bool:
    """Whether the round's candidates' curves are drawn beside its preset's: the validation check each epoch is
    sacreBLEU of the run's own text, comparable only where the round reads that score."""
    return round_.score == "bleu"


def machine_speed(record: dict) -> str:
    """The fp32 GFLOP/s measured before the candidate trained; a candidate of several launches has its last
    launch's (vanilla-train measures each launch's machine, and the summary keeps the last)."""
    launches = len(run_launches(record))
    speed = record["fp32_gflops_before"]
    return f"{speed} (last of {launches} launches)" if launches > 1 else str(speed)


def settings_text(preset: dict) -> str:
    return ", ".join(f"`{key}: {value}`" for key, value in preset.items())


def curves_file(round_: Round) -> str:
    return CURVES.format(round_.number)


def report(records: dict[int, list[dict]], summaries: list[dict], preset: str) -> str:
    """docs/recipe.md: the rule, then each round (round_section) over its records; ``summaries`` are the full runs'
    (the preset's repeats), ``preset`` the one the open round changes."""
    lines = [
        "# The Multi30k recipe, chosen on validation",
        "",
        "Generated by `python -m experiments.recipe --report` from the records in "
        "`results/recipe/[ROUND/]NAME/recipe.json` ([experiments/recipe.py](../experiments/recipe.py) trains them). "
        "Every candidate is `vanilla-train --config multi30k` with a few flags changed, scored on the validation set "
        "only (beam 4, the length penalty chosen on validation, the preset's checkpoint averaging). Round 1 ran "
        "when the preset's budget was 54 minutes, so the steps a candidate reached depended on the machine's speed "
        "that day (the fp32 peak measured before it); the preset's budget is steps since, which closed round 2 before "
        "its candidates ran. A candidate trains only where its run could be read against its preset's runs: the "
        "same budget, kind of device and precision (experiments/comparable.py). A round's choice goes into "
        "[training/configs/multi30k.yaml](../training/configs/multi30k.yaml), and the next round's candidates "
        "change that preset. A round may instead try another preset's recipe whole (round 4: Wu et al.'s, "
        "`--config multi30k-tiny`, with its own decoding), read in the score the round names and at the budget it "
        "states.",
        "",
        f"**The rule**, stated before the candidates ran: {RULE}",
        "",
        f"**The learning rate for a size**, stated 2026-11-28 before any candidate used it: {LEARNING_RATE_RULE}",
        "",
    ]
    for one in ROUNDS:
        lines += round_section(
            one, records.get(one.number, []), preset_runs(one, records, summaries), closed(one, preset)
        )
    return "\n".join(lines)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.recipe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--candidates", nargs="+", choices=NAMES, help="default: every candidate, in order")
    parser.add_argument("--config", default="multi30k", help="the preset the candidates change (a name or a YAML)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "recipe"), help="where the candidates' models go")
    parser.add_argument("--results", default=str(RESULTS), help="where the candidates' records go")
    parser.add_argument("--page", default=str(PAGE), help="the page generated from the records")
    parser.add_argument("--repeats", default=str(REPEATS), help="the preset's full runs (results/DATE-SLUG folders)")
    parser.add_argument("--report", action="store_true", help="only write the page from the records")
    parser.add_argument(
        "--start_over",
        action="store_true",
        help="train the candidates from scratch, deleting what their --runs folders hold (default: "
        "go on from a stopped run of the same settings there)",
    )
    return parser


def closed(round_: Round, preset: str) -> str | None:
    """Why the round is closed, where ``preset`` (a name or a YAML) no longer has its values (its candidates would
    change another preset than the one their band was measured on); None while it is open."""
    resolved = resolved_arguments(
        *parse_args(["--config", preset, "--output_dir", "unused"])
    )  # as summary.json has them
    if of_preset(resolved, round_.preset):
        return None
    now = settings_text({key: resolved.get(key) for key in round_.preset})
    return f"its candidates change the preset with {settings_text(round_.preset)}, and --config {preset} now has {now}"


def open_round(round_: Round, preset: str) -> None:
    """Refuses to train a round's candidate once the round is closed."""
    why = closed(round_, preset)
    if why:
        raise UsageError(f"round {round_.number} ({round_.title}) is closed: {why}")


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, runs, page = Path(args.results).resolve(), Path(args.runs).resolve(), Path(args.page).resolve()
    repeats = Path(args.repeats).resolve()
    precision = experiment_precision()
    trained = False
    for one in [] if args.report else ROUNDS:
        if not args.candidates and closed(one, args.config):
            logger.info("round %d is closed: its candidates not recorded train no more", one.number)
            continue
        todo = [c for c in one.candidates if not args.candidates or c.name in args.candidates]
        for candidate in todo:
            if recorded(candidate, args.config, precision, results / one.folder):
                logger.info("%s: recorded, skipped", candidate.name)
                continue
            open_round(one, args.config)
            summaries = full_runs(repeats)
            records = read_records(results)
            planned = planned_run(candidate.settings(args.config, precision))
            check_comparable(one, planned, preset_run_records(one, records, summaries))
            record = train(candidate, args.config, precision, runs / one.folder, results / one.folder, args.start_over)
            logger.info("%s: validation BLEU %.2f", candidate.name, record["validation_bleu"])
            write_page(results, repeats, page, args.config)  # after every run: an interrupted sweep has its page
            trained = True
    if not trained:
        write_page(results, repeats, page, args.config)
    print(f"wrote {page}")


def read_records(results: Path, kept: set[Path] | None = None) -> dict[int, list[dict]]:
    """Each round's candidate records (those among ``kept`` where given), in the round's order."""
    found = {}
    for one in ROUNDS:
        paths = [results / one.folder / c.name / RECORD for c in one.candidates]
        found[one.number] = [read_json(p, remedy=REMEDY) for p in paths if p.is_file() and (kept is None or p in kept)]
    return found


def full_runs(repeats: Path) -> list[dict]:
    """The summary.json of every run folder in ``repeats`` (results/DATE-SLUG)."""
    return [read_json(p, remedy=REMEDY) for p in sorted(repeats.glob("*/summary.json"))]


def write_page(results: Path, repeats: Path, page: Path, preset: str) -> None:
    """The page and, beside it, each round's figure of its candidates' curves (its preset's run in black)."""
    records = read_records(results)
    page.write_text(report(records, full_runs(repeats), preset))
    for one in ROUNDS:
        if records[one.number] and drawn(one):
            plot_curves(one, records, results, page.parent / curves_file(one))


def plot_curves(round_: Round, records: dict[int, list[dict]], results: Path, path: Path) -> None:
    """The round's candidates' validation checks (eval_bleu of each learning_curve.csv) against training minutes, in
    the table's order, and its preset's run (the reference record, whichever round made it) in black."""
    plt = pyplot("python -m experiments.recipe")
    ranked = sorted(records[round_.number], key=lambda r: -round_.of(r))
    curves = [(r["candidate"], results / round_.folder) for r in ranked]
    reference = reference_record(round_, records)
    if reference and reference[0] is not round_:  # made by an earlier round: drawn beside this round's candidates
        curves.append((round_.reference, results / reference[0].folder))
    figure, axis = plt.subplots(figsize=(7, 4))
    for name, folder in curves:
        columns = curve_columns(folder / name / "learning_curve.csv")
        style = {"color": "black", "linewidth": 2.5} if name == round_.reference else {}
        axis.plot(columns["minutes"], columns["eval_bleu"], marker=".", label=name, **style)
    axis.set(
        xlabel="training minutes",
        ylabel="validation check: sacreBLEU, greedy, 200 sentences",
        title=f"Multi30k recipe, round {round_.number}: {round_.title}",
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


main = console_script(run)

if __name__ == "__main__":
    main()
