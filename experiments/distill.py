"""`python -m experiments.distill`: sequence-level knowledge distillation (Kim & Rush, 2016) on the bundled Multi30k
en->de, and docs/distillation.md written from its records (issue 119, item 2).

    python -m experiments.distill                     # every stage, each skipping what its records show done
    python -m experiments.distill --stages teachers   # one stage (or several, in order)
    python -m experiments.distill --report            # the page from the records, nothing run
    python -m experiments.distill --trainings 1       # a session's share: at most one vanilla-train run, then stop

The budget and every choice are experiments/distill_budget.yaml, committed before the first run. The stages, in order:

- teachers: 3 seeds of multi30k-tiny, by vanilla-train;
- ensemble: the teachers' ensemble translates validation in each --ensemble_mode; the higher lowercased, tokenized
  BLEU is the mode chosen (recorded with the time it was chosen);
- distilled: the ensemble's beam translations of the 29,000 training sources, kept gzipped in results/distill/ with
  what made them (the command, the teachers' commits, the mode), so that a fresh clone trains students without the
  teachers; a file of another length than its sources is refused in one line;
- students: seed 1 of each mix of distilled and original pairs, the mix chosen on validation (recorded when), its
  further seeds, and the small student (a deep encoder, a shallow decoder);
- scores: test2016, once for each teacher, the ensemble and each chosen student: lowercased, tokenized BLEU and
  sacreBLEU of the model's text;
- speed: vanilla-bench (beam 4, batches 64 and 1; CTranslate2 float32 and int8, generate()) for teacher seed 1, the
  chosen students' seed 1 and the small student, all in one run of the command, and each model's size on disk.

Resumable: a run recorded with the same settings is skipped (vanilla-train goes on from the newest checkpoint of a run
stopped while it trained), as is every decode whose record exists. A rehearsal (``--pairs N``: the first N training
pairs, N // 10 of validation and test2016, with ``--steps``) names its data in its runs' settings and keeps its data,
models and records apart (STEPS-steps-N-pairs/, data-N-pairs/).

Each run's model is kept when it finishes, its weights stored in float16 (``hub_card.stored``: 5.2 MB for a
multi30k-tiny model, loaded back in float32), under results/distill/STEPS-steps/models/, committed: runs/ does not
survive a change of machine, and every later stage loads the kept models (the ensemble's and the distilled set's
teachers, test2016's and the speed's models), the same weights on every machine. A run stopped part-way is not
carried (its checkpoint with Adam's state is 28 MiB): it starts again in a later session (docs/distillation.md).
"""

import argparse
import gzip
import logging
import time
from pathlib import Path

from hub_card.stored import store_float16
from vanilla_tools.cli import UsageError, console_script, positive_int
from vanilla_tools.metrics import score_in_form
from vanilla_tools.run_files import read_json, write_json
from vanilla_tools.text_form import TextForm

from . import launch
from .backtranslation import write_if_changed
from .backtranslation_round import read_bundled
from .distill_page import page
from .distill_plan import (
    DISTILLED,
    REMEDY,
    ROOT_RUNS,
    Budget,
    Run,
    check_aligned,
    chosen_students,
    mix_candidates,
    recorded,
    teachers,
    validation_bleu,
)
from .launch import ROOT, SUMMARY, shown

logger = logging.getLogger("distill")
RESULTS = ROOT / "results" / "distill"
PAGE = ROOT / "docs" / "distillation.md"
STAGES = ("teachers", "ensemble", "distilled", "students", "scores", "speed")
AFTER_STOP = "; the same command goes on where it stopped"
FORM = TextForm.moses_lowercase("en", "de")  # multi30k-tiny's text: the models write it, the scores read it


class TrainingsDone(Exception):
    """The command has launched the vanilla-train runs it was allowed (``--trainings``) and another is due."""


class Paths:
    """Where a budget's data, models and records go, and how many runs this command may still train (None: any)."""

    def __init__(self, budget: Budget, runs: Path, results: Path, trainings: int | None = None):
        self.budget = budget
        self.trainings = trainings
        self.data = runs / budget.layout.data_folder
        self.models = runs / budget.layout.folder
        self.records = results / budget.layout.folder

    def model(self, run: Run) -> Path:
        return self.models / run.folder

    def record(self, run: Run) -> Path:
        return self.records / run.folder

    def kept(self, run: Run) -> Path:
        """The run's model as the results keep it (float16 weights), what every later stage loads."""
        return self.records / "models" / run.folder


