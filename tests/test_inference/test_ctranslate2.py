"""CTranslate2 export: float32 CTranslate2 decodes the very tokens generate() does (greedy and beam 4, padded
batches, every layout the model has), int8 runs, the command-line paths work, and what cannot be exported says so."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import tiny_config
from training_helpers import ENGLISH

from modeling_vanilla import VanillaTransformerForSeq2Seq, from_marian
from modeling_vanilla.convert_ctranslate2 import export_ctranslate2

ctranslate2 = pytest.importorskip("ctranslate2", reason='CTranslate2 is an optional extra: pip install -e ".[ct2]"')

from inference.ct2 import CTranslate2Engine  # noqa: E402
from inference.engine import GenerateEngine  # noqa: E402
from vanilla_tools.decoding import Decoding  # noqa: E402
from vanilla_tools.exports import cached_ctranslate2  # noqa: E402

pytestmark = pytest.mark.slow

SOURCES = [*ENGLISH, "A dog.", "Two women read a book in the meadow.", "A man plays football. A woman reads."]


def translate(model: Path, source: Path, *flags: str) -> subprocess.CompletedProcess:
    """vanilla-translate --model ``model`` on the file ``source`` with ``flags``, offline; asserts it exited 0."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "vanilla-translate"), "--model", str(model), str(source), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def saved_model(folder: Path, tokenizer, seed: int = 0, **overrides) -> Path:
    """A tiny random model whose logits are sharpened (embeddings x4), so that greedy and beam paths differ and
    end, saved with the tokenizer."""
    torch.manual_seed(seed)
    model = VanillaTransformerForSeq2Seq(tiny_config(vocab_size=len(tokenizer), **overrides)).eval()
    with torch.no_grad():
        for embedding in {model.model.shared, model.model.decoder.embed_tokens}:
            embedding.weight.mul_(4.0)
        if model.final_logits_bias is not None:
            model.final_logits_bias.normal_()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def generated_ids(model, tokenizer, num_beams: int, alpha: float) -> list[list[int]]:
    batch = tokenizer(SOURCES, return_tensors="pt", padding=True)
    out = model.generate(**batch, num_beams=num_beams, length_penalty=alpha)
    eos = tokenizer.eos_token_id
    return [row[: row.index(eos) + 1] if eos in row else row for row in (r[1:] for r in out.tolist())]


def ct2_ids(ct2_dir: Path, tokenizer, num_beams: int, alpha: float) -> list[list[int]]:
    translator = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=1)
    ids = tokenizer(SOURCES)["input_ids"]
    results = translator.translate_batch(
        [tokenizer.convert_ids_to_tokens(s) for s in ids],
        beam_size=num_beams,
        length_penalty=alpha,
        patience=1,
        max_decoding_length=max(map(len, ids)) + 50,
        min_decoding_length=0,
        max_input_length=0,
        return_end_token=True,
    )
    return [tokenizer.convert_tokens_to_ids(r.hypotheses[0]) for r in results]


LAYOUTS = {
    "paper": {},
    "concat sinusoids": {"sinusoidal_layout": "concat"},
    "learned positions": {"position_embedding_type": "learned", "max_position_embeddings": 64},
    "gelu": {"activation_function": "gelu"},
    "swish": {"activation_function": "swish"},
    "separate decoder embedding": {"share_encoder_decoder_embeddings": False},
    "untied output layer": {"tie_word_embeddings": False},
    "logits bias": {"final_logits_bias": True},
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_float32_export_decodes_the_tokens_generate_does(layout, tokenizer, tmp_path):
    folder = saved_model(tmp_path / "model", tokenizer, **LAYOUTS[layout])
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder).eval()
    ct2 = export_ctranslate2(folder, tmp_path / "ct2", "float32")
    for num_beams, alpha in ((1, 1.0), (4, 0.6), (4, 2.0)):
        expected = generated_ids(model, tokenizer, num_beams, alpha)
        assert ct2_ids(ct2, tokenizer, num_beams, alpha) == expected, (num_beams, alpha)
        assert any(len(ids) > 3 for ids in expected)


