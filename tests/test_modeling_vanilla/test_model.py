"""The model's forward contract: §3.4/§3.5 embeddings, the loss, outputs, and clear errors for bad input."""

import math

import pytest
import torch
from helpers import VOCAB, padded_batch, tiny_config, tiny_model
from torch.nn import functional as F

from modeling_vanilla import VanillaTransformerModel, speedups
from modeling_vanilla.modeling_vanilla import SinusoidalPositionalEncoding, shift_tokens_right, sinusoid_table
from modeling_vanilla.speedups import residual_dropout


def test_sinusoid_table_follows_the_equations():
    table = sinusoid_table(50, 8, "interleaved")
    for pos in (0, 1, 7, 49):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-7)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-7)
    concat = sinusoid_table(50, 8, "concat")
    torch.testing.assert_close(concat[:, :4], table[:, 0::2])
    torch.testing.assert_close(concat[:, 4:], table[:, 1::2])


def test_positions_beyond_the_table_grow_it():
    """Sinusoids are not learned, so a sequence longer than max_position_embeddings works (§3.5)."""
    model = tiny_model()  # max_position_embeddings=16
    encoding = model.model.encoder.embed_positions
    assert isinstance(encoding, SinusoidalPositionalEncoding) and encoding.table.shape == (16, 32)
    ids = torch.randint(3, VOCAB, (2, 40))
    out = model(input_ids=ids, decoder_input_ids=ids[:, :30])
    assert out.logits.shape == (2, 30, VOCAB) and torch.isfinite(out.logits).all()
    assert encoding.table.shape[0] >= 40
    torch.testing.assert_close(encoding.table[:40], sinusoid_table(40, 32, "interleaved"))
    assert "table" not in "".join(model.state_dict())  # never saved


def test_learned_positions_have_a_hard_limit():
    model = tiny_model(position_embedding_type="learned")
    ids = torch.randint(3, VOCAB, (1, 16))
    assert model(input_ids=ids, decoder_input_ids=ids).logits.shape == (1, 16, VOCAB)
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model(input_ids=torch.randint(3, VOCAB, (1, 17)), decoder_input_ids=ids)


def test_embeddings_are_scaled_and_shared():
    model = tiny_model()
    shared = model.model.shared
    assert model.model.encoder.embed_tokens is shared and model.model.decoder.embed_tokens is shared
    assert model.lm_head.weight is shared.weight  # §3.4: one matrix, three uses
    ids = torch.randint(3, VOCAB, (1, 5))
    scaled, hidden = model.model.encoder.embed(ids, None)
    torch.testing.assert_close(scaled, shared(ids) * math.sqrt(32))
    torch.testing.assert_close(hidden, scaled + sinusoid_table(5, 32, "interleaved"))


def test_initialisation_is_tensor2tensor():
    torch.manual_seed(0)
    model = tiny_model(d_model=64, num_attention_heads=4, vocab_size=4000)
    std = model.model.shared.weight.std().item()
    assert std == pytest.approx(64**-0.5, rel=0.05)
    fc1 = model.model.encoder.layers[0].ffn.fc1
    bound = math.sqrt(6 / (64 + 48))  # Xavier-uniform
    assert fc1.weight.abs().max().item() <= bound and fc1.weight.abs().max().item() > 0.9 * bound
    assert fc1.bias.abs().max() == 0
    norm = model.model.encoder.layers[0].ffn_sublayer.norm
    assert torch.equal(norm.weight, torch.ones(64)) and torch.equal(norm.bias, torch.zeros(64))


def test_loss_is_label_smoothed_cross_entropy_ignoring_minus_100():
    model = tiny_model(label_smoothing=0.1)
    ids, mask = padded_batch()
    labels = torch.randint(3, VOCAB, (3, 6))
    labels[0, 4:] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    expected = F.cross_entropy(
        out.logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100, label_smoothing=0.1
    )
    torch.testing.assert_close(out.loss, expected)
    assert out.loss.item() > 0


def labelled_step(skip_logits: bool, autocast: bool = False, num_items_in_batch=None):
    """One training forward and backward of a seeded tiny model with a Marian-style logits bias and -100 labels;
    returns the output and every parameter's gradient."""
    model = tiny_model(label_smoothing=0.1, final_logits_bias=True).train()
    with torch.no_grad():
        model.final_logits_bias.normal_()
    ids, mask = padded_batch()
    labels = torch.randint(3, VOCAB, (3, 6), generator=torch.Generator().manual_seed(1))
    labels[0, 4:] = -100
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(
            input_ids=ids,
            attention_mask=mask,
            labels=labels,
            skip_logits=skip_logits,
            num_items_in_batch=num_items_in_batch,
        )
    out.loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("num_items_in_batch", [None, 37])
