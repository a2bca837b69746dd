"""The README and docs stay true: their Python blocks run as printed, every command they print parses with the
tool it names (flags, values), every link to a file in the repository leads somewhere, the README stays a front
page (<= 8 KB), and docs/results.md is what ``python -m experiments.results_index`` makes of the records."""

import json
import os
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from training_helpers import synthetic_run

from benchmarks import (
    data_scale,
    ensemble_memory,
    epoch_shapes,
    gpu_model,
    gpu_pack,
    gpu_translate,
    host_time,
    load_check,
    preemption,
    restricted_attention,
    step_dispatch,
    training_step,
    translate_memory,
    wmt14_step,
)
from experiments import (
    backtranslation,
    comparable,
    distill,
    recipe,
    reproduce,
    results_index,
    subword_nmt,
    table3,
    verdict,
)
from hub_card import card, push
from inference import attention, bench, ct2, demo, onnx_runtime, translate
from training.api import run_launches, run_train_minutes
from training.arguments import parse_args
from training.finish import clock
from training.run import plot_curve
from training.step import average

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = {  # console script or module -> its argument parser
    "vanilla-translate": translate.arguments,
    "vanilla-export-ct2": ct2.arguments,
    "vanilla-attention": attention.arguments,
    "vanilla-average-checkpoints": average.arguments,
    "vanilla-plot-curve": plot_curve.arguments,
    "vanilla-push": push.arguments,
    "vanilla-bench": bench.arguments,
    "benchmarks.data_scale": data_scale.arguments,
    "benchmarks.translate_memory": translate_memory.arguments,
    "benchmarks.ensemble_memory": ensemble_memory.arguments,
    "experiments.results_index": results_index.arguments,
    "experiments.table3": table3.arguments,
    "benchmarks.restricted_attention": restricted_attention.arguments,
    "vanilla-demo": demo.arguments,
    "vanilla-export-onnx": onnx_runtime.arguments,
    "benchmarks.preemption": preemption.arguments,
    "benchmarks.training_step": training_step.arguments,
    "experiments.recipe": recipe.arguments,
    "experiments.reproduce": reproduce.arguments,
    "experiments.backtranslation": backtranslation.arguments,
    "experiments.distill": distill.arguments,
    "experiments.subword_nmt": subword_nmt.arguments,
    "benchmarks.load_check": load_check.arguments,
    "benchmarks.wmt14_step": wmt14_step.arguments,
    "benchmarks.epoch_shapes": epoch_shapes.arguments,
    "benchmarks.step_dispatch": step_dispatch.arguments,
    "benchmarks.gpu_model": gpu_model.arguments,
    "benchmarks.host_time": host_time.arguments,
    "benchmarks.gpu_translate": gpu_translate.arguments,
    "benchmarks.gpu_pack": gpu_pack.arguments,
}


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def commands(page: Path) -> list[list[str]]:
    """The command lines of a page's bash blocks (continuation lines joined, comments dropped)."""
    out = []
    for block in blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                out.append(shlex.split(line))
    return out


def tool_and_arguments(words: list[str]) -> tuple[str, list[str]] | None:
    """Which tool a command runs and its arguments (vanilla-*, python -m X, torchrun/accelerate ... -m X)."""
    if words[0] in ("make", "pip", "tensorboard"):  # not this package's tools
        return None
    if words[0] == "bash":  # a script of the repository's
        assert (ROOT / words[1]).is_file(), f"no such script: {words[1]}"
        return None
    if words[0] in TOOLS or words[0] == "vanilla-train":
        return words[0], words[1:]
    if "-m" in words:
        module = words[words.index("-m") + 1]
        return ("vanilla-train" if module == "training.train" else module), words[words.index("-m") + 2 :]
    raise AssertionError(f"a command the docs test does not know: {shlex.join(words)}")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_command_parses(page):
    for words in commands(page):
        found = tool_and_arguments(words)
        if found is None:
            continue
        tool, argv = found
        if tool == "vanilla-train":
            parse_args(argv)  # raises on an unknown flag or a bad value
        else:
            TOOLS[tool]().parse_args(argv)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_links_lead_to_files(page):
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert not target.startswith("../shared"), f"{page.name} links outside the repository: {target}"
        assert (page.parent / target).resolve().exists(), f"{page.name}: {target} does not exist"


