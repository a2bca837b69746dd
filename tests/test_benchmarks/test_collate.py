"""benchmarks.collate (issue 99, item 3): both collators timed on the same 25k-token batches, checked equal."""

from benchmarks import collate


def test_the_record_times_both_collators_on_batches_of_the_budget():
    record = collate.main(["--pairs", "3000", "--repeats", "1"])
    assert record["tokens_per_batch_per_side"] == 25_000 and record["batches"] >= 2
    assert record["pairs_per_batch"] > 500  # Multi30k's sentences are short: about 1,160 a batch on all of it
    assert set(record["ms_per_batch"]) == {"before", "after"} and min(record["ms_per_batch"].values()) > 0
    assert record["ratio_before_over_after"] > 0  # (the ratio itself is a timing: docs/performance.md gives it)
