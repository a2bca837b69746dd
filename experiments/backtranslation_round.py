"""One back-translation round's design (experiments/backtranslation.py says what it measures and why): its training
sets (``CONDITIONS``), the budget of every run (``Budget``, a rehearsal's included), each vanilla-train run and its
settings (``Run``), their order (``plan``), and whether a record stands for a run (``recorded``)."""

import gzip
from dataclasses import dataclass
from pathlib import Path

from vanilla_tools.cli import UsageError

from . import launch
from .comparable import FP32, precision_flags
from .launch import ROOT, SUMMARY

BUNDLED = ROOT / "data" / "multi30k"
SPLIT_SEED = 0
STEPS = 2000
TOKENS_PER_STEP = 4096
WARMUP = 800
SAVE_STEPS = 100
AVERAGE = 5
PRECISION = FP32
TAG = "<BT>"
SAMPLE_SEED = 1
BEAMS = 5
TRANSLATIONS = "test2016.de"  # a run's test translations, in the model's text (lowercased, tokenized)
REMEDY = "delete its folder and run again what wrote it"
BACK_TRANSLATIONS = {"beam": ["--num_beams", str(BEAMS)], "sample": ["--sample", "--seed", str(SAMPLE_SEED)]}
DATA = "{data}"  # the data folder in a run's settings: the settings name files, not where this machine keeps them


@dataclass(frozen=True)
class Condition:
    """One training set of the forward model: A, and optionally B's German with English of ``english``."""

    name: str
    english: str | None  # B's English: None (A alone), "real", "sample" or "beam" (the reverse model's)
    tagged: bool
    seeds: tuple[int, ...]
    shown: str  # the page's name

    def corpora(self) -> list[str]:
        """vanilla-train's --train_files groups."""
        groups = ["--train_files", f"{DATA}/A.en", f"{DATA}/A.de"]
        if self.english is not None:
            english = "B.en" if self.english == "real" else f"B.bt-{self.english}.en"
            groups += ["--train_files", f"{DATA}/{english}", f"{DATA}/B.de", *([f"tag={TAG}"] if self.tagged else [])]
        return groups


CONDITIONS = (
    Condition("A", None, False, (1, 2, 3), "A alone"),
    Condition("A+B", "real", False, (1,), "A + B's real English (upper bound)"),
    Condition("A+BT-sample-tagged", "sample", True, (1, 2, 3), "A + BT by sampling, tagged"),
    Condition("A+BT-sample", "sample", False, (1,), "A + BT by sampling, untagged"),
    Condition("A+BT-beam-tagged", "beam", True, (1,), "A + BT by beam, tagged"),
    Condition("A+BT-beam", "beam", False, (1,), "A + BT by beam, untagged"),
)
BY_NAME = {condition.name: condition for condition in CONDITIONS}


