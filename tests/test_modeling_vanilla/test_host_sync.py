"""Decoding waits on the device for nothing: no decoding step of generate() reads a tensor's value back to the host
(``.item()``, ``bool(tensor)``, ``int(tensor)``), which on an accelerator would stall every step. The inputs are
checked once, before decoding; the masks are built without asking whether they could be skipped.

Counted on the CPU with a dispatch mode that sees every aten operator: reading a value back is
``aten::_local_scalar_dense`` (what .item() and int() run) or ``aten::is_nonzero`` (what bool() runs). On a CPU
reading costs nothing and decoding skips the masks it does not need; the tests of the accelerator path make every
tensor count as one whose reads wait for a device (``reads_synchronise``).
"""

import pytest
import torch
from helpers import padded_batch, tiny_model
from torch.utils._python_dispatch import TorchDispatchMode

from modeling_vanilla import checks

READ_BACK = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default)


@pytest.fixture
def on_an_accelerator(monkeypatch):
    monkeypatch.setattr(checks, "reads_synchronise", lambda tensor: True)


class ReadBackCounter(TorchDispatchMode):
    """Counts value read-backs while ``counting`` is set (inside the model's calls)."""

    def __init__(self):
        super().__init__()
        self.counting, self.read_backs = False, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counting and func in READ_BACK:
            self.read_backs += 1
        return func(*args, **(kwargs or {}))


def counted(counter: ReadBackCounter, function):
    def call(*args, **kwargs):
        counter.counting = True
        try:
            return function(*args, **kwargs)
        finally:
            counter.counting = False

    return call


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_no_decoding_step_reads_a_value_back(num_beams, attn_implementation, on_an_accelerator):
    model = tiny_model(attn_implementation=attn_implementation)
    ids, mask = padded_batch()  # padded: the masks are real
    counter = ReadBackCounter()
    steps = []
    forward = model.forward

    def step(*args, **kwargs):
        steps.append(kwargs.get("decoder_input_ids").shape)
        return forward(*args, **kwargs)

    model.forward = counted(counter, step)  # every decoding step: decoder, output layer, loss-free
    encoder = model.model.encoder
    encoder.forward = counted(counter, encoder.forward)  # the encoder, run once by generate()
    with counter:
        out = model.generate(ids, attention_mask=mask, num_beams=num_beams, max_new_tokens=6, min_new_tokens=6)
    assert len(steps) == 6 and out.shape[1] == 7
    assert counter.read_backs == 0


def test_nor_with_decoder_inputs_and_their_mask(on_an_accelerator):
    model = tiny_model()
    ids, mask = padded_batch()
    start = torch.zeros(3, 2, dtype=torch.long)
    counter = ReadBackCounter()
    model.forward = counted(counter, model.forward)
    with counter:
        model.generate(
            ids,
            attention_mask=mask,
            decoder_input_ids=start,
            decoder_attention_mask=torch.ones_like(start),
            max_new_tokens=4,
            num_beams=2,
        )
    assert counter.read_backs == 0


def test_a_plain_forward_checks_values_and_the_counter_sees_it():
    """Outside generate() the model checks the ids' values (one read-back each check): the counter is not blind."""
    model = tiny_model()
    ids, mask = padded_batch()
    counter = ReadBackCounter()
    with counter:
        counted(counter, model)(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3])
    assert counter.read_backs >= 2  # input_ids and decoder_input_ids, at least


@pytest.mark.parametrize(("accelerator", "masks"), [(False, "none"), (True, "every one")])
def test_on_the_cpu_decoding_skips_the_masks_it_does_not_need(accelerator, masks, monkeypatch):
    """Unpadded decoding with SDPA: on the CPU no decoding step passes a mask (is_causal and nothing padded do the
    work); where reads would wait for a device, every step builds its masks. The same tokens either way."""
    model = tiny_model(attn_implementation="sdpa")
    ids = padded_batch()[0][:1]  # one sentence: nothing padded
    sdpa, passed = torch.nn.functional.scaled_dot_product_attention, []

    def recording(*args, attn_mask=None, **kwargs):
        passed.append(attn_mask is not None)
        return sdpa(*args, attn_mask=attn_mask, **kwargs)

    expected = model.generate(ids, num_beams=1, max_new_tokens=5, min_new_tokens=5)
    if accelerator:
        monkeypatch.setattr(checks, "reads_synchronise", lambda tensor: True)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    assert torch.equal(model.generate(ids, num_beams=1, max_new_tokens=5, min_new_tokens=5), expected)
    decoding = passed[len(passed) - 4 * model.config.decoder_layers :]  # the last 2 steps, 2 attentions a layer
    assert all(decoding) if masks == "every one" else not any(decoding)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_a_training_steps_forward_reads_no_value_back(attn_implementation, on_an_accelerator):
    """A training step on an accelerator: no value check and no mask skip reads back (each would be a
    synchronisation per step); the loss is the same as where they run."""
    model = tiny_model(attn_implementation=attn_implementation).train()
    ids, mask = padded_batch()
    labels = ids.masked_fill(mask == 0, -100)
    counter = ReadBackCounter()
    with counter:
        loss = counted(counter, model)(input_ids=ids, attention_mask=mask, labels=labels).loss
    assert counter.read_backs == 0
    loss.backward()
    checks.reads_synchronise = lambda tensor: False  # the CPU: values checked, masks skipped where they may be
    torch.testing.assert_close(model.eval()(input_ids=ids, attention_mask=mask, labels=labels).loss, loss)


def test_on_the_cpu_a_training_step_still_checks_values():
    model = tiny_model().train()
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match=r"`labels` holds token id 999, outside \[0, vocab_size=61\) or -100"):
        model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, 999))
