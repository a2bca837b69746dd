"""The one place an engine is chosen and built: ``vanilla-translate``, ``vanilla-demo``, training's CTranslate2 export
check and the translation benchmark all call ``create_engine``.

``auto`` is CTranslate2 float32 (the same translations as ``generate()``, 2-3x faster on a CPU: docs/performance.md)
wherever it can run the model on the device the model is on (a CUDA device too, where CTranslate2's build sees it),
else ``generate()``; the choice and its reason are logged. ``onnx`` is ONNX Runtime (exported on first use to
MODEL_DIR/onnx, on the CPU), chosen by name only. Beyond translating, ``generate()`` and CTranslate2 (so ``auto``
too) force target prefixes, score given translations and sample; ONNX Runtime's search does neither
(``refuse_modes``)."""

import importlib.util
import logging
import os
from pathlib import Path

from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding
from vanilla_tools.exports import cached_ctranslate2, ctranslate2_dir

from .ct2 import CTranslate2Engine, check_compute_type, device_refusal
from .engine import Engine, GenerateEngine
from .onnx_runtime import OnnxEngine, cached_onnx

logger = logging.getLogger(__name__)
ENGINES = ("auto", "generate", "ctranslate2", "onnx")
MODES = ("--prefix", "--score", "--sample")  # vanilla-translate's modes beside translation
CAN_DO = {"auto": MODES, "generate": MODES, "ctranslate2": MODES, "onnx": ()}


def refuse_modes(kind: str, modes: list[str]) -> None:
    """One line naming the engine ``kind`` and the ``modes`` (of ``MODES``) it cannot run, if any."""
    missing = [mode for mode in modes if mode not in CAN_DO[kind]]
    if missing:
        able = " or ".join(name for name, can in CAN_DO.items() if name != "auto" and set(missing) <= set(can))
        raise UsageError(f"the {kind} engine cannot {' or '.join(missing)}: use --engine {able}")


def ctranslate2_unavailable(model_dir: str | Path, model, decoding: Decoding, quantization: str) -> str | None:
    """Why CTranslate2 cannot translate with ``model`` (saved in ``model_dir``, on its device) as ``decoding`` says:
    None if it can. What the converter itself refuses (a setting CTranslate2 lacks) is found when exporting."""
    export = ctranslate2_dir(model_dir, quantization)
    folder = export.parent
    if importlib.util.find_spec("ctranslate2") is None:
        return "the ctranslate2 package is not installed"
    if device_refusal(model.device):
        return device_refusal(model.device)
    if model.config.model_type != "vanilla_transformer":
        return f"a {model.config.model_type} model"
    if not folder.is_dir():
        return "the model is not a local directory"
    if not export.is_dir() and not os.access(folder, os.W_OK):
        return f"{folder} is read-only"
    return decoding.ctranslate2_refusal()


def create_engine(
    kind: str, model_dir: str | Path, model, tokenizer, decoding: Decoding, quantization: str = "float32"
) -> Engine:
    """The engine ``kind`` (one of ``ENGINES``) for ``model`` loaded from ``model_dir``, searching as ``decoding``
    says, on the device ``model`` is on. ``ctranslate2`` exports the model on first use (kept in
    MODEL_DIR/ctranslate2-QUANTIZATION) and raises naming what it cannot run; ``auto`` falls back to ``generate()``
    instead, saying why. Either refuses a ``quantization`` that CTranslate2 does not run on the device."""
    if kind not in ENGINES:
        raise ValueError(f"engine {kind!r} is not one of {ENGINES}")
    if kind == "onnx":
        export = cached_onnx(model_dir)
        logger.info("engine: onnx (%s)", export)
        return OnnxEngine(export, tokenizer, decoding, model.config)
    if kind == "auto":
        reason = ctranslate2_unavailable(model_dir, model, decoding, quantization)
        if reason:
            logger.info("engine: generate (%s)", reason)
            return GenerateEngine(model, tokenizer, decoding)
    if kind in ("auto", "ctranslate2"):
        device = model.device
        if kind == "ctranslate2" and device_refusal(device):
            raise UsageError(f"--engine ctranslate2 on {device}: {device_refusal(device)}")
        check_compute_type(quantization, device)
        try:
            export = cached_ctranslate2(model_dir, quantization)
        except ValueError as error:  # a setting CTranslate2 does not have, named by the converter
            if kind != "auto":
                raise
            logger.info("engine: generate (CTranslate2 cannot run this model: %s)", error)
            return GenerateEngine(model, tokenizer, decoding)
        logger.info("engine: ctranslate2 %s on %s (%s)", quantization, device, export)
        return CTranslate2Engine(export, tokenizer, decoding, device=device, compute_type=quantization)
    logger.info("engine: generate")
    return GenerateEngine(model, tokenizer, decoding)
