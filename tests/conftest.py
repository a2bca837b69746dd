import contextlib
import io
from pathlib import Path

import pytest
import torch
from transformers.testing_utils import parse_flag_from_env

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items):
    """The long end-to-end tests carry pytest's ``slow`` mark (``pytestmark = pytest.mark.slow`` in a module,
    ``@pytest.mark.slow`` on a test; transformers' ``@slow`` sets the same mark) and run only with RUN_SLOW=1, read as
    transformers reads it. They are skipped here, before setup, so that the fast tier builds no fixture that only
    slow tests use (transformers' decorator alone skips inside the test, after its fixtures are built)."""
    if parse_flag_from_env("RUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: RUN_SLOW=1 runs it")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


def records_and_pages() -> dict[str, int]:
    """Every file under results/ and docs/ with its modification time."""
    return {
        str(p): p.stat().st_mtime_ns
        for folder in ("results", "docs")
        for p in (ROOT / folder).rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="session", autouse=True)
def _records_untouched():
    """No test writes into the repository's records or pages (vanilla-train's --summary_dir of a preset points
    there): a test that did once overwrote make demo's committed record."""
    before = records_and_pages()
    yield
    after = records_and_pages()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, f"the tests wrote into the repository: {changed}"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture(scope="session")
def copy_model():
    from helpers import train_copy_model

    return train_copy_model()


@pytest.fixture(scope="session")
def tokenizer():
    """A 200-token shared BPE tokenizer learned from the three sentence pairs of ``training_helpers``."""
    from training_helpers import ENGLISH, GERMAN

    from training.data.tokenizer import train_tokenizer

    return train_tokenizer((ENGLISH + GERMAN) * 20, vocab_size=200, min_frequency=1)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """One tiny vanilla-train run (6 steps, checkpoints every 2, evaluations at 3 and 6, the last 2 checkpoints
    averaged, beam-2 final evaluation with alpha chosen on validation) shared by the tests."""
    from training_helpers import train_argv, write_corpus

    from training.train import run

    folder = tmp_path_factory.mktemp("run")
    corpus = write_corpus(folder / "data")
    output = folder / "out"
    argv = train_argv(
        corpus,
        output,
        "--max_steps",
        "6",
        "--save_steps",
        "2",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "3",
        "--num_beams",
        "2",
        "--translate_examples",
        "2",
        "--logging_steps",
        "1",
        "--average_last",
        "2",
        "--length_penalty_candidates",
        "0.5",
        "2.0",
        "--summary_dir",
        str(folder / "summary"),
    )
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        results = run(argv)
    print(stdout.getvalue(), end="")
    return {
        "corpus": corpus,
        "output": output,
        "results": results,
        "summary": folder / "summary",
        "stdout": stdout.getvalue(),
    }
