"""`python -m benchmarks.wmt14_step`: the wmt14 preset's training step on a GPU: tokens/s, MFU, and the host syncs
inside a step.

The preset is the paper's base model and recipe (training/configs/wmt14.yaml): 6+6 layers of d_model 512, a shared
37k BPE vocabulary, token batches of 3,125 padded tokens a side accumulated to 25,000 a step, bf16 autocast, fused
Adam. Its data, WMT14 on the Hub, is out of reach of the machines this is run on, so ``--prepare`` (on any machine)
writes a stand-in with WMT14's shape: pairs from ``benchmarks/wmt_like.py`` (WMT's sentence lengths, words with a real
long tail) and the preset's 37k vocabulary learned on them. A step does the same work on it as on WMT14 for the same
batch shapes; the shapes of every batch are recorded and the FLOPs counted from them.

For each of the ``MODES`` asked for (eager, ``--torch_compile``, compiled with the step's tokens in one batch, and so
with CUDA graphs): the preset's trainer (``vanilla-train``'s, through ``build_trainer``, its loader's worker processes
on as on CUDA) trains until every batch shape it will meet in the measured steps has been trained once, twice with CUDA
graphs (``warm_steps``, from its sampler's plan; ``--warmup`` sets the count instead), then ``--steps`` timed ones (the
GPU synchronised only at the two ends), then ``--sync_steps`` with CUDA's sync debug mode on, which names every call
that makes the host wait for the GPU, then ``--launch_steps`` under the profiler, which counts the kernels the host
launched and sums the time of those the GPU ran (GPU-busy milliseconds a step: the record says whether the host bound
the step), beside the step the model of benchmarks/gpu_model.py predicted (``--host_other_ms`` or ``--host_time_mode``
gives the input no record gives yet; without either the record says why there is no prediction). MFU is the timed steps'
matrix-product FLOPs (``inference.bench.train_flops`` on each padded batch, as the training process took it:
``TakenBatches``) over their time and the bf16 matrix-product peak measured in the same run (and, beside it, the
datasheet's dense bf16 rate where the GPU is known). The record is rewritten after each mode, so a call cut short keeps
what it measured; a mode that fails is recorded with its error, and the next one measured.

    python -m benchmarks.wmt14_step --prepare .device/wmt-like           # here: corpus and tokenizer
    python -m benchmarks.wmt14_step --data .device/wmt-like --json results/benchmarks/wmt14-step.json   # on a GPU
"""

import argparse
import json
import re
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity
from transformers import TrainerCallback

from benchmarks import gpu_model, wmt_like, write_record
from benchmarks.training_step import StepClock, preset_trainer
from inference.bench import train_flops
from training.api import (
    compile_counts,
    lengths,
    load_parallel_data,
    load_preset,
    parse_args,
    text_form,
    tokenize_splits,
    train_tokenizer,
)
from vanilla_tools.cli import UsageError, load_tokenizer, positive_int
from vanilla_tools.hardware import matmul_peak, precision
from vanilla_tools.provenance import provenance

