"""benchmarks.epoch_shapes (issue 99, item 4 C): the shapes, padding and fill of the wmt14 preset's stand-in epoch,
bucketed as on CUDA, at 3,125 tokens a micro-batch and at the whole step of 25,000 in one."""

from benchmarks import epoch_shapes


def test_the_step_in_one_micro_batch_keeps_the_shapes_few_but_pads_more():
    """At 3,125 tokens the epoch of tests/test_training/test_batch_shapes.py (673 batches, 61 shapes, 16.9%); at
    25,000, 87 batches of 52 shapes (within 64), but 20.9% padding, over the 17.6% target: batches 8 times larger
    span more target buckets for each source bucket (the target side pads 24.8%, the source side 16.7%). The fill
    is each side's padded tokens over the budget: 73% and 75% at 3,125, 71% and 80% at 25,000."""
    record = epoch_shapes.main(["--budgets", "3125", "25000"])
    assert record["targets"] == {"shapes": 64, "padding": 0.176}
    assert record["epochs"] == [
        {
            "budget": 3125,
            "batches": 673,
            "shapes": 61,
            "padding": 0.169,
            "padding_source": 0.1617,
            "padding_target": 0.176,
            "fill_source": 0.7317,
            "fill_target": 0.7523,
            "met": {"shapes": True, "padding": True},
        },
        {
            "budget": 25_000,
            "batches": 87,
            "shapes": 52,
            "padding": 0.2094,
            "padding_source": 0.1665,
            "padding_target": 0.2478,
            "fill_source": 0.7116,
            "fill_target": 0.7968,
            "met": {"shapes": True, "padding": False},
        },
    ]
