"""Decoding through generate() with transformers' EncoderDecoderCache (§6.1: beam 4, length penalty 0.6)."""

import pytest
import torch
from helpers import EOS, VOCAB, copy_task_batch, nbest, padded_batch, tiny_model
from transformers import DynamicCache, EncoderDecoderCache, StaticCache

from modeling_vanilla.compat import CACHE_NAME


def sharpened_model(seed: int = 0, **overrides):
    """A random model whose logits are peaked enough that beams and greedy paths differ and end with EOS."""
    model = tiny_model(seed, **overrides)
    with torch.no_grad():
        model.model.shared.weight.mul_(4.0)
    return model


# generate() with each cache against generate() without one: the same tokens, and the same scores at every step. The
# scores catch a cache that is dropped between steps (transformers 5.24 passes it as `cache=`): the tokens of a random
# model can still agree while the scores differ from the second step on.
DECODINGS = {
    "greedy": dict(num_beams=1, do_sample=False),
    "beam 4": dict(num_beams=4, do_sample=False, length_penalty=0.6),
    "sampling": dict(num_beams=1, do_sample=True, top_k=20),
}
CACHES = {
    "dynamic": ({}, {}),
    "static": ({}, dict(cache_implementation="static")),
    "sliding (restricted attention)": (dict(attention_window=2), {}),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("decoding", DECODINGS)
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_generate_with_a_cache_equals_generate_without(decoding, cache, impl):
    model_overrides, cache_kwargs = CACHES[cache]
    model = sharpened_model(attn_implementation=impl, **model_overrides)
    ids, mask = padded_batch()
    kwargs = dict(
        max_new_tokens=10, min_new_tokens=10, output_scores=True, return_dict_in_generate=True, **DECODINGS[decoding]
    )
    torch.manual_seed(0)
    cached = model.generate(ids, attention_mask=mask, use_cache=True, **cache_kwargs, **kwargs)
    torch.manual_seed(0)
    uncached = model.generate(ids, attention_mask=mask, use_cache=False, **kwargs)
    assert len(cached.scores) == len(uncached.scores) == 10
    for step, (with_cache, without) in enumerate(zip(cached.scores, uncached.scores, strict=True)):
        torch.testing.assert_close(with_cache, without, atol=1e-5, rtol=1e-5, msg=lambda m, s=step: f"step {s}: {m}")
    assert torch.equal(cached.sequences, uncached.sequences)
    if decoding == "beam 4":
        torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores, atol=1e-5, rtol=1e-5)


def stepwise_logits(step_fn, model, ids, mask, targets, cache=None):
    """Feed ``targets`` one token at a time through ``step_fn`` (the model, compiled or not). Returns the logits of
    every step, concatenated, and the cache (the one given, or the one the model made)."""
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    logits = []
    for t in range(targets.shape[1]):
        out = step_fn(
            encoder_outputs=encoder_outputs,
            attention_mask=mask,
            decoder_input_ids=targets[:, t : t + 1],
            cache=cache,
            use_cache=True,
        )
        cache = getattr(out, CACHE_NAME)
        logits.append(out.logits)
    return torch.cat(logits, dim=1), cache


def static_cache(model, source_length: int) -> EncoderDecoderCache:
    return EncoderDecoderCache(
        StaticCache(model.config, max_cache_len=16), StaticCache(model.config, max_cache_len=source_length)
    )


def test_compiled_static_cache_decode_step_equals_eager():
    """torch.compile(fullgraph=True): the one-token decode step with a StaticCache traces as one graph (no breaks)
    and gives the eager logits. (The aot_eager backend checks the graph; inductor only changes the kernels.)"""
    torch._dynamo.reset()
    model = tiny_model()
    ids, mask = padded_batch()
    targets = torch.randint(3, VOCAB, (ids.shape[0], 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        eager, _ = stepwise_logits(model, model, ids, mask, targets, static_cache(model, ids.shape[1]))
        compiled_step = torch.compile(model, fullgraph=True, backend="aot_eager")
        compiled, _ = stepwise_logits(compiled_step, model, ids, mask, targets, static_cache(model, ids.shape[1]))
        full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=targets).logits
    torch.testing.assert_close(eager, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)


def test_incremental_decoding_equals_a_full_forward():
    """Step-by-step logits with the cache equal the logits of one teacher-forced pass."""
    model = tiny_model()
    ids, mask = padded_batch()
    dec = torch.randint(3, VOCAB, (3, 6))
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    steps, cache = stepwise_logits(model, model, ids, mask, dec)
    assert isinstance(cache, EncoderDecoderCache)
    assert cache.self_attention_cache.get_seq_length() == 6  # grows one position a step
    assert cache.cross_attention_cache.get_seq_length() == 7  # the source, projected once
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_decoding_in_chunks_equals_a_full_forward(impl):
    """Several new tokens on top of a cache (queries offset from the keys) are masked causally too."""
    model = tiny_model(attn_implementation=impl)
    ids, mask = padded_batch()
    dec = torch.randint(3, VOCAB, (3, 7))
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, :3], use_cache=True)
        second = model(
            encoder_outputs=(first.encoder_last_hidden_state,),
            attention_mask=mask,
            decoder_input_ids=dec[:, 3:],
            cache=getattr(first, CACHE_NAME),
            use_cache=True,
        )
    torch.testing.assert_close(torch.cat([first.logits, second.logits], dim=1), full, atol=1e-5, rtol=1e-5)