def test_a_converted_marian_model_exports_too(tokenizer, tmp_path):
    """from_marian gives concat sinusoids and a final_logits_bias; its export decodes as its generate()."""
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(3)
    marian = MarianMTModel(
        MarianConfig(
            vocab_size=len(tokenizer),
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=48,
            decoder_ffn_dim=48,
            pad_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=0,
            forced_eos_token_id=None,
            max_position_embeddings=64,
        )
    )
    model = from_marian(marian)
    with torch.no_grad():
        model.model.shared.weight.mul_(4.0)
        model.final_logits_bias.normal_()
    model.generation_config.update(max_length=None, bad_words_ids=None, num_beams=4, length_penalty=0.6)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    ct2 = export_ctranslate2(tmp_path / "model", tmp_path / "ct2", "float32")
    expected = generated_ids(model.eval(), tokenizer, 4, 0.6)
    assert ct2_ids(ct2, tokenizer, 4, 0.6) == expected
    # the Marian model itself is refused: loaded as this package's, its weights would not match (nonsense exported)
    marian.save_pretrained(tmp_path / "marian")
    with pytest.raises(ValueError, match="marian holds a marian model, not this package's: a MarianMTModel converts"):
        export_ctranslate2(tmp_path / "marian", tmp_path / "ct2-marian", "float32")
    assert not (tmp_path / "ct2-marian").exists()


def test_the_engine_translates_as_generate_whatever_the_batch(tokenizer, tmp_path):
    folder = saved_model(tmp_path / "model", tokenizer)
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder).eval()
    engine = CTranslate2Engine(
        cached_ctranslate2(folder, "float32"), tokenizer, Decoding.resolve(model.generation_config)
    )
    ours = GenerateEngine(model, tokenizer)
    for batch in (SOURCES, SOURCES[:1], SOURCES[2:5]):
        expected, got = ours(batch), engine(batch)
        assert got.texts == expected.texts and got.unfinished == expected.unfinished
        assert got.source_lengths == expected.source_lengths and got.output_lengths == expected.output_lengths


def test_the_export_cache_follows_the_weights(tokenizer, tmp_path):
    folder = saved_model(tmp_path / "model", tokenizer)
    first = cached_ctranslate2(folder, "int8")
    stamp = (first / "model.bin").stat().st_mtime_ns
    assert cached_ctranslate2(folder, "int8") == first and (first / "model.bin").stat().st_mtime_ns == stamp
    saved_model(folder, tokenizer, seed=1)  # retrained in place
    assert cached_ctranslate2(folder, "int8") == first and (first / "model.bin").stat().st_mtime_ns != stamp


def test_translate_with_the_engine_equals_generate_on_a_trained_model(trained_run, tmp_path):
    """vanilla-translate --engine ctranslate2 (float32) on the model trained on real Multi30k sentences: the same
    lines as --engine generate, blank lines and order kept, and --references scored."""
    model_dir = tmp_path / "model"
    import shutil

    shutil.copytree(trained_run["output"], model_dir, ignore=shutil.ignore_patterns("checkpoint-*"))
    lines = [
        "Two young men are playing football.",
        "",
        "A woman in a red coat walks a dog across the street.",
        "A child.",
        "Two dogs run through the snow while a man watches them from the porch.",
    ]
    source = tmp_path / "in.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    references = tmp_path / "ref.de"
    references.write_text("\n".join(["Zwei Männer."] * len(lines)) + "\n", encoding="utf-8")
    outputs = {}
    for engine, extra in (("generate", []), ("ctranslate2", ["--quantization", "float32"])):
        result = translate(
            model_dir, source, "--engine", engine, "--references", str(references), "--batch_size", "2", *extra
        )
        assert "BLEU = " in result.stderr
        outputs[engine] = result.stdout.split("\n")
    assert outputs["ctranslate2"] == outputs["generate"]
    assert len(outputs["generate"]) == len(lines) + 1 and outputs["generate"][1] == ""
    assert (model_dir / "ctranslate2-float32" / "model.bin").is_file()


AUTO = {
    "the paper's model": ({}, "engine: ctranslate2"),
    "an activation CTranslate2 lacks": (
        {"activation_function": "tanh"},
        "engine: generate (CTranslate2 cannot run "
        "this model: `activation_function` 'tanh' has no CTranslate2 counterpart",
    ),
    "beam search without early stopping": (
        {"early_stopping": False},
        "engine: generate (early_stopping=False with "
        "4 beams: CTranslate2's beam search stops as early_stopping=True does",
    ),
}


