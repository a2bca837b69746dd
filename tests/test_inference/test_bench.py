"""vanilla-bench (inference.bench) runs end to end at a tiny size (the figures themselves come from the documented
command)."""

import json
import sys

import pytest

from inference.bench import CONFIGS, check_equal, main, marian_model, train_flops
from modeling_vanilla import from_marian
from vanilla_tools.hardware import cpu_bf16

pytestmark = pytest.mark.slow


def test_benchmark_writes_ratios_for_each_config(tmp_path, monkeypatch):
    """The console script, whole: it exits 0 (its results are written, not returned to sys.exit)."""
    out = tmp_path / "bench.json"
    monkeypatch.setattr(sys, "argv", ["vanilla-bench", "--config", "tiny", "--repeats", "1", "--json", str(out)])
    with pytest.raises(SystemExit) as exit_status:
        main()
    assert exit_status.value.code == 0
    results = json.loads(out.read_text())
    tiny = results["configs"]["tiny"]
    measured = ["fp32", "bf16"] if cpu_bf16() else ["fp32"]  # emulated bf16 (no AVX512-BF16 or AMX): not timed
    assert tiny["precisions"] == measured
    trained = {f"train_{precision}" for precision in measured}
    assert set(tiny["ratios"]) == trained | {"generate_greedy", "generate_beam4", "peak_memory"}
    assert all(value > 0 for value in tiny["ratios"].values())
    for key in trained:
        assert tiny[key]["ours"]["tokens_per_s"] > 0 and tiny[key]["marian"]["tokens_per_s"] > 0
    assert 0 < tiny["mfu_fp32"]["mfu"] < 1 and tiny["peak_memory_mib"]["ours"] > 0
    assert results["machine"]["torch"]


def test_the_compared_models_compute_the_same_function():
    marian = marian_model("tiny")
    check_equal(marian, from_marian(marian), CONFIGS["tiny"][-1])  # raises if logits or greedy tokens differ


def test_flop_count_of_a_training_step():
    config = from_marian(marian_model("tiny")).config  # d 64, 1+1 layers, ffn 128, vocab 1000
    per_token = (4 * 64 * 64 + 2 * 64 * 128) + (8 * 64 * 64 + 2 * 64 * 128) + 64 * 1000
    attention = 3 * 2 * 10 * 64
    assert train_flops(config, batch=2, length=10) == 3 * 2 * 20 * (per_token + attention)
    # 10 source, 4 target tokens: the encoder's work on 10, the decoder's on 4, the cross-attention's K/V on 10
    encoder = 10 * (4 * 64 * 64 + 2 * 64 * 128) + 2 * 10 * 10 * 64
    decoder = 4 * (6 * 64 * 64 + 2 * 64 * 128) + 10 * 2 * 64 * 64 + 2 * 4 * 4 * 64 + 2 * 4 * 10 * 64 + 4 * 64 * 1000
    assert train_flops(config, batch=2, length=10, target_length=4) == 3 * 2 * 2 * (encoder + decoder)


def test_the_translation_bench_gives_marian_our_maximum_length(tokenizer, tmp_path):
    """MarianMTModel's generate() stops at 20 tokens unless told; the bench's Marian engine decodes to the same
    input length + 50 as ours, so both give the same tokens (a random model rarely ends, so outputs run long)."""
    from helpers import tiny_config
    from training_helpers import ENGLISH

    from inference.bench_engines import make_engine
    from modeling_vanilla import VanillaTransformerForSeq2Seq

    config = tiny_config(vocab_size=len(tokenizer), max_position_embeddings=128)  # Marian tabulates its positions
    VanillaTransformerForSeq2Seq(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    for beams in (1, 4):
        ours, marian = (make_engine(name, str(tmp_path), beams)(ENGLISH) for name in ("generate", "marian"))
        assert max(ours.output_lengths) > 20
        assert marian.texts == ours.texts and marian.output_lengths == ours.output_lengths


def test_the_translation_bench_runs_each_engine_in_its_process(tokenizer, tmp_path):
    """The bench's whole path (a worker process per measurement, the rows, BLEU, agreement with generate()) on a
    tiny model: ONNX Runtime gives generate()'s translations."""
    from helpers import saved_model_with_tokenizer
    from training_helpers import ENGLISH, GERMAN

    from inference.bench_engines import run

    pytest.importorskip("onnxruntime")
    model_dir = saved_model_with_tokenizer(tmp_path / "model", tokenizer)
    source, references = tmp_path / "src.en", tmp_path / "ref.de"
    source.write_text("\n".join(ENGLISH) + "\n")
    references.write_text("\n".join(GERMAN) + "\n")
    results = run(str(model_dir), source, references, [2], ["generate", "onnx"], timeout=300)
    rows = {(row["engine"], row["num_beams"]): row for row in results["runs"]}
    assert set(rows) == {(engine, beams) for engine in ("generate", "onnx") for beams in (1, 4)}, results["runs"]
    for row in rows.values():
        assert row["sentences_per_s"] > 0 and row["output_tokens_per_s"] > 0 and row["identical_to_generate"] == 1.0
