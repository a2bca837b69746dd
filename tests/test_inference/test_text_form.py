"""A model trained on prepared text (issue 112): its config says so (``text_form``), every engine of
vanilla-translate prepares raw input as training did (the same tokens, translations and n-best scores as input
prepared beforehand), --detokenize writes readable text, the scores are counted as the run record counts them; a
model of raw text is served as before, one saved before the field says once that its text is unknown, and the
model's own code, without the package, says once that it cannot prepare the text."""

import json
import logging
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from helpers import BLOCK_PACKAGE, saved_model_with_tokenizer
from training_helpers import ENGLISH, GERMAN

from inference import translate
from inference.engine import BatchTranslation, PreparedEngine, prepared
from modeling_vanilla import VanillaTransformerConfig
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding
from vanilla_tools.text_form import TextForm

FORM = TextForm.moses_lowercase("en", "de")
# the last line is why --prepared exists: Moses' English tokenizer splits "'s" again once it stands alone
LINES = [*ENGLISH, "", 'A man\'s dog runs through the "snow".']
UNKNOWN = "the text it was trained on is unknown"
NOTE = "which transformers cannot prepare"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def with_text_form(folder: Path, form: str | dict) -> Path:
    config = VanillaTransformerConfig.from_pretrained(folder)
    config.text_form = form
    config.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def moses_model(tokenizer, tmp_path_factory) -> Path:
    folder = saved_model_with_tokenizer(tmp_path_factory.mktemp("moses"), tokenizer, end_bias=8.0)
    return with_text_form(folder, FORM.as_config())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """The lines and their references, raw and prepared beforehand."""
    folder = tmp_path_factory.mktemp("inputs")
    files = {
        "raw.en": LINES,
        "prepared.en": [FORM.source(line) for line in LINES],
        "raw.de": [*GERMAN, "", "Der Hund eines Mannes läuft durch den Schnee."],
    }
    files["prepared.de"] = [FORM.target(line) for line in files["raw.de"]]
    for name, lines in files.items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {name: folder / name for name in files}


def translated(model: Path, source: Path, capsys, *flags: str) -> tuple[str, str]:
    """vanilla-translate's stdout and stderr."""
    capsys.readouterr()
    translate.run(["--model", str(model), str(source), *flags])
    out = capsys.readouterr()
    return out.out, out.err


def scores(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("BLEU = ", "lowercased, tokenized BLEU = "))]


def test_the_prepared_text_differs_from_the_raw_and_is_not_prepared_twice():
    assert all(FORM.source(line) != line for line in LINES if line)
    assert FORM.source(LINES[-1]) == 'a man \'s dog runs through the " snow . "'
    assert FORM.source(FORM.source(LINES[-1])) != FORM.source(LINES[-1])  # hence --prepared


def test_the_engine_is_given_the_prepared_text():
    given = []

    class Recording:
        decoding = Decoding()

        def __call__(self, sentences: list[str]) -> BatchTranslation:
            given.extend(sentences)
            return BatchTranslation(sentences, [False] * len(sentences), [1] * len(sentences), [1] * len(sentences))

    engine = prepared(Recording(), FORM)
    assert isinstance(engine, PreparedEngine) and engine.decoding is Recording.decoding
    assert engine(ENGLISH).texts == [FORM.source(line) for line in ENGLISH] == given
    assert isinstance(prepared(Recording(), TextForm()), Recording)  # raw text: the engine itself