def keep(path: Path, record: dict) -> None:
    """A record filed at ``path``, its folder made where it is the first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)


# The data


def prepare_data(paths: Paths) -> None:
    """Training, validation and test2016 as vanilla-train's files (a rehearsal's first lines), and the distilled
    targets where the results keep them."""
    paths.data.mkdir(parents=True, exist_ok=True)
    held_out = paths.budget.layout.held_out
    for lang in ("en", "de"):
        write_if_changed(paths.data / f"train.{lang}", read_bundled(f"train.{lang}", paths.budget.pairs))
        write_if_changed(paths.data / f"validation.{lang}", read_bundled(f"val.{lang}", held_out))
        write_if_changed(paths.data / f"test.{lang}", read_bundled(f"test_2016_flickr.{lang}", held_out))
    kept = paths.records / "distilled" / f"{DISTILLED}.gz"
    if kept.is_file():
        write_if_changed(paths.data / DISTILLED, read_distilled(kept, paths.data / "train.en"))


def read_distilled(kept: Path, sources: Path) -> list[str]:
    """The kept distilled targets, refused where they are not one line a training source."""
    with gzip.open(kept, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    check_aligned(kept, len(lines), len(sources.read_text(encoding="utf-8").splitlines()))
    return lines


# Runs and decodes


def train(run: Run, paths: Paths) -> dict:
    """The run's record: found with its settings, else vanilla-train runs (resuming a stopped run), its model is
    kept in the results and the record is filed, summary.json last."""
    if (found := recorded(run, paths.budget, paths.records.parent)) is not None:
        logger.info("%s: recorded, skipped", run)
        return found
    if paths.trainings == 0:
        raise TrainingsDone(str(run))
    if paths.trainings is not None:
        paths.trainings -= 1
    output_dir = paths.model(run)
    argv = [arg.replace(paths.budget.layout.data, str(paths.data)) for arg in run.settings(paths.budget)]
    _, summary = launch.train(
        argv, output_dir, str(run), remedy=f"delete {shown(output_dir)} and run again", after_stop=AFTER_STOP
    )
    stored = store_float16(output_dir, paths.kept(run))
    logger.info("%s: its model kept in %s (%.1f MiB)", run, shown(paths.kept(run)), stored["bytes"] / 2**20)
    record = {**summary, "experiment": "distill", "settings": run.settings(paths.budget), "kept": stored}
    keep(paths.record(run) / SUMMARY, record)
    return record


def translate(models: list[Path], source: Path, output: Path, what: str, options: list[str]) -> list[str]:
    """vanilla-translate of ``source`` by ``models`` (an ensemble where several) to ``output`` in the model's text;
    returns the command that ran."""
    argv = [shown(source), *(arg for model in models for arg in ("--model", shown(model))), "--output", shown(output)]
    output.parent.mkdir(parents=True, exist_ok=True)
    return launch.launch("inference.translate", [*argv, *options], what, after_stop=AFTER_STOP)


def decoding(budget: Budget) -> list[str]:
    distilled = budget.plan["distilled"]
    return ["--num_beams", str(distilled["num_beams"]), "--length_penalty", str(distilled["length_penalty"])]


def scored(translations: Path, references: Path) -> dict:
    """Lowercased, tokenized BLEU and sacreBLEU of the model's text, as vanilla-train's final scores count them."""
    hypotheses = translations.read_text(encoding="utf-8").splitlines()
    lines = references.read_text(encoding="utf-8").splitlines()
    scores = score_in_form(hypotheses, [FORM.target(line) for line in lines], FORM)
    return {"bleu_lc_tok": scores.bleu_lc_tok, "bleu": scores.bleu, "lc_tok_signature": scores.lc_tok_signature}


def decode_once(record: Path, models: list[Path], source: Path, references: Path, what: str, options: list[str]):
    """The record of a decode and its score, made once: found, it is read back."""
    if (found := read_json(record, dict, REMEDY)) is not None:
        logger.info("%s: recorded, skipped", what)
        return found
    translations = record.with_suffix(".de")
    command = translate(models, source, translations, what, options)
    found = {"translate": command, **scored(translations, references), "time": time.strftime("%Y-%m-%d %H:%M UTC")}
    keep(record, found)
    return found


def teacher_models(paths: Paths) -> list[Path]:
    return [kept(run, paths) for run in teachers(paths.budget)]


def kept(run: Run, paths: Paths) -> Path:
    """The run's kept model, refused in one line where its record stands without it."""
    if not (paths.kept(run) / "config.json").is_file():
        raise UsageError(f"{run} is recorded but {shown(paths.kept(run))} holds no model: delete its record")
    return paths.kept(run)


