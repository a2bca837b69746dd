"""The distillation experiment (experiments.distill): the budget stated in distill_budget.yaml as the runs' settings,
what a record must match to be skipped, a rehearsal kept apart, the choices on validation made once, the distilled
set refused where it has not one line a source, and each distilled line the ensemble's translation of its own
source (re-translated one by one); a slow test rehearses the whole pipeline."""

import copy
import gzip
import json
import shutil
import subprocess
import sys

import pytest
import torch
from helpers import saved_model_with_tokenizer
from safetensors.torch import load_file
from training_helpers import ENGLISH, synthetic_run
from transformers import GenerationConfig

from experiments import comparable, distill, distill_page, launch
from experiments import distill_plan as plan
from inference.engine import GenerateEngine
from inference.ensemble import VanillaTransformerEnsemble
from inference.translate import translate_stream
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding


def value(settings: list[str], flag: str) -> str:
    return settings[settings.index(flag) + 1]


def test_the_runs_train_the_budget_stated_in_the_yaml():
    budget = plan.Budget.of()
    assert [str(run) for run in plan.teachers(budget)] == ["teacher seed 1", "teacher seed 2", "teacher seed 3"]
    teacher = plan.Run("teacher", None, 2).settings(budget)
    for flag, expected in (("--config", "multi30k-tiny"), ("--max_steps", "8000")):
        assert value(teacher, flag) == expected
    assert value(teacher, "--warmup_steps") == "2000" and value(teacher, "--seed") == "2"
    assert "--train_files {data}/train.en {data}/train.de --validation_files" in " ".join(teacher)
    assert "--save_steps" not in teacher  # the preset's own checkpoints and average
    student = plan.Run("student", "distilled+original", 1).settings(budget)
    assert "--train_files {data}/train.en {data}/train.distilled.de --train_files {data}/train.en {data}/train.de" in (
        " ".join(student)
    )
    assert (value(student, "--save_steps"), value(student, "--average_last")) == ("69", "10")
    assert value(student, "--final_splits") == "validation"  # test2016 only by the scores stage
    small = plan.Run("small", "distilled", 1).settings(budget)
    assert (value(small, "--encoder_layers"), value(small, "--decoder_layers")) == ("8", "1")
    assert [str(r) for r in plan.mix_candidates(budget)] == [
        "student-distilled seed 1",
        "student-distilled+original seed 1",
    ]
    assert [str(r) for r in plan.chosen_students(budget, "distilled")] == [
        "student-distilled seed 1",
        "student-distilled seed 2",
        "student-distilled seed 3",
        "small-distilled seed 1",
    ]
    with pytest.raises(UsageError, match="^--steps 0: a run needs at least 1 step$"):
        plan.Budget.of(0)
    with pytest.raises(UsageError, match="^--pairs 5: a rehearsal needs at least 10 pairs"):
        plan.Budget.of(4, 5)


def test_the_runs_train_in_the_experiments_precision_and_a_record_in_the_other_stands_for_them(tmp_path, monkeypatch):
    """bf16 autocast where the CPU multiplies bf16 in hardware, else fp32 (comparable.experiment_precision): a teacher
    recorded in bf16 on one machine is not trained again in fp32 on another, nor the other way round."""
    budget, run = plan.Budget.of(4, 40), plan.Run("teacher", None, 1)
    for precision, flag in ((comparable.BF16, "true"), (comparable.FP32, "false")):
        monkeypatch.setattr(plan, "experiment_precision", lambda precision=precision: precision)
        assert value(run.settings(budget), "--bf16") == flag
    file_record(tmp_path, run, budget, bleu_lc_tok=1.0)  # trained in fp32, the last precision set
    monkeypatch.setattr(plan, "experiment_precision", lambda: comparable.BF16)
    assert plan.recorded(run, budget, tmp_path) is not None
    assert plan.recorded(plan.Run("teacher", None, 2), budget, tmp_path) is None


def file_record(results, run, budget, **validation) -> None:
    folder = results / budget.layout.folder / run.folder
    folder.mkdir(parents=True)
    record = {"run": synthetic_run(), "validation": validation, "settings": run.settings(budget)}
    (folder / launch.SUMMARY).write_text(json.dumps(record))