@pytest.mark.parametrize("autocast", [False, True])
def test_fused_loss_equals_logits_then_cross_entropy(monkeypatch, autocast, num_items_in_batch):
    """LinearCrossEntropy gives the loss and every gradient of lm_head + F.cross_entropy, in several row chunks."""
    monkeypatch.setattr(speedups, "LOSS_CHUNK_ROWS", 4)  # 18 rows: chunks of 4, 4, 4, 4 and 2
    expected, expected_grads = labelled_step(False, autocast, num_items_in_batch)
    got, grads = labelled_step(True, autocast, num_items_in_batch)
    assert got.logits is None and expected.logits.shape == (3, 6, VOCAB)
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-6, rtol=1e-6)
    assert grads.keys() == expected_grads.keys() and all(g is not None for g in grads.values())
    tolerance = 2e-2 if autocast else 1e-5  # bf16 per-chunk rounding of the shared-embedding gradient
    for name, grad in grads.items():
        scale = expected_grads[name].abs().max()
        torch.testing.assert_close(grad / scale, expected_grads[name] / scale, atol=tolerance, rtol=0, msg=name)


def test_training_forward_skips_logits_unless_asked():
    model = tiny_model(label_smoothing=0.1)
    ids, mask = padded_batch()
    labels = torch.randint(3, VOCAB, (3, 4))
    evaluated = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert evaluated.logits.shape == (3, 4, VOCAB)
    with torch.no_grad():  # loss only, as Trainer asks with prediction_loss_only
        fused = model(input_ids=ids, attention_mask=mask, labels=labels, skip_logits=True)
    assert fused.logits is None
    torch.testing.assert_close(fused.loss, evaluated.loss)
    model.train()
    assert model(input_ids=ids, attention_mask=mask, labels=labels).logits is None
    assert model(input_ids=ids, attention_mask=mask, labels=labels, skip_logits=False).logits.shape == (3, 4, VOCAB)
    assert model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits.shape == (3, 7, VOCAB)
    with pytest.raises(ValueError, match="skip_logits=True .* needs labels"):
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids, skip_logits=True)


def test_labels_are_shifted_into_decoder_inputs():
    labels = torch.tensor([[5, 6, 7, 2], [8, 2, -100, -100]])
    assert shift_tokens_right(labels, 0, 0).tolist() == [[0, 5, 6, 7], [0, 8, 2, 0]]
    model = tiny_model()
    ids, mask = padded_batch(batch=2)
    a = model(input_ids=ids, attention_mask=mask, labels=labels).logits
    b = model(input_ids=ids, attention_mask=mask, decoder_input_ids=shift_tokens_right(labels, 0, 0)).logits
    torch.testing.assert_close(a, b)


def test_post_ln_output_of_every_layer_is_normalised():
    model = tiny_model()
    ids, mask = padded_batch()
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3], output_hidden_states=True)
    assert len(out.encoder_hidden_states) == 3 and len(out.decoder_hidden_states) == 3
    for hidden in (*out.encoder_hidden_states[1:], *out.decoder_hidden_states[1:]):
        torch.testing.assert_close(hidden.mean(-1), torch.zeros(hidden.shape[:2]), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.encoder_last_hidden_state, out.encoder_hidden_states[-1])


def test_base_model_returns_seq2seq_model_output_and_tuples():
    torch.manual_seed(0)
    model = VanillaTransformerModel(tiny_config()).eval()
    ids, mask = padded_batch()
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4])
    assert type(out).__name__ == "Seq2SeqModelOutput"
    assert out.last_hidden_state.shape == (3, 4, 32) and out.encoder_last_hidden_state.shape == (3, 7, 32)
    as_tuple = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4], return_dict=False)
    assert isinstance(as_tuple, tuple)
    torch.testing.assert_close(as_tuple[0], out.last_hidden_state)


def test_return_dict_false_gives_loss_then_logits():
    model = tiny_model()
    ids, mask = padded_batch()
    labels = torch.randint(3, VOCAB, (3, 4))
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    loss, logits = model(input_ids=ids, attention_mask=mask, labels=labels, return_dict=False)[:2]
    torch.testing.assert_close(loss, out.loss)
    torch.testing.assert_close(logits, out.logits)


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_residual_dropout_keeps_1_minus_p_and_rescales(p):
    x = torch.randn(3, 100_001)  # odd size: the two-per-draw masks must cover every element
    torch.manual_seed(0)
    y = residual_dropout(x, p, training=True)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.005  # 300k Bernoulli draws: 4 standard deviations
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    torch.manual_seed(0)
    assert torch.equal(residual_dropout(x, p, training=True), y)  # the seed fixes the mask
    assert residual_dropout(x, p, training=False) is x and residual_dropout(x, 0.0, training=True) is x


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_compiled_residual_dropout_keeps_1_minus_p_and_rescales(p):
    """The form compiled code takes (integer masks, out-of-place random numbers), run eagerly: the same
    distribution."""
    x = torch.randn(3, 100_001)
    y = speedups.compiled_residual_dropout(x, p)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.005
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))


@pytest.mark.parametrize("dropout", [residual_dropout, lambda x, p, training: speedups.compiled_residual_dropout(x, p)])
def test_residual_dropout_gradient_is_the_mask_over_1_minus_p(dropout):
    # drawn in fp32, then rounded: torch 2.10's bf16 randn gives exact zeros (0.6% of draws), whose kept elements
    # would read as dropped in y
    torch.manual_seed(1)
    x = torch.randn(4, 64).to(torch.bfloat16).requires_grad_()
    assert torch.all(x != 0)
    y = dropout(x, 0.25, training=True)
    assert y.dtype == torch.bfloat16
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y != 0).to(x.dtype) / 0.75)