def runnable_blocks() -> list[tuple[str, str]]:
    """The Python blocks of the pages that need no Hub (those of docs/hub.md that load "my-name/..." are tested,
    through the same calls, in tests/test_hub_card/test_hub.py against a local Hub)."""
    return [
        (f"{page.name}[{i}]", code)
        for page in PAGES
        for i, code in enumerate(blocks(page, "python"))
        if "my-name/" not in code
    ]


@pytest.mark.parametrize(("name", "code"), runnable_blocks(), ids=[n for n, _ in runnable_blocks()])
def test_python_blocks_run(name, code, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_bytes()) <= 8 * 1024
    text = page_text("README.md")
    assert "make demo" in text and "make test" in text


def test_the_torch_floor_is_the_oldest_release_the_compatibility_table_passes():
    """pyproject's torch requirement is the oldest release that docs/hub.md#compatibility shows passing the tests of
    `make compat` with nothing failed: raising or lowering it needs a run in the table."""
    floor = card.torch_floor()
    rows = re.findall(r"^\| (\d+\.\d+\.\d+)[^|]*\| [\d.]+ \| \w+ \| \d+ \| (.+) \|$", page_text("docs/hub.md"), re.M)
    passing = [Version(torch) for torch, failures in rows if failures == "none"]
    assert len(rows) >= 2 and Version(floor) == min(passing), (floor, rows)


def test_results_page_is_generated_from_the_records():
    """The page is the committed records' (a user's own runs, `make demo`'s among them, add untracked ones)."""
    kept = {path.parent for path in tracked("results/*/summary.json")}
    assert page_text("docs/results.md") == results_index.index(ROOT / "results", kept)


def test_the_backtranslation_page_is_generated_from_its_records():
    assert page_text("docs/backtranslation.md") == backtranslation.page(
        backtranslation.Budget(), backtranslation.RESULTS
    )


def test_the_preset_runs_at_earlier_code_have_their_own_mean(tmp_path, monkeypatch):
    """The final seeds' mean (canonical and seed) leaves out the preset's runs at earlier code, which get theirs."""
    run = json.loads((ROOT / "results" / "2026-11-30-multi30k-final-seed1" / "summary.json").read_text())
    monkeypatch.setattr(results_index, "ROOT", tmp_path)  # the page links its runs from docs/ up to results/
    for name, role, bleu in (("a", "canonical", 40.0), ("b", "seed", 41.0), ("c", "earlier", 30.0)):
        (tmp_path / "results" / name).mkdir(parents=True)
        record = {**run, "role": role, "test2016": {**run["test2016"], "bleu": bleu}}
        (tmp_path / "results" / name / "summary.json").write_text(json.dumps(record))
    page = results_index.index(tmp_path / "results")
    final, earlier = page.split(f"## {results_index.ROLES['earlier']}")
    assert "| **mean of 2** |" in final and "**40.50**" in final
    assert "| **mean of 1** |" in earlier and "**30.00**" in earlier


def test_the_reproductions_seeds_are_read_against_wu_et_al(tmp_path, monkeypatch):
    """Wu et al.'s recipe reproduced: its own section, its seeds' mean and the 95% interval of it in the BLEU that
    matches fairseq's, and where their 41.02 lies; no interval below three seeds."""
    run = json.loads((ROOT / "results" / "2026-11-30-multi30k-final-seed1" / "summary.json").read_text())
    monkeypatch.setattr(results_index, "ROOT", tmp_path)
    for name, role, lc_tok in (("a", "canonical", 40.0), ("t1", "reproduction", 40.0), ("t2", "reproduction", 41.0)):
        (tmp_path / "results" / name).mkdir(parents=True)
        record = {**run, "role": role, "test2016": {**run["test2016"], "bleu_lc_tok": lc_tok}}
        (tmp_path / "results" / name / "summary.json").write_text(json.dumps(record))
    reproduction = results_index.index(tmp_path / "results").split(f"## {results_index.ROLES['reproduction']}")[1]
    assert "| **mean of 2** |" in reproduction and "2 seed(s) scored in that BLEU here, too few" in reproduction
    (tmp_path / "results" / "t3").mkdir()
    record = {**run, "role": "reproduction", "test2016": {**run["test2016"], "bleu_lc_tok": 42.0}}
    (tmp_path / "results" / "t3" / "summary.json").write_text(json.dumps(record))
    reproduction = results_index.index(tmp_path / "results").split(f"## {results_index.ROLES['reproduction']}")[1]
    assert (
        "mean test2016 BLEU, lowercased and tokenized: **41.00**, its 95% interval 38.52-43.48 (t, 3 seeds); "
        "Wu et al. (ACL 2021) print 41.02, inside it." in reproduction
    )
    assert results_index.against_published([{"test2016": {"bleu_lc_tok": x}} for x in (37.0, 37.1, 37.2)]).endswith(
        "print 41.02, above it."
    )