def test_cross_attention_keys_are_projected_once(monkeypatch):
    model = tiny_model()
    ids, mask = padded_batch()
    cross = model.model.decoder.layers[0].cross_attn
    calls = []
    original = cross._project_key_value
    monkeypatch.setattr(cross, "_project_key_value", lambda k, v: calls.append(k.shape) or original(k, v))
    model.generate(ids, attention_mask=mask, num_beams=1, max_new_tokens=6, min_new_tokens=6)
    assert len(calls) == 1


def test_beam_search_reorders_only_the_self_attention_cache(monkeypatch):
    model = sharpened_model()
    ids, mask = padded_batch()
    kwargs = dict(num_beams=4, max_new_tokens=12, do_sample=False, length_penalty=0.6, return_dict_in_generate=True)
    reordered = []
    original = DynamicCache.reorder_cache
    monkeypatch.setattr(DynamicCache, "reorder_cache", lambda self, idx: reordered.append(self) or original(self, idx))
    out = model.generate(ids, attention_mask=mask, **kwargs)
    cache = getattr(out, CACHE_NAME)
    steps = out.sequences.shape[1] - 1
    assert steps > 3 and len(reordered) >= steps - 1
    assert all(c is cache.self_attention_cache for c in reordered)  # the cross-attention cache is never copied
    monkeypatch.delattr(type(model), "_reorder_cache")  # transformers' default: reorder both caches
    assert torch.equal(out.sequences, model.generate(ids, attention_mask=mask, **kwargs).sequences)


def test_saved_generation_config_is_the_papers_decoding(tmp_path):
    model = tiny_model()
    assert (model.generation_config.num_beams, model.generation_config.length_penalty) == (4, 0.6)
    model.save_pretrained(tmp_path)
    saved = (tmp_path / "generation_config.json").read_text()
    assert '"num_beams": 4' in saved and '"length_penalty": 0.6' in saved


def test_beam_search_options(copy_model):
    src, mask, labels = copy_task_batch(torch.Generator().manual_seed(5), batch=3)
    out = copy_model.generate(
        src,
        attention_mask=mask,
        num_beams=4,
        num_return_sequences=3,
        early_stopping=True,
        length_penalty=0.6,
        max_new_tokens=10,
        return_dict_in_generate=True,
        output_scores=True,
    )
    assert out.sequences.shape[0] == 9
    assert out.sequences_scores.shape == (9,)
    scores = out.sequences_scores.view(3, 3)
    assert torch.all(scores[:, :-1] >= scores[:, 1:])  # returned best first
    best = out.sequences.view(3, 3, -1)[:, 0]
    for row, target in zip(best.tolist(), labels.tolist(), strict=True):
        expected = [t for t in target if t != -100]
        assert row[1 : 1 + len(expected)] == expected  # the trained model copies, then stops with EOS


def test_greedy_and_beam_stop_at_eos(copy_model):
    src, mask, labels = copy_task_batch(torch.Generator().manual_seed(6), batch=8)
    for num_beams in (1, 4):
        out = copy_model.generate(src, attention_mask=mask, num_beams=num_beams, max_new_tokens=20)
        assert out.shape[1] < 21  # stopped early: every row reached EOS
        assert all(EOS in row for row in out.tolist())


def test_default_generate_uses_beam_4():
    model = sharpened_model()
    ids, mask = padded_batch()
    default = model.generate(ids, attention_mask=mask, max_new_tokens=10)
    explicit = model.generate(
        ids, attention_mask=mask, max_new_tokens=10, num_beams=4, length_penalty=0.6, early_stopping=True
    )
    assert torch.equal(default, explicit)


def test_sampling_is_seeded_and_respects_top_k():
    model = tiny_model()
    ids, mask = padded_batch()
    kwargs = dict(do_sample=True, num_beams=1, temperature=0.7, top_k=5, top_p=0.9, max_new_tokens=8)
    torch.manual_seed(3)
    first = model.generate(ids, attention_mask=mask, **kwargs)
    torch.manual_seed(3)
    second = model.generate(ids, attention_mask=mask, **kwargs)
    assert torch.equal(first, second)
    # top_k=1 sampling is greedy
    greedy = model.generate(ids, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=8)
    top1 = model.generate(ids, attention_mask=mask, num_beams=1, do_sample=True, top_k=1, max_new_tokens=8)
    assert torch.equal(greedy, top1)


