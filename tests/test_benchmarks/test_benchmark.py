"""The repository's benchmarks (benchmarks/, run from a checkout) end to end at toy sizes (the figures themselves
come from the documented commands)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import batch_of, tiny_config, tiny_model
from training_helpers import train_argv, write_corpus
from transformers import TrainerCallback

from benchmarks import load_check
from modeling_vanilla import checks

pytestmark = pytest.mark.slow


def test_the_restricted_attention_bench_records_each_length_window_and_implementation(tmp_path):
    """Table 1's benchmark at toy lengths: a row per (n, window, implementation) with its figures, the crossover
    per implementation, and the plot."""
    from benchmarks.restricted_attention import WINDOW, main

    record = main(
        [
            "--lengths",
            "16",
            "128",
            "--implementations",
            "sdpa",
            "--repeats",
            "1",
            "--json",
            str(tmp_path / "r.json"),
            "--plot",
            str(tmp_path / "r.png"),
        ]
    )
    keys = [(row["n"], row["window"], row["implementation"]) for row in record["rows"]]
    assert keys == [(n, w, "sdpa") for n in (16, 128) for w in (None, WINDOW)]
    assert all(row["seconds"] > 0 and row["peak_rss_mib"] > 0 for row in record["rows"]), record["rows"]
    assert set(record["crossover"]) == {"sdpa"} and record["matmul_gflops_fp32"] > 0
    assert record["code"]["commit"] and (tmp_path / "r.png").stat().st_size > 10_000


def test_the_crossover_is_the_first_length_where_the_window_is_faster():
    """A length where only one of the pair ran (an error row has no seconds) decides nothing."""
    from benchmarks.restricted_attention import WINDOW, crossover

    def row(n, window, seconds=None):
        return {
            "n": n,
            "implementation": "flex_attention",
            "window": window,
            **({"seconds": seconds} if seconds else {"error": "out of memory"}),
        }

    rows = [
        row(64, None, 1.0),
        row(64, WINDOW, 1.5),
        row(256, None, 2.0),
        row(256, WINDOW),
        row(1024, None, 8.0),
        row(1024, WINDOW, 4.0),
        row(4096, None, 30.0),
        row(4096, WINDOW, 9.0),
    ]
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


def test_the_preemption_bench_measures_the_grace_a_sigtermed_run_needs(tmp_path):
    """The wmt14 preset at a toy width, signalled after its first step: it exits 143 with a complete checkpoint of
    the step in progress, and the grace splits into the rest of that step and the checkpoint's write."""
    from benchmarks.preemption import main

    toy = [
        "--d_model",
        "64",
        "--encoder_layers",
        "1",
        "--decoder_layers",
        "1",
        "--ffn_dim",
        "128",
        "--num_attention_heads",
        "2",
        "--max_tokens_per_batch",
        "2000",
    ]
    record = main(["--json", str(tmp_path / "p.json"), "--", *toy])
    measurement = record["measurement"]
    assert measurement["exit_status"] == 143 and measurement["stopped_at_step"] == 2
    assert measurement["parameters"] and measurement["checkpoint_mib"] > 1
    parts = measurement["rest_of_step_s"] + measurement["checkpoint_write_and_exit_s"]
    assert measurement["rest_of_step_s"] > 0 and abs(parts - measurement["grace_needed_s"]) < 0.05
    assert (tmp_path / "p.json").exists() and record["code"]["commit"]


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