# The stages


def stage_teachers(paths: Paths) -> None:
    for run in teachers(paths.budget):
        train(run, paths)


def stage_ensemble(paths: Paths) -> str:
    """The ensemble mode chosen on validation: each mode's decode recorded, the higher chosen (a tie: the first)."""
    chosen = paths.records / "ensemble" / "mode.json"
    if (found := read_json(chosen, dict, REMEDY)) is not None:
        return found["mode"]
    scores = {}
    for mode in paths.budget.plan["ensemble_modes"]:
        record = paths.records / "ensemble" / f"validation-{mode}.json"
        options = [*decoding(paths.budget), "--engine", "generate", "--ensemble_mode", mode]
        source, references = paths.data / "validation.en", paths.data / "validation.de"
        found = decode_once(record, teacher_models(paths), source, references, f"ensemble {mode}: validation", options)
        scores[mode] = found["bleu_lc_tok"]
    mode = max(scores, key=lambda name: (scores[name], -list(scores).index(name)))
    keep(chosen, {"mode": mode, "validation_bleu_lc_tok": scores, "chosen": time.strftime("%Y-%m-%d %H:%M UTC")})
    return mode


def stage_distilled(paths: Paths, mode: str) -> None:
    """The training sources translated by the ensemble, kept gzipped with what made them."""
    kept = paths.records / "distilled"
    if (kept / f"{DISTILLED}.gz").is_file():
        logger.info("distilled set: recorded, skipped")
        return
    output = paths.data / f"{DISTILLED}.part"
    options = [*decoding(paths.budget), "--engine", "generate", "--ensemble_mode", mode]
    command = translate(teacher_models(paths), paths.data / "train.en", output, "distilled set", options)
    lines = output.read_text(encoding="utf-8").splitlines()
    check_aligned(output, len(lines), len((paths.data / "train.en").read_text(encoding="utf-8").splitlines()))
    kept.mkdir(parents=True, exist_ok=True)
    with gzip.open(kept / f"{DISTILLED}.gz.part", "wt", encoding="utf-8") as f:
        f.writelines(f"{line}\n" for line in lines)
    records = {run.seed: recorded(run, paths.budget, paths.records.parent) or {} for run in teachers(paths.budget)}
    keep(
        kept / f"{DISTILLED}.json",
        {
            "translate": command,
            "ensemble_mode": mode,
            "lines": len(lines),
            "teachers": [{"seed": seed, "code": r.get("run", {}).get("code")} for seed, r in records.items()],
        },
    )
    (kept / f"{DISTILLED}.gz.part").rename(kept / f"{DISTILLED}.gz")
    output.rename(paths.data / DISTILLED)


def stage_students(paths: Paths) -> str:
    """Seed 1 of each mix, the mix chosen on validation (recorded once, with when), then its seeds and the small
    student; returns the chosen mix."""
    if not (paths.data / DISTILLED).is_file():
        raise UsageError("the students need the distilled set: run the distilled stage first")
    candidates = {run.mix: validation_bleu(train(run, paths)) for run in mix_candidates(paths.budget)}
    chosen = paths.records / "students" / "mix.json"
    if (found := read_json(chosen, dict, REMEDY)) is None:
        mix = max(candidates, key=lambda name: (candidates[name], -list(candidates).index(name)))
        found = {"mix": mix, "validation_bleu_lc_tok": candidates, "chosen": time.strftime("%Y-%m-%d %H:%M UTC")}
        keep(chosen, found)
    for run in chosen_students(paths.budget, found["mix"]):
        train(run, paths)
    return found["mix"]