def test_no_repeat_ngram_size_and_max_new_tokens():
    model = tiny_model()
    ids, mask = padded_batch()
    out = model.generate(
        ids,
        attention_mask=mask,
        num_beams=1,
        do_sample=False,
        max_new_tokens=15,
        min_new_tokens=15,
        no_repeat_ngram_size=2,
    )
    assert out.shape == (3, 16)  # decoder start + 15 new tokens
    for row in out.tolist():
        bigrams = list(zip(row[1:], row[2:], strict=False))
        assert len(bigrams) == len(set(bigrams))


# generate() as users call it (docs/ecosystem.md#generate-as-users-call-it): each of transformers' documented tools
# once.


def test_text_iterator_streamer_yields_the_generated_text(tokenizer):
    from threading import Thread

    from transformers import TextIteratorStreamer

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    model = sharpened_model(vocab_size=len(tokenizer), pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad)
    batch = tokenizer(["Two dogs run through the snow."], return_tensors="pt")
    kwargs = dict(num_beams=1, max_new_tokens=12, min_new_tokens=12)
    expected = tokenizer.decode(model.generate(**batch, **kwargs)[0], skip_special_tokens=True)
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=60)
    thread = Thread(target=model.generate, kwargs={**batch, **kwargs, "streamer": streamer})
    thread.start()
    pieces = list(streamer)
    thread.join()
    assert len(pieces) > 1 and "".join(pieces) == expected and expected.strip()


@pytest.mark.parametrize("num_beams", [1, 4])
def test_compute_transition_scores_rebuilds_the_sequence_scores(copy_model, num_beams):
    """transformers' documented recipe: the per-token scores summed (and, for beams, divided by length^alpha) are
    the search's own scores; greedy's are the log-probabilities of the tokens it chose."""
    src, mask, _ = copy_task_batch(torch.Generator().manual_seed(7), batch=4)
    out = nbest(copy_model, src, mask, num_beams, length_penalty=0.6, max_new_tokens=12)
    steps = copy_model.compute_transition_scores(
        out.sequences, out.scores, out.get("beam_indices"), normalize_logits=num_beams == 1
    )
    assert steps.shape == (4 * num_beams, out.sequences.shape[1] - 1)
    if num_beams == 1:
        log_probs = torch.stack(out.scores, dim=1).log_softmax(-1)  # (B, T - 1, V)
        chosen = log_probs.gather(-1, out.sequences[:, 1:, None]).squeeze(-1)
        torch.testing.assert_close(steps, chosen)
        return
    lengths = (steps < 0).sum(dim=1)  # the documented way: padding scores 0
    torch.testing.assert_close(steps.sum(dim=1) / lengths**0.6, out.sequences_scores)


def test_assisted_decoding_with_a_smaller_model_gives_the_same_tokens(copy_model):
    """Greedy assisted decoding (a 1-layer draft of the same vocabulary proposes tokens, the model verifies them)
    returns exactly the model's own greedy output."""
    src, mask, _ = copy_task_batch(torch.Generator().manual_seed(8), batch=3)
    draft = tiny_model(seed=1, encoder_layers=1, decoder_layers=1, d_model=16, ffn_dim=32, num_attention_heads=2)
    for row in range(3):
        ids, row_mask = src[row : row + 1], mask[row : row + 1]
        alone = copy_model.generate(ids, attention_mask=row_mask, num_beams=1, max_new_tokens=10)
        assisted = copy_model.generate(
            ids, attention_mask=row_mask, num_beams=1, max_new_tokens=10, assistant_model=draft
        )
        assert torch.equal(assisted, alone)


def test_bad_words_ids_and_a_custom_logits_processor(copy_model):
    from transformers import LogitsProcessor, LogitsProcessorList

    src, mask, _ = copy_task_batch(torch.Generator().manual_seed(9), batch=6)
    kwargs = dict(attention_mask=mask, num_beams=4, max_new_tokens=10)
    banned = src[0, 0].item()  # the copy model would write it
    assert banned in copy_model.generate(src, **kwargs)[0].tolist()
    assert banned not in copy_model.generate(src, bad_words_ids=[[banned]], **kwargs).flatten().tolist()

    class EvenTokensOnly(LogitsProcessor):
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            odd = torch.arange(scores.shape[-1], device=scores.device) % 2 == 1
            return scores.masked_fill(odd & (torch.arange(scores.shape[-1]) != EOS), float("-inf"))

    out = copy_model.generate(src, logits_processor=LogitsProcessorList([EvenTokensOnly()]), **kwargs)
    generated = set(out[:, 1:].flatten().tolist())
    assert generated and all(t % 2 == 0 or t == EOS for t in generated)
    assert any(t % 2 == 1 for t in src.flatten().tolist() if t > 2)  # the processor changed what it would copy