def test_a_run_of_several_launches_counts_their_minutes_together():
    """A summary's own minutes are its last launch's; the page gives the run's training and says whose command."""
    record = {
        "train_minutes": 82.78,
        "wall_clock_minutes": 84.1,
        "run": {"launches": [{"train_minutes": 52.3}, {"train_minutes": 82.78}]},
    }
    assert results_index.training_minutes(record) == "135.08 (2 launches)"
    assert results_index.command_minutes(record) == "84.1 (last launch)"
    one = {"train_minutes": 54.05, "wall_clock_minutes": 56.0, "run": {"launches": [{}]}}
    assert (results_index.training_minutes(one), results_index.command_minutes(one)) == ("54.05", "56.0")


def test_results_mean_is_left_out_where_a_run_lacks_the_score():
    runs = [
        {"validation": {"bleu": 40.0}, "test2016": {"bleu": 38.0, "chrf": 63.0, "length_ratio": 1.0}},
        {
            "validation": {"bleu": 41.0},
            "test2016": {"bleu": 39.0, "chrf": 64.0, "length_ratio": 1.02, "bleu_lc_tok": 39.5},
        },
    ]
    assert results_index.mean_row(runs) == "| **mean of 2** | | | | | | | | 40.50 | **38.50** | 63.50 | 1.01 | - |"


def test_results_row_gives_the_machine_speed_where_recorded():
    folder = ROOT / "results" / "2026-11-26-example"  # row() links to results/ from docs/
    run = {
        "train_minutes": 54.0,
        "wall_clock_minutes": 55.5,
        "validation": {"bleu": 41.0},
        "beam": {"length_penalty": 2.0},
        "test2016": {"bleu": 39.0},
        "run": {**synthetic_run(precision=None, minutes=54, max_steps=None), "steps": 7100},
    }
    cells = [cell.strip() for cell in results_index.row(folder, run).split("|")]
    assert cells[4:8] == ["54.0 / 55.5", "-", "-", "7,100 (54 min)"]  # before 2026-11-26 no speed; no precision
    run["machine_speed"] = {"fp32_gflops_before": 182.3, "fp32_gflops_after": 180.1}
    cells = [cell.strip() for cell in results_index.row(folder, run).split("|")]
    assert cells[5] == "182.3 / 180.1" and cells[9:11] == ["41.0 (2.0)", "**39.0**"]
    assert len(cells) - 2 == results_index.HEADER.count("|") - 1  # one cell per column


@pytest.mark.parametrize(
    ("run", "shown"),
    [
        ({**synthetic_run(precision=None, max_steps=None, minutes=54), "steps": 1000}, ("-", "1,000 (54 min)")),
        (synthetic_run(precision="bf16 autocast", max_steps=7200), ("bf16 autocast", "7,200 (7,200 steps)")),
        ({**synthetic_run(precision="fp32", max_steps=None), "steps": None}, ("fp32", "? (40 epochs)")),
    ],
)
def test_results_row_gives_the_precision_and_budget_of_its_run_record(run, shown):
    """The run record's precision ("-": recorded before 2026-11-24), and its steps against its budget."""
    row = results_index.row(ROOT / "results" / "2026-11-26-example", {"run": run})
    cells = [cell.strip() for cell in row.split("|")]
    assert tuple(cells[6:8]) == shown


def page_text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def flat(page: str) -> str:
    """A page's text with each run of whitespace one space, so that a figure may wrap across lines."""
    return " ".join(page_text(page).split())


def names_its_record(page: str, name: str) -> bool:
    """Whether ``page`` gives the commit of results/benchmarks/NAME.json where it names that record."""
    commit = benchmark(name)["code"]["commit"][:7]
    return f"Measured at commit {commit} ([`results/benchmarks/{name}.json`]" in flat(page)