def scored_models(paths: Paths) -> dict[str, list[Path]]:
    """Every model scored on test2016, by its record's name: each teacher, the ensemble, each chosen student."""
    mix = read_json(paths.records / "students" / "mix.json", dict, REMEDY)
    if mix is None:
        raise UsageError("the scores need the students' chosen mix: run the students stage first")
    runs = [*teachers(paths.budget), *chosen_students(paths.budget, mix["mix"])]
    return {"ensemble": teacher_models(paths)} | {run.folder: [kept(run, paths)] for run in runs}


def stage_scores(paths: Paths, mode: str) -> None:
    for name, models in scored_models(paths).items():
        options = [*decoding(paths.budget), "--engine", "generate"]
        options += ["--ensemble_mode", mode] if len(models) > 1 else []
        record = paths.records / "scores" / f"{name.replace('/', '-')}.json"
        decode_once(record, models, paths.data / "test.en", paths.data / "test.de", f"{name}: test2016", options)


def size_on_disk(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def stage_speed(paths: Paths) -> None:
    """vanilla-bench for teacher seed 1, each chosen mix's seed 1 and the small students, all again in one run of the
    command unless each is recorded (their ratios compare measurements of one session)."""
    speed = paths.budget.plan["speed"]
    models = {name: m[0] for name, m in scored_models(paths).items() if name.endswith("seed-1")}
    records = {name: paths.records / "speed" / f"{name.replace('/', '-')}.json" for name in models}
    if all(record.is_file() for record in records.values()):
        logger.info("speed: recorded, skipped")
        return
    measured = time.strftime("%Y-%m-%d %H:%M UTC")
    for name, model in models.items():
        bench = records[name].with_suffix(".bench.json")
        argv = ["--translate", shown(model), "--source", shown(paths.data / "test.en")]
        argv += ["--references", shown(paths.data / "test.de"), "--json", shown(bench)]
        argv += ["--engines", *speed["engines"], "--batch_sizes", *map(str, speed["batch_sizes"])]
        bench.parent.mkdir(parents=True, exist_ok=True)
        command = launch.launch("inference.bench", argv, f"{name}: speed", after_stop=AFTER_STOP)
        sizes = {"weights": size_on_disk(model / "model.safetensors") if (model / "model.safetensors").is_file() else 0}
        sizes |= {p.name: size_on_disk(p) for p in model.glob("ctranslate2-*") if p.is_dir()}
        keep(records[name], {"bench": command, "measured": measured, "bytes": sizes})


def run_stages(stages: list[str], paths: Paths) -> None:
    prepare_data(paths)
    mode = None
    for stage in STAGES:
        if stage not in stages:
            continue
        if stage == "teachers":
            stage_teachers(paths)
        elif stage == "ensemble":
            mode = stage_ensemble(paths)
        elif stage == "students":
            stage_students(paths)
        elif stage == "speed":
            stage_speed(paths)
        else:
            mode = mode or chosen_mode(paths)
            (stage_distilled if stage == "distilled" else stage_scores)(paths, mode)
        prepare_data(paths)  # the distilled targets, once kept, where the students read them


def chosen_mode(paths: Paths) -> str:
    found = read_json(paths.records / "ensemble" / "mode.json", dict, REMEDY)
    if found is None:
        raise UsageError("no ensemble mode is chosen yet: run the ensemble stage first")
    return found["mode"]


# The command


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.distill", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    launch.add_record_arguments(parser, runs=ROOT_RUNS, results=RESULTS, page=PAGE)
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES), help="default: all, in order")
    parser.add_argument("--steps", type=int, help="each run's steps (default: the budget's)")
    parser.add_argument(
        "--trainings",
        type=positive_int,
        help="launch at most N vanilla-train runs (a run found recorded is not one), then stop with the page written: "
        "a session that must finish what it starts trains one (--trainings 1)",
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    budget = Budget.of(args.steps, args.pairs)
    paths = Paths(budget, Path(args.runs).resolve(), Path(args.results).resolve(), args.trainings)
    if not args.report:
        try:
            run_stages(args.stages, paths)
        except TrainingsDone as done:
            logger.info("--trainings %d done: %s is the next run, the same command trains it", args.trainings, done)
    Path(args.page).write_text(page(budget, paths.records), encoding="utf-8")
    print(f"wrote {args.page}")


main = console_script(run)

if __name__ == "__main__":
    main()
