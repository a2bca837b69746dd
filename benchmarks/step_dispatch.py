"""`python -m benchmarks.step_dispatch`: the operators one optimizer step of the real training loop dispatches, with
the step's tokens in 8 accumulated micro-batches and in 1, eager and compiled (issue 99, item 4 A: a CPU proxy for
the kernels a GPU step launches).

The wmt14 preset's depth (6+6 layers) and tokens a step (25,000 a side), at a tiny width (``TINY``: the count does
not depend on width), trained by ``vanilla-train``'s trainer (``build_trainer``: Trainer's loop, its gradient
accumulation, the fused AdamW) on the bundled Multi30k data (the multi30k preset's data path; WMT14 is on the Hub),
with CUDA's settings (``ON_CUDA``: no per-batch NaN check). The second optimizer step is profiled (the first
compiles) and counted as ``training_step --launches`` counts a step (``launched``: ATen operators called from Python
or autograd that compute, and inductor's kernels), leaving out the data loader's work, which on a GPU is the host's
and launches nothing. Counted apart: the accumulation adds, the ``add_`` autograd's ``AccumulateGrad`` makes into a
``.grad`` that a micro-batch before has set (one a parameter for each micro-batch after the first).

Counts, not timings: they are deterministic, so they can be made on a busy machine.

    python -m benchmarks.step_dispatch --json results/benchmarks/step-dispatch.json
"""

import argparse
import json
import tempfile
import unittest.mock

import torch
from torch.profiler import ProfilerActivity

from benchmarks import write_record
from benchmarks.training_step import StepClock, chain, launched, preset_trainer
from training.api import load_preset
from vanilla_tools.provenance import provenance

DEPTH_OF = "wmt14"  # the preset whose depth and tokens a step are counted
DATA_OF = "multi30k"  # the preset whose (bundled) data trains it
TINY = {"d_model": 32, "ffn_dim": 64, "num_attention_heads": 2, "vocab_size": 1000}
MICRO_BATCHES = (8, 1)  # today's accumulated step (the paper's 8 GPUs' shares) and the step in one micro-batch
# The H200's compiled wmt14 step, 8 micro-batches of 3,125 tokens a side, bf16 autocast: 7,908 GPU kernels a step
# (torch.profiler's CUDA kernels over 2 profiled steps; results/benchmarks/gpu/h200-2026-11-28-calls-5-7.json).
H200_KERNELS_PER_STEP, H200_MICRO_BATCHES = 7908, 8
# The target: the one-batch compiled step dispatches at most this share of today's accumulated compiled one.
TARGET_SHARE = 1 / 6
SHOWN = ("micro_batches", "compiled", "parameters", "dispatched", "accumulation_adds")  # printed as each is counted


def tiny_flags(micro_batches: int, compiled: bool) -> list[str]:
    """vanilla-train's flags (over the multi30k preset) for the wmt14 depth at ``TINY`` width, its tokens a step in
    ``micro_batches`` micro-batches, logging nothing in the steps counted."""
    depth = load_preset(DEPTH_OF)
    step_tokens = depth["tokens_per_step"]
    sizes = {
        **TINY,
        "encoder_layers": depth["encoder_layers"],
        "decoder_layers": depth["decoder_layers"],
        "tokens_per_step": step_tokens,
        "max_tokens_per_batch": step_tokens // micro_batches,
    }
    return [
        *(f for name, value in sizes.items() for f in (f"--{name}", str(value))),
        "--torch_compile",
        str(compiled).lower(),
        "--logging_nan_inf_filter",
        "false",
        "--bf16",
        "false",
        "--logging_steps",
        "1000",
    ]


def in_data_loader(event) -> bool:
    return any(e.name.startswith("enumerate(DataLoader)") for e in chain(event))


def accumulation_add(event) -> bool:
    """An ``add_`` into a ``.grad`` by autograd's AccumulateGrad (the gradient of a micro-batch after the first)."""
    return event.name == "aten::add_" and any("AccumulateGrad" in e.name for e in chain(event.cpu_parent))


def count_events(events) -> dict:
    """A profiled step's ``launched`` operators (the data loader's left out) by name, their sum, and the
    accumulation adds among them."""
    stepped = [event for event in events if not in_data_loader(event)]
    operators = launched(stepped)
    return {
        "dispatched": sum(operators.values()),
        "accumulation_adds": sum(1 for event in stepped if accumulation_add(event)),
        "by_operator": dict(operators.most_common()),
    }


def step_dispatch(micro_batches: int, compiled: bool, preset: str = DATA_OF, extra: tuple[str, ...] = ()) -> dict:
    """The operators the second optimizer step dispatches (``count_events``), the step's tokens in
    ``micro_batches`` micro-batches, eager or ``compiled`` (inductor's kernels named in the profile)."""
    torch._dynamo.reset()  # each count compiles as if it ran alone
    with tempfile.TemporaryDirectory() as out:
        flags = [*tiny_flags(micro_batches, compiled), *extra]
        trainer, args = preset_trainer(2, out, flags, preset=preset)
        clock = StepClock(profile_from=1, profile_steps=1, activities=(ProfilerActivity.CPU,), with_flops=False)
        trainer.add_callback(clock)
        with unittest.mock.patch.object(torch._inductor.config.cpp, "enable_kernel_profile", True):
            trainer.train()
    return {
        "vanilla_train_flags": flags,
        "micro_batches": args.gradient_accumulation_steps,
        "compiled": compiled,
        "parameters": sum(1 for p in trainer.model.parameters() if p.requires_grad),
        **count_events(clock.profiler.events()),
    }


def summary(counts: dict[str, dict]) -> dict:
    """The target (one-batch compiled against 8-batch compiled) and the calibration against the H200's kernels."""
    today, one = counts["compiled, 8 micro-batches"], counts["compiled, 1 micro-batch"]
    h200 = H200_KERNELS_PER_STEP / H200_MICRO_BATCHES
    return {
        "one_batch_share_of_today": one["dispatched"] / today["dispatched"],
        "target_share": TARGET_SHARE,
        "target_met": one["dispatched"] <= TARGET_SHARE * today["dispatched"] and one["accumulation_adds"] == 0,
        "h200_kernels_per_micro_batch": h200,
        "h200_kernels_per_step": H200_KERNELS_PER_STEP,
        "cpu_per_micro_batch_today": today["dispatched"] / today["micro_batches"],
        "h200_over_cpu_today": H200_KERNELS_PER_STEP / today["dispatched"],
    }


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_dispatch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the record here")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    counts = {}
    for compiled in (False, True):
        for micro_batches in MICRO_BATCHES:
            name = f"{'compiled' if compiled else 'eager'}, {micro_batches} micro-batch{'es' * (micro_batches > 1)}"
            counts[name] = step_dispatch(micro_batches, compiled)
            print(name, json.dumps({key: counts[name][key] for key in SHOWN}), flush=True)
    record = {
        **provenance(),
        "what": __doc__.split("\n\n")[0],
        "depth_of": DEPTH_OF,
        "data_of": DATA_OF,
        "counts": counts,
        "summary": summary(counts),
    }
    print(json.dumps(record["summary"]))
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