def test_a_rehearsal_is_kept_apart_and_its_record_never_stands_for_the_experiment(tmp_path):
    real, rehearsal = plan.Budget.of(), plan.Budget.of(4, 40)
    run = plan.Run("teacher", None, 1)
    assert (rehearsal.layout.folder, rehearsal.layout.data_folder, rehearsal.layout.held_out) == (
        "4-steps-40-pairs",
        "data-40-pairs",
        4,
    )
    assert value(run.settings(rehearsal), "--warmup_steps") == "1"  # 2000 of 8000, scaled
    assert "{data-40-pairs}/train.en" in run.settings(rehearsal)
    file_record(tmp_path, run, rehearsal, bleu_lc_tok=1.0)
    assert plan.recorded(run, rehearsal, tmp_path) is not None
    assert plan.recorded(plan.Run("teacher", None, 2), rehearsal, tmp_path) is None
    (tmp_path / rehearsal.layout.folder).rename(tmp_path / real.layout.folder)  # its record in the experiment's place
    assert plan.recorded(run, real, tmp_path) is None


def paths_of(tmp_path, budget=None) -> distill.Paths:
    return distill.Paths(budget or plan.Budget.of(4, 40), tmp_path / "runs", tmp_path / "results")


def test_a_distilled_file_of_another_length_than_its_sources_is_refused_in_one_line(tmp_path):
    paths = paths_of(tmp_path)
    distill.prepare_data(paths)
    assert len((paths.data / "train.en").read_text().splitlines()) == 40
    kept = paths.records / "distilled" / f"{plan.DISTILLED}.gz"
    kept.parent.mkdir(parents=True)
    with gzip.open(kept, "wt") as f:
        f.write("ein satz\n" * 39)
    with pytest.raises(UsageError, match=r"^.*train.distilled.de.gz: 39 distilled lines for 40 sources; delete it"):
        distill.prepare_data(paths)
    with gzip.open(kept, "wt") as f:
        f.write("".join(f"satz {i}\n" for i in range(40)))
    distill.prepare_data(paths)  # kept and aligned: where the students read it
    assert (paths.data / plan.DISTILLED).read_text().splitlines()[7] == "satz 7"


def fake_translate(outputs: dict[str, list[str]], ran: list[list[str]]):
    """subprocess.run for vanilla-translate: writes ``outputs[mode]`` (by --ensemble_mode) to --output."""

    def run(command, cwd):
        ran.append(command)
        output = command[command.index("--output") + 1]
        mode = command[command.index("--ensemble_mode") + 1] if "--ensemble_mode" in command else None
        (cwd / output).write_text("".join(f"{line}\n" for line in outputs[mode]))
        return subprocess.CompletedProcess(command, 0)

    return run


def with_teachers(paths: distill.Paths) -> None:
    for run in plan.teachers(paths.budget):
        paths.kept(run).mkdir(parents=True)
        (paths.kept(run) / "config.json").write_text("{}")


def test_the_ensemble_mode_is_chosen_on_validation_once_and_recorded_with_when(tmp_path, monkeypatch):
    paths = paths_of(tmp_path)
    distill.prepare_data(paths)
    with_teachers(paths)
    references = (paths.data / "validation.de").read_text().splitlines()
    halved = [" ".join(line.split()[::2]) for line in references]
    ran = []
    monkeypatch.setattr(launch.subprocess, "run", fake_translate({"linear": halved, "log_linear": references}, ran))
    assert distill.stage_ensemble(paths) == "log_linear"
    chosen = json.loads((paths.records / "ensemble" / "mode.json").read_text())
    assert chosen["validation_bleu_lc_tok"]["log_linear"] == 100.0
    assert chosen["validation_bleu_lc_tok"]["linear"] < 50 and chosen["chosen"].endswith("UTC")
    assert [value(command, "--ensemble_mode") for command in ran] == ["linear", "log_linear"]
    assert ran[0].count("--model") == 3 and value(ran[0], "--num_beams") == "5"
    assert distill.stage_ensemble(paths) == "log_linear" and len(ran) == 2  # recorded: not decoded again


def test_the_distilled_set_is_kept_with_what_made_it_and_refused_when_misaligned(tmp_path, monkeypatch):
    paths = paths_of(tmp_path)
    distill.prepare_data(paths)
    with_teachers(paths)
    sources = (paths.data / "train.en").read_text().splitlines()
    ran = []
    monkeypatch.setattr(launch.subprocess, "run", fake_translate({"linear": sources[:-1]}, ran))
    with pytest.raises(UsageError, match=r"train.distilled.de.part: 39 distilled lines for 40 sources"):
        distill.stage_distilled(paths, "linear")
    assert not (paths.records / "distilled").exists()  # nothing kept of it
    monkeypatch.setattr(launch.subprocess, "run", fake_translate({"linear": [s.upper() for s in sources]}, ran))
    distill.stage_distilled(paths, "linear")
    made = json.loads((paths.records / "distilled" / f"{plan.DISTILLED}.json").read_text())
    assert made["translate"] == ["vanilla-translate", *ran[-1][3:]] and made["lines"] == 40
    assert (made["ensemble_mode"], [t["seed"] for t in made["teachers"]]) == ("linear", [1, 2, 3])
    assert (paths.data / plan.DISTILLED).read_text().splitlines() == [s.upper() for s in sources]
    distill.stage_distilled(paths, "linear")
    assert len(ran) == 2  # kept: not translated again