PRESET = "wmt14"
LENGTHS = "lengths.npz"
HELD_OUT = 200  # pairs at the corpus' end kept as the validation and test files (the FSDP check's final evaluation)
EPOCHS_PLANNED = 4  # epochs of the sampler's plan searched for the shapes the measured steps meet
# Dense bf16 matrix-product rates from NVIDIA's datasheets (the "with sparsity" figures halved), by device name
DATASHEET_BF16 = {
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,
    "H200 NVL": 835e12,
    "H200": 989e12,
    "A100": 312e12,
}
TORCH_DIR = str(Path(torch.__file__).parent) + "/"  # not "/torch/": a lent GPU's venv is /opt/torch/.venv
LAUNCH = re.compile(r"^cu(da)?(LaunchKernel|LaunchCooperativeKernel|GraphLaunch)")  # a kernel (or graph) launch
# The steps measured (--modes): vanilla-train's flags for each. eager and compiled train the step as 8 accumulated
# batches of 3,125 tokens a side (its 25,000 on 8 of the paper's GPUs, the preset's budget before it was sized to the
# device: training/step/micro_batch.py), the control; compiled-one-batch trains the step's tokens as one batch, 1/8
# of the launches (the memory it takes is the record's peak_memory_gib), without CUDA graphs (mode default, which
# vanilla-train would otherwise pick for one batch a step). cudagraphs: inductor's CUDA graph trees replay a step's
# kernels in one launch, one graph a batch shape (the shapes are bounded), where the host would launch each; one
# batch a step, as vanilla-train requires of CUDA graphs (training/step/compiled.py settle_cuda_graphs).
ONE_BATCH = ["--max_tokens_per_batch", str(load_preset(PRESET)["tokens_per_step"])]
EIGHT_BATCHES = ["--max_tokens_per_batch", str(load_preset(PRESET)["tokens_per_step"] // 8)]
# The times a batch shape is trained before its steps run at their steady speed: once (compiled, or eager's first
# allocation), but twice with CUDA graph trees, which run a new shape's graph once to warm it up, then record it.
WARM_RUNS = {"cudagraphs": 2}
MODES = {
    "eager": ["--torch_compile", "false", *EIGHT_BATCHES],
    "compiled": ["--torch_compile", "true", *EIGHT_BATCHES],
    "compiled-one-batch": ["--torch_compile", "true", "--torch_compile_mode", "default", *ONE_BATCH],
    "cudagraphs": ["--torch_compile", "true", "--torch_compile_mode", "reduce-overhead", *ONE_BATCH],
}


def prepare(folder: Path, pairs: int) -> None:
    """``pairs`` WMT-like training pairs, ``HELD_OUT`` each for validation and test, and the preset's vocabulary
    learned on the training pairs, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    wmt_like.write_corpus(folder, pairs + 2 * HELD_OUT)
    for lang in ("en", "de"):
        lines = (folder / f"train.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / f"train.{lang}").write_text("".join(lines[:pairs]), encoding="utf-8")
        (folder / f"valid.{lang}").write_text("".join(lines[pairs : pairs + HELD_OUT]), encoding="utf-8")
        (folder / f"test.{lang}").write_text("".join(lines[pairs + HELD_OUT :]), encoding="utf-8")
    texts = [line for lang in ("en", "de") for line in (folder / f"train.{lang}").read_text("utf-8").splitlines()]
    train_tokenizer(texts, load_preset(PRESET)["vocab_size"]).save_pretrained(folder / "tokenizer")
    write_lengths(folder)


def write_lengths(folder: Path) -> None:
    """The training pairs' token lengths as the preset cuts them (``LENGTHS``, uint8): the epoch whose batch shapes
    tests/test_training/test_batch_shapes.py counts (its fixture is a copy)."""
    with tempfile.TemporaryDirectory() as out:
        _, data_args, _ = parse_args(["--config", PRESET, "--output_dir", out, *data_flags(folder)])
    data = tokenize_splits(
        load_parallel_data(data_args, text_form(data_args)), load_tokenizer(str(folder / "tokenizer")), data_args
    )
    source, target = lengths(data["train"])
    np.savez_compressed(folder / LENGTHS, source=source.astype(np.uint8), target=target.astype(np.uint8))


def data_flags(folder: Path) -> list[str]:
    """vanilla-train's flags for the prepared corpus in ``folder``."""
    return [
        "--dataset",
        "files",
        "--tokenizer",
        str(folder / "tokenizer"),
        "--train_files",
        str(folder / "train.en"),
        str(folder / "train.de"),
        "--validation_files",
        str(folder / "valid.en"),
        str(folder / "valid.de"),
        "--test_files",
        str(folder / "test.en"),
        str(folder / "test.de"),
    ]


class TakenBatches:
    """Wraps the trainer's ``get_batch_samples``, where its loop takes each step's batches in the training process:
    the shape (pairs, source length, target length) and the real (unpadded) source + target tokens of each batch, in
    the order the steps train them. Not the collator's: on CUDA it runs in the loader's worker processes, and a count
    kept there never reaches this one (the H200's call at 6585233 saw no batch, and divided by 0). The real tokens are
    counted on the batch's device and read after training (a step waits for no count), until ``counting`` is turned
    off: the steps after the timed ones, watched for syncs and launches, run no counting kernels."""

    def __init__(self, take: Callable):
        self.take, self.shapes, self.counted, self.counting = take, [], [], True

    def __call__(self, epoch_iterator, num_batches: int, device: torch.device):
        batches, items = self.take(epoch_iterator, num_batches, device)
        for batch in batches:
            self.shapes.append((*batch["input_ids"].shape, batch["labels"].shape[1]))
            if self.counting:
                self.counted.append(batch["attention_mask"].sum() + batch["labels"].ne(-100).sum())
        return batches, items

    @cached_property
    def tokens(self) -> list[int]:
        """The real tokens of each batch counted, once training is done."""
        return torch.stack(self.counted).tolist() if self.counted else []


class SyncWatch(TrainerCallback):
    """Times the steps after ``warmup`` up to ``timed`` (GPU synchronised at both ends only) and marks the batches they
    took (counting their tokens up to the second mark only), then, for the steps up to ``last``, counts CUDA's
    synchronising calls by the innermost frame outside torch and ``warnings`` that made them (a call on the autograd
    engine's thread has no Python frame: it is counted as such)."""

    def __init__(self, warmup: int, timed: int, last: int, batches: TakenBatches):
        self.warmup, self.timed, self.last, self.batches = warmup, timed, last, batches
        self.events, self.marks, self.graphs = [], [], []
        self.syncs: Counter = Counter()
        self.shown, self.filters = warnings.showwarning, None
        self.start = self.warm_s = 0.0
        self.compiles: list[tuple[int, int, float]] = []  # (step, graphs by then, seconds since the start)

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        graphs = compile_counts()["graphs"]
        if graphs != (self.compiles[-1][1] if self.compiles else 0):
            self.compiles.append((state.global_step, graphs, round(time.perf_counter() - self.start, 1)))
            print("step {}: {} graph(s) compiled, {} s since the start".format(*self.compiles[-1]), flush=True)
        if state.global_step in (self.warmup, self.timed):
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            event.synchronize()
            self.events.append(event)
            self.marks.append(len(self.batches.shapes))
            self.graphs.append(graphs)
        if state.global_step == self.warmup:
            self.warm_s = time.perf_counter() - self.start
        if state.global_step == self.timed:
            self.batches.counting = False
            self.filters = warnings.filters[:]
            warnings.simplefilter("always")
            warnings.showwarning = self.count
            torch.cuda.set_sync_debug_mode("warn")
        elif state.global_step == self.last:
            self.on_train_end(args, state, control)

    def on_train_end(self, args, state, control, **kwargs):
        torch.cuda.set_sync_debug_mode(0)
        warnings.showwarning = self.shown
        if self.filters is not None:
            warnings.filters[:] = self.filters

    def count(self, message, category, filename, lineno, file=None, line=None):
        if "synchronizing" not in str(message):
            return self.shown(message, category, filename, lineno, file, line)
        skipped = (TORCH_DIR, warnings.__file__)  # transformers' and accelerate's frames stay: they called torch
        ours = [frame for frame in traceback.extract_stack()[:-1] if not any(s in frame.filename for s in skipped)]
        where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno} {ours[-1].name}" if ours else "no Python frame"
        self.syncs[where] += 1
        return None

    def timed_batches(self) -> slice:
        return slice(*self.marks)

    def new_shapes_timed(self) -> int:
        """Shapes first met in the timed steps (0 when the warm-up met them all)."""
        timed = self.timed_batches()
        return len(set(self.batches.shapes[timed]) - set(self.batches.shapes[: timed.start]))

    def seconds(self) -> float:
        return self.events[0].elapsed_time(self.events[1]) / 1e3


def warm_steps(trainer, measured: int, times: int = 1) -> dict:
    """The steps that train every batch shape the ``measured`` steps after them will meet ``times`` times
    (``WARM_RUNS``), from the trainer's sampler (its plan of each epoch, ``EPOCHS_PLANNED`` of them,
    ``gradient_accumulation_steps`` batches a step): the smallest count after which no shape is met for one of its
    first ``times`` for ``measured`` steps, with the shapes met by then."""
    sampler, accumulated = trainer.token_batches(), trainer.args.gradient_accumulation_steps
    shapes = []
    for epoch in range(EPOCHS_PLANNED):
        sampler.set_epoch(epoch)
        shapes += sampler.batch_shapes()
    met: dict = {}
    for at, shape in enumerate(shapes):
        met.setdefault(shape, []).append(at)
    steps = 0
    for at in sorted(at for ats in met.values() for at in ats[:times]):
        if at < (steps + measured) * accumulated:  # not yet warm within the measured steps: warm past it
            steps = at // accumulated + 1
    return {"steps": steps, "shapes": len(set(shapes[: steps * accumulated])), "batches_per_epoch": len(sampler)}


def train(
    data: Path,
    mode: str,
    warmup: int | None,
    measured: int,
    watch: Callable[[TakenBatches, int], list[TrainerCallback]],
):
    """The preset trained on the prepared data, without evaluation or checkpoints, for ``warmup`` steps (None:
    ``warm_steps``) and ``measured`` more, the batches it takes counted (``TakenBatches``), watched by the callbacks
    of ``watch(the count, the warm-up's steps)``; returns the trainer, the count, the callbacks and the warm-up
    (``warm_steps``'s fields)."""
    with tempfile.TemporaryDirectory() as out:
        trainer, _ = preset_trainer(1, out, [*data_flags(data), "--logging_steps", "1000", *MODES[mode]], preset=PRESET)
        warm = warm_steps(trainer, measured, WARM_RUNS.get(mode, 1)) if warmup is None else {"steps": warmup}
        trainer.args.max_steps = warm["steps"] + measured  # the warm-up is known once the sampler has planned
        trainer.get_batch_samples = batches = TakenBatches(trainer.get_batch_samples)
        callbacks = watch(batches, warm["steps"])
        for callback in callbacks:
            trainer.add_callback(callback)
        trainer.train()
    return trainer, batches, callbacks, warm


def kernel_launches(clock: StepClock, steps: int) -> dict:
    """Kernels the host launched (CUDA's launch calls, a CUDA graph's launch counted once) and kernels the GPU ran,
    a step, in the profiled window of ``clock``, and the GPU-busy milliseconds a step: the summed time of the GPU's
    kernels and copies (a graph's kernels each; the profiler's ranges on the GPU's timeline, which span kernels,
    left out), or None, with why, where the profiler saw none."""
    averages = clock.profiler.key_averages()
    launches = sum(event.count for event in averages if LAUNCH.match(event.key))
    kernels = sum(event.count for event in averages if event.device_type == DeviceType.CUDA)
    on_gpu = [e for e in averages if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
    busy = {"gpu_busy_ms": sum(e.self_device_time_total for e in on_gpu) / 1e3 / steps} if on_gpu else {}
    return {
        "host_launches_per_step": launches / steps,
        "gpu_kernels_per_step": kernels / steps,
        **(busy or {"gpu_busy_ms": None, "gpu_busy_note": "the profiler saw no CUDA kernels"}),
    }


def measure(
    data: Path,
    mode: str,
    warmup: int | None,
    steps: int,
    sync_steps: int,
    launch_steps: int,
    host_other: tuple[float, str] | str,
) -> dict:
    """The preset's step on the prepared data in ``mode`` (see the module's docstring), whether the host bound it,
    and the model's prediction of it beside it (``gpu_model.beside``, with ``host_other``)."""
    measured = steps + sync_steps + launch_steps
    torch._dynamo.reset()  # each mode compiles, and counts its graphs and seconds, as if it ran alone
    torch._dynamo.utils.counters.clear()
    torch.cuda.reset_peak_memory_stats()

    def watch(batches: TakenBatches, warm: int) -> list[TrainerCallback]:
        last = warm + steps + sync_steps
        activities = (ProfilerActivity.CPU, ProfilerActivity.CUDA)
        return [SyncWatch(warm, warm + steps, last, batches), StepClock(last, launch_steps, activities, False)]

    trainer, batches, (watch, clock), warm = train(data, mode, warmup, measured, watch)
    accumulated = trainer.args.gradient_accumulation_steps
    timed = watch.timed_batches()
    config = trainer.model.config
    flops = sum(train_flops(config, pairs, source, target) for pairs, source, target in batches.shapes[timed])
    seconds = watch.seconds()
    padded = sum(pairs * (source + target) for pairs, source, target in batches.shapes[timed])
    launched = kernel_launches(clock, launch_steps)
    return {
        "mode": mode,
        "torch_compile": trainer.args.torch_compile,
        "precision": precision(trainer.args.mixed_precision),
        "batch_shapes": trainer.shapes.describe(),
        "batches_per_step": accumulated,
        "warmup": {
            **warm,
            "seconds": watch.warm_s,
            "shapes_met": len(set(batches.shapes[: timed.start])),
            "compiled_at": watch.compiles,
        },
        "batches_timed": timed.stop - timed.start,
        "steps_timed": steps,
        "new_shapes_in_timed_steps": watch.new_shapes_timed(),
        "graphs_compiled_in_timed_steps": watch.graphs[1] - watch.graphs[0],
        "step_s": seconds / steps,
        "tokens_per_s": sum(batches.tokens[timed]) / seconds,
        "padded_tokens_per_s": padded / seconds,
        "padding": 1 - sum(batches.tokens[timed]) / padded,
        "train_flops_per_s": flops / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "syncs_in_steps": sync_steps,
        "syncs": dict(watch.syncs.most_common()),
        "launches_in_steps": launch_steps,
        **launched,
        "host_bound": gpu_model.host_bound(launched["gpu_busy_ms"], seconds / steps * 1e3),
        **gpu_model.beside(mode, seconds / steps * 1e3, launched["gpu_busy_ms"], host_other),
        **({"compilation": compile_counts()} if trainer.args.torch_compile else {}),
    }


def profile_steps(data: Path, warmup: int | None, steps: int) -> None:
    """Prints the operators of ``steps`` eager steps by their own CUDA time, then by their own CPU time."""
    activities = (ProfilerActivity.CPU, ProfilerActivity.CUDA)
    _, _, (clock,), _ = train(
        data, "eager", warmup, steps, lambda _, warm: [StepClock(warm, steps, activities, with_flops=False)]
    )
    averages = clock.profiler.key_averages()
    for key in ("self_cuda_time_total", "self_cpu_time_total"):
        print(averages.table(sort_by=key, row_limit=25, max_name_column_width=60))


def datasheet_peak(device: str) -> float | None:
    """The dense bf16 rate of ``DATASHEET_BF16`` whose name ``device`` holds (the first listed), or None."""
    return next((rate for name, rate in DATASHEET_BF16.items() if name in device), None)


def run(
    data: Path,
    warmup: int | None,
    steps: int,
    sync_steps: int,
    launch_steps: int,
    modes: list[str],
    json_path: str | None,
    host_other: tuple[float, str] | str,
) -> dict:
    """Each of ``modes`` (``MODES``) in turn; the record (with ``provenance()``) written to ``json_path``
    after each."""
    peak = matmul_peak(torch.bfloat16, n=8192, repeats=10, device="cuda")
    datasheet = datasheet_peak(torch.cuda.get_device_name())
    record = {
        **provenance(),
        "preset": PRESET,
        "data": "benchmarks/wmt_like.py stand-in (--prepare)",
        "warmup_steps": warmup if warmup is not None else "every shape met (warm_steps)",
        "matmul_peak_bf16_flops_per_s": peak,
        "datasheet_bf16_flops_per_s": datasheet,
        "host_bound": f"GPU busy less than {gpu_model.HOST_BOUND_BELOW:.0%} of the step (benchmarks/gpu_model.py)",
        "runs": [],
    }
    for mode in modes:
        try:
            result = measure(data, mode, warmup, steps, sync_steps, launch_steps, host_other)
        except Exception as error:  # recorded, and the next mode still measured: a call is minutes of a lent GPU
            traceback.print_exc()
            record["runs"].append({"mode": mode, "error": f"{type(error).__name__}: {error}"[:2000]})
            write_record(record, json_path)
            continue
        result["mfu"] = result["train_flops_per_s"] / peak
        result["mfu_datasheet"] = result["train_flops_per_s"] / datasheet if datasheet else None
        record["runs"].append(result)
        print(json.dumps(result), flush=True)  # each as it is measured
        write_record(record, json_path)
    return record


def milliseconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(record: dict) -> str:
    rows = [
        "| step | warm-up s (steps) | s/step | tokens/s | MFU (bf16 peak {:.0f} TFLOP/s) | padding | peak GiB "
        "| host syncs | launches/step | GPU-busy ms/step | predicted ms/step |".format(
            record["matmul_peak_bf16_flops_per_s"] / 1e12
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in record["runs"]:
        if "error" in r:
            rows.append(f"| {r['mode']} | failed: {r['error'].splitlines()[0][:200]} |")
            continue
        syncs = sum(r["syncs"].values())
        rows.append(
            f"| {r['mode']} "
            f"| {r['warmup']['seconds']:.1f} ({r['warmup']['steps']}) | {r['step_s']:.3f} "
            f"| {r['tokens_per_s']:,.0f} | {r['mfu']:.1%} | {r['padding']:.1%} | {r['peak_memory_gib']:.1f} "
            f"| {syncs} in {r['syncs_in_steps']} steps | {r['host_launches_per_step']:,.0f} "
            f"| {milliseconds(r['gpu_busy_ms'])} | {milliseconds(r.get('predicted_step_ms'))} |"
        )
    return "\n".join(rows)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prepare", type=Path, metavar="DIR", help="write the stand-in corpus and vocabulary here")
    mode.add_argument("--data", type=Path, metavar="DIR", help="measure on the corpus --prepare wrote here")
    parser.add_argument("--pairs", type=positive_int, default=40_000, help="--prepare: training pairs")
    parser.add_argument("--warmup", type=positive_int, help="steps before the measured (default: all shapes met)")
    parser.add_argument("--steps", type=positive_int, default=30, help="steps timed")
    parser.add_argument("--sync_steps", type=positive_int, default=3, help="steps watched for host syncs, after")
    parser.add_argument("--launch_steps", type=positive_int, default=2, help="steps profiled for launches, after")
    parser.add_argument("--profile", type=positive_int, metavar="STEPS", help="profile STEPS eager steps instead")
    parser.add_argument(
        "--modes", nargs="+", choices=list(MODES), default=["eager", "compiled"], help="the steps measured, in turn"
    )
    parser.add_argument("--json", help="write the record here")
    other = parser.add_mutually_exclusive_group()  # benchmarks/gpu_model.py's input: without one, no prediction
    other.add_argument("--host_other_ms", type=float, help="the model's host time a step besides launches (stated)")
    other.add_argument("--host_time_mode", help="the model's host time a step from this mode of host-time.json")
    return parser


def main(argv: list[str] | None = None) -> dict:
    parser = arguments()
    args = parser.parse_args(argv)
    if args.prepare and args.profile:
        parser.error("--profile measures on the corpus of --data; --prepare only writes one")
    if args.prepare:
        prepare(args.prepare, args.pairs)
        return {}
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks.wmt14_step measures a GPU's step: no CUDA device here (--prepare runs anywhere)")
    if args.profile:
        profile_steps(args.data, args.warmup, args.profile)
        return {}
    try:
        host_other = gpu_model.host_other_ms(args.host_other_ms, args.host_time_mode)
    except UsageError as error:  # the measurement is what a lent GPU is for: it is made, the reason recorded
        host_other = f"not predicted: {error}"
    record = run(
        args.data, args.warmup, args.steps, args.sync_steps, args.launch_steps, args.modes, args.json, host_other
    )
    print(table(record))
    for r in record["runs"]:
        print(r["mode"], "syncs:", r.get("syncs", "not measured"))
    return record


if __name__ == "__main__":
    main()