def benchmark(name: str) -> dict:
    return json.loads((ROOT / "results" / "benchmarks" / f"{name}.json").read_text())


def tracked(pattern: str) -> list[Path]:
    """The committed files that match ``pattern``, sorted: a user's own runs add untracked ones beside them."""
    found = subprocess.run(["git", "-C", str(ROOT), "ls-files", pattern], capture_output=True, text=True, check=True)
    return sorted(ROOT / path for path in found.stdout.split())


def demo_records() -> list[dict]:
    """The newest committed record of `make demo` (results/DATE-demo*/summary.json) for each precision it trained in
    (bf16 and fp32: the README gives what to expect on each kind of CPU measured)."""
    records = [json.loads(path.read_text()) for path in tracked("results/*-demo*/summary.json")]
    return list({record["run"]["precision"]: record for record in records}.values())


def headline_figures() -> list[tuple[str, str]]:
    """(page, text): each headline figure of the README and docs/performance.md as its record gives it."""
    eager, compiled = (benchmark(f"training-step-profile{kind}")["profile"] for kind in ("", "-compiled"))
    interleaved, compare = benchmark("training-step-compiled")["interleaved"], benchmark("training-step")["comparison"]
    load = benchmark("load-check")["measurement"]
    performance = "docs/performance.md"
    return [
        (performance, f"{1e3 * eager['step_s_median']:.1f} ms ({eager['tokens_per_s']:,.0f} tokens/s)"),
        (performance, f"{1e3 * compiled['step_s_median']:.1f} ms ({compiled['tokens_per_s']:,.0f} tokens/s)"),
        (performance, f"**{compiled['limit_ms_per_step']:.0f} ms a step**"),
        (performance, f"**{interleaved['speedup']:.2f}x**"),
        (performance, f"**{compare['speedup']:.2f}x** the tokens/s"),
        (performance, f"{compare['speedup_in_budget']:.2f}x the tokens in the 54 minutes"),
        (performance, f"{compare['first_steps_s']['now']:.0f} s"),
        (performance, f"**{1e3 * load['scan_s']:.1f} ms** of a {1e3 * load['from_pretrained_s']:.1f} ms load"),
        *curve_figures(performance),
        *demo_figures(),
        ("README.md", f"{compare['speedup']:.2f}x"),
        *serving_figures(),
        *preset_figures(),
    ]


def demo_figures() -> list[tuple[str, str]]:
    return [
        figure
        for demo in demo_records()
        for figure in (
            (
                "README.md",
                f"{clock(demo['train_minutes'])} of training, {clock(demo['wall_clock_minutes'])} for the whole",
            ),
            ("README.md", f"test2016 BLEU {demo['test2016']['bleu']:.2f}, chrF {demo['test2016']['chrf']:.2f}"),
        )
    ]


def in_words(count: int) -> str:
    return "one two three four five six seven eight nine ten".split()[count - 1]


def preset_figures() -> list[tuple[str, str]]:
    """The README's headline: the mean test2016 BLEU (sacreBLEU, and lowercased and tokenized) of the preset's runs at
    its final code (its canonical run and repeats: seeds 1-3; not its runs at earlier code, earlier presets' or the
    history), and beside it the runs of the preset on other hardware (role "hardware": a CPU without bf16, in fp32)."""
    runs = [json.loads(path.read_text()) for path in tracked("results/*-multi30k*/summary.json")]
    seeds = [run["test2016"] for run in runs if run.get("role") in ("canonical", "seed")]
    other = [run["test2016"]["bleu"] for run in runs if run.get("role") == "hardware"]
    which = f"mean of {in_words(len(seeds))} seeds" if len(seeds) > 1 else "one seed"
    return [
        (
            "README.md",
            f"to {statistics.mean(s['bleu'] for s in seeds):.1f} BLEU in an hour on two CPU cores with bf16 "
            f"(test2016, {which} of `vanilla-train --config multi30k`",
        ),
        ("README.md", f"{statistics.mean(s['bleu_lc_tok'] for s in seeds):.1f} lowercased and tokenized"),
        (
            "README.md",
            f"{statistics.mean(other):.1f} in {in_words(len(other))} run{'s' * (len(other) > 1)} on a CPU without bf16",
        ),
    ]


