"""Exports kept beside a model (MODEL_DIR/ctranslate2-QUANTIZATION, MODEL_DIR/onnx): each records which weights it
was made from, and is made again when they change (a model retrained in place). Here, below inference/ and
training/, because both make them: the engines when they serve, vanilla-train at the end of a run (--export_ct2)."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from modeling_vanilla.convert_ctranslate2 import export_ctranslate2

from .disk import write_guard

SOURCE_RECORD = "vanilla_source.json"  # in an export: which weights it was made from


def source_record(model_dir: Path, variant: str) -> dict:
    weights = Path(model_dir) / "model.safetensors"
    stat = weights.stat()
    return {
        "weights": str(weights.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "quantization": variant,
    }


def record_source(model_dir: str | Path, output_dir: Path, variant: str) -> Path:
    (output_dir / SOURCE_RECORD).write_text(json.dumps(source_record(Path(model_dir), variant), indent=1) + "\n")
    return output_dir


Export = Callable[[str | Path, Path], Path]  # (model directory, output folder) -> the folder


def cached_export(model_dir: str | Path, folder: Path, variant: str, export: Export) -> Path:
    """``folder``, made by ``export(model_dir, folder)`` now if it is missing or was made from other weights."""
    record = folder / SOURCE_RECORD
    if record.is_file() and json.loads(record.read_text()) == source_record(Path(model_dir), variant):
        return folder
    with export_write_guard(folder, variant):
        return record_source(model_dir, export(model_dir, folder), variant)


def export_write_guard(folder: Path, variant: str):
    """A failed write while exporting into ``folder`` (a full disk, a quota, ...): the partial export removed, one
    line naming the cause."""
    then = "run again (the model itself is untouched)"
    return write_guard(folder, f"the {variant} export", then, lambda: shutil.rmtree(folder, ignore_errors=True))


def ctranslate2_dir(model_dir: str | Path, quantization: str) -> Path:
    """Where ``cached_ctranslate2`` keeps a model's export: ``MODEL_DIR/ctranslate2-<quantization>``."""
    return Path(model_dir) / f"ctranslate2-{quantization}"


def cached_ctranslate2(model_dir: str | Path, quantization: str) -> Path:
    """``ctranslate2_dir``, exported now if it is missing or was made from other weights."""

    def make(source: str | Path, folder: Path) -> Path:
        return export_ctranslate2(source, folder, quantization, force=True)

    return cached_export(model_dir, ctranslate2_dir(model_dir, quantization), quantization, make)
