"""The translation pipeline shipped with the model (pipeline_vanilla.py): transformers 5 removed "translation" for
every model (MarianMTModel included, shown below); a checkpoint saved by this package answers to it again."""

import json

import pytest
from helpers import saved_model_with_tokenizer, tiny_model
from transformers import pipeline

from modeling_vanilla import to_marian

SENTENCES = ["Two dogs run through the snow.", "A man.", "A woman in a red coat reads a book in the park."]


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory):
    return saved_model_with_tokenizer(tmp_path_factory.mktemp("pipeline"), tokenizer)


def generated_texts(model, tokenizer, sentences: list[str], **kwargs) -> list[str]:
    out = model.generate(**tokenizer(sentences, return_tensors="pt", padding=True), **kwargs)
    return [text.strip() for text in tokenizer.batch_decode(out, skip_special_tokens=True)]


def test_the_checkpoint_names_its_pipeline(model_dir):
    assert (model_dir / "pipeline_vanilla.py").is_file()
    entry = json.loads((model_dir / "config.json").read_text())["custom_pipelines"]["translation"]
    assert entry["impl"] == "pipeline_vanilla.TranslationPipeline" and entry["pt"] == ["AutoModelForSeq2SeqLM"]


def test_translation_pipeline_as_transformers_4_had_it(model_dir, tokenizer):
    translator = pipeline("translation", model=str(model_dir), trust_remote_code=True)
    model = translator.model
    assert type(translator).__name__ == "TranslationPipeline"

    # one string, the model's own decoding (beam 4, alpha 0.6, input + 50)
    expected = generated_texts(model, tokenizer, SENTENCES[:1])
    assert translator(SENTENCES[0]) == [{"translation_text": expected[0]}] and expected[0]

    # a list, batched two at a time (padded), with generate() parameters: as generate() on each string alone
    got = translator(SENTENCES, batch_size=2, num_beams=2, max_length=8)
    alone = [generated_texts(model, tokenizer, [s], num_beams=2, max_length=8)[0] for s in SENTENCES]
    assert got == [{"translation_text": text} for text in alone]

    # n-best
    two = translator(SENTENCES[2], num_beams=3, num_return_sequences=2, max_new_tokens=6)
    assert [d["translation_text"] for d in two] == generated_texts(
        model, tokenizer, SENTENCES[2:], num_beams=3, num_return_sequences=2, max_new_tokens=6
    )
    assert len({d["translation_text"] for d in two}) == 2

    # inferred from the checkpoint's one custom task; token ids on request
    inferred = pipeline(model=str(model_dir), trust_remote_code=True)
    ids = inferred(SENTENCES[1], return_tensors=True, num_beams=1, max_new_tokens=5)[0]["translation_token_ids"]
    assert (
        ids.tolist()
        == model.generate(**tokenizer(SENTENCES[1:2], return_tensors="pt"), num_beams=1, max_new_tokens=5)[0].tolist()
    )


def test_the_pipeline_needs_trust_remote_code(model_dir):
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline("translation", model=str(model_dir))


def test_transformers_5_refuses_translation_for_marian_too(tmp_path, tokenizer):
    """The control: the built-in task name is gone for MarianMTModel as well (not a fault of this model)."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    model = tiny_model(vocab_size=len(tokenizer), pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad)
    to_marian(model).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(KeyError, match="(The task translation has been removed|Unknown task translation)"):
        pipeline("translation", model=str(tmp_path))
