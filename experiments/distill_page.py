"""docs/distillation.md, written from the distillation experiment's records (experiments/distill.py runs them): the
commands, the budget, what was chosen on validation and when, and the table of scores, speeds and sizes."""

from pathlib import Path

from vanilla_tools.run_files import read_json

from .distill_plan import PRECISION_WORDS, REMEDY, Budget, Run, chosen_students, mix_candidates, teachers
from .verdict import mean_interval

INTRO = """# Sequence-level knowledge distillation on Multi30k

Issue 119, item 2: three multi30k-tiny teachers, their ensemble's beam translations of the 29,000 training sources
(the distilled set: Kim & Rush, 2016), and students trained on them, the same architecture and a small, fast one (a
deep encoder, a shallow decoder: Kasai et al., 2021). `python -m experiments.distill` runs it and writes this page
from its records in results/distill/; every choice is made on validation and test2016 is decoded once for each chosen
model.

```bash
python -m experiments.distill --stages teachers   # the 3 teachers (24,000 steps): hours
python -m experiments.distill                     # every stage, each skipping what its records show done
python -m experiments.distill --trainings 1       # the same, stopping before a second vanilla-train run
python -m experiments.distill --report            # this page from the records, nothing run
python -m experiments.distill --pairs 30 --steps 1   # a rehearsal, its data, models and records apart
```

A rehearsal's teachers train 1 step: at the warm-up's first rate (1e-7) they are their initialisation, whose
translations are long and random, where 2-step teachers translate every line empty and leave the students no pair.

The distilled set is kept gzipped in results/distill/8000-steps/distilled/ with what made it (the vanilla-translate
command, the ensemble mode, the teachers' commits), so a fresh clone trains the students without the teachers.
"""


SESSIONS = """## A run a session

A run must finish within the session that starts it: runs/ does not survive a change of machine, and a run stopped
part-way is not carried (its checkpoint with Adam's state is 28 MiB; the next session starts it again). A run is about
140 minutes on the 2-core AMX Xeon in bf16 autocast (teacher seed 1: 139 training minutes, its evaluations included;
fp32 takes 1.3 times as long: the teacher's command, steps 75-135, on 2026-12-07), so a session starts the runner
first, for one run (`python -m experiments.distill --trainings 1`: it stops once that run is filed, before the next;
nothing else heavy beside it), and commits results/distill/8000-steps/. Each finished run's model is kept there with
its weights in float16 (`hub_card.stored`: about 6 MiB, loaded back in float32): the ensemble, the distilled set, the
test2016 scores and the speeds load those, the same weights on every machine (the validation scores that choose the
students' mix are vanilla-train's own, of the float32 model).
"""


def budget_section(budget: Budget) -> str:
    plan = budget.plan
    small = plan["small_student"]
    speed = plan["speed"]
    students = plan["students"]
    teacher_steps = len(plan["teachers"]["seeds"]) * budget.steps
    student_steps = (len(students["mixes"]) + len(students["seeds"]) - 1 + len(small["seeds"])) * budget.steps
    return "\n".join(
        [
            "## The budget, stated before the first run",
            "",
            f"experiments/distill_budget.yaml, read by the runner (each run {budget.steps:,} steps):",
            "",
            f"- teachers: `--config {plan['teachers']['config']}`, seeds {plan['teachers']['seeds']}, "
            f"{PRECISION_WORDS[plan['teachers']['precision']]};",
            f"- the ensemble's mode chosen on validation among {', '.join(plan['ensemble_modes'])};",
            f"- the distilled set: beam {plan['distilled']['num_beams']}, length penalty "
            f"{plan['distilled']['length_penalty']};",
            f"- students: the teachers' architecture on each mix of {', '.join(plan['students']['mixes'])} (seed 1, "
            f"chosen on validation), the chosen mix's seeds {plan['students']['seeds']}; checkpoints every "
            f"{plan['students']['save_steps']} steps, the last {plan['students']['average']} averaged;",
            f"- the small student: {small['encoder_layers']} encoder layers, {small['decoder_layers']} decoder "
            f"layer(s), the tiny width, on {small['mix']}, seeds {small['seeds']};",
            f"- compute: {teacher_steps:,} teacher steps and {student_steps:,} student steps, "
            "besides the decodes (distill_budget.yaml counts them);",
            f"- speed: vanilla-bench at beam {speed['num_beams']}, batches {speed['batch_sizes']}, "
            f"{', '.join(speed['engines'])}, as ratios to teacher seed 1's ct2-int8, measured in one run.",
            "",
        ]
    )