def test_the_training_step_profiles_the_preset_named_and_counts_an_accumulated_steps_batches_together(tmp_path):
    """``--profile --preset multi30k-tiny`` profiles that preset (not multi30k under its name), here on a small corpus
    with two batches a step: the record names the preset and the accumulation, and a step's tokens are its batches'."""
    from benchmarks.training_step import main, profile_preset, step_tokens

    assert step_tokens([5, 7, 1, 2, 4, 4], 2) == [12, 3, 8] and step_tokens([5, 7], 1) == [5, 7]
    corpus = write_corpus(tmp_path / "data", pairs=120)
    extra = train_argv(corpus, tmp_path / "run", "--tokens_per_step", "512", "--bf16", "false")
    record = profile_preset(2, 1, 1, extra, "multi30k-tiny")
    assert (record["preset"], record["gradient_accumulation_steps"]) == ("multi30k-tiny", 2)
    assert record["tokens_per_step_median"] > 512  # one batch has at most 256 tokens a side: two batches counted
    assert record["steps_profiled"] == 1 and record["profiled_step_ms"] > 0 and record["precision"] == "fp32"
    with pytest.raises(SystemExit) as refused:
        main(["--compare", "HEAD", "--preset", "multi30k-tiny"])
    assert refused.value.code == 2


def test_the_gpu_step_benchmark_trains_on_the_files_it_prepares_and_counts_its_batches(tmp_path, monkeypatch):
    """benchmarks.wmt14_step without its GPU parts: --prepare's corpus (training pairs, then 200 held-out pairs each
    for validation and test) and the preset's vocabulary learned on the training pairs; the wmt14 preset's trainer
    built from them (made tiny here, bucketed as on CUDA), every batch's shape and real tokens recorded; without
    --warmup the measured steps start once every batch shape they meet has been trained (warm_steps plans it from
    the sampler; the batches counted as the training loop took them show it). The record is docs/performance.md's
    GPU section."""
    from transformers import AutoTokenizer

    from benchmarks import wmt14_step
    from benchmarks.wmt14_step import TakenBatches

    wmt14_step.prepare(tmp_path, 60)
    lines = {
        name: (tmp_path / name).read_text(encoding="utf-8").splitlines()
        for name in ("train.en", "train.de", "valid.en", "valid.de", "test.en", "test.de")
    }
    assert [len(lines[name]) for name in lines] == [60, 60, 200, 200, 200, 200]
    assert not set(lines["train.en"]) & set(lines["test.en"])  # held out
    lengths = np.load(tmp_path / wmt14_step.LENGTHS)  # the training pairs' token lengths (test_batch_shapes' fixture)
    assert len(lengths["source"]) == len(lengths["target"]) == 60 and lengths["source"].min() >= 2
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    tiny_wmt14_step(monkeypatch, tmp_path)
    trainer, batches, (watch,), warm = wmt14_step.train(
        tmp_path, "eager", None, 6, lambda counted, warm: [TrainerCallback()]
    )
    assert isinstance(batches, TakenBatches) and watch in trainer.callback_handler.callbacks
    assert trainer.args.gradient_accumulation_steps == 2 and trainer.state.global_step == warm["steps"] + 6
    trained = batches.shapes  # as the steps took them: no loader's lookahead
    assert len(trained) == (warm["steps"] + 6) * 2
    warmed = warm["steps"] * 2
    print("warm-up:", warm, "batches:", len(trained), "shapes:", len(set(trained)))
    assert 0 < warm["steps"] and warm["shapes"] == len(set(trained[:warmed]))
    assert set(trained[warmed:]) <= set(trained[:warmed])  # nothing new once warm
    assert set(trained[warmed - 2 : warmed]) - set(trained[: warmed - 2])  # a step earlier was not warm
    assert len(batches.tokens) == len(batches.shapes)
    for (pairs, source, target), tokens in zip(batches.shapes, batches.tokens, strict=True):
        assert pairs * max(source, target) <= 200 and 0 < tokens <= pairs * (source + target)
    assert trainer.processing_class.get_vocab() == tokenizer.get_vocab()  # the prepared one, not learned again
    assert trainer.model.config.encoder_layers == 1 and trainer.model.config.vocab_size == len(tokenizer)


# The wmt14 preset made tiny for a CPU, bucketed as on CUDA: 200 tokens a side a batch, 2 a step
TINY_WMT14 = [
    *("--d_model", "16", "--ffn_dim", "32", "--encoder_layers", "1", "--decoder_layers", "1"),
    *("--num_attention_heads", "2", "--max_tokens_per_batch", "200", "--tokens_per_step", "400"),
    *("--required_batch_size_multiple", "2", "--required_seq_len_multiple", "4", "--num_batch_buckets", "4"),
]


