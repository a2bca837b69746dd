"""Ensemble decoding (inference/ensemble.py): one model's ensemble is that model bit for bit, two copies of a model
decode as it does, one step of two models is the hand-computed mixture, beam search reorders every member's cache,
members that cannot decode together are refused naming the difference, and vanilla-translate decodes with several
--model end to end."""

import copy
import logging
import math
import re
import sys
from pathlib import Path

import huggingface_hub
import pytest
import torch
from helpers import padded_batch, saved_model_with_tokenizer, tiny_model

from inference.engine import GenerateEngine
from inference.ensemble import (
    EnsembleCache,
    VanillaTransformerEnsemble,
    check_tokenizers,
    combine,
    tokenizer_difference,
)
from inference.translate import main, translate_stream
from modeling_vanilla import VanillaTransformerForSeq2Seq
from modeling_vanilla.compat import CACHE_NAME
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding, Sampling
from vanilla_tools.text_form import TextForm

SEARCHES = {"greedy": 1, "beam": 4}
PREPARED = TextForm.moses_lowercase("en", "de")


def generated(model, beams: int, **kwargs):
    ids, mask = padded_batch(0)
    return model.generate(
        input_ids=ids,
        attention_mask=mask,
        num_beams=beams,
        num_return_sequences=beams,
        max_new_tokens=9,
        return_dict_in_generate=True,
        output_scores=True,
        **kwargs,
    )


def peaked(seed: int, **overrides):
    """A tiny model whose logits are peaked (embeddings x4), so its beams and its ensembles' choices differ."""
    model = tiny_model(seed, **overrides)
    with torch.no_grad():
        model.model.shared.weight.mul_(4.0)
    return model


@pytest.mark.parametrize("search", SEARCHES)
def test_an_ensemble_of_one_model_is_that_model_exactly(search):
    model = peaked(0)
    alone, ensembled = (
        generated(model, SEARCHES[search]),
        generated(VanillaTransformerEnsemble([model]), SEARCHES[search]),
    )
    assert torch.equal(alone.sequences, ensembled.sequences)
    assert all(torch.equal(a, b) for a, b in zip(alone.scores, ensembled.scores, strict=True))
    if search == "beam":
        assert torch.equal(alone.sequences_scores, ensembled.sequences_scores)


@pytest.mark.parametrize("mode", ["linear", "log_linear"])
@pytest.mark.parametrize("search", SEARCHES)
def test_two_copies_of_a_model_give_its_own_output(search, mode):
    model = peaked(0)
    alone = generated(model, SEARCHES[search])
    copies = generated(VanillaTransformerEnsemble([model, peaked(0)], weights=[1, 3], mode=mode), SEARCHES[search])
    assert torch.equal(alone.sequences, copies.sequences)
    if search == "beam":
        torch.testing.assert_close(copies.sequences_scores, alone.sequences_scores, rtol=0, atol=1e-5)


def test_the_two_combinations_by_hand():
    """p = (1/4, 3/4) and (3/4, 1/4), weights 3:1. Linear: 3/4 p + 1/4 q = (3/8, 5/8). Log-linear:
    p^(3/4) q^(1/4), renormalised: (1, sqrt 3) / (1 + sqrt 3)."""
    a, b = torch.tensor([0.0, math.log(3)]), torch.tensor([math.log(3), 0.0]) + 5.0  # logits: any shift is the same
    torch.testing.assert_close(combine([a, b], [0.75, 0.25], "linear").exp(), torch.tensor([3 / 8, 5 / 8]))
    root = math.sqrt(3)
    expected = torch.tensor([1 / (1 + root), root / (1 + root)])
    torch.testing.assert_close(combine([a, b], [0.75, 0.25], "log_linear").exp(), expected)


