"""Restricted self-attention (Table 1, ``attention_window`` r): encoder positions see |i - j| <= r, decoder positions
j in [i - r, i], encoder-decoder attention everything; against a brute-force masked reference, in every attention
implementation, with padding, in generate() with and without the sliding-window cache."""

import pytest
import torch
from helpers import padded_batch, tiny_config, tiny_model
from transformers import AutoModelForSeq2SeqLM

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq, to_marian
from modeling_vanilla.compat import CACHE_NAME
from modeling_vanilla.convert_ctranslate2 import ctranslate2_spec

LONG = 64  # positions: longer than any window below, so the window matters


def windowed(r: int | None, impl: str = "eager", seed: int = 0) -> VanillaTransformerForSeq2Seq:
    return tiny_model(seed, attn_implementation=impl, attention_window=r, max_position_embeddings=LONG)


def reference_logits(model, ids, mask, decoder_ids, r: int) -> torch.Tensor:
    """The layers run one by one (eager attention) on masks written out position by position."""
    encoder, decoder = model.model.encoder, model.model.decoder
    source, target = ids.shape[1], decoder_ids.shape[1]
    padding = mask.bool()[:, None, None, :]  # (B, 1, 1, S)
    band = torch.tensor([[abs(i - j) <= r for j in range(source)] for i in range(source)])
    causal_band = torch.tensor([[i - r <= j <= i for j in range(target)] for i in range(target)])
    _, hidden = encoder.embed(ids, None)
    for layer in encoder.layers:
        hidden = layer(hidden, band[None, None] & padding)
    _, output = decoder.embed(decoder_ids, None)
    for layer in decoder.layers:
        output = layer(output, causal_band[None, None], hidden, padding.expand(-1, 1, target, -1))
    return model.lm_head(output)


@pytest.mark.parametrize("r", [0, 1, 3])
def test_equals_a_brute_force_masked_reference(r):
    model = windowed(r)
    ids, mask = padded_batch(length=11)
    decoder_ids = torch.randint(3, 61, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
        expected = reference_logits(model, ids, mask, decoder_ids, r)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_window_changes_the_output_and_a_window_as_long_as_the_input_does_not():
    ids, mask = padded_batch(length=11)
    with torch.no_grad():
        full, wide, narrow = (
            windowed(r)(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits for r in (None, 11, 2)
        )
    torch.testing.assert_close(wide, full)
    assert (narrow - full).abs().max() > 1e-2


@pytest.mark.parametrize("impl", ["sdpa", "flex_attention"])
def test_every_attention_implementation_equals_eager(impl):
    ids, mask = padded_batch(length=13)
    with torch.no_grad():
        expected = windowed(2)(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
        got = windowed(2, impl)(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_training_gradients_equal_in_eager_and_sdpa():
    ids, mask = padded_batch(length=10)
    labels = torch.randint(3, 61, (3, 8), generator=torch.Generator().manual_seed(2))
    grads = []
    for impl in ("eager", "sdpa"):
        model = windowed(2, impl).train()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append(model.model.encoder.layers[0].self_attn.in_proj.weight.grad)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-5)


def test_a_padded_batch_gives_each_sentence_its_own_logits():
    model = windowed(2)
    ids, mask = padded_batch(length=10)
    with torch.no_grad():
        batch = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :6]).logits
        for row in range(3):
            kept = int(mask[row].sum())
            alone = model(input_ids=ids[row : row + 1, :kept], decoder_input_ids=ids[row : row + 1, :6]).logits
            torch.testing.assert_close(batch[row : row + 1], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beams", [1, 3])
def test_generate_with_the_sliding_cache_equals_without_a_cache(beams):
    model = windowed(2, "sdpa")
    ids, mask = padded_batch(length=9)
    kwargs = dict(attention_mask=mask, num_beams=beams, max_new_tokens=20)
    cached = model.generate(ids, use_cache=True, return_dict_in_generate=True, **kwargs)
    uncached = model.generate(ids, use_cache=False, **kwargs)
    assert torch.equal(cached.sequences, uncached)
    assert cached.sequences.shape[1] > 2 + 1  # decoded past the window
    cache = getattr(cached, CACHE_NAME)
    # the decoder keeps r keys (position i sees them and itself: r + 1); encoder-decoder attention the whole source
    assert cache.self_attention_cache.layers[0].keys.shape[-2] == 2
    assert cache.cross_attention_cache.layers[0].keys.shape[-2] == 9


def test_saved_loaded_and_refused_where_it_cannot_run(tmp_path):
    model = windowed(3)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    assert loaded.config.attention_window == 3 and loaded.config.sliding_window == 4
    assert "sliding_window" not in loaded.config.to_dict()  # saved once, as attention_window
    loaded.config.sliding_window = 2  # transformers' name, W positions: r = W - 1
    assert loaded.config.attention_window == 1
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match=r"cache_implementation='static' with `attention_window` 3"):
        model.generate(ids, attention_mask=mask, cache_implementation="static")
    with pytest.raises(ValueError, match=r"`attention_window` 3: MarianMTModel has full self-attention only"):
        to_marian(model)
    pytest.importorskip("ctranslate2")
    with pytest.raises(ValueError, match=r"`attention_window` 3: CTranslate2's encoder-decoder Transformer has no"):
        ctranslate2_spec(model, tokenizer=None)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_a_bad_window_is_named(bad):
    with pytest.raises(ValueError, match=r"`attention_window` must be an integer >= 0 or None"):
        tiny_config(attention_window=bad)
    assert VanillaTransformerConfig().attention_window is None  # the paper's models attend fully
