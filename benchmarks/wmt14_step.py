"""`python -m benchmarks.wmt14_step`: the wmt14 preset's training step on a GPU: tokens/s, MFU, and the host syncs
inside a step.

The preset is the paper's base model and recipe (training/configs/wmt14.yaml): 6+6 layers of d_model 512, a shared
37k BPE vocabulary, token batches of 3,125 padded tokens a side accumulated to 25,000 a step, bf16 autocast, fused
Adam. Its data, WMT14 on the Hub, is out of reach of the machines this is run on, so ``--prepare`` (on any machine)
writes a stand-in with WMT14's shape: pairs from ``benchmarks/wmt_like.py`` (WMT's sentence lengths, words with a real
long tail) and the preset's 37k vocabulary learned on them. A step does the same work on it as on WMT14 for the same
batch shapes; the shapes of every batch are recorded and the FLOPs counted from them.

For each of eager and ``--torch_compile``: the preset's trainer (``vanilla-train``'s, through ``build_trainer``)
trains ``--warmup`` steps, then ``--steps`` timed ones (the GPU synchronised only at the two ends), then
``--sync_steps`` with CUDA's sync debug mode on, which names every call that makes the host wait for the GPU. MFU
is the timed steps' matrix-product FLOPs (``inference.bench.train_flops`` on each padded batch) over their time and
the bf16 matrix-product peak measured in the same run.

    python -m benchmarks.wmt14_step --prepare .device/wmt-like           # here: corpus and tokenizer
    python -m benchmarks.wmt14_step --data .device/wmt-like --json results/benchmarks/wmt14-step.json   # on a GPU
"""

import argparse
import json
import tempfile
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity
from transformers import TrainerCallback

from benchmarks import wmt_like, write_record
from benchmarks.training_step import StepClock, TokenCount, preset_trainer
from inference.bench import train_flops
from training.arguments import load_preset, parse_args
from training.compiled import compile_counts
from training.data import lengths, load_parallel_data, tokenize_splits
from training.tokenizer import train_tokenizer
from vanilla_tools.cli import load_tokenizer, positive_int
from vanilla_tools.hardware import matmul_peak
from vanilla_tools.provenance import provenance

PRESET = "wmt14"
LENGTHS = "lengths.npz"
HELD_OUT = 200  # pairs at the corpus' end kept as the validation and test files (the FSDP check's final evaluation)


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
    data = tokenize_splits(load_parallel_data(data_args), load_tokenizer(str(folder / "tokenizer")), data_args)
    source, target = lengths(data["train"])
    np.savez_compressed(folder / LENGTHS, source=source.astype(np.uint8), target=target.astype(np.uint8))


def data_flags(folder: Path) -> list[str]:
    """vanilla-train's flags for the prepared corpus in ``folder``."""
    return ["--dataset", "files", "--tokenizer", str(folder / "tokenizer"),
            "--train_files", str(folder / "train.en"), str(folder / "train.de"),
            "--validation_files", str(folder / "valid.en"), str(folder / "valid.de"),
            "--test_files", str(folder / "test.en"), str(folder / "test.de")]  # fmt: skip


class SyncWatch(TrainerCallback):
    """Times the steps after ``warmup`` up to ``timed`` (GPU synchronised at both ends only) and marks the batches
    they took (the loader's one batch of lookahead is the same at both marks), then, for the steps up to ``last``,
    counts CUDA's synchronising calls by the innermost frame outside torch and ``warnings`` that made them (a call on
    the autograd engine's thread has no Python frame: it is counted as such)."""

    def __init__(self, warmup: int, timed: int, last: int, batches: TokenCount):
        self.warmup, self.timed, self.last, self.batches = warmup, timed, last, batches
        self.events, self.marks = [], []
        self.syncs: Counter = Counter()
        self.shown, self.filters = warnings.showwarning, None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step in (self.warmup, self.timed):
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            event.synchronize()
            self.events.append(event)
            self.marks.append(len(self.batches.shapes))
        if state.global_step == self.timed:
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
        skipped = ("/torch/", warnings.__file__)
        ours = [frame for frame in traceback.extract_stack()[:-1] if not any(s in frame.filename for s in skipped)]
        where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno} {ours[-1].name}" if ours else "no Python frame"
        self.syncs[where] += 1
        return None

    def timed_batches(self) -> slice:
        return slice(*self.marks)

    def seconds(self) -> float:
        return self.events[0].elapsed_time(self.events[1]) / 1e3