def tiny_wmt14_step(monkeypatch, data: Path, *flags: str) -> None:
    """benchmarks.wmt14_step's trainer made ``TINY_WMT14``, with ``flags``; its eager and compiled modes without their
    own budgets (8 batches of the preset's step), which would come after the tiny one and replace it, the compiled
    one with the aot_eager backend (dynamo's and AOTAutograd's part of a compilation, in seconds on a CPU)."""
    from benchmarks import wmt14_step

    monkeypatch.setattr(
        wmt14_step, "data_flags", lambda data, own=wmt14_step.data_flags: [*own(data), *TINY_WMT14, *flags]
    )
    monkeypatch.setitem(wmt14_step.MODES, "eager", ["--torch_compile", "false"])
    monkeypatch.setitem(
        wmt14_step.MODES, "compiled", ["--torch_compile", "true", "--torch_compile_backend", "aot_eager"]
    )


class CpuEvent:
    """``torch.cuda.Event`` for a CPU: the time it was recorded."""

    def __init__(self, enable_timing: bool = False):
        self.at = 0.0

    def record(self) -> None:
        import time

        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "CpuEvent") -> float:
        return (end.at - self.at) * 1e3


def test_the_gpu_step_measurement_rehearsed_on_the_cpu_with_loader_workers(tmp_path, monkeypatch):
    """benchmarks.wmt14_step's measurement (``run``: every mode's training, shapes, padding, FLOPs, clock, compile
    count and record) on the CPU, its loader's worker processes on as on CUDA (training.arguments.LOADER_ON_CUDA),
    only the CUDA calls left out: CUDA's events are the host's clock, its sync debug mode, memory statistics and
    synchronisation do nothing, and the bf16 peak is stated. On the code of 6585233 this failed as the H200's call
    did: the batches were counted by the collator, which ran in the workers, so the record's padding divided by 0.
    Here the record holds each mode's timed batches (3 steps of 2), the warm-up's shapes counted as the loop took
    its batches and as the sampler planned them, and the compiled graphs, counted with the workers on."""
    import json

    from benchmarks import wmt14_step
    from training.arguments import LOADER_ON_CUDA

    wmt14_step.prepare(tmp_path, 60)
    workers = [flag for name, value in LOADER_ON_CUDA.items() for flag in (f"--{name}", str(value))]
    tiny_wmt14_step(monkeypatch, tmp_path, *workers)
    for name, stand_in in {
        "Event": CpuEvent,
        "set_sync_debug_mode": lambda mode: None,
        "reset_peak_memory_stats": lambda: None,
        "max_memory_allocated": lambda: 0,
        "synchronize": lambda: None,
        "get_device_name": lambda: "a CPU rehearsing",
    }.items():
        monkeypatch.setattr(torch.cuda, name, stand_in)
    monkeypatch.setattr(wmt14_step, "matmul_peak", lambda *args, **kwargs: 1e12)
    path = tmp_path / "wmt14-step.json"
    record = wmt14_step.run(tmp_path, None, 3, 1, 1, ["eager", "compiled"], str(path), "not predicted here")
    assert json.loads(path.read_text()) == json.loads(json.dumps(record))
    assert [run.get("error") for run in record["runs"]] == [None, None], record["runs"]
    rows = wmt14_step.table(record).splitlines()[2:]  # what main prints, after the header
    assert [row.split(" | ")[0] for row in rows] == ["| eager", "| compiled"] and "0 in 1 steps" in rows[1]
    for run in record["runs"]:
        assert run["batches_per_step"] == 2 and run["batches_timed"] == 6 and run["new_shapes_in_timed_steps"] == 0
        assert run["warmup"]["shapes_met"] == run["warmup"]["shapes"] > 1  # taken as the sampler planned them
        assert 0 < run["padding"] < 1 and run["tokens_per_s"] > 0
        assert run["padded_tokens_per_s"] == pytest.approx(run["tokens_per_s"] / (1 - run["padding"]))
        assert run["mfu"] == run["train_flops_per_s"] / 1e12 > 0 and run["mfu_datasheet"] is None
        assert run["gpu_busy_ms"] is None and run["host_bound"] is None  # the profiler saw no CUDA kernel
    compiled = record["runs"][1]
    assert compiled["prediction"] == "not predicted here"  # the model of the step covers the compiled modes
    # the first compilation serves every shape but one of the first batch's: its single pair (200 tokens a side
    # hold one pair of the 128 bucket) is a size of 1, which dynamo specialises whatever the marks; the next
    # batch's 2 pairs compile again, dynamic in that size too (at most 2 graphs: the H200's call compiled 3)
    assert [graphs for _, graphs, _ in compiled["warmup"]["compiled_at"]] == [1, 2]
    assert compiled["compilation"]["graphs"] == 2 and compiled["graphs_compiled_in_timed_steps"] == 0


