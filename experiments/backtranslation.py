"""`python -m experiments.backtranslation`: one round of back-translation (Sennrich et al. 2016; sampling, Edunov et
al. 2018; tagged, Caswell et al. 2019) measured on the bundled Multi30k en->de, and docs/backtranslation.md written
from its records (issue 113).

    python -m experiments.backtranslation            # every run not yet recorded, in order; then the page
    python -m experiments.backtranslation --report   # the page from the records, nothing trained

The data: Multi30k's 29,000 training pairs split in two halves by a fixed permutation (``SPLIT_SEED``): A (14,500
pairs) and B (14,500), whose English is set aside but for the upper bound. The reverse model (de->en) trains on A and
translates B's German twice: by beam search (beam 5) and by sampling (the full distribution, ``--seed 1``), its output
detokenized as a user's files would be. The forward models (en->de) then train on:

- A alone (3 seeds);
- A + B back-translated by sampling, tagged ``<BT>`` (3 seeds), and untagged (1 seed);
- A + B back-translated by beam search, tagged and untagged (1 seed each);
- A + B's real English: the upper bound (1 seed).

The budget, stated before any run (issue 113 allows the preset's or a smaller one): Wu et al.'s Transformer-Tiny
recipe (``--config multi30k-tiny``: lowercased, Moses-tokenized text, 10k BPE, beam 5) for ``STEPS`` steps of
``TOKENS_PER_STEP`` tokens (one batch a step) instead of 8,000 of 8,192, warm-up ``WARMUP`` steps (the recipe's 2,000
would end the run at its peak), fp32 on every machine (so that any session continues the sweep with runs that compare),
no evaluation while training, a checkpoint every ``SAVE_STEPS`` steps and the last ``AVERAGE`` averaged: the same
window of steps whatever the size of the training set (the preset's last 10 epochs would average a run on A + B over
twice the steps of a run on A). Each run is scored on test2016 by vanilla-train and its translations written again by
vanilla-translate (generate(), beam 5) for the page's intervals.

The page reports, per condition, each seed's sacreBLEU and lowercased, tokenized BLEU (vanilla-train's record), and
the fraction of the gap between A alone and the upper bound that back-translation recovers, ``(BT - A) / (A+B - A)``,
with a 95% interval from a bootstrap that draws both the test sentences and, where a condition has several, its seeds
(the upper bound's one seed is drawn over sentences only: its seed variance is not in the interval).

Resumable: a run recorded with the same settings is skipped; a run stopped while training goes on from its newest
checkpoint (vanilla-train's relaunch); the synthetic English is kept in the results (gzipped), so a later session on a
fresh clone needs neither the reverse model nor its runs folder. Each run's record holds vanilla-train's summary (the
code, machine, device, precision, steps and seed) with the experiment's settings and the test translations.
"""

import argparse
import gzip
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from training.api import run_launches
from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.metrics import statistics_bleu, tokenized_bleu_statistics
from vanilla_tools.run_files import read_json, write_json

from . import launch
from .comparable import FP32, precision_flags
from .launch import ROOT, SUMMARY, shown

logger = logging.getLogger("backtranslation")
BUNDLED = ROOT / "data" / "multi30k"
RESULTS = ROOT / "results" / "backtranslation"
PAGE = ROOT / "docs" / "backtranslation.md"
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
BOOTSTRAP_DRAWS = 1000
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


# The data


