"""§3.2: scaled dot-product and multi-head attention, alone and inside the model."""

import logging
from types import SimpleNamespace

import pytest
import torch
from helpers import padded_batch, tiny_config, tiny_model
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from modeling_vanilla import MultiHeadAttention
from modeling_vanilla.modeling_vanilla import eager_attention_forward
from modeling_vanilla.speedups import sdpa_without_cudnn


def copy_from_torch(ours: MultiHeadAttention, reference: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        if ours.in_proj is not None:
            ours.in_proj.weight.copy_(reference.in_proj_weight)
        else:
            ours.q_proj.weight.copy_(reference.q_proj_weight)
            ours.k_proj.weight.copy_(reference.k_proj_weight)
            ours.v_proj.weight.copy_(reference.v_proj_weight)
            for proj, bias in zip(
                (ours.q_proj, ours.k_proj, ours.v_proj), reference.in_proj_bias.chunk(3), strict=True
            ):
                proj.bias.copy_(bias)
        if ours.in_proj is not None:
            ours.in_proj.bias.copy_(reference.in_proj_bias)
        ours.out_proj.load_state_dict(reference.out_proj.state_dict())


@pytest.mark.parametrize(("kdim", "vdim", "lq", "lk"), [(None, None, 5, 5), (None, None, 3, 8), (12, 20, 4, 9)])
def test_multi_head_attention_equals_torch(kdim, vdim, lq, lk):
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(16, 4, kdim=kdim, vdim=vdim, batch_first=True).eval()
    ours = MultiHeadAttention(16, 4, kdim=kdim, vdim=vdim).eval()
    copy_from_torch(ours, reference)
    query = torch.randn(2, lq, 16)
    key = torch.randn(2, lk, kdim or 16)
    value = torch.randn(2, lk, vdim or 16)
    padding = torch.zeros(2, lk, dtype=torch.bool)
    padding[1, -2:] = True  # nn.MultiheadAttention: True = ignore
    expected, expected_weights = reference(query, key, value, key_padding_mask=padding)
    allowed = (~padding)[:, None, None, :]  # ours: True = may attend, (B, 1, Lq, Lk) broadcast
    got, _ = ours(query, key, value, attention_mask=allowed)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    got_self, _ = ours(query) if kdim is None else (None, None)
    if kdim is None:
        expected_self, _ = reference(query, query, query)
        torch.testing.assert_close(got_self, expected_self, atol=1e-5, rtol=1e-5)


def test_eager_weights_are_the_softmax_of_scaled_scores():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    module = nn.Module().eval()
    out, weights = eager_attention_forward(module, q, k, v, None, scaling=0.5)
    expected = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)  # sqrt(d_k) = 2
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, (expected @ v).transpose(1, 2))
    assert torch.allclose(weights.sum(-1), torch.ones(1, 2, 3))


def test_decoder_self_attention_is_causal():
    """Changing a future target token must not change the logits of earlier positions (§3.2.3)."""
    model = tiny_model()
    ids, mask = padded_batch()
    dec = torch.randint(3, 61, (3, 6))
    changed = dec.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 58 + 3
    a = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    b = model(input_ids=ids, attention_mask=mask, decoder_input_ids=changed).logits
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_source_padding_is_masked():
    """Whatever sits under padding in the source does not change the output."""
    model = tiny_model()
    ids, mask = padded_batch()
    other = ids.masked_fill(mask == 0, 7)
    dec = torch.randint(3, 61, (3, 4))
    a = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    b = model(input_ids=other, attention_mask=mask, decoder_input_ids=dec).logits
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("grad", [False, True])
def test_eager_and_sdpa_agree(grad):
    """Both run torch's SDPA kernel in fp32, with or without gradients (bf16 CPU training: math_attention_is_faster)."""
    ids, mask = padded_batch()
    labels = torch.randint(3, 61, (3, 5))
    outputs = {}
    for impl in ("eager", "sdpa"):
        model = tiny_model(attn_implementation=impl)
        assert model.config._attn_implementation == impl
        with torch.set_grad_enabled(grad):
            outputs[impl] = model(input_ids=ids, attention_mask=mask, labels=labels)
    torch.testing.assert_close(outputs["eager"].logits, outputs["sdpa"].logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(outputs["eager"].loss, outputs["sdpa"].loss, atol=1e-5, rtol=1e-5)


def test_cpu_bf16_training_uses_the_math_path_for_short_sequences(monkeypatch):
    model = tiny_model(attn_implementation="sdpa").train()
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    ids, mask = padded_batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
    loss.backward()
    assert calls == []
    model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()  # fp32: SDPA
    assert len(calls) == 2 * 3  # 2 encoder + 2x2 decoder attention blocks


def test_output_attentions_with_eager():
    model = tiny_model(attn_implementation="eager")
    ids, mask = padded_batch()
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4], output_attentions=True)
    assert len(out.encoder_attentions) == 2 and out.encoder_attentions[0].shape == (3, 4, 7, 7)
    assert len(out.decoder_attentions) == 2 and out.decoder_attentions[0].shape == (3, 4, 4, 4)
    assert len(out.cross_attentions) == 2 and out.cross_attentions[0].shape == (3, 4, 4, 7)
    # padded source positions get zero weight, future target positions get zero weight
    assert out.cross_attentions[0][2, :, :, mask[2] == 0].abs().max() == 0
    assert torch.triu(out.decoder_attentions[1][0, 0], diagonal=1).abs().max() == 0
    torch.testing.assert_close(out.cross_attentions[1].sum(-1), torch.ones(3, 4, 4))


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_all_padding_source_row_stays_finite(impl):
    """A query whose keys are all padding (an empty source row) yields finite outputs, loss and gradients."""
    model = tiny_model(attn_implementation=impl).train()
    ids, mask = padded_batch()
    mask[1] = 0
    labels = torch.randint(3, 61, (3, 5))
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    assert torch.isfinite(out.loss)  # training computes the loss without logits (LinearCrossEntropy)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_mismatched_widths_need_heads_to_divide():
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(10, 3)
    assert tiny_config().num_attention_heads == 4