def test_the_students_mix_is_chosen_on_validation_once_then_its_seeds_and_the_small_student(tmp_path, monkeypatch):
    paths = paths_of(tmp_path)
    distill.prepare_data(paths)
    (paths.data / plan.DISTILLED).write_text("x\n" * 40)
    scores = {"distilled": 30.0, "distilled+original": 31.5}
    trained = []

    def train(run, _paths):
        trained.append(str(run))
        return {"validation": {"bleu_lc_tok": scores[run.mix]}}

    monkeypatch.setattr(distill, "train", train)
    assert distill.stage_students(paths) == "distilled+original"
    assert trained[2:] == [
        "student-distilled+original seed 1",
        "student-distilled+original seed 2",
        "student-distilled+original seed 3",
        "small-distilled seed 1",
    ]
    scores["distilled"] = 99.0  # a later session: the choice stands as recorded
    assert distill.stage_students(paths) == "distilled+original"


def fake_train(tokenizer, trained: list[str]):
    """launch.train as vanilla-train finishes a run (the names of the runs it trained in ``trained``): a model saved in
    its folder, a summary of one launch of 4 steps in 2.4 minutes with validation 12.34 returned."""
    launched = {
        "first_step": 0,
        "last_step": 4,
        "code": {"commit": "0123456789"},
        "machine": {"processor": "a CPU"},
        "precision": "fp32",
        "train_minutes": 2.4,
    }

    def train(flags, output_dir, what, **_):
        trained.append(what)
        saved_model_with_tokenizer(output_dir, tokenizer, seed=1)
        return ["vanilla-train", *flags], {"run": {"launches": [launched]}, "validation": {"bleu_lc_tok": 12.34}}

    return train


def test_a_finished_run_keeps_its_model_in_float16_in_the_results_and_the_stages_load_it_there(
    tmp_path, tokenizer, monkeypatch
):
    """A run vanilla-train finishes: its model kept under the results in float16 before its record is filed; on a
    machine without runs/, the stages load the kept models; a record without its kept model is refused in one line."""
    paths = paths_of(tmp_path)
    first, second, _ = plan.teachers(paths.budget)
    monkeypatch.setattr(launch, "train", fake_train(tokenizer, []))
    record = distill.train(first, paths)
    kept = paths.kept(first)
    assert kept == paths.records / "models" / "teacher" / "seed-1"
    assert {t.dtype for t in load_file(kept / "model.safetensors").values()} == {torch.float16}
    assert record["kept"]["bytes"] == sum(p.stat().st_size for p in kept.iterdir())
    assert plan.recorded(first, paths.budget, paths.records.parent) == record
    runs = distill_page.runs_section(paths.budget, paths.records)
    assert "- teacher seed 1: trained (steps 0-4 at 0123456 on a CPU, fp32, 2 minutes), validation 12.34" in runs
    assert "- teacher seed 2: not trained yet" in runs

    shutil.rmtree(paths.models)  # another machine: the results alone
    assert distill.kept(first, paths) == kept
    with pytest.raises(UsageError, match=r"^teacher seed 2 is recorded but .*seed-2 holds no model: delete its record"):
        distill.kept(second, paths)


def test_trainings_1_launches_one_run_then_stops_and_the_same_command_goes_on_with_the_next(
    tmp_path, tokenizer, monkeypatch, caplog
):
    """A session that must finish what it starts: `--trainings 1` trains the first run not recorded, files it, writes
    the page and stops (status 0) before the next; run again, it skips the recorded run and trains the next."""
    trained = []
    monkeypatch.setattr(launch, "train", fake_train(tokenizer, trained))
    page = tmp_path / "distillation.md"
    argv = ["--steps", "4", "--pairs", "40", "--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results")]
    argv += ["--page", str(page), "--trainings", "1"]
    with caplog.at_level("INFO", logger="distill"):
        distill.run(argv)
    assert trained == ["teacher seed 1"]
    assert "--trainings 1 done: teacher seed 2 is the next run, the same command trains it" in caplog.text
    assert "- teacher seed 1: trained" in page.read_text() and "- teacher seed 2: not trained yet" in page.read_text()
    distill.run(argv)
    assert trained == ["teacher seed 1", "teacher seed 2"]
    with pytest.raises(SystemExit) as refused:
        distill.arguments().parse_args(["--trainings", "0"])
    assert refused.value.code == 2


def test_the_page_says_plainly_that_nothing_is_recorded_yet(tmp_path):
    text = distill.page(plan.Budget.of(), tmp_path)
    assert "No run is recorded yet" in text and "not chosen yet" in text
    assert "8 encoder layers, 1 decoder layer(s)" in text