def curve_figures(page: str) -> list[tuple[str, str]]:
    """The mean training loss over the last 100 of the first 500 steps, eager and compiled."""
    summary = benchmark("training-step-curves")["curves"]["summary"]
    eager, compiled = (sum(summary[name]["mean"][-10:]) / 10 for name in ("eager", "compiled"))
    return [(page, f"the mean loss is {eager:.2f} eager and {compiled:.2f} compiled")]


def serving_figures() -> list[tuple[str, str]]:
    """The README's serving sentence: beam 4 on test2016, sentences/s at batch 64 and the ratios at batch 1."""
    runs = {(r["engine"], r["batch_size"]): r for r in benchmark("translation")["runs"] if r["num_beams"] == 4}
    speed = {key: run["sentences_per_s"] for key, run in runs.items()}
    generate, ct2, int8 = (speed[(engine, 64)] for engine in ("generate", "ct2-float32", "ct2-int8"))
    return [
        ("README.md", f"`generate()` {generate:.0f} sentences/s; CTranslate2 float32 {ct2:.0f} ({ct2 / generate:.1f}x"),
        (
            "README.md",
            f"int8 {int8:.0f} ({int8 / generate:.1f}x, BLEU {runs[('ct2-int8', 64)]['bleu']:.2f} against "
            f"{runs[('generate', 64)]['bleu']:.2f}",
        ),
        (
            "README.md",
            f"batch 1, {speed[('ct2-float32', 1)] / speed[('generate', 1)]:.1f}x and "
            f"{speed[('ct2-int8', 1)] / speed[('generate', 1)]:.1f}x",
        ),
    ]


@pytest.mark.parametrize(("page", "text"), headline_figures(), ids=[f"{p}: {t}" for p, t in headline_figures()])
def test_headline_figures_are_their_records(page, text):
    """A figure on the front page or the performance page is the one its record holds (records are committed with
    the pages that quote them)."""
    assert text in flat(page)


