"""d_k independent of d_model / h (``head_dim``; Table 3, row B): W^Q, W^K, W^V map d_model to h d_k, W^O maps it
back; against the equations written out, in every attention implementation, with the cache, saved and loaded."""

import pytest
import torch
from helpers import padded_batch, tiny_config, tiny_model
from torch.nn import functional as F
from transformers import AutoModelForSeq2SeqLM

from modeling_vanilla import MultiHeadAttention, to_marian
from modeling_vanilla.convert_ctranslate2 import ctranslate2_spec


def test_projections_have_h_times_d_k_rows():
    attention = tiny_model(head_dim=24).model.encoder.layers[0].self_attn  # d_model 32, h 4
    assert attention.in_proj.weight.shape == (3 * 4 * 24, 32)
    assert attention.out_proj.weight.shape == (32, 96)
    assert tiny_config().attention_head_dim() == 8 and tiny_config(head_dim=24).attention_head_dim() == 24


def test_equals_the_equations_written_out():
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(12, 3, head_dim=5).eval()  # d_model 12 is no multiple of h d_k = 15
    x = torch.randn(2, 7, 12)
    w_q, w_k, w_v = attention.in_proj.weight.split(15)
    b_q, b_k, b_v = attention.in_proj.bias.split(15)
    heads = []
    for i in range(3):
        rows = slice(5 * i, 5 * (i + 1))
        q, k, v = (F.linear(x, w[rows], b[rows]) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
        heads.append(torch.softmax(q @ k.transpose(1, 2) / 5**0.5, dim=-1) @ v)
    expected = attention.out_proj(torch.cat(heads, dim=-1))
    with torch.no_grad():
        torch.testing.assert_close(attention(x)[0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("impl", ["sdpa", "flex_attention"])
def test_every_attention_implementation_equals_eager(impl):
    ids, mask = padded_batch()
    with torch.no_grad():
        expected = tiny_model(head_dim=24)(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
        got = tiny_model(head_dim=24, attn_implementation=impl)(
            input_ids=ids, attention_mask=mask, decoder_input_ids=ids
        ).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_generate_with_the_cache_equals_without(tmp_path):
    model = tiny_model(head_dim=6, d_model=30, num_attention_heads=4)  # h d_k = 24 < d_model = 30
    ids, mask = padded_batch()
    kwargs = dict(attention_mask=mask, num_beams=2, max_new_tokens=8)
    assert torch.equal(model.generate(ids, use_cache=True, **kwargs), model.generate(ids, use_cache=False, **kwargs))
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    assert loaded.config.head_dim == 6
    assert torch.equal(loaded.generate(ids, **kwargs), model.generate(ids, **kwargs))


def test_refused_where_it_cannot_run_and_a_bad_width_is_named():
    model = tiny_model(head_dim=24)
    with pytest.raises(ValueError, match=r"`head_dim` 24: MarianMTModel's heads are d_model / h = 8 wide"):
        to_marian(model)
    with pytest.raises(ValueError, match=r"`head_dim` must be a positive integer or None \(d_model / h\), got 0"):
        tiny_config(head_dim=0)
    with pytest.raises(ValueError, match=r"`d_model` \(30\) must be divisible by `num_attention_heads` \(4\), or set"):
        tiny_config(d_model=30)
    pytest.importorskip("ctranslate2")
    with pytest.raises(ValueError, match=r"`head_dim` 24: CTranslate2's heads are d_model / h = 8 wide"):
        ctranslate2_spec(model, tokenizer=None)
