"""vanilla-bench runs end to end at a tiny size (the figures themselves come from the documented command)."""

import json
from pathlib import Path

import pytest
import torch
from helpers import tiny_config, tiny_model

from benchmarks import load_check
from benchmarks.bench import CONFIGS, check_equal, main, marian_model, train_flops
from modeling_vanilla import checks, from_marian


def test_benchmark_writes_ratios_for_each_config(tmp_path):
    out = tmp_path / "bench.json"
    main(["--config", "tiny", "--repeats", "1", "--json", str(out)])
    results = json.loads(out.read_text())
    tiny = results["configs"]["tiny"]
    assert set(tiny["ratios"]) == {"train_fp32", "train_bf16", "generate_greedy", "generate_beam4", "peak_memory"}
    assert all(value > 0 for value in tiny["ratios"].values())
    for key in ("train_fp32", "train_bf16"):
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


def test_the_translation_bench_gives_marian_our_maximum_length(tokenizer, tmp_path):
    """MarianMTModel's generate() stops at 20 tokens unless told; the bench's Marian engine decodes to the same
    input length + 50 as ours, so both give the same tokens (a random model rarely ends, so outputs run long)."""
    from helpers import tiny_config
    from training_helpers import ENGLISH

    from benchmarks.translation import make_engine
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

    from benchmarks.translation import run

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


def test_the_restricted_attention_bench_records_each_length_window_and_implementation(tmp_path):
    """Table 1's benchmark at toy lengths: a row per (n, window, implementation) with its figures, the crossover
    per implementation, and the plot."""
    from benchmarks.restricted_attention import WINDOW, main

    record = main(["--lengths", "16", "128", "--implementations", "sdpa", "--repeats", "1",
                   "--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")])  # fmt: skip
    keys = [(row["n"], row["window"], row["implementation"]) for row in record["rows"]]
    assert keys == [(n, w, "sdpa") for n in (16, 128) for w in (None, WINDOW)]
    assert all(row["seconds"] > 0 and row["peak_rss_mib"] > 0 for row in record["rows"]), record["rows"]
    assert set(record["crossover"]) == {"sdpa"} and record["matmul_gflops_fp32"] > 0
    assert record["code"]["commit"] and (tmp_path / "r.png").stat().st_size > 10_000


def test_the_wmt_like_corpus_has_a_long_tail_of_word_types(tmp_path):
    """Seeded (the same text twice), WMT's sentence lengths, Zipf-distributed real words, and a tail of rare types
    that keeps growing with the corpus (Multi30k joined with itself stays at its ~25k types)."""
    from collections import Counter

    pytest.importorskip("wordfreq")
    from benchmarks.data_scale import word_types, write_joined_corpus
    from benchmarks.wmt_like import write_corpus

    for name in ("a", "b", "joined"):
        (tmp_path / name).mkdir()
    first, second = write_corpus(tmp_path / "a", 3000), write_corpus(tmp_path / "b", 3000)
    assert word_types(first) > 2 * word_types(write_joined_corpus(tmp_path / "joined", 3000))
    assert [Path(f).read_text() for f in first] == [Path(f).read_text() for f in second]
    for path, most_common in zip(first, ("the", "die"), strict=True):
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        words = Counter(w.strip(".,?!").lower() for line in lines for w in line.split())
        assert len(lines) == 3000 and 19 < sum(words.values()) / len(lines) < 27  # WMT: about 23 words a sentence
        assert words.most_common(1)[0][0] == most_common
        assert sum(1 for c in words.values() if c == 1) > 0.5 * len(words)  # most types seen once: a long tail


def test_the_data_scale_bench_measures_a_cold_start_against_its_bare_limit(tmp_path):
    pytest.importorskip("wordfreq")
    from benchmarks.data_scale import main

    record = main(["--pairs", "2000", "--corpora", "wmt-like", "--json", str(tmp_path / "d.json")])
    (row,) = record["runs"]
    assert row["corpus"] == "wmt-like" and row["word_types"] > 20_000
    limit = row["bare_limit"]
    assert limit["total_s"] > 0 and limit["tokens"] > 2 * 2000 and limit["processes"] >= 1
    assert row["cold"]["ratio_to_bare_limit"] == round(row["cold"]["first_step_s"] / limit["total_s"], 2)
    assert row["warm"]["first_step_s"] > 0 and row["loader_tokens_per_s"] > 0


def test_the_load_check_bench_times_loading_with_and_without_the_scan():
    measurement = load_check.measure(tiny_config(), repeats=2)
    assert measurement["parameters"] == sum(p.numel() for p in tiny_model().parameters())
    assert measurement["repeats"] == 2 and measurement["scan_share_of_load"] > 0
    assert all(measurement[key] > 0 for key in ("from_pretrained_s", "from_pretrained_without_scan_s", "scan_s"))
    damaged = tiny_model()
    with torch.no_grad():
        damaged.lm_head.weight[3, 1] = float("nan")
    for scan in (load_check.scan_per_tensor, checks.check_loaded_weights):  # the two scans compared find the same
        with pytest.raises(ValueError, match="weight `model.shared.weight` holds NaN"):  # the tied matrix, by name
            scan(damaged, "x")
