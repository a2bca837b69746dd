"""`python -m experiments.results_index`: docs/results.md, generated from the run records in results/ (never edited by
hand). Each run folder, results/DATE-SLUG/, holds the summary.json that ``vanilla-train --summary_dir`` writes: the
scores, the command and every argument it resolved to, and its run record (training/run/record.py: the code, machine,
device, precision, budget, seed and steps reached; held to its schema here); and the learning curve.
A record's ``role`` says what the run is for: the canonical run of the preset, its repeats (seeds, other hours), the
preset's runs at earlier code (earlier: read into its band, experiments/recipe.py, but not its headline), its
runs on other hardware (a CPU without bf16: fp32, fewer steps in the hour; kept out of the repeats' mean), the
canonical run and repeats of a preset since replaced (superseded: still the band its replacement was chosen against,
experiments/recipe.py), the ablations that chose the preset, Wu et al.'s recipe reproduced (reproduction) and its
controls (control: one thing changed), or history (runs of earlier presets and code)."""

import argparse
import json
import statistics
from pathlib import Path

from training.api import check_run_record, run_launches, run_train_minutes
from vanilla_tools.provenance import ROOT

from .verdict import CONFIDENCE, mean_interval

INTRO = Path(__file__).with_name("results_intro.md")  # the page's opening: what a record holds, and since when
ROLES = {
    "canonical": "The canonical run",
    "seed": "Repeats of the canonical recipe",
    "earlier": "The canonical recipe at earlier code, before the runs above",
    "hardware": "The canonical recipe on other hardware (another precision or speed: each note says if it compares)",
    "reproduction": (
        "Wu et al.'s Transformer-Tiny recipe, reproduced (`--config multi30k-tiny`: lowercased, tokenized text, so "
        "its sacreBLEU is of that text)"
    ),
    "control": (
        "Controls of the reproduction: its recipe with one thing changed, which each note names (kept out of its "
        "seeds' mean)"
    ),
    "superseded": "The runs of earlier presets, before a recipe candidate replaced them",
    "ablation": "Ablations that chose the preset",
    "history": "History: earlier presets and code",
    None: "Other runs",
}
# Wu et al. (ACL 2021)'s text-only Transformer-Tiny on test2016: fairseq's BLEU-4 on lowercased, tokenized text, in
# README-baseline.md of github.com/LividWo/Revisit-MMT (issue 101's anchor; training/configs/multi30k-tiny.yaml)
WU_2021_TEST2016 = 41.02
HEADER = (
    "| run | date | commit | minutes (training / command) | fp32 GFLOP/s (before / after) | precision | steps (budget) "
    "| epochs "
    "| validation BLEU (alpha) | test BLEU | chrF | length ratio | test BLEU, lowercased and tokenized |"
)


def test_scores(record: dict) -> dict:
    """The test-set scores, whatever the test set is called (test2016, newstest2014, test)."""
    for key in ("test2016", "newstest2014", "test"):
        if key in record:
            return record[key]
    return {}


def epochs(folder: Path) -> float | None:
    curve = folder / "learning_curve.json"
    rows = json.loads(curve.read_text()) if curve.is_file() else []
    return round(rows[-1]["epoch"], 1) if rows else None


def steps_cell(run: dict) -> str:
    """The steps a run reached and its budget: "7,100 (54 min)", "7,200 (7,200 steps)"."""
    budget = run["budget"]
    if budget["max_train_minutes"]:
        limit = f"{budget['max_train_minutes']:g} min"
    else:
        limit = f"{budget['max_steps']:,} steps" if budget["max_steps"] else f"{budget['num_train_epochs']:g} epochs"
    return f"{run['steps']:,} ({limit})" if run["steps"] is not None else f"? ({limit})"


def training_minutes(record: dict) -> str:
    """The run's training minutes: its launches' together where it had several (the summary's own minutes are its
    last launch's, as the command's are)."""
    launches = len(run_launches(record))
    if launches > 1:
        return f"{run_train_minutes(record):.2f} ({launches} launches)"
    return str(record.get("train_minutes", "?"))


def command_minutes(record: dict) -> str:
    """The command's minutes, data and final evaluation with the training: its last launch's where it had several (the
    earlier commands were stopped, and only their training minutes are recorded)."""
    minutes = record.get("wall_clock_minutes", "?")
    return f"{minutes} (last launch)" if len(run_launches(record)) > 1 else str(minutes)


