"""The README and docs stay true: their Python blocks run as printed, every command they print parses with the
tool it names (flags, values), every link to a file in the repository leads somewhere, the README stays a front
page (<= 8 KB), and docs/results.md is what ``python -m experiments.results_index`` makes of the records."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import data_scale, preemption, restricted_attention, training_step, translate_memory
from experiments import results_index, table3
from hub_card import push
from inference import attention, bench, ct2, demo, onnx_runtime, translate
from training import average, plot_curve
from training.arguments import parse_args

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = {  # console script or module -> its argument parser
    "vanilla-translate": translate.arguments, "vanilla-export-ct2": ct2.arguments,
    "vanilla-attention": attention.arguments, "vanilla-average-checkpoints": average.arguments,
    "vanilla-plot-curve": plot_curve.arguments, "vanilla-push": push.arguments, "vanilla-bench": bench.arguments,
    "benchmarks.data_scale": data_scale.arguments, "benchmarks.translate_memory": translate_memory.arguments,
    "experiments.results_index": results_index.arguments, "experiments.table3": table3.arguments,
    "benchmarks.restricted_attention": restricted_attention.arguments, "vanilla-demo": demo.arguments,
    "vanilla-export-onnx": onnx_runtime.arguments, "benchmarks.preemption": preemption.arguments,
    "benchmarks.training_step": training_step.arguments,
}  # fmt: skip


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
    if words[0] in ("make", "pip"):
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
    return [(f"{page.name}[{i}]", code) for page in PAGES for i, code in enumerate(blocks(page, "python"))
            if "my-name/" not in code]  # fmt: skip


@pytest.mark.parametrize(("name", "code"), runnable_blocks(), ids=[n for n, _ in runnable_blocks()])
def test_python_blocks_run(name, code, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_bytes()) <= 8 * 1024
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_results_page_is_generated_from_the_records():
    assert (ROOT / "docs" / "results.md").read_text(encoding="utf-8") == results_index.index(ROOT / "results")


def test_results_mean_is_left_out_where_a_run_lacks_the_score():
    runs = [
        {"validation": {"bleu": 40.0}, "test2016": {"bleu": 38.0, "chrf": 63.0, "length_ratio": 1.0}},
        {
            "validation": {"bleu": 41.0},
            "test2016": {"bleu": 39.0, "chrf": 64.0, "length_ratio": 1.02, "bleu_lc_tok": 39.5},
        },
    ]
    assert results_index.mean_row(runs) == "| **mean of 2** | | | | | 40.50 | **38.50** | 63.50 | 1.01 | - |"
