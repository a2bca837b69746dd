"""Bounded batch shapes (vanilla_tools/batch_shapes.py): the shapes of a WMT-like epoch today and bucketed, the
padding bucketing adds, the loss and translations it leaves unchanged, and the flags through vanilla-train."""

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import PAD, VOCAB, padded_batch, saved_model_with_tokenizer, tiny_model
from training_helpers import built, train_argv, write_corpus

from inference.engine import GenerateEngine
from modeling_vanilla import VanillaTransformerForSeq2Seq
from training.data.batching import TokenBatchSampler, cut_points
from vanilla_tools.batch_shapes import UNPADDED, BatchShapes, PaddedBatches
from vanilla_tools.decoding import Decoding

# The token lengths of benchmarks/wmt14_step.py's stand-in corpus (40,000 WMT-like pairs, the wmt14 preset's 37k BPE,
# cut at 128 tokens a side), as its --prepare writes them
WMT_LIKE = Path(__file__).parents[1] / "fixtures" / "wmt-like-lengths.npz"
WMT14_BUDGET = 3125  # the wmt14 preset's --max_tokens_per_batch


def test_a_wmt_like_epoch_has_few_shapes_bucketed():
    """The epoch behind docs/performance.md's GPU profile: 605 batches, 604 of them a shape of their own (cuDNN
    planned almost every one). CUDA's defaults (8 length buckets a side, lengths and batch sizes multiples of 8) leave
    61, for 16.9% padding instead of 11.7% (in 673 batches); every batch stays within the budget counted on its padded
    lengths, and its size is a multiple of 8."""
    lengths = np.load(WMT_LIKE)
    today = TokenBatchSampler(lengths["source"], lengths["target"], WMT14_BUDGET, seed=1)
    on_cuda = BatchShapes.for_device("cuda", 128)
    bucketed = TokenBatchSampler(lengths["source"], lengths["target"], WMT14_BUDGET, seed=1, shapes=on_cuda)
    counts = {
        name: (len(s), len(set(s.batch_shapes())), round(s.padding(), 4))
        for name, s in (("today", today), ("bucketed", bucketed))
    }
    print("batches, distinct shapes, padding:", counts)
    assert counts == {"today": (605, 604, 0.1166), "bucketed": (673, 61, 0.169)}
    shapes = bucketed.batch_shapes()
    assert max(size * max(source, target) for size, source, target in shapes) <= WMT14_BUDGET
    assert {source for _, source, _ in shapes} | {target for _, _, target in shapes} <= set(on_cuda.buckets.tolist())
    assert all(size % 8 == 0 for size, _, _ in shapes)


def test_buckets_are_geometric_multiples_and_the_defaults_follow_the_device():
    shapes = BatchShapes.for_device("cuda", 128)
    assert shapes == BatchShapes(8, 8, 8, longest=128)
    assert shapes.buckets.tolist() == [8, 16, 24, 32, 40, 64, 88, 128]
    assert shapes.padded_lengths([1, 8, 9, 41, 128, 130]).tolist() == [8, 8, 16, 64, 128, 136]  # above: the multiple
    assert BatchShapes.for_device("cpu", 128) == UNPADDED
    assert BatchShapes.for_device("cpu", 64, num_batch_buckets=4) == BatchShapes(num_batch_buckets=4, longest=64)
    assert BatchShapes.for_device("cuda", 128, num_batch_buckets=0).buckets.tolist() == []


def test_a_batch_at_the_budget_keeps_a_multiple_and_carries_the_rest():
    # budget 100: ten pairs of 10 fill a batch; the 11th (50 tokens) makes it keep 8 and carry 2, and those 2 with
    # it would pass the budget (3 x 50), so they end a batch of their own, as fairseq's batch_by_size does
    longest = [10] * 10 + [50, 50]
    assert cut_points(longest, 100, multiple=8) == [8, 10, 12]
    assert cut_points(longest, 100) == [10, 12]  # without a multiple, as before


