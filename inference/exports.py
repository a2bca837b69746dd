"""Exports kept beside a model (MODEL_DIR/ctranslate2-QUANTIZATION, MODEL_DIR/onnx): each records which weights it
was made from, and is made again when they change (a model retrained in place)."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from vanilla_tools.disk import write_guard

SOURCE_RECORD = "vanilla_source.json"  # in an export: which weights it was made from


def source_record(model_dir: Path, variant: str) -> dict:
    weights = Path(model_dir) / "model.safetensors"
    stat = weights.stat()
    return {"weights": str(weights.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "quantization": variant}  # fmt: skip


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