def test_flex_attention_plugs_in():
    """Any implementation registered with transformers' attention interface works (flex runs forward-only on CPU)."""
    ids, mask = padded_batch()
    with torch.no_grad():
        expected = tiny_model(attn_implementation="eager")(input_ids=ids, attention_mask=mask, decoder_input_ids=ids)
        got = tiny_model(attn_implementation="flex_attention")(
            input_ids=ids, attention_mask=mask, decoder_input_ids=ids
        )
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-5)


def test_sdpa_run_as_eager_is_logged(caplog):
    """bf16 CPU training swaps SDPA for the same attention as matmul + softmax (speedups.math_attention_is_faster):
    the user who asked for sdpa is told, once."""
    logging.Logger.warning_once.cache_clear()
    model = tiny_model(attn_implementation="sdpa").train()
    ids, mask = padded_batch()
    with caplog.at_level(logging.WARNING), torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        model(input_ids=ids, attention_mask=mask, labels=ids)
    swaps = [r.getMessage() for r in caplog.records if "runs as 'eager'" in r.getMessage()]
    expected = (
        "attn_implementation='sdpa' runs as 'eager' (the same attention, as matmul and softmax) while "
        "training in torch.bfloat16 on the CPU over short sequences, where it is faster (speedups.py)"
    )
    assert swaps == [expected]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        model(input_ids=ids, attention_mask=mask, labels=ids)  # fp32: SDPA runs as asked, nothing logged
    assert not caplog.records


def sdpa_flags() -> dict[str, bool]:
    cuda = torch.backends.cuda
    return {
        "cudnn": cuda.cudnn_sdp_enabled(),
        "flash": cuda.flash_sdp_enabled(),
        "efficient": cuda.mem_efficient_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
    }


def test_attention_on_cuda_leaves_cudnn_out_and_the_users_choices_in():
    """speedups.sdpa_without_cudnn: cuDNN's attention plans every new shape (82% of a GPU step, profiled on an
    H200); SDPA runs with the other kernels the user has enabled, and the flags are restored after."""
    on_cuda, on_cpu = SimpleNamespace(device=torch.device("cuda")), torch.zeros(1)
    before = sdpa_flags()
    assert all(before.values())  # PyTorch's defaults
    with sdpa_without_cudnn(on_cuda):
        assert sdpa_flags() == {"cudnn": False, "flash": True, "efficient": True, "math": True}
    assert sdpa_flags() == before
    with sdpa_without_cudnn(on_cpu):
        assert sdpa_flags() == before
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]):  # a user's choice: flash and efficient off
        with sdpa_without_cudnn(on_cuda):
            assert sdpa_flags() == {"cudnn": False, "flash": False, "efficient": False, "math": True}
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # cuDNN's alone: the user's to keep
        with sdpa_without_cudnn(on_cuda):
            assert sdpa_flags()["cudnn"]
    assert sdpa_flags() == before


def test_compiled_attention_leaves_the_flags_alone(monkeypatch):
    """dynamo would restore the flags it traced with, not the caller's: compiled, nothing is set per call."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    before = sdpa_flags()
    with sdpa_without_cudnn(SimpleNamespace(device=torch.device("cuda"))):
        assert sdpa_flags() == before


def test_every_attention_call_goes_through_the_kernel_choice(monkeypatch):
    from modeling_vanilla import modeling_vanilla

    seen = []

    def recorded(query):
        seen.append(tuple(query.shape))
        return sdpa_without_cudnn(query)

    monkeypatch.setattr(modeling_vanilla, "sdpa_without_cudnn", recorded)
    model = tiny_model()
    ids, mask = padded_batch()
    model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids)
    config = model.config
    heads, d_k = config.num_attention_heads, config.d_model // config.num_attention_heads
    layers = config.encoder_layers + 2 * config.decoder_layers  # self-attention, and the decoder's cross-attention
    assert len(seen) == layers and all(shape[1:2] + shape[3:] == (heads, d_k) for shape in seen)
