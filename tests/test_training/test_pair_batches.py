"""Training's collator fills each side of a batch at once (``PairBatches``), with exactly the batches that
transformers' DataCollatorForSeq2Seq, padded to the batch shapes (``PaddedBatches``), makes of the same pairs."""

import pytest
import torch
from training_helpers import built, train_argv, write_corpus
from transformers import DataCollatorForSeq2Seq

from training.data.batching import TokenBatchSampler
from training.data.corpus import lengths
from vanilla_tools.batch_shapes import UNPADDED, BatchShapes, PaddedBatches, PairBatches


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A trainer of real Multi30k pairs, and its tokenized splits."""
    folder = tmp_path_factory.mktemp("pairs")
    return built(train_argv(write_corpus(folder / "data", pairs=200), folder / "run"))


@pytest.mark.parametrize("shapes", [UNPADDED, BatchShapes.for_device("cuda", 128)], ids=["unpadded", "bucketed"])
@pytest.mark.parametrize("split", ["train", "validation"])
def test_batches_are_the_seq2seq_collators_padded_to_their_shapes(run, shapes, split):
    trainer, data = run
    model, pad = trainer.model, trainer.processing_class.pad_token_id
    reference = PaddedBatches(
        DataCollatorForSeq2Seq(trainer.processing_class, model=model, label_pad_token_id=-100), shapes, pad
    )
    ours = PairBatches(shapes, pad, model.prepare_decoder_input_ids_from_labels)
    rows = data[split].select_columns(["input_ids", "labels"])
    plans = list(TokenBatchSampler(*lengths(data[split]), 300, shapes=shapes))
    assert len(plans) > 2
    padded = {"source": False, "target": False}  # whether any batch pads the side
    for plan in plans:
        features = [rows[int(i)] for i in plan]
        expected, batch = dict(reference(features)), ours(features)
        assert list(batch) == list(expected) == ["input_ids", "attention_mask", "labels", "decoder_input_ids"]
        for key, value in expected.items():
            assert batch[key].dtype == value.dtype and torch.equal(batch[key], value), key
        padded["source"] |= bool((batch["input_ids"] == pad).any())
        padded["target"] |= bool((batch["labels"] == -100).any())
        if shapes.pads():
            assert {batch["input_ids"].shape[1], batch["labels"].shape[1]} <= set(shapes.buckets.tolist())
    assert padded == {"source": True, "target": True}


def test_pairs_without_labels_collate_to_the_source_alone():
    batch = PairBatches(UNPADDED, 0)([{"input_ids": [5, 6, 7]}, {"input_ids": [8]}])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]] and batch["labels"] is None
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def storages(batch: dict) -> set[int]:
    return {value.untyped_storage().data_ptr() for value in batch.values()}


def test_a_worker_hands_over_a_batch_in_one_buffer(run):
    """Batches collated in a DataLoader's worker process arrive as views of one buffer (one shared-memory segment),
    the same batches that the training process collates itself, tensor for tensor."""
    trainer, data = run
    collate = PairBatches(
        UNPADDED, trainer.processing_class.pad_token_id, trainer.model.prepare_decoder_input_ids_from_labels
    )
    rows = data["train"].select_columns(["input_ids", "labels"])
    plans = [list(map(int, plan)) for plan in TokenBatchSampler(*lengths(data["train"]), 300)][:3]
    loader = torch.utils.data.DataLoader(rows, batch_sampler=plans, collate_fn=collate, num_workers=1)
    for plan, batch in zip(plans, loader, strict=True):
        expected = collate([rows[i] for i in plan])
        assert len(storages(expected)) == 4 and len(storages(batch)) == 1
        assert list(batch) == list(expected)
        for key, value in expected.items():
            assert batch[key].dtype == value.dtype and torch.equal(batch[key], value), key
