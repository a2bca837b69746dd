"""A trained model's folder copied as it travels to the Hub, its weights stored in float16: half the bytes (a
multi30k-tiny model, 2.6M parameters: 10.5 MB of float32 weights, 5.2 MB stored), for the models that the
repository itself carries (the distillation's finished runs, which a later session on another machine goes on with;
a shipped model). The config keeps the model's dtype, so ``from_pretrained`` loads the stored weights back in float32
and the model computes as it did, on weights rounded to float16's 11 significant bits."""

import shutil
from pathlib import Path

import torch
from huggingface_hub.utils import filter_repo_objects
from safetensors.torch import load_file, save_file

from vanilla_tools.cli import UsageError

from .push import IGNORE, REQUIRED

WEIGHTS = "model.safetensors"


def model_files(model_dir: Path) -> list[str]:
    """The files of ``model_dir`` that travel with the model (``vanilla-push``'s: no checkpoints, optimizer states
    or exports), by their paths in the folder."""
    names = [path.relative_to(model_dir).as_posix() for path in sorted(model_dir.rglob("*")) if path.is_file()]
    return list(filter_repo_objects(names, ignore_patterns=IGNORE))


def float16_weights(tensors: dict[str, torch.Tensor], weights: Path) -> dict[str, torch.Tensor]:
    """The floating-point ``tensors`` of ``weights`` rounded to float16 (others as they are), refused in one line
    where a value is beyond float16's range (it would be stored as infinity)."""
    stored = {name: t.to(torch.float16) if t.is_floating_point() else t for name, t in tensors.items()}
    if overflow := [name for name, t in stored.items() if t.is_floating_point() and not torch.isfinite(t).all()]:
        raise UsageError(f"{weights}: {', '.join(overflow)} hold values beyond float16's range: not stored in float16")
    return stored


def store_float16(model_dir: Path, dest: Path) -> dict:
    """``model_dir``'s model files copied to ``dest`` (written aside, then renamed: ``dest`` is the model whole, or
    absent), its weights in float16; returns what was stored: the folder's bytes and the largest change rounding
    made to a weight."""
    if missing := [name for name in REQUIRED if not (model_dir / name).is_file()]:
        raise UsageError(f"{model_dir} holds no model to store: {', '.join(missing)} missing")
    original = load_file(model_dir / WEIGHTS)
    staged = dest.with_name(f"{dest.name}.partial")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    try:
        for name in model_files(model_dir):
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            if name != WEIGHTS:
                shutil.copy2(model_dir / name, staged / name)
        weights = float16_weights(original, model_dir / WEIGHTS)
        save_file(weights, staged / WEIGHTS, metadata={"format": "pt"})
        shutil.rmtree(dest, ignore_errors=True)
        staged.replace(dest)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    floats = [name for name, t in weights.items() if t.is_floating_point()]
    rounding = max((original[name] - weights[name].float()).abs().max().item() for name in floats)
    return {
        "weights": "float16, loaded in float32",
        "bytes": sum(path.stat().st_size for path in dest.rglob("*") if path.is_file()),
        "largest_rounding": rounding,
    }