def test_a_mode_cut_short_keeps_the_record_of_the_mode_before_it(tmp_path, monkeypatch):
    """Each mode's record is written as soon as it is measured: a second mode stopped in its training (here by an
    interrupt, which ``run`` does not catch, as a call's timeout stops it) leaves the first one's on disk."""
    import json

    from benchmarks import wmt14_step

    def measure(data, mode, *args):
        if mode == "compiled":
            raise KeyboardInterrupt
        return {"mode": mode, "train_flops_per_s": 5e11}

    monkeypatch.setattr(wmt14_step, "measure", measure)
    monkeypatch.setattr(wmt14_step, "matmul_peak", lambda *args, **kwargs: 1e12)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H200")
    path = tmp_path / "wmt14-step.json"
    with pytest.raises(KeyboardInterrupt):
        wmt14_step.run(tmp_path, None, 3, 1, 1, ["eager", "compiled"], str(path), "not predicted here")
    assert json.loads(path.read_text())["runs"] == [
        {"mode": "eager", "train_flops_per_s": 5e11, "mfu": 0.5, "mfu_datasheet": 5e11 / 989e12}
    ]


def test_the_warm_up_trains_each_shape_the_measured_steps_meet_once_and_twice_for_cuda_graphs():
    """warm_steps on a sampler's plan (a stand-in: the same 6 batches an epoch, one a step): the measured steps meet
    no shape for the first time, or with CUDA graphs (a warm-up run, then the recording) for the first or second."""
    from types import SimpleNamespace

    from benchmarks.wmt14_step import EPOCHS_PLANNED, WARM_RUNS, warm_steps

    epoch = [(8, 16, 16), (8, 24, 24), (8, 16, 16), (16, 8, 8), (8, 24, 24), (16, 8, 8)]

    class Planned(list):
        def set_epoch(self, epoch: int) -> None:
            pass

        def batch_shapes(self) -> list:
            return list(self)

    trainer = SimpleNamespace(token_batches=lambda: Planned(epoch), args=SimpleNamespace(gradient_accumulation_steps=1))
    assert EPOCHS_PLANNED * len(epoch) > 12 and WARM_RUNS == {"cudagraphs": 2}
    assert warm_steps(trainer, 3) == {"steps": 4, "shapes": 3, "batches_per_epoch": 6}  # (16, 8, 8) first at 3
    assert warm_steps(trainer, 3, times=2)["steps"] == 6  # (16, 8, 8) again at 5
    trainer.args.gradient_accumulation_steps = 2  # steps of two batches: (16, 8, 8)'s second at step 2
    assert warm_steps(trainer, 3, times=2)["steps"] == 3 and warm_steps(trainer, 3)["steps"] == 2