def test_each_distilled_line_is_its_own_sources_translation_by_the_ensemble(tmp_path, tokenizer):
    """The distilled stage with an ensemble of tiny models, through vanilla-translate; then a sample of the sources
    re-translated one by one, each compared with the distilled line at its index."""
    budget = plan.Budget.of(4, 40, plan=copy.deepcopy(plan.read_budget()))
    budget.plan["distilled"]["num_beams"] = 2
    paths = paths_of(tmp_path, budget)
    paths.data.mkdir(parents=True)
    sources = [f"{a} {b}" for a in ENGLISH for b in ENGLISH] + ENGLISH  # lines that differ, of several lengths
    (paths.data / "train.en").write_text("".join(f"{line}\n" for line in sources))
    models = [saved_model_with_tokenizer(paths.kept(run), tokenizer, seed=run.seed) for run in plan.teachers(budget)]
    for model in models:  # outputs of a fixed length: the batch's longest source sets no limit
        GenerationConfig.from_pretrained(model, max_new_tokens=10).save_pretrained(model)
    distill.stage_distilled(paths, "log_linear")
    distilled = (paths.data / plan.DISTILLED).read_text().splitlines()
    # the sample: lines unlike both neighbours', so that a line shifted either way would differ from its own
    sample = [
        i for i, line in enumerate(distilled) if line not in distilled[max(0, i - 1) : i] + distilled[i + 1 : i + 2]
    ]
    assert len(sample) >= 3, distilled
    ensemble = VanillaTransformerEnsemble.from_pretrained(models, mode="log_linear")
    engine = GenerateEngine(ensemble, tokenizer, Decoding.resolve(ensemble.generation_config, 2, 1.0))
    for index in sample:
        assert list(translate_stream(engine, [sources[index]], batch_size=1)) == [distilled[index]]


@pytest.mark.slow
def test_the_rehearsal_runs_every_stage_and_scores_again_from_the_kept_models_on_a_fresh_machine(tmp_path):
    """The whole experiment on 30 pairs, 1 step a run (teachers at their initialisation translate every line, long
    and random: 2-step ones translate none, and vanilla-train rightly refuses a distilled set without a pair), then
    runs/ lost (a change of machine) and the scores decoded again from the models the results keep, alone."""
    folders = [
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(tmp_path / "results"),
        "--page",
        str(tmp_path / "p.md"),
    ]

    def distill_command(*argv: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "experiments.distill", "--pairs", "30", "--steps", "1", *argv, *folders],
            cwd=launch.ROOT,
        )
        assert done.returncode == 0

    distill_command()
    records = tmp_path / "results" / "1-steps-30-pairs"
    distilled = gzip.open(records / "distilled" / f"{plan.DISTILLED}.gz", "rt").read().splitlines()
    assert len(distilled) == 30 and all(distilled)
    assert (records / "ensemble" / "mode.json").is_file() and (records / "students" / "mix.json").is_file()
    scores = {path.name: json.loads(path.read_text()) for path in (records / "scores").glob("*.json")}
    chosen = json.loads((records / "students" / "mix.json").read_text())["mix"]
    assert set(scores) == {"ensemble.json"} | {f"teacher-seed-{seed}.json" for seed in (1, 2, 3)} | {
        f"student-{chosen}-seed-{seed}.json" for seed in (1, 2, 3)
    } | {"small-distilled-seed-1.json"}
    assert {path.name for path in (records / "speed").glob("*.bench.json")} == {
        "teacher-seed-1.bench.json",
        f"student-{chosen}-seed-1.bench.json",
        "small-distilled-seed-1.bench.json",
    }
    assert "| teacher: mean [95% band] | 3 |" in (tmp_path / "p.md").read_text()

    models = records / "models"
    kept = {path.parent.relative_to(models).as_posix() for path in models.rglob("model.safetensors")}
    assert len(kept) == 8 and "teacher/seed-1" in kept
    assert "- teacher seed 1: trained (steps 0-1 at " in (tmp_path / "p.md").read_text()

    shutil.rmtree(tmp_path / "runs")  # another machine: the results alone
    for path in (records / "scores").glob("*"):
        path.unlink()
    distill_command("--stages", "scores")
    again = {path.name: json.loads(path.read_text()) for path in (records / "scores").glob("*.json")}
    assert {name: found["bleu_lc_tok"] for name, found in again.items()} == {
        name: found["bleu_lc_tok"] for name, found in scores.items()
    }


def test_the_page_is_generated_from_its_records():
    assert (launch.ROOT / "docs" / "distillation.md").read_text() == distill.page(
        plan.Budget.of(), distill.RESULTS / plan.Budget.of().layout.folder
    )
