"""BPE-dropout: training pairs are re-segmented each epoch and batched on their new lengths; the text stays the
same, evaluation is untouched."""

import datasets
import pytest
from training_helpers import ENGLISH, GERMAN, built, train_argv, write_corpus

from training.data.bpe_dropout import BPEDropoutBatchSampler, BPEDropoutPairs


def resegmented(tokenizer, p: float, limit: int = 128, copies: int = 1) -> BPEDropoutPairs:
    texts = datasets.Dataset.from_dict({"source": ENGLISH * copies, "target": GERMAN * copies})
    return BPEDropoutPairs(texts, tokenizer, p, limit, limit)


def test_dropping_every_merge_spells_each_word_out(tokenizer):
    pairs = resegmented(tokenizer, 1.0)
    expected = [list(f"▁{sentence.replace(' ', '▁')}") + ["</s>"] for sentence in GERMAN]
    assert [tokenizer.convert_ids_to_tokens(ids) for ids in pairs.labels] == expected
    assert tokenizer.batch_decode(pairs.input_ids, skip_special_tokens=True) == ENGLISH
    assert [len(ids) for ids in pairs.input_ids] == [len(sentence) + 2 for sentence in ENGLISH]  # ▁ ... </s>
    assert pairs[1] == {"input_ids": pairs.input_ids[1], "labels": pairs.labels[1]} and len(pairs) == 3


def test_segmentations_vary_but_always_spell_the_same_text(tokenizer):
    pairs = resegmented(tokenizer, 0.5)
    deterministic = tokenizer(text_target=GERMAN)["input_ids"]
    seen_other = False
    for _ in range(20):  # P(no merge dropped in 20 segmentations at p = 0.5) is below 1e-100
        pairs.resegment()
        assert tokenizer.batch_decode(pairs.labels, skip_special_tokens=True) == GERMAN
        assert all(ids[-1] == tokenizer.eos_token_id for ids in pairs.labels)
        seen_other |= pairs.labels != deterministic
    assert seen_other


def test_resegmented_pairs_keep_the_length_limits(tokenizer):
    pairs = resegmented(tokenizer, 1.0, limit=6)
    assert all(len(ids) == 6 and ids[-1] == tokenizer.eos_token_id for ids in pairs.input_ids + pairs.labels)


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_probability_outside_the_range_is_refused(tokenizer, p):
    with pytest.raises(ValueError, match="BPE-dropout probability"):
        resegmented(tokenizer, p)


def test_each_epoch_is_batched_on_its_own_segmentation(tokenizer):
    pairs = resegmented(tokenizer, 0.3, copies=40)
    sampler = BPEDropoutBatchSampler(pairs, 200, seed=5)
    count = len(sampler)
    for epoch in range(4):
        sampler.set_epoch(epoch)
        segmentation = [list(ids) for ids in pairs.labels]
        batches = list(sampler)
        assert len(batches) == count and sorted(i for b in batches for i in b) == list(range(120))
        for b in batches:  # lengths are the ones this epoch's pairs have
            assert len(b) * max(len(pairs.input_ids[i]) for i in b) <= 200 * 1.1
        assert sampler.target_lengths.tolist() == [len(ids) for ids in pairs.labels]
        sampler.set_epoch(epoch)  # a second call for the same epoch (accelerate and Trainer both call it) keeps it
        assert pairs.labels == segmentation
    assert sampler.padding() < 0.25  # 120 pairs of 3 sentences: far from sorted-text padding, far below jittered


def test_only_training_batches_are_resegmented(tmp_path):
    corpus = write_corpus(tmp_path / "data", pairs=40)
    argv = train_argv(
        corpus,
        tmp_path / "run",
        "--bpe_dropout",
        "1.0",
        "--max_tokens_per_batch",
        "4096",
        "--per_device_eval_batch_size",
        "100",
    )
    trainer, data = built(argv)
    train_batches = list(trainer.get_train_dataloader())
    eval_batch = next(iter(trainer.get_eval_dataloader()))
    # every pair is spelled out ("▁" + characters + </s>) up to the length limit
    characters = sum(min(len(text) + 2, 128) for text in data["train"]["source"])
    assert sum(int(batch["attention_mask"].sum()) for batch in train_batches) == characters
    assert all(batch["input_ids"].numel() <= 4096 for batch in train_batches)  # planned on the spelled-out lengths
    assert int(eval_batch["attention_mask"].sum()) == sum(len(ids) for ids in data["validation"]["input_ids"])


def test_the_segmenter_pads_and_cuts_nothing_whatever_the_tokenizer_was_last_called_with(tokenizer):
    """A batch call with padding=True leaves padding switched on in a fast tokenizer's backend, which a copy of it
    keeps: once, the pairs came out padded to the longest sentence after another test had translated a batch."""
    tokenizer(GERMAN, padding=True, truncation=True, max_length=4)  # leaves both on in the backend
    try:
        pairs = resegmented(tokenizer, 1.0)
        assert [tokenizer.convert_ids_to_tokens(ids)[-1] for ids in pairs.labels] == ["</s>"] * len(GERMAN)
        assert [len(ids) for ids in pairs.input_ids] == [len(sentence) + 2 for sentence in ENGLISH]
    finally:
        tokenizer.backend_tokenizer.no_padding()
        tokenizer.backend_tokenizer.no_truncation()