@pytest.mark.parametrize(("overrides", "chosen"), AUTO.values(), ids=list(AUTO))
def test_translate_picks_ctranslate2_where_it_can_run_the_model(overrides, chosen, tokenizer, tmp_path):
    """vanilla-translate's default engine (auto): CTranslate2 float32 wherever it can run the model, else generate();
    the same lines either way, and the choice said."""
    early_stopping = overrides.pop("early_stopping", True)
    folder = saved_model(tmp_path / "model", tokenizer, **overrides)
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder)
    model.generation_config.early_stopping = early_stopping
    model.generation_config.save_pretrained(folder)
    source = tmp_path / "in.en"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    outputs, logs = {}, {}
    for engine in ("auto", "generate"):
        result = translate(folder, source, "--engine", engine)
        outputs[engine], logs[engine] = result.stdout, result.stderr
    assert chosen in logs["auto"]
    assert outputs["auto"] == outputs["generate"] and len(outputs["auto"].splitlines()) == len(SOURCES)


def test_export_command_writes_an_int8_model_that_translates(tokenizer, tmp_path):
    folder = saved_model(tmp_path / "model", tokenizer)
    command = [str(Path(sys.executable).parent / "vanilla-export-ct2"), str(folder), str(tmp_path / "int8")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"to {tmp_path / 'int8'}" in result.stdout
    assert sorted(p.name for p in (tmp_path / "int8").iterdir()) == [
        "config.json",
        "model.bin",
        "shared_vocabulary.json",
        "vanilla_source.json",
    ]
    translator = ctranslate2.Translator(str(tmp_path / "int8"), device="cpu")
    assert translator.translate_batch([["▁A", "▁dog", ".", "</s>"]])[0].hypotheses[0]
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "exists; pass force=True (--force) to replace it" in again.stderr


@pytest.mark.parametrize("where", ["the model's folder", "a folder above it"])
def test_export_refuses_a_folder_that_holds_the_model(where, tokenizer, tmp_path):
    """CTranslate2's force empties the output folder first: exporting into the model (or above it) with --force
    would delete the trained model before reading it."""
    folder = saved_model(tmp_path / "runs" / "model", tokenizer)
    output = folder if where == "the model's folder" else folder.parent
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(ValueError, match=f"the output folder {output} holds the model {folder}: export to another"):
        export_ctranslate2(folder, output, force=True)
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"activation_function": "tanh"}, ValueError, r"`activation_function` 'tanh' has no CTranslate2 counterpart"),
        ({"eos_token_id": [2, 3]}, ValueError, r"`eos_token_id` \[2, 3\]: CTranslate2 export supports one end token"),
    ],
)
def test_what_cannot_be_exported_is_named(overrides, error, message, tokenizer, tmp_path):
    folder = saved_model(tmp_path / "model", tokenizer, **overrides)
    with pytest.raises(error, match=message):
        export_ctranslate2(folder, tmp_path / "ct2")


def test_without_ctranslate2_the_extra_is_named(monkeypatch, tokenizer, tmp_path):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed
    with pytest.raises(ImportError, match=r'CTranslate2 is not installed: pip install -e "\.\[ct2\]"'):
        export_ctranslate2(saved_model(tmp_path / "model", tokenizer), tmp_path / "ct2")


@pytest.mark.parametrize("num_beams, nbest", [(4, 3), (1, 1)])
def test_nbest_lists_and_scores_agree_with_generate(tokenizer, tmp_path, num_beams, nbest):
    """The K best of the beam, best first, with the score the search ranked by (log-probability / length^alpha;
    greedy: alpha 1, the mean a token): generate()'s sequences_scores (or its transition scores) and CTranslate2's."""
    folder = saved_model(tmp_path / "model", tokenizer)
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder).eval()
    decoding = Decoding.resolve(model.generation_config, num_beams=num_beams, nbest=nbest)
    ours = GenerateEngine(model, tokenizer, decoding)(SOURCES)
    theirs = CTranslate2Engine(cached_ctranslate2(folder, "float32"), tokenizer, decoding)(SOURCES)
    assert [len(n) for n in ours.nbest] == [nbest] * len(SOURCES)
    assert [[text for text, _ in n] for n in ours.nbest] == [[text for text, _ in n] for n in theirs.nbest]
    assert ours.texts == [n[0][0] for n in ours.nbest] == theirs.texts
    for mine, other in zip(ours.nbest, theirs.nbest, strict=True):
        scores = [score for _, score in mine]
        assert scores == sorted(scores, reverse=True) and all(s < 0 for s in scores)
        assert scores == pytest.approx([score for _, score in other], abs=1e-4)
