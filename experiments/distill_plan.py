"""The distillation experiment's design (experiments/distill.py runs it): the budget read from distill_budget.yaml
(``Budget``, a rehearsal's included), each vanilla-train run and its settings (``Run``), which runs a stage trains
(``teachers``, ``mix_candidates``, ``chosen_students``), whether a record stands for a run (``recorded``), and the
refusal of a distilled file that has not one line per source (``check_aligned``)."""

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vanilla_tools.cli import UsageError

from . import backtranslation_round, launch
from .backtranslation_round import DATA
from .comparable import BF16, FP32, experiment_precision, precision_flags, standing_in
from .launch import ROOT, SUMMARY

BUDGET_FILE = Path(__file__).with_name("distill_budget.yaml")
REMEDY = "delete its folder and run again what wrote it"
DISTILLED = "train.distilled.de"  # the distilled targets, in the data folder and (gzipped) in the results
PRECISION_WORDS = {  # a part's precision in distill_budget.yaml, as the page says it
    "fp32": "fp32",
    "bf16": "bf16 autocast",
    "experiment": "bf16 autocast where the CPU multiplies bf16 in hardware, else fp32 (measured to train alike)",
}
CORPORA = {  # a mix's parts (distill_budget.yaml) as vanilla-train's --train_files groups
    "distilled": ("--train_files", f"{DATA}/train.en", f"{DATA}/{DISTILLED}"),
    "original": ("--train_files", f"{DATA}/train.en", f"{DATA}/train.de"),
}


def read_budget(path: Path = BUDGET_FILE) -> dict:
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


@dataclass(frozen=True)
class Budget:
    """The experiment's budget (``plan``, distill_budget.yaml) at ``steps`` a run, on ``pairs``: a rehearsal's first N
    training pairs (N // 10 of validation and test2016), None for all. A rehearsal's runs, data and records go to
    folders of their own and its settings name its data, so that nothing of it stands for a run of the experiment."""

    plan: dict = field(repr=False, compare=False)
    steps: int
    pairs: int | None = None

    @classmethod
    def of(cls, steps: int | None = None, pairs: int | None = None, plan: dict | None = None) -> "Budget":
        plan = plan or read_budget()
        steps = plan["teachers"]["steps"] if steps is None else steps
        if steps < 1:
            raise UsageError(f"--steps {steps}: a run needs at least 1 step")
        if pairs is not None and pairs < 10:
            raise UsageError(f"--pairs {pairs}: a rehearsal needs at least 10 pairs (one of validation and test)")
        return cls(plan, steps, pairs)

    @property
    def layout(self) -> backtranslation_round.Budget:
        """Where a budget's runs, data and records go, and how much of validation and test2016 a rehearsal sees:
        laid out as the back-translation round's (``folder``, ``data_folder``, ``data``, ``held_out``)."""
        return backtranslation_round.Budget(self.steps, pairs=self.pairs)

    def scaled(self, value: int) -> int:
        """A number of steps of the budget (warm-up, checkpoints) in proportion to a rehearsal's steps."""
        return max(1, round(value * self.steps / self.plan["teachers"]["steps"]))


