"""Peer parity: transformers' MarianMTModel (same post-LN architecture) converted with from_marian."""

import pytest
import torch
from transformers import MarianConfig, MarianMTModel

from inference import bench
from modeling_vanilla import VanillaTransformerForSeq2Seq, from_marian

SIZES = {  # d_model, layers (enc, dec), heads, ffn, vocab
    "tiny": (16, (1, 1), 2, 24, 40),
    "small": (64, (2, 3), 4, 96, 120),
    "wide": (96, (3, 2), 8, 256, 300),
}


def random_marian(size: str, activation: str, seed: int = 0) -> MarianMTModel:
    model = bench.random_marian(
        *SIZES[size], seed, activation_function=activation, max_position_embeddings=64, forced_eos_token_id=0
    ).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(std=0.1)  # non-zero so the conversion of the bias is tested
        model.model.shared.weight.mul_(8.0)  # peaked logits: greedy and beam paths differ, some hit EOS
    return model


def padded(vocab: int, pad: int, seed: int = 1, batch: int = 4, length: int = 9):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab - 1, (batch, length), generator=g)
    lengths = torch.tensor([length, length - 3, 2, length - 1])[:batch]
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, pad), mask


@pytest.mark.parametrize("activation", ["relu", "swish"])
@pytest.mark.parametrize("size", list(SIZES))
def test_converted_marian_gives_the_same_logits(size, activation):
    marian = random_marian(size, activation)
    ours = from_marian(marian)
    assert isinstance(ours, VanillaTransformerForSeq2Seq)
    assert ours.config.sinusoidal_layout == "concat" and ours.config.activation_function == activation
    vocab, pad = marian.config.vocab_size, marian.config.pad_token_id
    ids, mask = padded(vocab, pad)
    labels = torch.randint(1, vocab - 1, (4, 6), generator=torch.Generator().manual_seed(2))
    labels[2, 3:] = -100
    with torch.no_grad():
        expected = marian(input_ids=ids, attention_mask=mask, labels=labels)
        got = ours(input_ids=ids, attention_mask=mask, labels=labels)
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.encoder_last_hidden_state, expected.encoder_last_hidden_state, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("size", ["small", "wide"])
def test_converted_marian_generates_the_same_tokens(size, num_beams):
    marian = random_marian(size, "swish")
    ours = from_marian(marian)
    ids, mask = padded(marian.config.vocab_size, marian.config.pad_token_id)
    kwargs = dict(num_beams=num_beams, max_new_tokens=15, do_sample=False, length_penalty=0.6)
    expected = marian.generate(ids, attention_mask=mask, **kwargs)
    got = ours.generate(ids, attention_mask=mask, **kwargs)
    assert expected.shape[1] > 4 and (expected == 0).any()  # several steps, and some rows end with EOS
    assert torch.equal(got, expected)


def test_converted_model_saves_and_reloads(tmp_path):
    marian = random_marian("small", "relu")
    ours = from_marian(marian)
    ours.save_pretrained(tmp_path)
    reloaded = VanillaTransformerForSeq2Seq.from_pretrained(tmp_path).eval()
    ids, mask = padded(marian.config.vocab_size, marian.config.pad_token_id)
    with torch.no_grad():
        expected = marian(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
        got = reloaded(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(reloaded.final_logits_bias, marian.final_logits_bias)


def test_resize_keeps_the_final_logits_bias():
    ours = from_marian(random_marian("tiny", "relu"))
    bias = ours.final_logits_bias.clone()
    ours.resize_token_embeddings(50)
    assert ours.final_logits_bias.shape == (1, 50)
    torch.testing.assert_close(ours.final_logits_bias[:, :40], bias)
    assert ours.final_logits_bias[:, 40:].abs().max() == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"share_encoder_decoder_embeddings": False}, "separate source and target vocabularies"),
        ({"decoder_vocab_size": 77}, "separate source and target vocabularies"),
        ({"encoder_attention_heads": 2, "decoder_attention_heads": 4}, "attention_heads"),
        ({"encoder_ffn_dim": 32, "decoder_ffn_dim": 64}, "ffn_dim"),
        ({"encoder_layerdrop": 0.1}, "LayerDrop"),
    ],
)
def test_unsupported_marian_settings_raise(overrides, message):
    base = dict(
        vocab_size=40,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=24,
        decoder_ffn_dim=24,
        pad_token_id=39,
        decoder_start_token_id=39,
    )
    marian = MarianMTModel(MarianConfig(**{**base, **overrides}))
    with pytest.raises(ValueError, match=message):
        from_marian(marian)


def test_only_marian_models_convert():
    with pytest.raises(TypeError, match="MarianMTModel"):
        from_marian(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_to_marian_computes_the_same_function(layout):
    """The reverse conversion, for comparisons on the same weights (vanilla-bench): the paper's interleaved
    sinusoids become Marian's layout by permuting the residual stream's coordinates."""
    from helpers import padded_batch, tiny_model

    from modeling_vanilla import to_marian

    ours = tiny_model(sinusoidal_layout=layout, final_logits_bias=True)
    with torch.no_grad():
        ours.final_logits_bias.normal_()
        ours.model.shared.weight.mul_(4.0)
    marian = to_marian(ours)
    assert isinstance(marian, MarianMTModel)
    ids, mask = padded_batch()
    expected = ours(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
    got = marian(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    for beams in (1, 4):
        kwargs = dict(attention_mask=mask, num_beams=beams, max_new_tokens=12, length_penalty=0.6)
        assert torch.equal(marian.generate(ids, **kwargs), ours.generate(ids, **kwargs))
    with pytest.raises(ValueError, match="MarianMTModel has sinusoidal positions only"):
        to_marian(tiny_model(position_embedding_type="learned"))