def row(folder: Path, record: dict) -> str:
    test, validation = test_scores(record), record.get("validation", {})
    alpha = record.get("beam", {}).get("length_penalty")
    link = f"[{folder.name}]({Path('..') / folder.relative_to(ROOT)})"  # docs/results.md links up to results/
    run = record["run"]
    commit = run["code"].get("commit") or "?"
    minutes = f"{training_minutes(record)} / {command_minutes(record)}"
    speed = record.get("machine_speed") or {}
    gflops = f"{speed['fp32_gflops_before']} / {speed['fp32_gflops_after']}" if speed else "-"
    scores = (
        f"**{test.get('bleu', '?')}** | {test.get('chrf', '?')} | {test.get('length_ratio', '?')} | "
        f"{test.get('bleu_lc_tok', '-')}"
    )
    return (
        f"| {link} | {folder.name[:10]} | `{commit[:7]}` | {minutes} | {gflops} | {run['precision'] or '-'} | "
        f"{steps_cell(run)} | {epochs(folder) or '?'} | "
        f"{validation_cell(validation, alpha)} | {scores} |"
    )


def validation_cell(validation: dict, alpha) -> str:
    """The final validation BLEU with its alpha; "-" for a run whose end decoded no validation (--final_splits
    test, as `make demo` runs)."""
    return f"{validation['bleu']} ({alpha})" if "bleu" in validation else "-"


def mean_row(records: list[dict]) -> str:
    def mean(values):
        # a mean over only the runs that recorded a score would pass for the mean of them all
        values = list(values)
        known = all(isinstance(v, (int, float)) for v in values)
        return f"{statistics.mean(values):.2f}" if values and known else "-"

    tests, validation = [test_scores(r) for r in records], [r.get("validation", {}) for r in records]
    return (
        f"| **mean of {len(records)}** | | | | | | | | {mean(v.get('bleu') for v in validation)} | "
        f"**{mean(t.get('bleu') for t in tests)}** | {mean(t.get('chrf') for t in tests)} | "
        f"{mean(t.get('length_ratio') for t in tests)} | "
        f"{mean(t.get('bleu_lc_tok') for t in tests)} |"
    )


def against_published(records: list[dict]) -> str:
    """The reproduction's seeds against Wu et al.'s figure: the mean of their test BLEU, lowercased and tokenized,
    with its 95% interval (experiments/verdict.py), and where 41.02 lies."""
    scores = [test_scores(r).get("bleu_lc_tok") for r in records]
    found = None if None in scores else mean_interval(scores)
    if found is None:
        return (
            f"Wu et al. (ACL 2021) print {WU_2021_TEST2016} on test2016 (lowercased, tokenized); {len(records)} "
            "seed(s) scored in that BLEU here, too few for an interval."
        )
    mean, low, high = found
    place = "inside" if low <= WU_2021_TEST2016 <= high else "above" if WU_2021_TEST2016 > high else "below"
    return (
        f"The seeds' mean test2016 BLEU, lowercased and tokenized: **{mean:.2f}**, its {CONFIDENCE:.0%} interval "
        f"{low:.2f}-{high:.2f} (t, {len(scores)} seeds); Wu et al. (ACL 2021) print {WU_2021_TEST2016}, {place} it."
    )


def index(results: Path, kept: set[Path] | None = None) -> str:
    """The page over every run folder in ``results`` (or those in ``kept``) that holds a summary.json."""
    records = sorted(
        (folder, json.loads((folder / "summary.json").read_text()))
        for folder in results.iterdir()
        if (folder / "summary.json").is_file() and (kept is None or folder in kept)
    )
    for folder, record in records:
        try:
            check_run_record(record["run"])
        except (KeyError, ValueError) as error:
            raise ValueError(f"{folder / 'summary.json'}: {error}") from None
    lines = [
        "# Results",
        "",
        "<!-- Generated by `python -m experiments.results_index` from results/*/summary.json: do not edit. -->",
        "",
        INTRO.read_text().rstrip("\n"),
    ]
    for role, title in ROLES.items():
        chosen = [(f, r) for f, r in records if r.get("role") == role]
        if not chosen:
            continue
        lines += ["", f"## {title}", "", HEADER, "| --- " * HEADER.count(" | ") + "| --- |"]
        lines += [row(f, r) for f, r in chosen]
        if role == "seed":
            canonical = [r for _, r in records if r.get("role") == "canonical"]
            lines.append(mean_row(canonical + [r for _, r in chosen]))
        elif role in ("earlier", "superseded"):
            lines.append(mean_row([r for _, r in chosen]))
        elif role == "reproduction":
            lines += [mean_row([r for _, r in chosen]), "", against_published([r for _, r in chosen])]
        lines.append("")
        for folder, record in chosen:
            lines.append(f"- **{folder.name}**: {record.get('note', '')} Command: `{record.get('command', '?')}`.")
            for figure in ("learning_curve.png", "attention.png"):
                if role == "canonical" and (folder / figure).is_file():
                    lines.append(f"\n  ![{figure}]({Path('..') / folder.relative_to(ROOT) / figure})")
    return "\n".join(lines) + "\n"


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", default=str(ROOT / "results"))
    parser.add_argument("--output", default=str(ROOT / "docs" / "results.md"))
    return parser


def main(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    Path(args.output).write_text(index(Path(args.results)))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
