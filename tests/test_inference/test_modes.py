"""vanilla-translate's modes beside translation on test2016's lines: --prefix (generate() and CTranslate2 continue
each line's prefix to the same tokens), --score (each engine's log-probabilities are the model's own loss and
CTranslate2's score_batch) and --sample (a seed draws the same samples again)."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import saved_model_with_tokenizer

from inference.engine import GenerateEngine
from inference.modes import score_lines
from inference.translate import translate_stream
from modeling_vanilla import VanillaTransformerForSeq2Seq
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.decoding import Decoding, Sampling

ctranslate2 = pytest.importorskip("ctranslate2", reason='CTranslate2 is an optional extra: pip install -e ".[ct2]"')

from inference.ct2 import CTranslate2Engine  # noqa: E402
from vanilla_tools.exports import cached_ctranslate2  # noqa: E402

LINES = 48  # of test2016 in the fast tests; the slow one takes all 1,000


def lines_of(lang: str, lines: int | None = None) -> list[str]:
    with gzip.open(BUNDLED_DIR / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()[:lines]


def prefixes(references: list[str]) -> list[str]:
    """The first two words of each reference, every third line none: prefixes of mixed lengths in every batch."""
    return ["" if i % 3 == 2 else " ".join(line.split()[:2]) for i, line in enumerate(references)]


@pytest.fixture(scope="module")
def model_dir(tokenizer, tmp_path_factory) -> Path:
    """A tiny random model with peaked logits and a bias towards </s> (outputs of many lengths), as trained models
    are, over the shared tokenizer; its CTranslate2 float32 export beside it."""
    folder = saved_model_with_tokenizer(tmp_path_factory.mktemp("modes") / "model", tokenizer, end_bias=4.0)
    cached_ctranslate2(folder, "float32")
    return folder


def engines(model_dir: Path, tokenizer, decoding: Decoding) -> tuple[GenerateEngine, CTranslate2Engine]:
    model = VanillaTransformerForSeq2Seq.from_pretrained(model_dir).eval()
    export = cached_ctranslate2(model_dir, "float32")
    return GenerateEngine(model, tokenizer, decoding), CTranslate2Engine(export, tokenizer, decoding)


def test_a_prefix_continues_to_the_tokens_ctranslate2_gives(model_dir, tokenizer):
    sources, given = lines_of("en", LINES), prefixes(lines_of("de", LINES))
    ours, theirs = engines(model_dir, tokenizer, Decoding(num_beams=1))
    expected = list(translate_stream(theirs, sources, batch_size=16, prefixes=given))
    assert list(translate_stream(ours, sources, batch_size=16, prefixes=given)) == expected
    # each begins with its prefix as the tokenizer writes it back (this small vocabulary has no ü: it drops it)
    written = tokenizer.batch_decode(tokenizer(given, add_special_tokens=False)["input_ids"], skip_special_tokens=True)
    assert all(text.startswith(prefix.strip()) for text, prefix in zip(expected, written, strict=True))
    assert expected != list(translate_stream(ours, sources, batch_size=16))  # the prefixes changed the outputs


def test_scores_are_the_models_loss_and_ctranslate2s(model_dir, tokenizer):
    sources, translations = lines_of("en", LINES), lines_of("de", LINES)
    ours, theirs = engines(model_dir, tokenizer, Decoding(num_beams=1))
    mine, other = ours.score(sources, translations), theirs.score(sources, translations)
    assert [len(s) for s in mine] == [len(ids) for ids in tokenizer(translations)["input_ids"]]  # </s> counted
    assert max(abs(a - b) for m, o in zip(mine, other, strict=True) for a, b in zip(m, o, strict=True)) < 1e-4
    model = ours.model
    assert model.config.label_smoothing == 0.0  # the loss is the unsmoothed negative log-likelihood
    for source, translation, log_probs in list(zip(sources, translations, mine, strict=True))[:8]:
        labels = tokenizer(translation, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            loss = model(**tokenizer(source, return_tensors="pt"), labels=labels).loss.item()
        assert -sum(log_probs) / len(log_probs) == pytest.approx(loss, abs=1e-4)
    written = [line.split("\t") for line in score_lines(theirs, zip(sources, translations, strict=True), 16)]
    assert [float(total) for total, _ in written] == pytest.approx([sum(s) for s in mine], abs=1e-4)
    assert [float(mean) for _, mean in written] == pytest.approx([sum(s) / len(s) for s in mine], abs=1e-4)


@pytest.mark.parametrize("engine", ["generate", "ctranslate2"])
def test_a_seed_draws_the_same_samples_again(engine, model_dir, tokenizer):
    sources = lines_of("en", 8)

    def draw(**sampling) -> list[list[str]]:
        decoding = Decoding(max_new_tokens=20, sampling=Sampling(num_samples=3, **sampling))
        chosen = engines(model_dir, tokenizer, decoding)[engine == "ctranslate2"]
        return list(translate_stream(chosen, sources, batch_size=4))

    first = draw(seed=1, top_k=30, temperature=0.8)
    assert draw(seed=1, top_k=30, temperature=0.8) == first
    assert draw(seed=2, top_k=30, temperature=0.8) != first
    assert all(len(samples) == 3 for samples in first) and any(len(set(samples)) > 1 for samples in first)
    greedy_search = engines(model_dir, tokenizer, Decoding(num_beams=1, max_new_tokens=20))[0]
    greedy = list(translate_stream(greedy_search, sources, batch_size=4))
    assert draw(seed=3, top_k=1) == [[text] * 3 for text in greedy]  # one token to draw from: greedy search


@pytest.mark.slow
def test_prefixes_on_the_whole_of_test2016_give_ctranslate2s_tokens(model_dir, tmp_path):
    """vanilla-translate --prefix, as a user runs it, greedy: generate() and CTranslate2 write the same lines."""
    source = BUNDLED_DIR / "test_2016_flickr.en.gz"
    prefix = tmp_path / "prefix.de"
    prefix.write_text("\n".join(prefixes(lines_of("de"))) + "\n", encoding="utf-8")
    outputs = {}
    for engine in ("generate", "ctranslate2"):
        command = [str(Path(sys.executable).parent / "vanilla-translate"), "--model", str(model_dir), str(source)]
        command += ["--engine", engine, "--num_beams", "1", "--prefix", str(prefix)]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=1200, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outputs[engine] = done.stdout.splitlines()
    assert len(outputs["generate"]) == 1000 and outputs["generate"] == outputs["ctranslate2"]
