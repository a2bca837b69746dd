"""The repository's benchmarks (benchmarks/, run from a checkout) end to end at toy sizes (the figures themselves
come from the documented commands)."""

from pathlib import Path

import pytest
import torch
from helpers import tiny_config, tiny_model
from transformers import TrainerCallback

from benchmarks import load_check
from modeling_vanilla import checks

pytestmark = pytest.mark.slow


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


def test_the_crossover_is_the_first_length_where_the_window_is_faster():
    """A length where only one of the pair ran (an error row has no seconds) decides nothing."""
    from benchmarks.restricted_attention import WINDOW, crossover

    def row(n, window, seconds=None):
        return {"n": n, "implementation": "flex_attention", "window": window,
                **({"seconds": seconds} if seconds else {"error": "out of memory"})}  # fmt: skip

    rows = [row(64, None, 1.0), row(64, WINDOW, 1.5), row(256, None, 2.0), row(256, WINDOW),
            row(1024, None, 8.0), row(1024, WINDOW, 4.0), row(4096, None, 30.0), row(4096, WINDOW, 9.0)]  # fmt: skip
    assert crossover(rows, "flex_attention") == 1024
    assert crossover(rows, "sdpa") is None and crossover(rows[:4], "flex_attention") is None


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


def test_the_training_step_profile_names_where_a_step_goes():
    """A tiny bf16 training step profiled as benchmarks/training_step.py profiles the preset's: the model's regions
    (their backward included, through the profiler's sequence numbers), the operator families and the optimizer
    each get their time; all of it adds up to the step; the matrix products' FLOPs are counted."""
    import time

    from torch.profiler import ProfilerActivity, profile

    from benchmarks.training_step import categorize, labelled_regions

    model = tiny_model(dropout=0.1, label_smoothing=0.1).train()
    optimizer = torch.optim.AdamW(model.parameters())
    ids = torch.randint(3, 50, (4, 6))
    with labelled_regions(), profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
        loss.backward()
        optimizer.step()
        window = time.perf_counter() - start
    split = categorize(prof.events(), window, steps=1)
    spent = split["ms_per_step"]
    assert {"matrix products", "attention", "LayerNorm", "dropout", "loss", "optimizer"} <= spent.keys(), spent
    assert split["matrix_products_ms_per_step"]["loss"] > 0 and split["matrix_products_ms_per_step"]["attention"] > 0
    assert sum(spent.values()) >= 1e3 * window * 0.99 and split["matmul_flops_per_step"] > 0


def test_the_training_step_measures_from_an_empty_inductor_cache(monkeypatch, tmp_path):
    """Inside ``cold_inductor_cache`` inductor (and a worker process, through the environment) caches into a new,
    empty folder; afterwards the folder is gone and the variable is as it was."""
    from torch._inductor.runtime.runtime_utils import cache_dir

    from benchmarks.training_step import cold_inductor_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    with cold_inductor_cache():
        inside = Path(cache_dir())
        assert inside != tmp_path and inside.is_dir() and not any(inside.iterdir())
    assert not inside.exists() and cache_dir() == str(tmp_path)


def test_the_gpu_step_benchmark_trains_on_the_files_it_prepares_and_counts_its_batches(tmp_path, monkeypatch):
    """benchmarks.wmt14_step without its GPU parts: --prepare's corpus (training pairs, then 200 held-out pairs each
    for validation and test) and the preset's vocabulary learned on the training pairs; the wmt14 preset's trainer
    built from them (made tiny here), every batch's shape and real tokens recorded. The record is docs/performance.md's
    GPU section."""
    from transformers import AutoTokenizer

    from benchmarks import wmt14_step
    from benchmarks.training_step import TokenCount

    wmt14_step.prepare(tmp_path, 60)
    lines = {name: (tmp_path / name).read_text(encoding="utf-8").splitlines()
             for name in ("train.en", "train.de", "valid.en", "valid.de", "test.en", "test.de")}  # fmt: skip
    assert [len(lines[name]) for name in lines] == [60, 60, 200, 200, 200, 200]
    assert not set(lines["train.en"]) & set(lines["test.en"])  # held out
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    tiny = ["--d_model", "16", "--ffn_dim", "32", "--encoder_layers", "1", "--decoder_layers", "1",
            "--num_attention_heads", "2", "--max_tokens_per_batch", "200", "--tokens_per_step", "600"]  # fmt: skip
    monkeypatch.setattr(wmt14_step, "data_flags", lambda data, flags=wmt14_step.data_flags: [*flags(data), *tiny])
    trainer, watch = wmt14_step.train(tmp_path, False, 2, lambda counted: TrainerCallback())
    batches = trainer.data_collator
    assert isinstance(batches, TokenCount) and watch in trainer.callback_handler.callbacks
    assert trainer.args.gradient_accumulation_steps == 3 and trainer.state.global_step == 2
    assert len(batches.shapes) >= 6 and len(batches.tokens) == len(batches.shapes)
    for (pairs, source, target), tokens in zip(batches.shapes, batches.tokens, strict=True):
        assert pairs * max(source, target) <= 200 and 0 < tokens <= pairs * (source + target)
    assert trainer.processing_class.get_vocab() == tokenizer.get_vocab()  # the prepared one, not learned again
    assert trainer.model.config.encoder_layers == 1 and trainer.model.config.vocab_size == len(tokenizer)


def test_the_gpu_step_benchmark_refuses_a_machine_without_a_gpu(tmp_path, monkeypatch):
    from benchmarks import wmt14_step

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same on a machine with one
    for mode in ([], ["--profile", "3"]):
        with pytest.raises(SystemExit, match="measures a GPU's step: no CUDA device here"):
            wmt14_step.main(["--data", str(tmp_path), *mode])