def page_table(page: str, header: str) -> list[list[str]]:
    """The body rows of the table on ``page`` whose header row starts with ``header``, its cells without bold (a
    table may be indented, inside a list item)."""
    lines = [line.strip() for line in page_text(page).splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            return rows
        rows.append([cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")])
    return rows


def shows(cell: str, value: float) -> bool:
    """Whether ``cell`` ("1,431.0", "5.45x", "99.9%", "1.01x the time") is ``value`` to the digits it shows."""
    text = cell.split()[0].replace(",", "").rstrip("x%")
    return abs(float(text) - value) <= 0.5 * 10.0 ** -len(text.partition(".")[2]) + 1e-9


# docs/performance.md's training table: its row -> (the record's figure, its unit); ratios are ours / Marian's
TRAINING_ROWS = {
    "training step fp32 (tokens/s)": ("train_fp32", "tokens_per_s"),
    "training step bf16 autocast (tokens/s)": ("train_bf16", "tokens_per_s"),
    "generate greedy, batch 32 (new tokens/s)": ("generate_greedy", "new_tokens_per_s"),
    "generate beam 4, batch 32 (new tokens/s)": ("generate_beam4", "new_tokens_per_s"),
    "encoder + first decoder step, batch 1 (ms)": ("first_step_latency_ms", None),
    "training step peak memory (MiB)": ("peak_memory_mib", None),
}


def test_training_table_is_its_record():
    """Every figure of the table against MarianMTModel is results/benchmarks/training.json's, at its commit."""
    record = benchmark("training")
    rows = page_table("docs/performance.md", "| config | measure | ours | Marian |")
    assert {row[0] for row in rows} == set(record["configs"]) and len(rows) == 7 * len(record["configs"])
    for config, measure, ours, marian, ratio in rows:
        figures = record["configs"][config]
        if measure == "MFU fp32 / bf16":
            shown = dict(zip(("fp32", "bf16"), ours.split(" / "), strict=True))
            assert all(shows(shown[p], 100 * figures[f"mfu_{p}"]["mfu"]) for p in shown), (config, measure, ours)
            continue
        key, unit = TRAINING_ROWS[measure]
        expected = [figures[key][side] if unit is None else figures[key][side][unit] for side in ("ours", "marian")]
        assert shows(ours, expected[0]) and shows(marian, expected[1]), (config, measure, ours, marian, expected)
        assert shows(ratio, expected[0] / expected[1]), (config, measure, ratio)
    assert names_its_record("docs/performance.md", "training")


def test_the_operators_a_step_dispatches_are_their_record():
    """docs/performance.md's operators dispatched per optimizer step (issue 99, item 4 A), row by row in the record's
    order, the one-batch step's share of today's and the H200's count over the proxy's are step-dispatch.json's."""
    record = benchmark("step-dispatch")
    rows = page_table("docs/performance.md", "| step | micro-batches | operators dispatched |")
    counts = [
        [f"{c['micro_batches']}", f"{c['dispatched']:,}", f"{c['accumulation_adds']:,}"]
        for c in record["counts"].values()
    ]
    assert [row[1:] for row in rows] == counts
    summary, page = record["summary"], flat("docs/performance.md")
    assert f"dispatches {summary['one_batch_share_of_today']:.1%} of today's accumulated compiled one" in page
    assert f"the GPU runs {summary['h200_over_cpu_today']:.2f} times the proxy's count" in page
    assert names_its_record("docs/performance.md", "step-dispatch")


def test_the_gpu_step_model_is_its_record():
    """docs/performance.md's model of the GPU step (issue 99, item 4): its table is gpu-model.json's predictions, in
    order, and its inputs are the record's."""
    record = benchmark("gpu-model")
    rows = page_table("docs/performance.md", "| step (`wmt14_step` mode) | micro-batches | host launches |")
    assert [row[0].split()[0] for row in rows] == [p["mode"] for p in record["predictions"]]
    assert [row[1:] for row in rows] == [
        [
            str(p["micro_batches"]),
            f"{p['host_launches']:,.0f}",
            *(f"{p[key]:.1f}" for key in ("host_ms", "gpu_ms", "step_ms")),
            p["bound"],
        ]
        for p in record["predictions"]
    ]
    inputs, page = record["inputs"], flat("docs/performance.md")
    calibration = inputs["calibration"]
    assert f"times {calibration['launches_per_dispatch']:.2f}: the H200" in page
    assert f"{calibration['host_us_per_launch']:.1f} µs, call 5's {calibration['step_ms']:.1f} ms less" in page
    assert f"The host's other time:** {inputs['host_other_ms']:.1f} ms a step, from {inputs['host_other_from']}" in page
    assert f"at {inputs['gpu_fraction']:.0%} of the measured" in page


SERVING_ENGINES = {  # the serving table's names of vanilla-bench --translate's engines
    "generate()": "generate",
    "MarianMTModel": "marian",
    "CTranslate2 float32": "ct2-float32",
    "CTranslate2 int8": "ct2-int8",
    "generate(), static cache, compiled": "generate-static-compiled",
    "ONNX Runtime": "onnx",
}


def test_serving_tables_are_their_records():
    """The table of generate() against MarianMTModel, CTranslate2 and ONNX Runtime is
    results/benchmarks/translation.json's, figure by figure."""
    record = benchmark("translation")
    runs = {(run["engine"], run["num_beams"], run["batch_size"]): run for run in record["runs"]}
    rows = page_table("docs/performance.md", "| engine | beams | batch | sentences/s | output tokens/s | x generate()")
    assert len(rows) == len(runs)
    for name, beams, batch, per_s, tokens_per_s, speedup, rss, bleu, same in rows:
        run = runs[SERVING_ENGINES[name], int(beams), int(batch)]
        generate = runs["generate", int(beams), int(batch)]
        ratio = run["sentences_per_s"] / generate["sentences_per_s"]
        expected = (
            run["sentences_per_s"],
            run["output_tokens_per_s"],
            ratio,
            run["peak_rss_mib"],
            run["bleu"],
            100 * run["identical_to_generate"],
        )
        shown = (per_s, tokens_per_s, speedup, rss, bleu, same)
        assert all(map(shows, shown, expected)), (name, beams, batch, shown, expected)
    assert names_its_record("docs/performance.md", "translation")


def test_generate_against_marian_by_commit_is_its_records():
    """The runs of generate() and MarianMTModel at two commits (results/benchmarks/generate-vs-marian/RUN-*.json, one
    record a run, named by its place in the order they ran) are docs/performance.md's table, figure by figure, and
    every run's translations are the same 1,000 at the BLEU the page gives."""
    paths = tracked("results/benchmarks/generate-vs-marian/*.json")
    rows = page_table("docs/performance.md", "| run | commit | transformers | beams | generate() sentences/s")
    claim = re.search(
        r"generate\(\) and Marian decode the same 1,000 translations in every run "
        r"\(BLEU (\S+) greedy, (\S+) with beam 4\)",
        flat("docs/performance.md"),
    )
    assert claim, "docs/performance.md no longer says what generate() and Marian decode"
    bleu_by_beams = {1: claim[1], 4: claim[2]}  # a run at any other width has no BLEU on the page, and fails
    assert len(paths) > 1 and len(rows) == 2 * len(paths)
    for number, path in sorted((int(path.name.split("-")[0]), path) for path in paths):
        record = json.loads(path.read_text())
        assert all(run["identical_to_generate"] == 1.0 for run in record["runs"]), path.name
        assert all(shows(bleu_by_beams[run["num_beams"]], run["bleu"]) for run in record["runs"]), path.name
        speed = {(run["engine"], run["num_beams"]): run["sentences_per_s"] for run in record["runs"]}
        for beams in (1, 4):
            shown_number, commit, release, shown_beams, generate, marian, ratio = rows.pop(0)
            ours, theirs = speed["generate", beams], speed["marian", beams]
            assert (shown_number, commit, release, shown_beams) == (
                str(number),
                f"`{record['code']['commit'][:7]}`",
                record["machine"]["transformers"],
                str(beams),
            )
            assert shows(generate, ours) and shows(marian, theirs) and shows(ratio, ours / theirs), (path.name, beams)


def test_restricted_attention_table_is_its_record():
    """Table 1's measurement on docs/performance.md is what the benchmark prints from its record."""
    assert restricted_attention.table(benchmark("restricted-attention")) in page_text("docs/performance.md")


def test_multi30k_page_compares_the_precisions_by_the_rule_stated_before_the_runs():
    """docs/multi30k.md's fp32-against-bf16 table is the two records it links, its bands are experiments.comparable's
    (1.96 sqrt(2) times the test2016 and validation spread of the preset's six runs of 2026-11-23 to -26), and both
    differences lie inside them (``single_runs_agree``): the evidence ``PRECISION_EVIDENCE`` points to."""
    assert comparable.PRECISION_EVIDENCE == "docs/multi30k.md#bf16-autocast-and-fp32"
    spread_runs = [json.loads(path.read_text()) for path in tracked("results/2026-11-2[3-6]-multi30k*/summary.json")]
    assert len(spread_runs) == 6
    *runs, differences = page_table("docs/multi30k.md", "| run | precision | machine | test2016 | validation |")
    records = {}
    for run in runs:
        record = json.loads((ROOT / "results" / re.search(r"\[([\w-]+)\]", run[0])[1] / "summary.json").read_text())
        assert run[1] == record["run"]["precision"]
        records[run[1]] = record
    assert sorted(records) == sorted([comparable.BF16, comparable.FP32])
    for column, metric in ((3, "test2016"), (4, "validation")):
        spread = statistics.stdev(run[metric]["bleu"] for run in spread_runs)
        fp32, bf16 = records[comparable.FP32][metric]["bleu"], records[comparable.BF16][metric]["bleu"]
        assert [shows(run[column], records[run[1]][metric]["bleu"]) for run in runs] == [True, True]
        assert differences[column] == f"{fp32 - bf16:+.2f} (inside {comparable.single_run_band(spread):.2f})"
        assert comparable.single_runs_agree(fp32, bf16, spread)


def test_multi30k_page_gives_each_reproduction_seed_as_its_record():
    """docs/multi30k.md's table of Wu et al.'s seeds is the committed reproduction records, seed by seed, each row
    linking its own: precision, training minutes and launches, tokens a second, validation and test2016 BLEU
    (lowercased and tokenized) and sacreBLEU of that text."""
    found = [json.loads(path.read_text()) for path in tracked("results/*/summary.json")]
    records = {record["run"]["seed"]: record for record in found if record.get("role") == reproduce.ROLE}
    rows = page_table("docs/multi30k.md", "| seed | record | machine, precision |")
    assert records and sorted(int(row[0]) for row in rows) == sorted(records)
    for seed, link, machine, minutes, speed, validation, test, sacrebleu in rows:
        record = records[int(seed)]
        linked = ROOT / "results" / re.search(r"\[([\w-]+)\]", link)[1] / "summary.json"
        assert json.loads(linked.read_text()) == record and machine.endswith(record["run"]["precision"])
        assert minutes == f"{run_train_minutes(record):.1f} ({len(run_launches(record))})"
        batches, target = speed.split(" / ")
        throughput = record["throughput"]
        assert shows(batches, throughput["batch_tokens_per_second"])
        assert shows(target, throughput["target_tokens_per_second"])
        assert shows(validation, record["validation"]["bleu_lc_tok"]) and shows(test, record["test2016"]["bleu_lc_tok"])
        assert shows(sacrebleu, record["test2016"]["bleu"])


def test_multi30k_page_gives_the_reproductions_verdict_and_its_averaging_controls_as_the_records_do():
    """docs/multi30k.md's verdict on Wu et al.'s 41.02 (the seeds' mean test2016 BLEU, lowercased and tokenized, and
    its 95% interval, experiments/verdict.py) and its averaging controls on seed 3 (results/controls: their window,
    the last checkpoint alone) are the committed records' figures."""
    found = [json.loads(path.read_text()) for path in tracked("results/*/summary.json")]
    scores = [r["test2016"]["bleu_lc_tok"] for r in found if r.get("role") == reproduce.ROLE]
    mean, low, high = verdict.mean_interval(scores)
    page = flat("docs/multi30k.md")
    assert f"mean **{mean:.2f}**, its 95% interval {low:.2f}-{high:.2f} (t, {len(scores)} seeds;" in page
    assert low <= results_index.WU_2021_TEST2016 <= high and mean >= 40.5 and "**The target is met.**" in page

    def control(name: str) -> float:
        record = json.loads((ROOT / "results" / "controls" / name / "summary.json").read_text())
        assert record["run"]["seed"] == 3 and tracked(f"results/controls/{name}/summary.json")
        return record["validation"]["bleu_lc_tok"]

    window, last = control("seed3-epochs-106-115"), control("seed3-last-checkpoint")
    assert f"fairseq's window, as `--num-epoch-checkpoints 10` takes them), scores **{window:.2f}**;" in page
    assert f"the last checkpoint alone, {last:.2f}." in page


def test_paper_page_ranks_the_wide_model_among_every_3000_step_run():
    """docs/paper.md's "the three lowest of any of the N runs at 3,000 steps" counts every committed 3,000-step record
    (a run that lands later changes N, and the claim must be checked again), and the three lowest validation PPLs among
    them are the seeds of the row it names, at the figures it gives (seeds 1, 2, 3)."""
    claim = re.search(
        r"\(`([\w-]+)`\) has its three seeds there: validation PPL (\S+), (\S+) and (\S+) \(.{0,120}?\), "
        r"the three lowest of any of the (\d+) runs at 3,000 steps",
        flat("docs/paper.md"),
    )
    assert claim, "docs/paper.md no longer ranks a row's seeds among the 3,000-step runs"
    runs = [json.loads(path.read_text()) for path in tracked("results/table3/3000-steps/*table3.json")]
    assert int(claim[5]) == len(runs)
    lowest = sorted(sorted(runs, key=lambda run: run["validation_ppl"])[:3], key=lambda run: run["seed"])
    assert [(run["row"], run["seed"]) for run in lowest] == [(claim[1], seed) for seed in (1, 2, 3)]
    assert all(shows(shown, run["validation_ppl"]) for shown, run in zip(claim.groups()[1:4], lowest, strict=True))


def test_paper_page_quotes_table3_as_it_stands():
    """Each Table 3 difference docs/paper.md quotes, with its interval and word, is the generated page's (a sweep
    that adds seeds changes them, and the prose must follow)."""
    page, table = flat("docs/paper.md"), flat("docs/table3.md")
    quoted = re.findall(r"[+-]\d+\.\d+ \[[+-]\d+\.\d+, [+-]\d+\.\d+\](?:: (?:holds|opposite|no change found))?", page)
    assert quoted, "docs/paper.md quotes no Table 3 interval"
    assert [text for text in quoted if text not in table] == []