@dataclass(frozen=True)
class Run:
    """One vanilla-train run: a teacher, a student of a mix, or the small student."""

    role: str  # "teacher", "student" or "small"
    mix: str | None
    seed: int

    @property
    def name(self) -> str:
        return {"teacher": "teacher", "small": f"small-{self.mix}"}.get(self.role, f"student-{self.mix}")

    @property
    def folder(self) -> str:
        return f"{self.name}/seed-{self.seed}"

    def __str__(self) -> str:
        return f"{self.name} seed {self.seed}"

    def part(self, budget: Budget) -> dict:
        """The run's part of the budget: the teachers' or the students'."""
        return budget.plan["teachers"] if self.role == "teacher" else budget.plan["students"]

    def precision(self, budget: Budget) -> str:
        """FP32 or BF16: the part's precision, where it is ``experiment`` the one this machine trains experiments in
        (``comparable.experiment_precision``)."""
        named = self.part(budget)["precision"]
        return experiment_precision() if named == "experiment" else {"fp32": FP32, "bf16": BF16}[named]

    def settings(self, budget: Budget, precision: str | None = None) -> list[str]:
        """vanilla-train's arguments but the output folders, the data folder as ``{data}`` (in ``precision``, by
        default the run's): what a record must match to be skipped."""
        plan = budget.plan
        part = self.part(budget)
        settings = [
            "--config",
            part["config"],
            "--dataset",
            "files",
            "--source_lang",
            "en",
            "--target_lang",
            "de",
            "--max_steps",
            str(budget.steps),
            "--warmup_steps",
            str(budget.scaled(2000)),  # multi30k-tiny's, scaled in a rehearsal
            *precision_flags(precision or self.precision(budget)),
        ]
        if self.role == "teacher":
            settings += [*CORPORA["original"]]
        else:
            # the same window of steps averaged whatever the training set's size (distill_budget.yaml)
            save_steps = budget.scaled(part["save_steps"])
            settings += ["--eval_strategy", "no", "--save_strategy", "steps", "--save_steps", str(save_steps)]
            average = str(min(part["average"], budget.steps // save_steps))
            settings += ["--save_total_limit", average, "--average_last", average]
            for corpus in plan["students"]["mixes"][self.mix]:
                settings += [*CORPORA[corpus]]
        if self.role == "small":
            small = plan["small_student"]
            settings += [
                "--encoder_layers",
                str(small["encoder_layers"]),
                "--decoder_layers",
                str(small["decoder_layers"]),
            ]
        settings += [
            "--validation_files",
            f"{DATA}/validation.en",
            f"{DATA}/validation.de",
            "--test_files",
            f"{DATA}/test.en",
            f"{DATA}/test.de",
            "--final_splits",
            "validation",  # test2016 is decoded by the scores stage, once for each chosen model
            "--seed",
            str(self.seed),
        ]
        return [arg.replace(DATA, budget.layout.data) for arg in settings]


def teachers(budget: Budget) -> list[Run]:
    return [Run("teacher", None, seed) for seed in budget.plan["teachers"]["seeds"]]


def mix_candidates(budget: Budget) -> list[Run]:
    """Seed 1 of each mix, in the budget's order: validation chooses among them."""
    return [Run("student", mix, budget.plan["students"]["seeds"][0]) for mix in budget.plan["students"]["mixes"]]


def chosen_students(budget: Budget, mix: str) -> list[Run]:
    """Every seed of the chosen mix, then the small student(s)."""
    small = budget.plan["small_student"]
    return [Run("student", mix, seed) for seed in budget.plan["students"]["seeds"]] + [
        Run("small", small["mix"], seed) for seed in small["seeds"]
    ]


def recorded(run: Run, budget: Budget, results: Path) -> dict | None:
    """The run's record under ``results`` if it holds these settings, in the run's precision or one that stands for
    it (``comparable.standing_in``: a teacher trained in bf16 on one machine is not trained again in fp32 on
    another)."""
    alike = [run.settings(budget, other) for other in standing_in(run.precision(budget))]
    path = results / budget.layout.folder / run.folder / SUMMARY
    return launch.recorded(path, run.settings(budget), REMEDY, alike=alike)


def check_aligned(path: Path, lines: int, sources: int) -> None:
    """A distilled file of another length than its sources is refused in one line: its lines would pair with the
    wrong sources."""
    if lines != sources:
        shown = launch.shown(path)
        raise UsageError(f"{shown}: {lines} distilled lines for {sources} sources; delete it and run again")


def validation_bleu(record: dict) -> float:
    """A run's validation score (lowercased, tokenized BLEU, vanilla-train's final decode)."""
    return record["validation"]["bleu_lc_tok"]


ROOT_RUNS = ROOT / "runs" / "distill"