def read_bundled(name: str, limit: int | None = None) -> list[str]:
    with gzip.open(BUNDLED / f"{name}.gz", "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[:limit] if limit else lines


def halves(pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of A and of B: a fixed permutation of the ``pairs`` training pairs cut in two, each half in file order."""
    order = np.random.default_rng(SPLIT_SEED).permutation(pairs)
    return np.sort(order[: pairs // 2]), np.sort(order[pairs // 2 :])


def write_if_changed(path: Path, lines: list[str]) -> None:
    """Write ``lines`` unless ``path`` holds them already (datasets' cache keys on the file's time: a rewrite of the
    same text would tokenize it again)."""
    text = "".join(f"{line}\n" for line in lines)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def prepare_data(data: Path, budget: Budget) -> None:
    """The halves, validation and test2016 as vanilla-train's files in ``data`` (a rehearsal's budget: the first N
    training pairs, and the first N // 10 lines of validation and test2016)."""
    data.mkdir(parents=True, exist_ok=True)
    train = {lang: read_bundled(f"train.{lang}", budget.pairs) for lang in ("en", "de")}
    a, b = halves(len(train["en"]))
    held_out = budget.held_out
    for lang, lines in train.items():
        write_if_changed(data / f"A.{lang}", [lines[i] for i in a])
        write_if_changed(data / f"B.{lang}", [lines[i] for i in b])
        write_if_changed(data / f"validation.{lang}", read_bundled(f"val.{lang}", held_out))
        write_if_changed(data / f"test.{lang}", read_bundled(f"test_2016_flickr.{lang}", held_out))


# The runs


def vanilla(module: str, argv: list[str], what: str) -> list[str]:
    """One program of the round, and the command that ran; stopped by a signal, the same command goes on where it
    stopped."""
    return launch.launch(module, argv, what, after_stop=AFTER_STOP)


AFTER_STOP = "; the same command goes on where it stopped"


def recorded(run: Run, budget: Budget, results: Path) -> dict | None:
    """The run's record under ``results`` if it holds these settings."""
    return launch.recorded(results / budget.folder / run.folder / SUMMARY, run.settings(budget), REMEDY)


def train(run: Run, budget: Budget, runs: Path, results: Path) -> None:
    """vanilla-train for ``run`` (from its newest checkpoint where one stopped), its test2016 translated again for
    the page, and the record filed; summary.json last, so a folder cut short is no record."""
    output_dir = runs / budget.folder / run.folder
    data = runs / budget.data_folder
    argv = [arg.replace(budget.data, str(data)) for arg in run.settings(budget)]
    _, summary = launch.train(
        argv, output_dir, str(run), remedy=f"delete {shown(output_dir)} and run again", after_stop=AFTER_STOP
    )
    target = results / budget.folder / run.folder
    target.mkdir(parents=True, exist_ok=True)
    source, _ = run.direction
    if run.direction == ("en", "de"):
        translations = [
            str(data / f"test.{source}"),
            "--model",
            str(output_dir),
            "--output",
            str(target / TRANSLATIONS),
        ]
        vanilla(
            "inference.translate", [*translations, "--engine", "generate", "--num_beams", str(BEAMS)], f"{run}: test"
        )
    write_json(target / SUMMARY, {**summary, "experiment": "backtranslation", "settings": run.settings(budget)})


# The back-translations


def back_translate(budget: Budget, runs: Path, results: Path) -> None:
    """B's German in English by the reverse model, by beam search and by sampling (CTranslate2, float32), each kept
    gzipped in the results with what made it, then written where the forward runs read it."""
    kept, data = results / budget.folder / "synthetic", runs / budget.data_folder
    model = runs / budget.folder / Run.reverse().folder
    for mode, flags in BACK_TRANSLATIONS.items():
        name = f"B.bt-{mode}.en"
        if not (kept / f"{name}.gz").is_file():
            if not (model / "config.json").is_file():
                raise UsageError(
                    f"the reverse model is recorded but {shown(model)} holds no model to back-translate with: delete "
                    f"{shown(results / budget.folder / Run.reverse().name)} and it is trained again"
                )
            output = data / f"{name}.part"
            options = ["--detokenize", "--engine", "ctranslate2", "--quantization", "float32", *flags]
            argv = [shown(data / "B.de"), "--model", shown(model), "--output", shown(output), *options]
            command = vanilla("inference.translate", argv, f"back-translation by {mode}")
            lines = output.read_text(encoding="utf-8").splitlines()
            kept.mkdir(parents=True, exist_ok=True)
            with gzip.open(kept / f"{name}.gz.part", "wt", encoding="utf-8") as f:
                f.writelines(f"{line}\n" for line in lines)
            reverse = read_json(results / budget.folder / Run.reverse().folder / SUMMARY, dict, REMEDY) or {}
            write_json(
                kept / f"{name}.json",
                {
                    "mode": mode,
                    "translate": command,
                    "lines": len(lines),
                    "reverse_model": reverse.get("run", {}).get("code"),
                    "test2016_en": reverse.get("test"),
                },
            )
            (kept / f"{name}.gz.part").rename(kept / f"{name}.gz")
            output.unlink()
        with gzip.open(kept / f"{name}.gz", "rt", encoding="utf-8") as f:
            write_if_changed(data / name, f.read().splitlines())


def synthetic_kept(budget: Budget, results: Path) -> bool:
    return all((results / budget.folder / "synthetic" / f"B.bt-{mode}.en.gz").is_file() for mode in BACK_TRANSLATIONS)


# The scores and their intervals


def gap_fraction(a: list[np.ndarray], treatment: list[np.ndarray], upper: list[np.ndarray]) -> dict:
    """How much of the gap from A alone to the upper bound ``treatment`` recovers, (T - A) / (U - A) on seed means,
    and its 95% interval: ``BOOTSTRAP_DRAWS`` draws of the test sentences and of each condition's seeds."""

    def mean(runs: list[np.ndarray], rows: np.ndarray, seeds: np.ndarray) -> float:
        return float(np.mean([statistics_bleu(runs[s][rows]) for s in seeds]))

    every = np.arange(len(a[0]))
    values = [mean(c, every, np.arange(len(c))) for c in (a, treatment, upper)]
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(BOOTSTRAP_DRAWS):
        rows = rng.integers(0, len(every), len(every))
        base, bt, top = (mean(c, rows, rng.integers(0, len(c), len(c))) for c in (a, treatment, upper))
        if top != base:
            draws.append((bt - base) / (top - base))
    point = (values[1] - values[0]) / (values[2] - values[0]) if values[2] != values[0] else None
    low, high = np.percentile(draws, [2.5, 97.5]) if draws else (None, None)
    return {"fraction": point, "low": low, "high": high, "draws": len(draws)}


# The page


def records(budget: Budget, results: Path) -> dict[Run, dict]:
    """Every recorded run of the plan, with its settings as the plan's."""
    return {run: found for run in plan(budget) if (found := recorded(run, budget, results)) is not None}


def seed_statistics(budget: Budget, results: Path, condition: Condition, done: dict[Run, dict]) -> list[np.ndarray]:
    """Each recorded seed's sentence statistics on test2016 (a rehearsal's: its first lines), from its translations;
    a file of another length than the references it was made from is refused, naming both."""
    references = read_bundled("test_2016_flickr.de", budget.held_out)
    statistics = []
    for run in (r for r in done if r.name == condition.name):
        path = results / budget.folder / run.folder / TRANSLATIONS
        translations = path.read_text(encoding="utf-8").splitlines()
        if len(translations) != len(references):
            raise UsageError(
                f"{shown(path)}: {len(translations)} translations of test2016's {len(references)} sentences; {REMEDY}"
            )
        statistics.append(tokenized_bleu_statistics(translations, references, "de"))
    return statistics


def scores_cell(runs: list[dict], key: str, digits: int = 2) -> str:
    values = [run["test"][key] for run in runs]
    if not values:
        return "not run"
    listed = ", ".join(f"{v:.{digits}f}" for v in values)
    return listed if len(values) == 1 else f"{listed} (mean {np.mean(values):.{digits}f})"


def code_cell(record: dict) -> str:
    """The commit that trained a run (its summary.json's); a run resumed after a stop names each launch's commit and
    the steps it trained."""
    launches = run_launches(record)
    if len(launches) < 2:
        return record["run"]["code"]["commit"][:7]
    return ", ".join(f"{run['code']['commit'][:7]} (steps {run['first_step']}-{run['last_step']})" for run in launches)


def gap_cell(gap: dict | None) -> str:
    if gap is None or gap["fraction"] is None:
        return ""
    return f"{gap['fraction']:.0%} [{gap['low']:.0%}, {gap['high']:.0%}]"


# What the table's columns beside BLEU are, and what the literature leads one to expect at this size
LENGTH_AND_EXPECTATION = [
    "The length ratio is sacreBLEU's: the length of the model's test translations over the references' (below 1, the "
    'brevity penalty lowers BLEU). Edunov et al. (2018) find back-translation by sampling the most effective "in all '
    'but resource poor settings"; here the real parallel data is 14,500 pairs.',
]


def page(budget: Budget, results: Path) -> str:
    """docs/backtranslation.md from the records under ``results``."""
    done = records(budget, results)
    by_condition = {c.name: [done[r] for r in done if r.name == c.name] for c in CONDITIONS}
    statistics = {c.name: seed_statistics(budget, results, c, done) for c in CONDITIONS}
    gaps = {}
    for condition in CONDITIONS:
        if condition.english not in (None, "real") and all(statistics[n] for n in ("A", "A+B", condition.name)):
            gaps[condition.name] = gap_fraction(statistics["A"], statistics[condition.name], statistics["A+B"])
    lines = [
        "# One back-translation round on Multi30k (issue 113)",
        "",
        "Generated by `python -m experiments.backtranslation --report` from results/backtranslation/: do not edit. "
        "What is measured and why: the module's docstring (experiments/backtranslation.py).",
        "",
        "```bash",
        "python -m experiments.backtranslation            # the runs not yet recorded, then this page",
        "python -m experiments.backtranslation --report   # this page only",
        "```",
        "",
        f"Multi30k's training pairs split in halves A and B (a fixed permutation, seed {SPLIT_SEED}); B's English is "
        "set aside but for the upper bound. The reverse model (de->en) trains on A and translates B's German by beam "
        f"search (beam {BEAMS}) and by sampling (the whole distribution, seed {SAMPLE_SEED}); the forward models "
        f"(en->de) train on A with or without them, the synthetic sources tagged `{TAG}` or not. Every run: "
        f"`--config multi30k-tiny` (Wu et al.'s Transformer-Tiny, lowercased and tokenized text) for "
        f"{budget.steps:,} steps of {budget.tokens_per_step:,} tokens, warm-up {budget.warmup}, the last "
        f"{budget.average} checkpoints of every {budget.save_steps} steps averaged, {PRECISION}; the budget was "
        "stated before the first run. Scores on test2016 (1,000 sentences), beam 5: sacreBLEU of the model's "
        "lowercased, tokenized text and the lowercased, tokenized BLEU of the Multi30k papers.",
        "",
        "| training set | test2016 sacreBLEU | lowercased tokenized BLEU | length ratio | of the gap recovered [95%] |",
        "| --- | --- | --- | --- | --- |",
    ]
    for condition in CONDITIONS:
        runs = by_condition[condition.name]
        lines.append(
            f"| {condition.shown} | {scores_cell(runs, 'bleu')} | {scores_cell(runs, 'bleu_lc_tok')} | "
            f"{scores_cell(runs, 'length_ratio', 3)} | {gap_cell(gaps.get(condition.name))} |"
        )
    lines += ["", *findings(by_condition, gaps), "", *LENGTH_AND_EXPECTATION, "", "## The runs", ""]
    # no minutes: a run's wall clock depends on the machine and what ran beside it (its summary.json has them)
    for run, record in done.items():
        about, direction = record["run"], "->".join(run.direction)
        lines.append(
            f"- {run}: code {code_cell(record)}, {about['device']['name']}, {about['precision']}, "
            f"{about['steps']:,} steps; test2016 "
            f"{record['test']['bleu_lc_tok']:.2f} lowercased tokenized BLEU ({direction})."
        )
    missing = [str(run) for run in plan(budget) if run not in done]
    lines += ["", "Not yet run: " + (", ".join(missing) if missing else "none") + "."]
    lines += [
        "",
        f"The intervals: {BOOTSTRAP_DRAWS:,} bootstrap draws of the 1,000 test sentences and, for a condition with "
        "several, of its seeds; the upper bound's single seed is drawn over sentences only, so its seed variance is "
        "not in them.",
    ]
    return "\n".join([*lines, "", *BY_HAND]) + "\n"


# A user's own round, the commands the experiment runs (its budget's flags left out), on the files it writes
BY_HAND = [
    "## The same round by hand",
    "",
    "The experiment writes the halves to runs/backtranslation/data/ (here `$D`; `D=runs/backtranslation/data`); "
    "with the recipe's own budget, a round is:",
    "",
    "```bash",
    "vanilla-train --config multi30k-tiny --dataset files --source_lang de --target_lang en \\",
    "  --train_files $D/A.de $D/A.en --validation_files $D/validation.de $D/validation.en \\",
    "  --test_files $D/test.de $D/test.en --output_dir runs/reverse",
    "vanilla-translate $D/B.de --model runs/reverse --sample --seed 1 --detokenize --output $D/B.bt-sample.en",
    "vanilla-train --config multi30k-tiny --dataset files --source_lang en --target_lang de \\",
    "  --train_files $D/A.en $D/A.de --train_files $D/B.bt-sample.en $D/B.de tag='<BT>' \\",
    "  --validation_files $D/validation.en $D/validation.de --test_files $D/test.en $D/test.de \\",
    "  --output_dir runs/tagged",
    "```",
    "",
    "The tag is a token of its own in the learned vocabulary, put before each synthetic source after the text is "
    "lowercased and tokenized; test sources carry none (docs/training.md, several corpora).",
]


def findings(by_condition: dict[str, list[dict]], gaps: dict[str, dict]) -> list[str]:
    """What the table shows, in words, from its numbers; nothing where the comparison has not run."""
    said = []
    for name, gap in gaps.items():
        if gap["fraction"] is None:
            continue
        shown_name = BY_NAME[name].shown
        if gap["low"] > 0:
            verdict = "helps: its interval is above 0"
        elif gap["high"] < 0:
            verdict = "hurts: its interval is below 0"
        else:
            verdict = "is not told apart from A alone: its interval holds 0"
        said.append(f"- {shown_name} recovers {gap['fraction']:.0%} of the gap; it {verdict}.")
    return said or ["No back-translation run is compared yet."]


# The command


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.backtranslation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--report", action="store_true", help="write the page from the records; train nothing")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "backtranslation"), help="the models and the data")
    parser.add_argument("--results", default=str(RESULTS), help="where the records go")
    parser.add_argument("--page", default=str(PAGE), help="the page written from them")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"each run's steps (default {STEPS}, the budget)")
    parser.add_argument(
        "--conditions",
        nargs="+",
        choices=list(BY_NAME),
        default=list(BY_NAME),
        help="the training sets to run (default: all; the reverse model runs where one needs it)",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        help="a rehearsal: the first N training pairs, N // 10 of validation and test2016 (its runs, data and "
        "records apart, in STEPS-steps-N-pairs/ and data-N-pairs/; with --report, its page)",
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    results, runs = Path(args.results).resolve(), Path(args.runs).resolve()
    budget = Budget.of(args.steps, args.pairs)
    if not args.report:
        prepare_data(runs / budget.data_folder, budget)
        for planned in plan(budget, tuple(BY_NAME[name] for name in args.conditions)):
            if planned == Run.reverse():
                if synthetic_kept(budget, results):
                    back_translate(budget, runs, results)
                    continue
            if recorded(planned, budget, results) is not None:
                logger.info("%s: recorded, skipped", planned)
            else:
                train(planned, budget, runs, results)
            if planned == Run.reverse():
                back_translate(budget, runs, results)
    Path(args.page).write_text(page(budget, results), encoding="utf-8")
    print(f"wrote {args.page}")


main = console_script(run)

if __name__ == "__main__":
    main()
