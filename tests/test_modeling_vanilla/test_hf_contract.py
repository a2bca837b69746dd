"""The PreTrainedModel contract: Auto classes, save/load, remote code, tied weights, resizing."""

import copy
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import tomllib
import torch
from helpers import BLOCK_PACKAGE, VOCAB, padded_batch, tiny_model
from safetensors import safe_open
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq, VanillaTransformerModel
from modeling_vanilla.compat import CACHE_NAME, TESTED_RELEASES, note_untested_release


def test_auto_classes_know_the_model(tmp_path):
    config = AutoConfig.for_model("vanilla_transformer", d_model=32, num_attention_heads=4)
    assert isinstance(config, VanillaTransformerConfig)
    model = tiny_model()
    model.save_pretrained(tmp_path)
    assert isinstance(AutoModelForSeq2SeqLM.from_pretrained(tmp_path), VanillaTransformerForSeq2Seq)
    assert isinstance(AutoModel.from_pretrained(tmp_path), VanillaTransformerModel)


def test_save_and_load_give_the_same_logits(tmp_path):
    model = tiny_model(sinusoidal_layout="concat")
    ids, mask = padded_batch()
    expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checks.py",  # modeling_vanilla.py's relative imports travel with it
        "compat.py",
        "config.json",
        "configuration_vanilla.py",
        "generation_config.json",
        "model.safetensors",
        "modeling_vanilla.py",
        "pipeline_vanilla.py",  # the translation pipeline (config.json's custom_pipelines)
        "speedups.py",
    ]
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert loaded.config.sinusoidal_layout == "concat"
    torch.testing.assert_close(loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits, expected)


def test_tied_weights_are_stored_once_and_retied_on_load(tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        keys = set(f.keys())
    assert "model.shared.weight" in keys
    assert not keys & {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    assert not any("table" in k or "positions" in k for k in keys)  # sinusoids are recomputed, not stored
    loaded = VanillaTransformerForSeq2Seq.from_pretrained(tmp_path)
    with torch.no_grad():
        loaded.model.shared.weight[5].fill_(0.25)
    assert torch.all(loaded.lm_head.weight[5] == 0.25)
    assert torch.all(loaded.model.decoder.embed_tokens.weight[5] == 0.25)


def test_untied_output_layer_is_stored_separately(tmp_path):
    model = tiny_model(tie_word_embeddings=False)
    assert model.lm_head.weight.data_ptr() != model.model.shared.weight.data_ptr()
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForSeq2Seq.from_pretrained(tmp_path)
    torch.testing.assert_close(loaded.lm_head.weight, model.lm_head.weight)


def test_resize_token_embeddings_keeps_the_tie():
    model = tiny_model()
    old = model.model.shared.weight.detach().clone()
    model.resize_token_embeddings(VOCAB + 9)
    assert model.config.vocab_size == VOCAB + 9
    assert model.model.shared.weight.shape == (VOCAB + 9, 32)
    assert model.lm_head.weight is model.model.shared.weight
    assert model.model.encoder.embed_tokens is model.model.decoder.embed_tokens is model.model.shared
    torch.testing.assert_close(model.model.shared.weight[:VOCAB], old)
    ids = torch.tensor([[VOCAB + 8, 5, 6]])
    assert model(input_ids=ids, decoder_input_ids=ids).logits.shape == (1, 3, VOCAB + 9)


def test_remote_code_loads_without_the_package(tmp_path):
    """A fresh process in which `modeling_vanilla` cannot be imported loads the checkpoint with trust_remote_code."""
    model = tiny_model()
    ids, mask = padded_batch()
    expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    auto_map = json.loads((checkpoint / "config.json").read_text())["auto_map"]
    assert auto_map == {
        "AutoConfig": "configuration_vanilla.VanillaTransformerConfig",
        "AutoModel": "modeling_vanilla.VanillaTransformerModel",
        "AutoModelForSeq2SeqLM": "modeling_vanilla.VanillaTransformerForSeq2Seq",
    }
    torch.save({"ids": ids, "mask": mask}, tmp_path / "inputs.pt")
    script = BLOCK_PACKAGE + textwrap.dedent(
        f"""
        import torch
        from transformers import AutoModel, AutoModelForSeq2SeqLM

        try:
            import modeling_vanilla  # noqa: F401
            sys.exit("modeling_vanilla must not be importable here")
        except ModuleNotFoundError:
            pass
        inputs = torch.load({str(tmp_path / "inputs.pt")!r})
        model = AutoModelForSeq2SeqLM.from_pretrained({str(checkpoint)!r}, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        with torch.no_grad():
            ids, mask = inputs["ids"], inputs["mask"]
            logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits
        base = AutoModel.from_pretrained({str(checkpoint)!r}, trust_remote_code=True)
        assert type(base).__name__ == "VanillaTransformerModel"
        generated = model.generate(inputs["ids"], attention_mask=inputs["mask"], max_new_tokens=4)
        torch.save({{"logits": logits, "generated": generated}}, {str(tmp_path / "out.pt")!r})
        """
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(out["logits"], expected)
    assert torch.equal(out["generated"], model.generate(ids, attention_mask=mask, max_new_tokens=4))


def test_a_release_outside_the_tested_range_is_logged_once_not_refused(caplog):
    oldest, newest = TESTED_RELEASES
    with caplog.at_level(logging.WARNING):
        assert not any(note_untested_release(v) for v in (oldest, newest, "5.20.1", newest + ".post1"))
        assert not caplog.records
        assert note_untested_release("5.30.0.dev0")
    assert [r.getMessage() for r in caplog.records] == [
        f"the vanilla Transformer was tested on transformers {oldest} to {newest}, and 5.30.0.dev0 is installed: if "
        f"it misbehaves, `pip install transformers=={newest}` is the newest release tested"
    ]


def test_the_cache_under_either_name_gives_the_same_outputs():
    """forward takes `cache` (transformers >= 5.24) and `past_key_values` (its name before): the same outputs and
    cache; the old name warns only where the installed release has renamed it."""
    model = tiny_model()
    ids, mask = padded_batch()
    with torch.no_grad():  # a cache holding tensors that need gradients cannot be deep-copied
        first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :3], use_cache=True)
    outputs = {}
    for name in ("cache", "past_key_values"):
        step = dict(
            encoder_outputs=(first.encoder_last_hidden_state,),
            attention_mask=mask,
            use_cache=True,
            decoder_input_ids=ids[:, 3:4],
            **{name: copy.deepcopy(getattr(first, CACHE_NAME))},
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outputs[name] = model(**step)
        renamed = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
        assert len(renamed) == (name == "past_key_values" and CACHE_NAME == "cache")
    new, old = outputs["cache"], outputs["past_key_values"]
    torch.testing.assert_close(new.logits, old.logits, rtol=0, atol=0)
    assert getattr(new, CACHE_NAME).get_seq_length() == getattr(old, CACHE_NAME).get_seq_length() == 4


def test_the_floor_is_declared_once_for_pip_ci_and_the_log():
    """pyproject's requirement, the Makefile's `make compat` default (CI's floor run) and compat.TESTED_RELEASES name
    the same oldest release."""
    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    makefile = re.search(r"^TRANSFORMERS \?= (\S+)$", (root / "Makefile").read_text(), re.M).group(1)
    oldest = TESTED_RELEASES[0]
    assert f"transformers>={oldest.removesuffix('.0')}" in pyproject and makefile == oldest
