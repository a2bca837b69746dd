"""Shapes and fill of an epoch (issue 99, item 4 C), on the CPU in seconds: the wmt14 preset's stand-in epoch
(``benchmarks.wmt14_step --prepare``'s 40,000 WMT-like pairs, by their token lengths as
tests/fixtures/wmt-like-lengths.npz keeps them) planned by the training sampler with CUDA's batch shapes, seed 1, at
each budget asked: by default the preset's micro-batch before it was sized to the device (3,125 tokens a side, 8 a
step), 2 and 4 micro-batches a step, and the whole step in one (25,000), as one GPU that holds it trains it
(training/step/micro_batch.py).

For each budget: the batches, the distinct (pairs, source length, target length) shapes (one compiled graph or CUDA
graph each), the padding (of both sides together, as the run logs it, and of each side) and the fill of each side:
its padded tokens over the budget, over the epoch's batches (how much of the budget a batch uses on average). The
targets (issue 99): at most 64 shapes, and no more padding than the H200's measured epoch at 3,125 tokens, 17.6%
(results/benchmarks/gpu/h200-2026-11-28-calls-5-7.json, call_5.step_compiled.padding).

    python -m benchmarks.epoch_shapes --json results/benchmarks/epoch-shapes.json
"""

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks import write_record
from training.api import TokenBatchSampler
from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.provenance import provenance

LENGTHS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "wmt-like-lengths.npz"
BUDGETS = (3125, 6250, 12_500, 25_000)  # tokens a side: the preset's step of 25,000 in 8, 4, 2 and 1 micro-batches
SEED = 1  # the wmt14 preset's
LONGEST = 128  # the preset's --max_source_length and --max_target_length
MOST_SHAPES = 64
MOST_PADDING = 0.176  # the H200's epoch at 3,125 tokens a micro-batch


def epoch(source: np.ndarray, target: np.ndarray, budget: int) -> dict:
    """The shapes, padding and fill of one epoch of ``budget`` tokens a side, bucketed as on CUDA."""
    sampler = TokenBatchSampler(source, target, budget, seed=SEED, shapes=BatchShapes.for_device("cuda", LONGEST))
    shapes = sampler.batch_shapes()
    padded = {
        side: sum(pairs * lengths[at] for pairs, *lengths in shapes) for at, side in enumerate(("source", "target"))
    }
    real = {"source": int(source.sum()), "target": int(target.sum())}
    figures = {
        "budget": budget,
        "batches": len(shapes),
        "shapes": len(set(shapes)),
        "padding": round(sampler.padding(), 4),
        **{f"padding_{side}": round(1 - real[side] / padded[side], 4) for side in padded},
        **{f"fill_{side}": round(padded[side] / (len(shapes) * budget), 4) for side in padded},
    }
    figures["met"] = {"shapes": figures["shapes"] <= MOST_SHAPES, "padding": figures["padding"] <= MOST_PADDING}
    return figures


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default=str(LENGTHS), help="an .npz of the pairs' source and target lengths")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS), help="tokens a side a micro-batch")
    parser.add_argument("--json", help="write the record here")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    lengths = np.load(args.lengths)
    source, target = lengths["source"].astype(np.int64), lengths["target"].astype(np.int64)
    record = {
        **provenance(),
        "data": f"{Path(args.lengths).name}: {len(source)} pairs",
        "seed": SEED,
        "targets": {"shapes": MOST_SHAPES, "padding": MOST_PADDING},
        "epochs": [epoch(source, target, budget) for budget in args.budgets],
    }
    for figures in record["epochs"]:
        print(json.dumps(figures))
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