@dataclass(frozen=True)
class Budget:
    """What every run of the round trains for, and on how much of the data: ``pairs``, a rehearsal's first N training
    pairs (N // 10 of validation and test2016), None for all of it. A rehearsal's data, models and records are kept
    apart from the round's (``folder``, ``data_folder``) and its settings name its data (``data``), so that nothing
    of it stands for a run of the round."""

    steps: int = STEPS
    tokens_per_step: int = TOKENS_PER_STEP
    warmup: int = WARMUP
    save_steps: int = SAVE_STEPS
    average: int = AVERAGE
    pairs: int | None = None

    @classmethod
    def of(cls, steps: int, pairs: int | None = None) -> "Budget":
        """The budget scaled to ``steps`` (a rehearsal's few): warm-up and checkpoints in the same proportions."""
        if steps < 1:
            raise UsageError(f"--steps {steps}: a run needs at least 1 step")
        if pairs is not None and pairs < 2:
            raise UsageError(f"--pairs {pairs}: a rehearsal needs at least 2 pairs, one for each half")
        save_steps = max(1, round(steps * SAVE_STEPS / STEPS))
        return cls(
            steps,
            TOKENS_PER_STEP,
            max(1, round(steps * WARMUP / STEPS)),
            save_steps,
            min(AVERAGE, steps // save_steps),
            pairs,
        )

    @property
    def folder(self) -> str:
        """Where its runs and records go under --runs and --results."""
        return f"{self.steps}-steps" + (f"-{self.pairs}-pairs" if self.pairs else "")

    @property
    def data_folder(self) -> str:
        """Where its data goes under --runs: the round's in data/, a rehearsal's in data-N-pairs/."""
        return "data" + (f"-{self.pairs}-pairs" if self.pairs else "")

    @property
    def data(self) -> str:
        """The data folder as its runs' settings name it: ``{data}`` for the round, ``{data-N-pairs}`` for a
        rehearsal (a record of one never matches a run of the other)."""
        return DATA.replace("data", self.data_folder)

    @property
    def held_out(self) -> int | None:
        """The lines of validation and test2016 its runs see: all (None), or a rehearsal's N // 10."""
        return self.pairs and max(1, self.pairs // 10)

    def flags(self) -> list[str]:
        """vanilla-train's flags of the budget, on top of the multi30k-tiny preset."""
        return [
            "--config",
            "multi30k-tiny",
            "--dataset",
            "files",
            "--max_steps",
            str(self.steps),
            "--tokens_per_step",
            str(self.tokens_per_step),
            "--warmup_steps",
            str(self.warmup),
            "--eval_strategy",
            "no",
            "--save_strategy",
            "steps",
            "--save_steps",
            str(self.save_steps),
            "--save_total_limit",
            str(self.average),
            "--average_last",
            str(self.average),
            "--final_splits",
            "test",
            *precision_flags(PRECISION),
        ]


@dataclass(frozen=True)
class Run:
    """One vanilla-train run of the experiment: the reverse model, or one seed of a condition."""

    name: str
    seed: int
    direction: tuple[str, str]  # (source, target) languages
    corpora: tuple[str, ...]

    @classmethod
    def reverse(cls) -> "Run":
        return cls("reverse-de-en", 1, ("de", "en"), ("--train_files", f"{DATA}/A.de", f"{DATA}/A.en"))

    @classmethod
    def forward(cls, condition: Condition, seed: int) -> "Run":
        return cls(condition.name, seed, ("en", "de"), tuple(condition.corpora()))

    def settings(self, budget: Budget) -> list[str]:
        """vanilla-train's arguments but the output folders, with the data folder as ``{data}``: what a record must
        match to be skipped."""
        source, target = self.direction
        settings = [
            *budget.flags(),
            "--source_lang",
            source,
            "--target_lang",
            target,
            *self.corpora,
            "--validation_files",
            f"{DATA}/validation.{source}",
            f"{DATA}/validation.{target}",
            "--test_files",
            f"{DATA}/test.{source}",
            f"{DATA}/test.{target}",
            "--seed",
            str(self.seed),
        ]
        return [arg.replace(DATA, budget.data) for arg in settings]

    @property
    def folder(self) -> str:
        return f"{self.name}/seed-{self.seed}"

    def __str__(self) -> str:
        return f"{self.name} seed {self.seed}"


def plan(budget: Budget, conditions: tuple[Condition, ...] = CONDITIONS) -> list[Run]:
    """The reverse model where a condition needs its back-translations, then every condition's first seed, then the
    further seeds: the comparison that decides most comes first, so a sweep cut short over sessions still says
    something."""
    rounds = max(len(condition.seeds) for condition in conditions)
    forward = [Run.forward(c, c.seeds[i]) for i in range(rounds) for c in conditions if i < len(c.seeds)]
    needs_reverse = any(condition.english in BACK_TRANSLATIONS for condition in conditions)
    return [Run.reverse()] * needs_reverse + forward


def read_bundled(name: str, limit: int | None = None) -> list[str]:
    with gzip.open(BUNDLED / f"{name}.gz", "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[:limit] if limit else lines


def recorded(run: Run, budget: Budget, results: Path) -> dict | None:
    """The run's record under ``results`` if it holds these settings."""
    return launch.recorded(results / budget.folder / run.folder / SUMMARY, run.settings(budget), REMEDY)