def test_relu_from_its_output_has_relus_gradient():
    """The ReLU compiled code uses (its backward reads the output, not a boolean mask), run eagerly."""
    x = torch.tensor([-2.0, -0.0, 0.0, 0.5, 3.0], requires_grad=True)
    y = speedups._ReLUFromOutput.apply(x)
    y.backward(torch.full_like(y, 2.0))
    assert torch.equal(y, torch.relu(x.detach())) and torch.equal(x.grad, torch.tensor([0.0, 0.0, 0.0, 2.0, 2.0]))


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gradient_checkpointing_gives_the_same_gradients(dropout):
    ids, mask = padded_batch()
    labels = torch.randint(3, VOCAB, (3, 5))
    grads = []
    for checkpointing in (False, True):
        model = tiny_model(dropout=dropout).train()
        torch.manual_seed(5)  # recomputation must replay the same dropout masks
        if checkpointing:
            model.gradient_checkpointing_enable()
            layers = [*model.model.encoder.layers, *model.model.decoder.layers]
            assert all(layer.gradient_checkpointing for layer in layers)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)


def test_compiled_forward_and_backward_equal_eager():
    """torch.compile(fullgraph=True) traces the whole training forward as one graph and gives eager's loss and
    gradients (aot_eager backend: it checks the graph and autograd; inductor only changes the kernels)."""
    torch._dynamo.reset()
    ids, mask = padded_batch()
    labels = torch.randint(3, VOCAB, (3, 5), generator=torch.Generator().manual_seed(2))
    results = []
    for compiled in (False, True):
        model = tiny_model(label_smoothing=0.1).train()
        forward = torch.compile(model, fullgraph=True, backend="aot_eager") if compiled else model
        loss = forward(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[0][1].keys() == results[1][1].keys()
    for name, grad in results[0][1].items():
        torch.testing.assert_close(results[1][1][name], grad, msg=name)


def test_no_split_modules_name_real_layers():
    model = tiny_model()
    names = {type(m).__name__ for m in model.modules()}
    assert set(model._no_split_modules) <= names


@pytest.mark.parametrize("activation", ["relu", "gelu", "swish"])
def test_activation_is_configurable(activation):
    model = tiny_model(activation_function=activation)
    ids, mask = padded_batch()
    assert torch.isfinite(model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits).all()


# ---- bad input ------------------------------------------------------------------------------------------------
def test_token_id_out_of_range_names_the_id_and_vocab_size():
    model = tiny_model()
    ids, mask = padded_batch()
    bad = ids.clone()
    bad[1, 2] = VOCAB + 5
    with pytest.raises(ValueError, match=rf"token id {VOCAB + 5}.*vocab_size={VOCAB}"):
        model(input_ids=bad, attention_mask=mask, decoder_input_ids=ids)
    bad[1, 2] = -3
    with pytest.raises(ValueError, match=r"token id -3"):
        model(input_ids=bad, attention_mask=mask, decoder_input_ids=ids)
    with pytest.raises(ValueError, match=r"decoder_input_ids.*token id 999"):
        model(input_ids=ids, decoder_input_ids=torch.full((3, 2), 999))


def test_attention_mask_shape_mismatch():
    model = tiny_model()
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match=r"attention_mask.*\(3, 6\).*\(3, 7\), the shape of the `input_ids`"):
        model(input_ids=ids, attention_mask=mask[:, :6], decoder_input_ids=ids)
    with pytest.raises(ValueError, match="decoder_attention_mask"):
        model(input_ids=ids, decoder_input_ids=ids[:, :4], decoder_attention_mask=mask)


def test_missing_decoder_inputs():
    model = tiny_model()
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match="decoder_input_ids.*labels"):
        model(input_ids=ids, attention_mask=mask)


def test_empty_batch():
    model = tiny_model()
    empty = torch.zeros(0, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"non-empty.*\(0, 5\)"):
        model(input_ids=empty, decoder_input_ids=empty)
    with pytest.raises(ValueError, match="non-empty"):
        model.generate(torch.zeros(0, 3, dtype=torch.long), max_new_tokens=2)


def test_compiled_sinusoids_reach_past_the_table():
    """§3.5's extrapolation holds in a compiled graph too: a buffer cannot grow inside one, so past the table the
    graph computes the sinusoids it needs, the same values eager grows the table to (before, inductor's kernel
    indexed out of bounds: a static cache's translation of a line longer than max_position_embeddings)."""
    encoding = SinusoidalPositionalEncoding(16, 8, "interleaved")
    positions = torch.arange(40)
    compiled = torch.compile(encoding, backend="eager", fullgraph=True)
    assert torch.equal(compiled(positions, 40), SinusoidalPositionalEncoding(64, 8, "interleaved")(positions, 40))
    assert encoding.table.shape[0] == 16  # (eager's growth is left to eager)
    assert torch.equal(encoding(positions, 40), compiled(positions, 40)) and encoding.table.shape[0] == 40
