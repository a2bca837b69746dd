"""benchmarks/gpu_translate.py (issue 110, item 4): its reading of the targets and of what a device runs, and its
CPU rehearsal end to end on a tiny trained model, as the call runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import ctranslate2
import pytest
import torch
from helpers import saved_model_with_tokenizer
from training_helpers import ENGLISH, GERMAN

from benchmarks.gpu_translate import MODES, Mode, skip_reason, targets

ROOT = Path(__file__).resolve().parents[2]


def row(engine: str, batch: int, per_s: float, same: float = 1.0, change: float = 0.0) -> dict:
    return {
        "engine": engine,
        "batch_size": batch,
        "dtype": None,
        "sentences_per_s": per_s,
        "same_share": same,
        "bleu_change": change,
    }


def test_the_targets_are_read_from_the_modes_measured():
    assert targets([{"engine": "ct2-float16", "batch_size": 64, "dtype": None, "skipped": "no GPU"}]) == {
        "ct2_float16_keeps_the_translations": {
            "target": "the same line as float32 on >= 98%, within 0.1 BLEU",
            "met": None,
        },
        "generate_batch64_over_ct2_float16": {"target": ">= 0.5", "measured": None, "met": None},
    }
    read = targets([row("ct2-float16", 64, 400.0, same=0.981, change=-0.1), row("generate", 64, 123.7)])
    assert read["ct2_float16_keeps_the_translations"]["met"] is True
    assert read["generate_batch64_over_ct2_float16"] == {"target": ">= 0.5", "measured": 0.309, "met": False}
    read = targets([row("ct2-float16", 64, 200.0, same=0.979), row("generate", 64, 100.0)])
    assert read["ct2_float16_keeps_the_translations"]["met"] is False
    assert read["generate_batch64_over_ct2_float16"]["met"] is True
    assert targets([row("ct2-float16", 64, 200.0, change=0.11)])["ct2_float16_keeps_the_translations"]["met"] is False


def test_what_a_gpu_runs_and_a_cpu_skips(monkeypatch):
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda device, index=0: {"float16", "float32"})
    assert [skip_reason(mode, torch.device("cuda", 0)) for mode in MODES[:3]] == [
        None,
        None,
        "--quantization int8_float16 does not run on cuda:0: CTranslate2 runs float16, float32 there",
    ]
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    assert skip_reason(Mode("ct2-float16", 1), torch.device("cuda", 0)).startswith("CTranslate2 sees 0 CUDA device(s)")
    assert skip_reason(Mode("generate", 64, "float16"), torch.device("cpu")) == (
        "the CPU has no float16 matrix products: float16 is a GPU precision"
    )


@pytest.mark.slow
def test_the_cpu_rehearsal_measures_every_mode_a_cpu_runs(tokenizer, tmp_path):
    """As the call runs it (python -m from the checkout), on a CPU: the reference, then every mode, CTranslate2's
    GPU compute types and generate() in float16 skipped with their reason; generate() in float32 gives the
    reference's translations (CTranslate2 float32's) at each batch size, eager and compiled. The model: a tiny one
    whose outputs end at different lengths (a few steps of vanilla-train leave one that ends every line at once:
    nothing to compare), its position table as long as the outputs (a compiled step indexes the table)."""
    model = saved_model_with_tokenizer(tmp_path / "model", tokenizer, end_bias=2.0, max_position_embeddings=256)
    source, references = tmp_path / "src.en", tmp_path / "ref.de"
    source.write_text("\n".join(ENGLISH * 2) + "\n")
    references.write_text("\n".join(GERMAN * 2) + "\n")
    record_path = tmp_path / "gpu" / "translate.json"
    command = [sys.executable, "-m", "benchmarks.gpu_translate", str(model), "--device", "cpu", "--limit", "5"]
    command += ["--batch1_lines", "3", "--source", str(source), "--references", str(references)]
    command += ["--json", str(record_path)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=1200, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(record_path.read_text())
    assert (record["device"], record["lines"], record["batch1_lines"], record["num_beams"]) == ("cpu", 5, 3, 4)
    references = {reference["batch_size"]: reference for reference in record["references"]}
    assert {batch: (r["engine"], r["device"]) for batch, r in references.items()} == {
        64: ("ct2-float32", "cpu"),
        1: ("ct2-float32", "cpu"),
    }
    assert references[64]["sentences_per_s"] > 0 and references[1]["output_tokens"] < references[64]["output_tokens"]
    rows = {(r["engine"], r["batch_size"], r["dtype"]): r for r in record["modes"]}
    assert list(rows) == [(mode.engine, mode.batch_size, mode.dtype) for mode in MODES]
    runs = ", ".join(sorted(ctranslate2.get_supported_compute_types("cpu")))
    for quantization in ("float16", "int8_float16"):
        for batch in (64, 1):
            assert rows[f"ct2-{quantization}", batch, None]["skipped"] == (
                f"--quantization {quantization} does not run on cpu: CTranslate2 runs {runs} there"
            )
    assert rows["generate", 64, "float16"]["skipped"].startswith("the CPU has no float16 matrix products")
    for engine in ("generate", "generate-static-compiled"):
        for batch, lines in ((64, 5), (1, 3)):
            measured = rows[engine, batch, None]
            assert (measured["lines"], measured["lines_differing"], measured["bleu_change"]) == (lines, 0, 0.0)
            assert measured["sentences_per_s"] > 0 and measured["warmup_s"] > 0 and "gpu_mib" not in measured
            assert measured["output_tokens"] > 2 * lines  # translations, not only their end tokens
    assert record["targets"]["ct2_float16_keeps_the_translations"]["met"] is None