ENGINES = [
    "generate",
    pytest.param("ctranslate2", marks=pytest.mark.slow),
    pytest.param("onnx", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_raw_and_prepared_input_translate_alike_on_every_engine(engine, moses_model, inputs, capsys, caplog):
    pytest.importorskip({"generate": "torch", "ctranslate2": "ctranslate2", "onnx": "onnxruntime"}[engine])
    flags = ["--engine", engine, "--num_beams", "3", "--nbest", "3"]
    raw, _ = translated(moses_model, inputs["raw.en"], capsys, *flags, "--references", str(inputs["raw.de"]))
    ready, _ = translated(moses_model, inputs["prepared.en"], capsys, *flags, "--prepared")
    assert raw == ready and len(raw.splitlines()) == 3 * 4 + 1  # the same hypotheses with the same scores
    again, _ = translated(moses_model, inputs["prepared.en"], capsys, *flags)  # prepared twice: "' s"
    assert again != raw
    assert not [record for record in caplog.records if NOTE in record.getMessage() or UNKNOWN in record.getMessage()]
    if engine == "ctranslate2":  # the export says it too, for its users without the model's folder
        assert json.loads((moses_model / "ctranslate2-float32" / "config.json").read_text())["text_form"] == (
            FORM.as_config()
        )


@pytest.mark.parametrize("engine", ENGINES[:2])
def test_raw_and_prepared_prefixes_and_scores_agree(engine, moses_model, tmp_path, capsys):
    """--prefix and --score take target text: raw, it is prepared as the model's output is, so raw and prepared
    files give the same continuations and the same log-probabilities."""
    pytest.importorskip({"generate": "torch", "ctranslate2": "ctranslate2"}[engine])
    sentences = [*ENGLISH, LINES[-1]]
    translations = [*GERMAN, "Der Hund eines Mannes läuft durch den Schnee."]
    files = {
        "raw.en": sentences,
        "prepared.en": [FORM.source(line) for line in sentences],
        "raw.de": translations,
        "prepared.de": [FORM.target(line) for line in translations],
        "raw.prefix": [" ".join(line.split()[:2]) for line in translations],
        "prepared.prefix": [FORM.target(" ".join(line.split()[:2])) for line in translations],
    }
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    for mode in ("--score", "--prefix"):
        flags = ["--engine", engine, *(["--num_beams", "1"] if mode == "--prefix" else [])]  # --score: no search
        kind = "de" if mode == "--score" else "prefix"
        raw, _ = translated(moses_model, tmp_path / "raw.en", capsys, *flags, mode, str(tmp_path / f"raw.{kind}"))
        ready, _ = translated(
            moses_model,
            tmp_path / "prepared.en",
            capsys,
            *flags,
            "--prepared",
            mode,
            str(tmp_path / f"prepared.{kind}"),
        )
        assert raw == ready and len(raw.splitlines()) == len(sentences), mode


def test_scores_count_the_models_text_as_its_record_does(moses_model, inputs, capsys):
    flags = ["--engine", "generate", "--num_beams", "2"]
    out, raw = translated(moses_model, inputs["raw.en"], capsys, *flags, "--references", str(inputs["raw.de"]))
    _, ready = translated(
        moses_model, inputs["prepared.en"], capsys, *flags, "--prepared", "--references", str(inputs["prepared.de"])
    )
    assert len(scores(raw)) == 2 and scores(raw) == scores(ready)
    assert scores(raw)[1].endswith("|pre:lc+moses-norm+moses-tok-de)")
    detokenized, scored = translated(
        moses_model, inputs["raw.en"], capsys, *flags, "--detokenize", "--references", str(inputs["raw.de"])
    )
    assert detokenized.splitlines() == [FORM.detokenize(line) for line in out.splitlines()]
    assert scores(scored) == scores(raw)  # the model's own text is scored


def test_detokenize_reads_as_text():
    assert FORM.detokenize('ein hund läuft durch den " schnee " .') == 'ein hund läuft durch den "schnee".'
    assert TextForm().detokenize("A dog .") == "A dog ."


def test_a_model_of_raw_text_is_served_as_before(tokenizer, inputs, tmp_path, capsys, caplog):
    folder = saved_model_with_tokenizer(tmp_path / "raw", tokenizer, end_bias=1.0)
    assert VanillaTransformerConfig.from_pretrained(folder).text_form == "raw"
    out, _ = translated(folder, inputs["raw.en"], capsys, "--engine", "generate")
    ready, _ = translated(folder, inputs["raw.en"], capsys, "--engine", "generate", "--prepared")
    assert out == ready  # nothing is prepared
    assert not [record for record in caplog.records if UNKNOWN in record.getMessage()]
    with pytest.raises(UsageError, match="--detokenize undoes Moses' tokenization, and this model's text is not"):
        translate.run(["--model", str(folder), str(inputs["raw.en"]), "--detokenize"])


def test_a_model_saved_before_the_field_says_once_that_its_text_is_unknown(inputs, tmp_path, capsys, caplog):
    with tarfile.open(FIXTURES / "checkpoint-2026-11-25.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / "checkpoint-2026-11-25"
    assert VanillaTransformerConfig.from_pretrained(folder).text_form is None
    with caplog.at_level(logging.WARNING):
        out, _ = translated(folder, inputs["raw.en"], capsys, "--engine", "generate", "--num_beams", "1")
    unknown = [record.getMessage() for record in caplog.records if UNKNOWN in record.getMessage()]
    assert len(unknown) == 1 and unknown[0].startswith(str(folder)), unknown
    assert len(out.splitlines()) == len(LINES)


def test_the_models_own_code_says_once_that_it_cannot_prepare_the_text(moses_model, tmp_path):
    """As a Hub user without the package: generate() and the pipeline warn once, and not where the caller says it
    gives prepared text."""
    script = BLOCK_PACKAGE + textwrap.dedent(f"""
        import sys
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
        model = AutoModelForSeq2SeqLM.from_pretrained({str(moses_model)!r}, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        tokenizer = AutoTokenizer.from_pretrained({str(moses_model)!r})
        batch = tokenizer(["a dog runs ."], return_tensors="pt")
        model.text_form_applied = True
        model.generate(**batch, num_beams=1)
        print("applied: done", file=sys.stderr, flush=True)
        model.text_form_applied = False
        model.generate(**batch, num_beams=1)
        model.generate(**batch, num_beams=1)
        pipe = pipeline("translation", model={str(moses_model)!r}, trust_remote_code=True)
        pipe("a dog runs .", num_beams=1)
    """)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    notes = [number for number, line in enumerate(lines) if NOTE in line]
    assert len(notes) == 1 and notes[0] > lines.index("applied: done"), done.stderr[-3000:]
    assert "lowercased, Moses punctuation-normalized, Moses-tokenized text (en -> de, escape=False" in lines[notes[0]]


def test_the_model_card_says_how_to_translate_with_such_a_model(moses_model, tokenizer, tmp_path):
    from hub_card.card import build_model_card

    card = str(build_model_card(moses_model, "someone/moses-model"))
    assert "## The text it reads and writes" in card and "en → de: it reads" in card
    assert "vanilla-translate --model someone/moses-model --detokenize input.en" in card
    assert 'MosesTokenizer(lang="en")' in card
    raw = saved_model_with_tokenizer(tmp_path / "raw", tokenizer)
    assert "## The text it reads and writes" not in str(build_model_card(raw))