def runs_section(budget: Budget, records: Path) -> str:
    """Where each run stands in the results: trained (its validation score, its kept model's size) or not yet."""
    mix = read_json(records / "students" / "mix.json", dict, REMEDY)
    runs: list[Run] = [*teachers(budget), *mix_candidates(budget)]
    runs += chosen_students(budget, mix["mix"]) if mix else []
    lines = ["## The runs", ""]
    for run in dict.fromkeys(runs):
        summary = read_json(records / run.folder / "summary.json", dict, REMEDY)
        if summary is None:
            lines.append(f"- {run}: not trained yet")
            continue
        launches = ", ".join(
            f"steps {launch['first_step']:,}-{launch['last_step']:,} at {launch['code']['commit'][:7]} on "
            f"{launch['machine']['processor']}, {launch['precision']}, {launch['train_minutes']:.0f} minutes"
            for launch in summary["run"]["launches"]
        )
        kept = f"its model kept in float16, {summary['kept']['bytes'] / 2**20:.1f} MiB"
        lines.append(f"- {run}: trained ({launches}), validation {summary['validation']['bleu_lc_tok']:.2f}; {kept}")
    return "\n".join([*lines, ""])


def choices_section(records: Path) -> str:
    lines = ["## Chosen on validation", ""]
    for name, path, key in (
        ("ensemble mode", records / "ensemble" / "mode.json", "mode"),
        ("students' mix", records / "students" / "mix.json", "mix"),
    ):
        found = read_json(path, dict, REMEDY)
        if found is None:
            lines.append(f"- {name}: not chosen yet (no run is recorded).")
        else:
            scores = ", ".join(f"{k} {v:.2f}" for k, v in found["validation_bleu_lc_tok"].items())
            lines.append(f"- {name}: **{found[key]}**, chosen {found['chosen']} (validation tokenized BLEU: {scores}).")
    return "\n".join([*lines, ""])


def speed_cells(records: Path, name: str, base: dict | None, speed: dict) -> list[str]:
    """Each engine and batch's speed as a ratio to teacher seed 1's ct2-int8 at the same beam and batch, and the
    CTranslate2 int8 export's size."""
    found = read_json(records / "speed" / f"{name}.bench.json", dict, REMEDY)
    measured = read_json(records / "speed" / f"{name}.json", dict, REMEDY)
    cells = []
    for engine in speed["engines"]:
        for batch in speed["batch_sizes"]:
            value = rate(found, engine, speed["num_beams"], batch)
            reference = rate(base, "ct2-int8", speed["num_beams"], batch)
            cells.append(f"{value / reference:.2f}" if value and reference else "")
    size = measured and measured["bytes"].get("ctranslate2-int8")
    return [*cells, f"{size / 2**20:.1f}" if size else ""]


def rate(bench: dict | None, engine: str, beams: int, batch: int) -> float | None:
    for row in (bench or {}).get("runs", []):
        if (row["engine"], row["num_beams"], row["batch_size"]) == (engine, beams, batch):
            return row.get("sentences_per_s")
    return None


def table(budget: Budget, records: Path) -> str:
    speed = budget.plan["speed"]
    mix = read_json(records / "students" / "mix.json", dict, REMEDY)
    groups = {"teacher": [run.folder for run in teachers(budget)], "ensemble": ["ensemble"]}
    for run in chosen_students(budget, mix["mix"]) if mix else []:
        groups.setdefault(run.name, []).append(run.folder)
    base = read_json(records / "speed" / "teacher-seed-1.bench.json", dict, REMEDY)
    columns = [f"{e} b{b}" for e in speed["engines"] for b in speed["batch_sizes"]]
    head = ["model", "seed", "test2016 BLEU (lc, tok)", "sacreBLEU", *columns, "ct2 int8 MiB"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    any_score = False
    for group, names in groups.items():
        scores = []
        for name in names:
            key = name.replace("/", "-")
            found = read_json(records / "scores" / f"{key}.json", dict, REMEDY)
            if found is None:
                continue
            any_score = True
            scores.append(found["bleu_lc_tok"])
            seed = name.rsplit("-", 1)[-1] if "seed-" in name else "-"
            cells = speed_cells(records, key, base, speed)
            rows.append(
                f"| {group} | {seed} | {found['bleu_lc_tok']:.2f} | {found['bleu']:.2f} | {' | '.join(cells)} |"
            )
        if (band := mean_interval(scores)) is not None:
            mean, low, high = band
            rows.append(f"| {group}: mean [95% band] | {len(scores)} | {mean:.2f} [{low:.2f}, {high:.2f}] |")
    if not any_score:
        return "## Test2016\n\nNo run is recorded yet: the table fills in from the records as the stages run.\n"
    return "\n".join(["## Test2016", "", *rows, ""])


def page(budget: Budget, records: Path) -> str:
    sections = [INTRO, SESSIONS, budget_section(budget), runs_section(budget, records)]
    sections.append(choices_section(records))
    return "\n".join([*sections, table(budget, records)])