def test_each_step_mode_is_a_set_of_vanilla_train_flags():
    """wmt14_step's modes are vanilla-train's own flags on the preset: eager, compiled, compiled with the step's
    25,000 tokens a side in one batch (no accumulation), and so with inductor's CUDA graphs."""
    from benchmarks.wmt14_step import MODES, PRESET
    from training.arguments import load_preset, parse_args
    from training.step.compiled import captures_cuda_graphs

    assert list(MODES) == ["eager", "compiled", "compiled-one-batch", "cudagraphs"]
    preset = [f"--{key}={value}" for key, value in load_preset(PRESET).items() if key == "max_tokens_per_batch"]
    for mode, flags in MODES.items():
        _, data, args = parse_args(["--output_dir", "x", "--use_cpu", "true", *preset, *flags])
        assert args.torch_compile == (mode != "eager"), mode
        assert captures_cuda_graphs(args.torch_compile_mode) == (mode == "cudagraphs"), mode
        assert data.max_tokens_per_batch == (25_000 if mode in ("compiled-one-batch", "cudagraphs") else 3_125), mode


def test_the_datasheet_peak_is_the_gpu_named():
    from benchmarks.wmt14_step import datasheet_peak

    assert datasheet_peak("NVIDIA H100 80GB HBM3") == datasheet_peak("NVIDIA H200") == 989e12
    assert datasheet_peak("NVIDIA H100 PCIe") == 756e12 and datasheet_peak("NVIDIA GeForce RTX 4090") is None


def test_the_gpu_step_benchmark_refuses_a_machine_without_a_gpu(tmp_path, monkeypatch):
    from benchmarks import wmt14_step

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same on a machine with one
    for mode in ([], ["--profile", "3"]):
        with pytest.raises(SystemExit, match="measures a GPU's step: no CUDA device here"):
            wmt14_step.main(["--data", str(tmp_path), *mode])


