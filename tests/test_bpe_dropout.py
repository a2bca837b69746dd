"""BPE-dropout: training pairs are re-segmented each batch; the text stays the same, evaluation is untouched."""

import pytest
from training_helpers import ENGLISH, GERMAN, train_argv, write_corpus
from transformers import DataCollatorForSeq2Seq

from training.bpe_dropout import BPEDropoutCollator
from training.train import build_trainer, parse_args


def pairs(tokenizer) -> list[dict]:
    batch = tokenizer(ENGLISH, text_target=GERMAN)
    return [{"input_ids": s, "labels": t} for s, t in zip(batch["input_ids"], batch["labels"], strict=True)]


def collator(tokenizer, p: float, limit: int = 128) -> BPEDropoutCollator:
    return BPEDropoutCollator(DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100), tokenizer, p, limit, limit)


def test_dropping_every_merge_spells_each_word_out(tokenizer):
    batch = collator(tokenizer, 1.0)(pairs(tokenizer))
    expected = [list(f"▁{sentence.replace(' ', '▁')}") + ["</s>"] for sentence in GERMAN]
    labels = [[tokenizer.convert_ids_to_tokens(int(i)) for i in row if i != -100] for row in batch["labels"]]
    assert labels == expected
    sources = tokenizer.batch_decode(batch["input_ids"], skip_special_tokens=True)
    assert sources == ENGLISH
    longest = max(len(sentence) + 2 for sentence in ENGLISH)  # "▁" + characters + </s>
    assert batch["input_ids"].shape == (3, longest)
    assert batch["attention_mask"].sum(1).tolist() == [len(sentence) + 2 for sentence in ENGLISH]


def test_segmentations_vary_but_always_spell_the_same_text(tokenizer):
    drop = collator(tokenizer, 0.5)
    deterministic = [f["labels"] for f in pairs(tokenizer)]
    seen_other = False
    for _ in range(20):  # P(no merge dropped in 20 batches at p = 0.5) is below 1e-100
        labels = [[int(i) for i in row if i != -100] for row in drop(pairs(tokenizer))["labels"]]
        assert tokenizer.batch_decode(labels, skip_special_tokens=True) == GERMAN
        assert all(row[-1] == tokenizer.eos_token_id for row in labels)
        seen_other |= labels != deterministic
    assert seen_other


def test_resegmented_pairs_keep_the_length_limits(tokenizer):
    batch = collator(tokenizer, 1.0, limit=6)(pairs(tokenizer))
    assert batch["input_ids"].shape == (3, 6)
    assert (batch["input_ids"][:, -1] == tokenizer.eos_token_id).all()  # clipped, keeping </s>


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5])
def test_probability_outside_the_range_is_refused(tokenizer, p):
    with pytest.raises(ValueError, match="BPE-dropout probability"):
        collator(tokenizer, p)


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
    trainer, data = build_trainer(*parse_args(argv))
    train_batch = next(iter(trainer.get_train_dataloader()))
    eval_batch = next(iter(trainer.get_eval_dataloader()))
    # every pair is in the one batch, spelled out ("▁" + characters + </s>) up to the length limit
    characters = sum(min(len(text) + 2, 128) for text in data["train"]["source"])
    assert int(train_batch["attention_mask"].sum()) == characters
    assert int(eval_batch["attention_mask"].sum()) == sum(len(ids) for ids in data["validation"]["input_ids"])