def test_padding_changes_neither_the_loss_per_real_token_nor_the_gradients():
    """A batch padded to its buckets (ids with <pad>, masks with 0, labels with -100) gives the model's loss per
    real target token and the gradients of the batch as it came."""
    ids, mask = padded_batch(batch=3, length=7)
    labels = torch.randint(3, VOCAB, (3, 6), generator=torch.Generator().manual_seed(1))
    labels[1, 4:] = -100
    model = tiny_model(label_smoothing=0.1).train()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(labels=labels)
    padded = PaddedBatches(dict, BatchShapes(8, 8, 2, longest=16), PAD)(batch)
    assert {key: tuple(value.shape) for key, value in padded.items()} == {
        "input_ids": (3, 8),
        "attention_mask": (3, 8),
        "labels": (3, 8),
        "decoder_input_ids": (3, 8),
    }
    assert (padded["labels"][:, 6:] == -100).all() and (padded["attention_mask"][:, 7:] == 0).all()
    results = []
    for inputs in (batch, padded):
        model.zero_grad()
        loss = model(**inputs).loss
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(results[1][0], results[0][0])
    for padded_grad, grad in zip(results[1][1], results[0][1], strict=True):
        torch.testing.assert_close(padded_grad, grad)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_generate_translates_a_padded_batch_as_it_came(num_beams):
    model = tiny_model().eval()
    ids, mask = padded_batch(batch=3, length=7)
    padded = BatchShapes(required_seq_len_multiple=8).pad_batch({"input_ids": ids, "attention_mask": mask}, PAD)
    assert padded["input_ids"].shape == (3, 8)
    outputs = [
        model.generate(**inputs, num_beams=num_beams, max_new_tokens=9)
        for inputs in ({"input_ids": ids, "attention_mask": mask}, padded)
    ]
    assert torch.equal(outputs[0], outputs[1])


def test_the_flags_reach_the_sampler_from_the_command_line(tmp_path, caplog):
    corpus = write_corpus(tmp_path / "data")
    argv = train_argv(
        corpus,
        tmp_path / "out",
        "--max_steps",
        "1",
        "--required_batch_size_multiple",
        "2",
        "--required_seq_len_multiple",
        "4",
        "--num_batch_buckets",
        "3",
        "--max_source_length",
        "32",
        "--max_target_length",
        "32",
    )
    with caplog.at_level(logging.INFO):
        trainer, _ = built(argv)
    sampler = trainer._get_train_sampler()
    assert sampler.shapes == BatchShapes(2, 4, 3, longest=32)
    assert "batch shapes on cpu: batch sizes a multiple of 2, lengths a multiple of 4, length buckets: 8, 16, 32" in [
        r.getMessage() for r in caplog.records
    ]
    batches = list(trainer.get_train_dataloader())
    widths = {batch[key].shape[1] for batch in batches for key in ("input_ids", "labels")}
    assert widths <= {8, 16, 32}
    assert all(len(batch["input_ids"]) % 2 == 0 for batch in batches[:-1])
    # evaluation's generate() counts §6.1's output length from the longest source, not the bucket
    mask = torch.tensor([[1] * 5 + [0] * 3, [1] * 7 + [0]])
    assert trainer.generate_kwargs({"attention_mask": mask}, trainer.decoding.during)["max_new_tokens"] == 7 + 50


def test_translation_batches_are_bucketed_and_translate_as_they_came(tmp_path, tokenizer):
    """vanilla-translate's engine pads its sources to their bucket; the output length still counts from the longest
    source (§6.1: + 50), so an untrained model that never ends gives the very same outputs."""
    model = VanillaTransformerForSeq2Seq.from_pretrained(saved_model_with_tokenizer(tmp_path, tokenizer))
    sentences = ["A dog runs.", "Two men play football on a green field in the sun."]
    widths, generate = [], model.generate

    def recorded(**kwargs):
        widths.append(kwargs["input_ids"].shape[1])
        return generate(**kwargs)

    model.generate = recorded
    translations = [
        GenerateEngine(model, tokenizer, Decoding(num_beams=2, early_stopping=True), shapes)(sentences)
        for shapes in (UNPADDED, BatchShapes(required_seq_len_multiple=8, num_batch_buckets=2, longest=32))
    ]
    assert widths[1] in (8, 32) and widths[0] < widths[1]
    assert translations[1] == translations[0]
    assert translations[0].output_lengths == [widths[0] + 50] * 2  # both ran to the limit of the longest source