def test_a_gpu_call_rehearsed_on_the_cpu_brings_back_only_its_new_records_in_the_files_a_call_returns(
    tmp_path, tokenizer
):
    """benchmarks/gpu_call.sh as a lent GPU runs it, here on the CPU: the step benchmark refuses (no GPU), the FSDP
    part is left out (CHECK_FSDP=0), the translation benchmark runs on a tiny model's first lines (its GPU modes
    skipped, each with its reason), and gpu_experiments.sh trains the pending runs of a tiny Table 3 sweep within the
    budget. What comes back fits what a call returns (at most 8 files, 2 folders down): the translation's record,
    the new records in one archive (none of those already in results/table3), ready to unpack into results/table3,
    and the logs in another."""
    import json
    import os
    import subprocess
    import sys
    import tarfile

    from helpers import saved_model_with_tokenizer
    from training_helpers import tiny_preset

    from training.run.record import check_run_record

    root = Path(__file__).resolve().parents[2]
    preset, out = tiny_preset(tmp_path), tmp_path / "out"
    model = saved_model_with_tokenizer(tmp_path / "translate-model", tokenizer, end_bias=8.0)
    env = {
        **os.environ,
        "OUT": str(out),
        "RUNS": str(tmp_path / "runs"),
        "CHECK_FSDP": "0",
        "WMT_LIKE": str(tmp_path),  # a corpus folder (gpu_call.sh runs the step where there is one): it refuses first
        "DEADLINE_S": "700",  # a shared CPU's pace
        "TRANSLATE_MODEL": str(model),
        "TRANSLATE_S": "300",
        "TRANSLATE_ARGS": "--limit 8",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        [
            "bash",
            "benchmarks/gpu_call.sh",
            "--config",
            str(preset),
            "--rows",
            "base",
            "--steps",
            "2",
            "--curve_steps",
            "1",
            "--seeds",
            "1",
            "--precision",
            "fp32",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert "FSDP: not checked (CHECK_FSDP=0)" in done.stdout
    assert "no GPU: the runs train on the CPU" in done.stdout and "experiments.table3 exit 0" in done.stdout
    assert "new records: 1\n2-steps/fp32/base/seed-1/table3.json" in done.stdout
    assert "gpu_translate exit 0" in done.stdout
    assert sorted(path.name for path in out.rglob("*")) == [
        "gpu-translate.json",
        "logs.tgz",
        "new-records.txt",
        "table3-records.tgz",
    ]
    translation = json.loads((out / "gpu-translate.json").read_text())
    assert [row["batch_size"] for row in translation["references"]] == [64, 1]
    assert all(row["device"] == "cpu" and row["bleu"] >= 0 for row in translation["references"])
    assert not [row for row in translation["modes"] if "failed" in row]
    ran = sorted((row["engine"], row["batch_size"]) for row in translation["modes"] if "skipped" not in row)
    assert ran == [("generate", 1), ("generate", 64), ("generate-static-compiled", 1), ("generate-static-compiled", 64)]
    assert all(row["sentences_per_s"] > 0 and row["lines"] == 8 for row in translation["modes"] if "skipped" not in row)
    skipped = [row["skipped"] for row in translation["modes"] if "skipped" in row]
    assert len(skipped) == 5 and all("float16" in reason for reason in skipped)  # the GPU's precisions
    with tarfile.open(out / "logs.tgz") as logs:
        names = logs.getnames()
        step_log = logs.extractfile("./step.log").read().decode()
    assert {"./machine.txt", "./step.log", "./translate.log", "./table3.log"} <= set(names)
    assert "measures a GPU's step: no CUDA device here" in step_log
    with tarfile.open(out / "table3-records.tgz") as archive:
        archive.extractall(tmp_path / "records", filter="data")
    records = sorted((tmp_path / "records").rglob("table3.json"))
    assert [path.relative_to(tmp_path / "records").as_posix() for path in records] == [
        "2-steps/fp32/base/seed-1/table3.json"
    ]
    record = json.loads(records[0].read_text())
    check_run_record(record["run"])
    assert record["run"]["device"]["type"] == "cpu" and record["run"]["steps"] == 2


def bucketed_epoch() -> list[dict]:
    """The training batches (random ids) of an epoch of 300 pairs of 2-16 tokens in batches of up to 128 padded
    tokens a side, bucketed: lengths 8 or 16, batch sizes multiples of 8."""
    from training.data.batching import TokenBatchSampler
    from vanilla_tools.batch_shapes import BatchShapes

    lengths = torch.randint(2, 17, (2, 300), generator=torch.Generator().manual_seed(0))
    sampler = TokenBatchSampler(*lengths.tolist(), 128, shapes=BatchShapes(8, 8, 2, longest=16))
    return [batch_of(shape, seed) for seed, shape in enumerate(sampler.batch_shapes())]


def test_an_epoch_of_bucketed_shapes_compiles_once_a_shape_or_with_dynamic_shapes():
    """benchmarks.training_step --launches' count of compilations (aot_eager here: dynamo's and AOTAutograd's part;
    inductor's adds its kernels per graph): 34 batches of 5 shapes; compiled once per shape, 5 graphs (4
    recompiles); with the batches marked dynamic as vanilla-train's collator marks them, 1. No graph break in either
    (fullgraph=True would raise on one)."""
    from benchmarks.training_step import epoch_compiles

    batches = bucketed_epoch()
    counted = [
        epoch_compiles(tiny_model(label_smoothing=0.1).train(), batches, dynamic, backend="aot_eager")
        for dynamic in (False, True)
    ]
    print(counted)
    assert [(c["batches"], c["distinct_shapes"], c["graphs"], c["recompiles"], c["graph_breaks"]) for c in counted] == [
        (34, 5, 5, 4, 0),
        (34, 5, 1, 0, 0),
    ]


def test_batches_of_every_loss_chunk_count_compile_once_with_dynamic_shapes():
    """Eager, the fused loss goes through 1,024 rows at a time; compiled, through all at once: batches of 384 to
    3,200 target rows (1 to 4 chunks eager) compile into one graph with dynamic shapes, with the eager loss and
    gradient. Before, the graph unrolled the chunks' loop, so each count was a graph of its own: 4 here, and on a
    lent H200 each of the wmt14 preset's (its batches need 1 to 4) took ~50 s to compile."""
    from benchmarks.training_step import epoch_compiles

    shapes = [(64, 8, 8), (48, 8, 8), (96, 16, 16), (128, 16, 16), (160, 16, 16), (200, 16, 16)]
    batches = [batch_of(shape, seed) for seed, shape in enumerate(shapes)]
    counted = epoch_compiles(tiny_model(label_smoothing=0.1).train(), batches, True, backend="aot_eager")
    assert (counted["distinct_shapes"], counted["graphs"], counted["graph_breaks"]) == (6, 1, 0)
    model = tiny_model(label_smoothing=0.1)  # dropout 0: eager and compiled draw nothing
    compiled = torch.compile(model, backend="aot_eager", dynamic=True)
    for forward in (model, compiled):
        model.zero_grad()
        loss = forward(**batches[-1]).loss  # 3,200 rows
        loss.backward()
        if forward is model:
            eager = (loss.detach(), model.lm_head.weight.grad.clone())
    torch.testing.assert_close(loss.detach(), eager[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.lm_head.weight.grad, eager[1], rtol=1e-4, atol=1e-6)


def test_a_second_process_finds_the_first_ones_compiled_step_in_the_caches():
    """benchmarks.training_step --launches' compilations in two new processes, one after the other, from one empty
    inductor cache (a tiny model with dropout and the fused loss, one batch shape; inductor): the first compiles the
    step once per shape and with dynamic shapes, a graph each (AOTAutograd's cache misses, and inductor's for the
    forward and the backward graph); the second finds each whole in AOTAutograd's cache, custom autograd.Functions
    and all (torch bypasses that cache for them unless told otherwise: training.step.compiled.configure_inductor)."""
    from benchmarks.training_step import compiles_in_new_processes

    model = tiny_model(dropout=0.1, label_smoothing=0.1, encoder_layers=1, decoder_layers=1).train()
    cold, warm = compiles_in_new_processes(model, [batch_of((3, 7, 6))])
    print(cold, warm)
    for first, second in zip(cold, warm, strict=True):
        assert (first["graphs"], first["graph_breaks"], second["graphs"], second["graph_breaks"]) == (1, 0, 1, 0)
        assert first["aot_autograd_cache"] == {"hit": 0, "miss": 1, "bypass": 0}
        assert first["inductor_cache"] == {"hit": 0, "miss": 2}
        assert second["aot_autograd_cache"] == {"hit": 1, "miss": 0, "bypass": 0}
        assert second["inductor_cache"] == {"hit": 2, "miss": 0}
    assert [run["dynamic"] for run in cold] == [run["dynamic"] for run in warm] == [False, True]


def test_the_operators_a_step_launches_eager_and_compiled():
    """benchmarks.training_step --launches' count on a tiny model's training step (2+2 layers, batch (3, 7, 6), fused
    AdamW). With torch 2.13: eager calls 293 computing ATen operators (views launch nothing and are not counted);
    inductor's step launches 148, 62 of them its own kernels and the rest the matrix products, attention and
    optimizer it leaves to ATen."""
    from benchmarks.training_step import step_launches

    batch = batch_of((3, 7, 6))
    eager = step_launches(tiny_model(label_smoothing=0.1).train(), batch, compiled=False)
    compiled = step_launches(tiny_model(label_smoothing=0.1).train(), batch, compiled=True)
    print(sum(eager.values()), eager.most_common(), sum(compiled.values()), compiled.most_common())
    assert sum(eager.values()) == 293 and eager["aten::mm"] == 44 and "aten::view" not in eager
    assert eager["aten::_fused_adamw_"] == compiled["aten::_fused_adamw_"] == 1  # one kernel updates every weight
    assert compiled["inductor kernel"] > 0 and sum(compiled.values()) < 0.6 * sum(eager.values())
    left_to_aten = {name.removeprefix("aten::").split("_for_cpu")[0] for name in compiled if name != "inductor kernel"}
    assert left_to_aten <= {
        "mm",
        "addmm",
        "_scaled_dot_product_flash_attention",
        "scatter_reduce_",
        "ones_like",
        "zeros",
        "_foreach_add_",
        "_fused_adamw_",
    }, left_to_aten
