"""A checkpoint pushed earlier keeps loading: each archive in tests/fixtures (made once by
tests/fixtures/freeze_checkpoint.py, never remade) is loaded by today's package, and by its own code files on the
installed transformers in a process where the package cannot be imported (as a Hub user without it loads it with
trust_remote_code). Both must give the logits and the greedy and beam tokens it gave the day it was made: `make test`
checks this on the newest transformers, `make compat` on the floor."""

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import torch
from frozen import SOURCES, outputs
from helpers import BLOCK_PACKAGE
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import modeling_vanilla

TESTS = Path(__file__).resolve().parents[1]
ARCHIVES = sorted((TESTS / "fixtures").glob("checkpoint-*.tar.gz"))


@pytest.fixture(params=ARCHIVES, ids=[a.name.removesuffix(".tar.gz") for a in ARCHIVES])
def frozen(request, tmp_path) -> Path:
    with tarfile.open(request.param) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / request.param.name.removesuffix(".tar.gz")


def assert_same_outputs(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert torch.equal(got["input_ids"], expected["input_ids"])  # the tokenizer encodes as it did
    torch.testing.assert_close(got["logits"], expected["logits"], atol=1e-5, rtol=1e-5)
    assert torch.equal(got["greedy"], expected["greedy"]) and torch.equal(got["beam"], expected["beam"])


def test_there_is_a_frozen_checkpoint():
    assert ARCHIVES, "tests/fixtures holds no checkpoint-*.tar.gz"


def test_todays_package_loads_it(frozen):
    model = AutoModelForSeq2SeqLM.from_pretrained(frozen).eval()
    assert type(model) is modeling_vanilla.VanillaTransformerForSeq2Seq
    assert_same_outputs(
        outputs(model, AutoTokenizer.from_pretrained(frozen), SOURCES), load_file(frozen / "expected.safetensors")
    )


def test_its_own_code_loads_it_without_the_package(frozen, tmp_path):
    made = json.loads((frozen / "made.json").read_text())
    script = BLOCK_PACKAGE + textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from safetensors.torch import save_file
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        from frozen import SOURCES, outputs
        model = AutoModelForSeq2SeqLM.from_pretrained({str(frozen)!r}, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        tokenizer = AutoTokenizer.from_pretrained({str(frozen)!r})
        got = outputs(model, tokenizer, SOURCES)
        save_file({{name: tensor.contiguous() for name, tensor in got.items()}}, {str(tmp_path / "got.safetensors")!r})
    """)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (
        f"made at {made['commit'][:7]} on transformers {made['transformers']}: " + (done.stderr[-3000:])
    )
    assert_same_outputs(load_file(tmp_path / "got.safetensors"), load_file(frozen / "expected.safetensors"))
