"""Collating a training batch (issue 99, item 3), on the CPU in seconds: training's collator (``PairBatches``, each
side filled at once) against the one it replaced (``PaddedBatches`` over transformers' DataCollatorForSeq2Seq, which
pads every pair in Python lists), timed in the same run on the same batches: the first Multi30k training pairs
(bundled), BPE-segmented by a tokenizer learned from them, batched by the training sampler at the paper's 25,000
tokens a side with CUDA's batch shapes. Both collators' batches are checked equal first.

    python -m benchmarks.collate --json results/benchmarks/collate.json
"""

import argparse
import gzip
import statistics
import time

import torch
from transformers import DataCollatorForSeq2Seq

from benchmarks import write_record
from training.api import ModelArguments, TokenBatchSampler, build_model, train_tokenizer
from vanilla_tools.batch_shapes import BatchShapes, PaddedBatches, PairBatches
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.provenance import provenance

BUDGET = 25_000  # tokens a side (§5.1's batch)
LONGEST = 128  # vanilla-train's --max_source_length and --max_target_length


def pairs(count: int, vocab_size: int) -> tuple[list[dict], object]:
    """The first ``count`` bundled Multi30k training pairs as token ids (en -> de), and their tokenizer."""
    sides = []
    for lang in ("en", "de"):
        with gzip.open(BUNDLED_DIR / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            sides.append([next(f).strip() for _ in range(count)])
    tokenizer = train_tokenizer(sides[0] + sides[1], vocab_size=vocab_size)
    ids = [tokenizer(side, add_special_tokens=True)["input_ids"] for side in sides]
    return [{"input_ids": s[:LONGEST], "labels": t[:LONGEST]} for s, t in zip(*ids, strict=True)], tokenizer


def seconds_per_batch(collate, batches: list[list[dict]], repeats: int) -> float:
    """The median over ``repeats`` of the mean time to collate each of ``batches``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for features in batches:
            collate(features)
        times.append((time.perf_counter() - start) / len(batches))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=29_000, help="Multi30k training pairs (all: 29,000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the record here")
    args = parser.parse_args(argv)
    features, tokenizer = pairs(args.pairs, vocab_size=8000)
    shapes = BatchShapes.for_device("cuda", LONGEST)
    sampler = TokenBatchSampler(
        [len(f["input_ids"]) for f in features], [len(f["labels"]) for f in features], BUDGET, seed=1, shapes=shapes
    )
    batches = [[features[i] for i in plan] for plan in sampler]
    sizes = ModelArguments(d_model=8, encoder_layers=1, decoder_layers=1, num_attention_heads=1, ffn_dim=8)
    model = build_model(sizes, tokenizer)  # the collators need only its special tokens

    before = PaddedBatches(
        DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100), shapes, tokenizer.pad_token_id
    )
    after = PairBatches(shapes, tokenizer.pad_token_id, model.prepare_decoder_input_ids_from_labels)
    for features_of_batch in batches:
        old, new = dict(before(features_of_batch)), after(features_of_batch)
        assert all(torch.equal(old[key], new[key]) for key in old), "the collators' batches differ"
    timed = {
        name: seconds_per_batch(collate, batches, args.repeats)
        for name, collate in (("before", before), ("after", after))
    }
    record = {
        "provenance": provenance(),
        "batches": len(batches),
        "tokens_per_batch_per_side": BUDGET,
        "pairs_per_batch": round(sum(map(len, batches)) / len(batches), 1),
        "ms_per_batch": {name: round(1000 * seconds, 3) for name, seconds in timed.items()},
        "ratio_before_over_after": round(timed["before"] / timed["after"], 2),
    }
    print(record["ms_per_batch"], "ratio", record["ratio_before_over_after"], "over", len(batches), "batches")
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