@pytest.mark.parametrize("mode", ["linear", "log_linear"])
def test_one_step_of_two_models_is_the_hand_computed_mixture(mode):
    first, second = peaked(0), peaked(1, d_model=48, ffn_dim=64, decoder_layers=1)  # two sizes: one vocabulary
    ids, mask = padded_batch(0)
    start = torch.zeros(ids.shape[0], 1, dtype=torch.long)  # the decoder start token
    p, q = (
        m(input_ids=ids, attention_mask=mask, decoder_input_ids=start).logits[:, -1].softmax(-1)
        for m in (first, second)
    )
    if mode == "linear":
        expected = (0.25 * p + 0.75 * q).log()
    else:
        mixed = p**0.25 * q**0.75
        expected = (mixed / mixed.sum(-1, keepdim=True)).log()
    ensemble = VanillaTransformerEnsemble([first, second], weights=[1, 3], mode=mode)
    step = ensemble(input_ids=ids, attention_mask=mask, decoder_input_ids=start).logits[:, -1]
    torch.testing.assert_close(step, expected, rtol=1e-5, atol=1e-6)
    # generate()'s first greedy step takes that distribution: its token and its score
    out = generated(ensemble, 1)
    assert torch.equal(out.sequences[:, 1], expected.argmax(-1))
    torch.testing.assert_close(out.scores[0].log_softmax(-1), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("search", SEARCHES)
def test_the_cache_of_every_member_decodes_as_recomputing_does(search):
    """Beam search reorders each member's cache: with the caches, the ensemble's beams and scores are those of
    recomputing every prefix without one."""
    ensemble = VanillaTransformerEnsemble([peaked(0), peaked(1), peaked(2)])
    cached, recomputed = generated(ensemble, SEARCHES[search]), generated(ensemble, SEARCHES[search], use_cache=False)
    assert torch.equal(cached.sequences, recomputed.sequences)
    if search == "beam":
        torch.testing.assert_close(cached.sequences_scores, recomputed.sequences_scores)
    assert len({tuple(row) for row in generated(peaked(0), 4).sequences.tolist()}) > 1  # the beams do differ


def test_forced_decoding_scores_are_the_combined_log_probabilities(tokenizer, tmp_path):
    first = saved_model_with_tokenizer(tmp_path / "a", tokenizer, seed=0)
    second = saved_model_with_tokenizer(tmp_path / "b", tokenizer, seed=1)
    ensemble = VanillaTransformerEnsemble.from_pretrained([first, second])
    sources, translations = ["Two men play football.", "A dog runs."], ["Zwei Männer spielen.", "Ein Hund läuft."]
    scores = GenerateEngine(ensemble, tokenizer, Decoding(num_beams=1)).score(sources, translations)
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    targets = tokenizer(translations, return_tensors="pt", padding=True)["input_ids"]
    labels = targets.masked_fill(targets == tokenizer.pad_token_id, -100)
    p, q = (m(**batch, labels=labels).logits.softmax(-1) for m in ensemble.members)
    expected = (0.5 * p + 0.5 * q).log().gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    for row, ids, mine in zip(expected, tokenizer(translations)["input_ids"], scores, strict=True):
        torch.testing.assert_close(torch.tensor(mine), row[: len(ids)], rtol=1e-5, atol=1e-5)
    alone = GenerateEngine(ensemble.members[0], tokenizer, Decoding(num_beams=1)).score(sources, translations)
    assert (
        GenerateEngine(VanillaTransformerEnsemble(ensemble.members[:1]), tokenizer).score(sources, translations)
        == alone
    )


def test_n_models_hold_n_times_one_models_weights_and_decoding_state():
    members = [peaked(seed) for seed in range(3)]
    ensemble = VanillaTransformerEnsemble(members)
    # its weights and buffers are its members' (no copy), N x one model's
    assert ensemble.get_memory_footprint() == sum(member.get_memory_footprint() for member in members)
    assert {p.data_ptr() for p in ensemble.parameters()} == {p.data_ptr() for m in members for p in m.parameters()}
    alone = getattr(generated(members[0], 4), CACHE_NAME)
    together = getattr(generated(VanillaTransformerEnsemble([members[0], peaked(0)]), 4), CACHE_NAME)
    assert isinstance(together, EnsembleCache) and len(together.members) == 2
    assert EnsembleCache([alone]).nbytes() > 0 and together.nbytes() == 2 * EnsembleCache([alone]).nbytes()


@pytest.mark.parametrize(
    ("second", "named"),
    [
        (dict(vocab_size=62), "vocabularies: vocab_size 62 vs 61"),
        (dict(eos_token_id=3), "special tokens: eos_token_id 3 vs 2"),
        (dict(text_form=PREPARED.as_config()), "text forms: lowercase True vs False"),
    ],
)
def test_members_that_cannot_decode_together_are_refused_naming_the_difference(second, named):
    expected = f"these models cannot decode as an ensemble: model 2 and model 1 differ in their {named}"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        VanillaTransformerEnsemble([tiny_model(0), tiny_model(1, **second)])


def test_a_different_generation_config_is_refused_naming_the_setting():
    other = tiny_model(1)
    other.generation_config.num_beams = 5
    with pytest.raises(ValueError, match=r"differ in their generation configs: num_beams 5 vs 4$"):
        VanillaTransformerEnsemble([tiny_model(0), other])


def test_different_tokenizers_are_refused_naming_the_difference(tokenizer):
    from tokenizers import normalizers
    from training_helpers import ENGLISH, GERMAN

    from training.data.tokenizer import train_tokenizer

    smaller = train_tokenizer((ENGLISH + GERMAN) * 20, vocab_size=100, min_frequency=1)
    lowercasing = copy.deepcopy(tokenizer)
    lowercasing.backend_tokenizer.normalizer = normalizers.Lowercase()
    assert tokenizer_difference(copy.deepcopy(tokenizer), tokenizer) is None
    assert tokenizer_difference(smaller, tokenizer) == f"vocabularies of {len(smaller)} vs {len(tokenizer)} tokens"
    assert tokenizer_difference(lowercasing, tokenizer) == "their normalizers"
    with pytest.raises(UsageError, match=r"^B and A cannot decode as an ensemble: their tokenizers differ in vocab"):
        check_tokenizers(["A", "B"], [tokenizer, smaller])


def translate(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """vanilla-translate's console entry run with ``args``: its exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "argv", ["vanilla-translate", *args])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    status = 0
    try:
        main()
    except SystemExit as exited:
        status = exited.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def saved(tokenizer, tmp_path_factory) -> dict[str, Path]:
    """Two models over one tokenizer (a, b), one over another tokenizer, one reading prepared text, and an input."""
    from training_helpers import ENGLISH, GERMAN

    from training.data.tokenizer import train_tokenizer

    folder = tmp_path_factory.mktemp("ensemble")
    other = train_tokenizer((ENGLISH + GERMAN) * 20, vocab_size=100, min_frequency=1)
    source = folder / "in.en"
    source.write_text("Two young men are playing football.\n\nA woman walks a dog.\n", encoding="utf-8")
    return {
        "a": saved_model_with_tokenizer(folder / "a", tokenizer, seed=0, end_bias=4.0),
        "b": saved_model_with_tokenizer(folder / "b", tokenizer, seed=1, end_bias=4.0),
        "other tokenizer": saved_model_with_tokenizer(folder / "c", other, seed=2),
        "prepared text": saved_model_with_tokenizer(folder / "d", tokenizer, seed=3, text_form=PREPARED.as_config()),
        "input": source,
    }


def test_vanilla_translate_decodes_with_two_models(saved, tokenizer, monkeypatch, capsys, caplog):
    a, b = str(saved["a"]), str(saved["b"])
    with caplog.at_level(logging.INFO, logger="inference.ensemble"):
        status, out, err = translate(
            monkeypatch, capsys, "--model", a, "--model", b, str(saved["input"]), "--nbest", "2"
        )
    assert status == 0, err
    assert (
        "engine: generate (an ensemble of 2 models decodes on generate() only; ctranslate2: CTranslate2 has no "
        in caplog.text
    )
    ensemble = VanillaTransformerEnsemble.from_pretrained([a, b])
    engine = GenerateEngine(ensemble, tokenizer, Decoding.resolve(ensemble.generation_config, nbest=2))
    nbest = engine(["Two young men are playing football.", "A woman walks a dog."]).nbest
    expected = [
        f"{n} ||| {text} ||| {score:.4f}" for n, pairs in zip((0, 2), nbest, strict=True) for text, score in pairs
    ]
    assert out.splitlines() == [*expected[:2], "1 |||  ||| 0.0000", *expected[2:]]
    alone = translate(monkeypatch, capsys, "--model", a, str(saved["input"]), "--nbest", "2", "--engine", "generate")
    assert alone[1] != out  # the second model changed the translations


SOURCES = ["Two young men are playing football.", "A woman walks a dog.", "Men play.", "A dog runs in the snow."]
PREFIXES = ["Zwei", "", "Männer spielen", ""]
DECODINGS = {  # 8 tokens at most: what is compared is the modes, not long outputs
    "greedy": Decoding(num_beams=1, max_new_tokens=8),
    "beam n-best": Decoding(num_beams=4, length_penalty=0.6, early_stopping=True, max_new_tokens=8, nbest=3),
    "samples": Decoding(sampling=Sampling(top_k=10, num_samples=2, seed=1), max_new_tokens=8),
}


@pytest.mark.parametrize("decoding", DECODINGS.values(), ids=DECODINGS)
def test_the_engine_of_a_one_model_ensemble_writes_the_models_output_in_every_mode(saved, tokenizer, decoding):
    """What vanilla-translate writes, prefixes or not: a one-model ensemble's is the model's (scores too)."""
    model = VanillaTransformerForSeq2Seq.from_pretrained(saved["a"]).eval()
    for prefixes in (None, PREFIXES):  # (new engines: each seeds its samples at its first batch)
        alone, one = (GenerateEngine(m, tokenizer, decoding) for m in (model, VanillaTransformerEnsemble([model])))
        expected = list(translate_stream(alone, SOURCES, batch_size=2, prefixes=prefixes))
        assert list(translate_stream(one, SOURCES, batch_size=2, prefixes=prefixes)) == expected
    two = GenerateEngine(VanillaTransformerEnsemble.from_pretrained([saved["a"], saved["b"]]), tokenizer, decoding)
    continued = list(translate_stream(two, SOURCES, batch_size=2, prefixes=PREFIXES))
    firsts = [output if isinstance(output, str) else output[0] for output in continued]  # the best, or a sample
    texts = [first if isinstance(first, str) else first[0] for first in firsts]  # (an n-best entry: text, score)
    assert all(text.startswith(prefix) for text, prefix in zip(texts, PREFIXES, strict=True))


REFUSED = [
    # (case, models, more arguments, the last line of stderr)
    (
        "ctranslate2",
        ["a", "b"],
        ["--engine", "ctranslate2"],
        "--engine ctranslate2 decodes one model, and 2 --model were given: CTranslate2 has no ensembles, by design "
        "(its issue #273); use --engine generate",
    ),
    (
        "onnx",
        ["a", "b", "a"],
        ["--engine", "onnx"],
        "--engine onnx decodes one model, and 3 --model were given: the ONNX export is one model's graph; use "
        "--engine generate",
    ),
    (
        "quantization",
        ["a", "b"],
        ["--quantization", "int8"],
        "--quantization int8 is CTranslate2's, which decodes one model: an ensemble decodes on generate() (its "
        "precision: --dtype)",
    ),
    (
        "weights of one model",
        ["a"],
        ["--ensemble_weights", "1"],
        "--ensemble_weights: options of an ensemble, which needs --model two or more times",
    ),
    (
        "a weight short",
        ["a", "b"],
        ["--ensemble_weights", "1"],
        "1 ensemble weights for 2 models: give one weight a model",
    ),
    (
        "a zero weight",
        ["a", "b"],
        ["--ensemble_weights", "1", "0"],
        "ensemble weights must be positive numbers, got [1.0, 0.0]",
    ),
    (
        "tokenizers",
        ["a", "other tokenizer"],
        [],
        "{other tokenizer} and {a} cannot decode as an ensemble: their tokenizers differ in vocabularies of 100 vs "
        "138 tokens",
    ),
    (
        "text forms",
        ["a", "prepared text"],
        [],
        "these models cannot decode as an ensemble: {prepared text} and {a} differ in their text forms: lowercase "
        "True vs False",
    ),
]


@pytest.mark.parametrize(("models", "more", "line"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_vanilla_translate_refuses_what_cannot_decode_together(saved, monkeypatch, capsys, models, more, line):
    models_argv = [argument for name in models for argument in ("--model", str(saved[name]))]
    status, _, err = translate(monkeypatch, capsys, *models_argv, str(saved["input"]), *more)
    assert status == 1
    for name, path in saved.items():  # {name}: that model's folder
        line = line.replace(f"{{{name}}}", str(path))
    assert err.strip().splitlines()[-1] == f"vanilla-translate: error: {line}"
