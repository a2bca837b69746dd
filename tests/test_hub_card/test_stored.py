"""hub_card.stored: a model's folder copied as it travels, its weights in float16, loaded back in float32 through
transformers' own from_pretrained (AutoModelForSeq2SeqLM, as vanilla-translate loads a model)."""

import pytest
import torch
from helpers import saved_model_with_tokenizer
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSeq2SeqLM

import modeling_vanilla  # noqa: F401  (registers the model with the Auto classes)
from hub_card.stored import store_float16
from vanilla_tools.cli import UsageError


def tensor_bytes(weights) -> int:
    """A safetensors file's bytes less its header (8 bytes of length, then the header)."""
    with open(weights, "rb") as f:
        return weights.stat().st_size - 8 - int.from_bytes(f.read(8), "little")


@pytest.fixture
def run_dir(tmp_path, tokenizer):
    """A finished run's folder: its model and tokenizer, beside what does not travel (a checkpoint, an export, an
    optimizer's state)."""
    folder = saved_model_with_tokenizer(tmp_path / "run", tokenizer, seed=3)
    (folder / "checkpoint-5").mkdir()
    (folder / "checkpoint-5" / "model.safetensors").write_bytes(b"older weights")
    (folder / "ctranslate2-int8").mkdir()
    (folder / "ctranslate2-int8" / "model.bin").write_bytes(b"export")
    (folder / "optimizer.pt").write_bytes(b"Adam")
    (folder / "training_recipe.json").write_text("{}")
    return folder


def test_the_stored_model_is_its_weights_rounded_to_float16_and_loads_back_in_float32(run_dir, tmp_path):
    stored = store_float16(run_dir, tmp_path / "kept")
    kept = tmp_path / "kept"
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        p.name for p in run_dir.iterdir() if p.is_file() and p.name != "optimizer.pt"
    )  # no checkpoint, export or optimizer state
    weights = load_file(kept / "model.safetensors")
    original = load_file(run_dir / "model.safetensors")
    assert weights.keys() == original.keys() and {t.dtype for t in weights.values()} == {torch.float16}
    assert 2 * tensor_bytes(kept / "model.safetensors") == tensor_bytes(run_dir / "model.safetensors")
    assert stored["bytes"] == sum(p.stat().st_size for p in kept.iterdir())

    model = AutoModelForSeq2SeqLM.from_pretrained(kept)
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # the config's dtype: it computes in float32
    loaded = model.state_dict()
    largest = 0.0
    for name, tensor in original.items():
        assert torch.equal(loaded[name], tensor.half().float()), name  # rounded once, to the nearest float16
        largest = max(largest, (tensor - tensor.half().float()).abs().max().item())
    assert stored["largest_rounding"] == largest > 0


def test_a_weight_beyond_float16s_range_is_refused_and_nothing_is_stored(run_dir, tmp_path):
    weights = load_file(run_dir / "model.safetensors")
    name = sorted(weights)[0]
    weights[name] = weights[name] * 0 + 1e6  # float16's largest finite value is 65,504
    save_file(weights, run_dir / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(UsageError, match=f"^.*model.safetensors: {name} hold values beyond float16's range"):
        store_float16(run_dir, tmp_path / "kept")
    assert not any(tmp_path.glob("kept*"))  # neither the model nor a part of it


def test_a_folder_without_a_model_is_refused_in_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(UsageError, match="^.*run holds no model to store: model.safetensors missing$"):
        store_float16(tmp_path / "run", tmp_path / "kept")