def train(data: Path, compiled: bool, steps: int, watch: Callable[[TokenCount], TrainerCallback]):
    """The preset trained on the prepared data for ``steps`` steps, without evaluation or checkpoints, its batches
    counted, watched by ``watch(the count)``; returns the trainer and the watch."""
    with tempfile.TemporaryDirectory() as out:
        trainer, _ = preset_trainer(steps, out, [*data_flags(data), "--logging_steps", "1000", "--torch_compile",
                                                 str(compiled).lower()], preset=PRESET)  # fmt: skip
        trainer.data_collator = batches = TokenCount(trainer.data_collator)
        trainer.add_callback(callback := watch(batches))
        trainer.train()
    return trainer, callback


def measure(data: Path, compiled: bool, warmup: int, steps: int, sync_steps: int) -> dict:
    """The preset's step on the prepared data, eager or compiled (see the module's docstring)."""
    last = warmup + steps + sync_steps
    torch.cuda.reset_peak_memory_stats()
    trainer, watch = train(data, compiled, last, lambda batches: SyncWatch(warmup, warmup + steps, last, batches))
    batches = trainer.data_collator
    accumulated = trainer.args.gradient_accumulation_steps
    timed = watch.timed_batches()
    config = trainer.model.config
    flops = sum(train_flops(config, pairs, source, target) for pairs, source, target in batches.shapes[timed])
    seconds = watch.seconds()
    padded = sum(pairs * (source + target) for pairs, source, target in batches.shapes[timed])
    return {
        "torch_compile": compiled,
        "precision": "bf16 autocast" if trainer.args.bf16 else "fp32",
        "batches_per_step": accumulated,
        "batches_timed": timed.stop - timed.start,
        "steps_timed": steps,
        "step_s": seconds / steps,
        "tokens_per_s": sum(batches.tokens[timed]) / seconds,
        "padded_tokens_per_s": padded / seconds,
        "padding": 1 - sum(batches.tokens[timed]) / padded,
        "train_flops_per_s": flops / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "syncs_in_steps": sync_steps,
        "syncs": dict(watch.syncs.most_common()),
        **({"compilation": compile_counts()} if compiled else {}),
    }


def profile_steps(data: Path, warmup: int, steps: int) -> None:
    """Prints the operators of ``steps`` eager steps by their own CUDA time, then by their own CPU time."""
    activities = (ProfilerActivity.CPU, ProfilerActivity.CUDA)
    _, watch = train(data, False, warmup + steps, lambda _: StepClock(warmup, steps, activities, with_flops=False))
    averages = watch.profiler.key_averages()
    for key in ("self_cuda_time_total", "self_cpu_time_total"):
        print(averages.table(sort_by=key, row_limit=25, max_name_column_width=60))


def run(data: Path, warmup: int, steps: int, sync_steps: int) -> dict:
    peak = matmul_peak(torch.bfloat16, n=8192, repeats=10, device="cuda")
    results = []
    for compiled in (False, True):
        results.append(measure(data, compiled, warmup, steps, sync_steps))
        results[-1]["mfu"] = results[-1]["train_flops_per_s"] / peak
        print(json.dumps(results[-1]), flush=True)  # each as it is measured
    return {"preset": PRESET, "data": "benchmarks/wmt_like.py stand-in (--prepare)", "warmup_steps": warmup,
            "matmul_peak_bf16_flops_per_s": peak, "runs": results}  # fmt: skip


def table(record: dict) -> str:
    rows = ["| step | s/step | tokens/s | MFU (bf16 peak {:.0f} TFLOP/s) | padding | peak GiB | host syncs |".format(
        record["matmul_peak_bf16_flops_per_s"] / 1e12), "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in record["runs"]:
        syncs = sum(r["syncs"].values())
        rows.append(f"| {'compiled' if r['torch_compile'] else 'eager'} | {r['step_s']:.3f} | {r['tokens_per_s']:,.0f} "
                    f"| {r['mfu']:.1%} | {r['padding']:.1%} | {r['peak_memory_gib']:.1f} "
                    f"| {syncs} in {r['syncs_in_steps']} steps |")  # fmt: skip
    return "\n".join(rows)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prepare", type=Path, metavar="DIR", help="write the stand-in corpus and vocabulary here")
    mode.add_argument("--data", type=Path, metavar="DIR", help="measure on the corpus --prepare wrote here")
    parser.add_argument("--pairs", type=positive_int, default=40_000, help="--prepare: training pairs")
    parser.add_argument("--warmup", type=positive_int, default=10, help="steps before the timed ones")
    parser.add_argument("--steps", type=positive_int, default=30, help="steps timed")
    parser.add_argument("--sync_steps", type=positive_int, default=3, help="steps watched for host syncs, after")
    parser.add_argument("--profile", type=positive_int, metavar="STEPS", help="profile STEPS eager steps instead")
    parser.add_argument("--json", help="write the record here")
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
    record = {**provenance(), **run(args.data, args.warmup, args.steps, args.sync_steps)}
    print(table(record))
    for r in record["runs"]:
        print(("compiled" if r["torch_compile"] else "eager"), "syncs:", r["syncs"])
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
