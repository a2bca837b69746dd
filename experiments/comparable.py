"""Whether two runs may be compared: one rule for the results page, the recipe and Table 3, over the run records of
training/run/record.py (``run_record``), and the precision an experiment trains in.

Two runs are compared only where they ran the same code (its git trees, ``code_tree``), with the same budget (steps
of the same token batch: a budget in minutes depends on the machine, so no such run is compared with any other), on
the same kind of device (CPU and GPU have not been measured to train alike), and in the same precision, unless bf16
autocast and fp32 have been measured to train alike (``PRECISION_EVIDENCE``). ``why_not`` names every difference
that keeps two runs apart; a reader may set aside a criterion it accounts for otherwise (the recipe reads one
candidate against its preset's runs of earlier code, their spread the wider for it).

The rule that settles the precision question, stated before its runs: Table 3's base row at 1,000 steps, three seeds
in fp32 beside its three seeds in bf16 autocast, at one code. bf16 and fp32 *agree* where, on both validation
perplexity and BLEU, the 95% Welch interval of fp32 less bf16 (experiments/verdict.py) holds zero and the difference
of the means is smaller than the seeds' own spread (the larger of the two sides' standard deviations). Measured (the
fp32 seeds at d879cda): they agree (docs/table3.md). The second measurement the compute-budget issue asks for,
stated here before its fp32 run finished: the multi30k preset at its budget, once in fp32 beside its one bf16 run of
the same recipe (results/2026-11-26-multi30k: test2016 38.94, validation 41.11). One run a side has no spread of its
own, so the preset's run-to-run spread is that of its six bf16 runs (results/2026-11-23-multi30k to -26: standard
deviation 0.398 sacreBLEU on test2016, 0.566 BLEU on validation); the two runs agree where, on both, the difference
lies inside the 95% band of the difference of two such runs (``single_runs_agree``: 1.10 on test2016, 1.57 on
validation). Until both agree, or where either fails, an experiment trains in fp32, the precision every machine runs
(``experiment_precision``). Measured (results/2026-11-28-multi30k-fp32-budget, 7,200 steps in fp32 at 11f2019):
test2016 39.25 against 38.94 (+0.31, inside 1.10), validation 40.50 against 41.11 (-0.61, inside 1.57): they agree,
and ``PRECISION_EVIDENCE`` names the page that says so."""

import math
import statistics
from dataclasses import dataclass

from vanilla_tools.hardware import bf16_supported, precision

from .verdict import MIN_SEEDS, difference

FP32, BF16 = precision("no"), precision("bf16")
# Where bf16 autocast and fp32 were measured to agree under the rule above (a page and its section), or None.
PRECISION_EVIDENCE: str | None = "docs/multi30k.md#bf16-autocast-and-fp32"
CRITERIA = ("code", "budget", "device", "precision")


@dataclass(frozen=True)
class Apart:
    """One reason two runs are not compared: which criterion (CRITERIA), in words."""

    criterion: str
    reason: str

    def __str__(self) -> str:
        return self.reason


def code_key(run: dict) -> str:
    """The code a run executed: its ``code_tree``, or its commit marked modified where the tree differed from it (or
    bare, for runs recorded before code trees were)."""
    code = run.get("code") or {}
    if "code_tree" not in code:
        return code.get("commit") or "?"
    return code["code_tree"] or f"{code.get('commit')} modified"


def budget_text(budget: dict) -> str:
    length = f"{budget['max_steps']:,} steps" if budget.get("max_steps") else f"{budget.get('num_train_epochs')} epochs"
    minutes = f", at most {budget['max_train_minutes']:g} minutes" if budget.get("max_train_minutes") else ""
    return f"{length} of {budget.get('tokens_per_step')} tokens{minutes}"


def why_not(a: dict, b: dict, ignoring: tuple[str, ...] = ()) -> list[Apart]:
    """Every reason the runs of records ``a`` and ``b`` (``run_record``s) may not be compared, but the criteria in
    ``ignoring``; [] when they may."""
    apart = []
    if code_key(a) != code_key(b):
        apart.append(Apart("code", f"other code ({code_key(a)[:12]} and {code_key(b)[:12]})"))
    if a["budget"] != b["budget"]:
        apart.append(Apart("budget", f"other budgets ({budget_text(a['budget'])}; {budget_text(b['budget'])})"))
    elif a["budget"].get("max_train_minutes"):
        apart.append(
            Apart(
                "budget",
                f"a budget in minutes ({a['budget']['max_train_minutes']:g}): the steps it "
                "reaches depend on the machine",
            )
        )
    if a["device"]["type"] != b["device"]["type"]:
        apart.append(
            Apart(
                "device",
                f"other devices ({a['device']['type']} and {b['device']['type']}): not measured to train alike",
            )
        )
    if None in (a["precision"], b["precision"]):
        apart.append(Apart("precision", "a precision not recorded"))
    elif a["precision"] != b["precision"] and PRECISION_EVIDENCE is None:
        apart.append(
            Apart("precision", f"other precisions ({a['precision']} and {b['precision']}): not measured to train alike")
        )
    return [one for one in apart if one.criterion not in ignoring]


def groups(runs: list[dict], ignoring: tuple[str, ...] = ()) -> list[list[dict]]:
    """``runs`` (records holding a run record under "run") split into groups that may be compared with each other
    (but for the criteria in ``ignoring``), in the order their first member comes (the criteria are equalities, so
    each group is one class)."""
    found: list[list[dict]] = []
    for record in runs:
        home = next((group for group in found if not why_not(group[0]["run"], record["run"], ignoring)), None)
        if home is None:
            found.append([record])
        else:
            home.append(record)
    return found


def precisions_agree(fp32: list[float], bf16: list[float]) -> bool | None:
    """The module's rule on one metric, over the seeds of each precision: whether fp32 and bf16 autocast agree;
    None with fewer than MIN_SEEDS seeds a side."""
    if min(len(fp32), len(bf16)) < MIN_SEEDS:
        return None
    diff = difference(fp32, bf16)
    return not diff.excludes_zero() and abs(diff.delta) < max(statistics.stdev(fp32), statistics.stdev(bf16))


def single_run_band(spread: float) -> float:
    """The 95% band of the difference of two single runs whose runs vary by ``spread`` (a standard deviation) from
    run to run: 1.96 * sqrt(2) * spread."""
    return 1.96 * math.sqrt(2) * spread


def single_runs_agree(a: float, b: float, spread: float) -> bool:
    """Whether two single runs' scores ``a`` and ``b`` agree: their difference lies inside ``single_run_band``."""
    return abs(a - b) < single_run_band(spread)


def standing_in(precision: str) -> list[str]:
    """The other precisions whose run records stand for a run in ``precision``: once bf16 autocast and fp32 are
    measured to train alike (``PRECISION_EVIDENCE``), the other one; none before."""
    return [other for other in (FP32, BF16) if other != precision] if PRECISION_EVIDENCE else []


def experiment_precision() -> str:
    """The precision an experiment trains in: fp32 everywhere until bf16 autocast is measured to agree with it
    (``PRECISION_EVIDENCE``); then the one this machine runs fast."""
    return BF16 if PRECISION_EVIDENCE is not None and bf16_supported() else FP32


def precision_flags(name: str) -> list[str]:
    """vanilla-train's flag for precision ``name`` (FP32 or BF16)."""
    return ["--bf16", "true" if name == BF16 else "false"]
