"""The one place an engine is chosen and built: ``vanilla-translate``, ``vanilla-demo`` and the translation benchmark
all load a model with ``load`` and build its engine with ``build_engine`` (``create_engine`` beneath it).

``auto`` is CTranslate2 (float32 by default: the same translations as ``generate()``, 2-3x faster on a CPU:
docs/performance.md) wherever it can run the model on the device the model is on (a CUDA device too, where
CTranslate2's build sees it) in the precision asked for, else ``generate()``; the choice and its reason are logged.
``onnx`` is ONNX Runtime (exported on first use to MODEL_DIR/onnx; float32, on the CPU), chosen by name only.
Beyond translating, ``generate()`` and CTranslate2 (so ``auto`` too) force target prefixes, score given translations
and sample; ONNX Runtime's search does neither (``refuse_modes``).

No flag is dropped without a word: ``--dtype`` is ``generate()``'s precision and CTranslate2's compute type
(``ct2.compute_type``); where an engine cannot honour a flag (``--quantization`` beside an engine without
CTranslate2, ``--dtype`` or ``--device`` that ONNX Runtime's float32 CPU graphs cannot run) it is refused in one line
naming flag and engine (``refuse_flags``), and ``auto`` says what it leaves unused when it falls back to
``generate()``."""

import importlib.util
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from vanilla_tools.cli import UsageError, load_model, load_tokenizer
from vanilla_tools.decoding import Decoding
from vanilla_tools.device import place, resolve_device, resolve_dtype
from vanilla_tools.exports import cached_ctranslate2, ctranslate2_dir
from vanilla_tools.text_form import TextForm, served_text_form

from .ct2 import CTranslate2Engine, check_compute_type, compute_type, compute_type_refusal, device_refusal
from .engine import Engine, GenerateEngine, prepared
from .ensemble import DEFAULT_MODE, VanillaTransformerEnsemble, ensemble_engine, load_ensemble
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


def refuse_flags(kind: str, device: torch.device, dtype: str | None, quantization: str | None) -> None:
    """One line naming a flag that the engine ``kind`` would drop, and the engine: ``--quantization`` (CTranslate2's)
    beside an engine without CTranslate2; beside ONNX Runtime's float32 graphs on the CPU, a ``--dtype`` other than
    float32 or a ``--device`` other than the CPU. (``auto``'s fallback to generate() says what it leaves unused.)"""
    if quantization is not None and kind in ("generate", "onnx"):
        raise UsageError(
            f"--quantization {quantization} is CTranslate2's: the {kind} engine has none (use --engine ctranslate2 or "
            "auto, or drop --quantization)"
        )
    if kind != "onnx":
        return
    if dtype not in (None, "float32"):
        raise UsageError(f"--dtype {dtype}: the onnx engine runs float32 only (use --engine generate or ctranslate2)")
    if device.type != "cpu":
        raise UsageError(
            f"--device {device}: the onnx engine runs on the CPU only (use --engine generate or ctranslate2)"
        )


@dataclass(frozen=True)
class EngineOptions:
    """What a command asks of its engine, its flags as given: ``kind`` (--engine), ``device`` (--device), ``dtype``
    (--dtype; None: not given, float32), ``quantization`` (--quantization, CTranslate2's export; None: not given,
    float32), ``trust_remote_code``."""

    kind: str = "auto"
    device: str = "auto"
    dtype: str | None = None
    quantization: str | None = None
    trust_remote_code: bool = False

    def placement(self) -> tuple[torch.device, torch.dtype]:
        """Where the model goes and in what precision, refused in one line before it loads: the device
        (``resolve_device``; ``--device auto`` is the CPU for the onnx engine, whose graphs run there), a flag the
        engine would drop (``refuse_flags``), then the precision the device runs (``resolve_dtype``)."""
        device = resolve_device("cpu" if self.kind == "onnx" and self.device == "auto" else self.device)
        refuse_flags(self.kind, device, self.dtype, self.quantization)
        return device, resolve_dtype(self.dtype, device)


@dataclass
class LoadedModel:
    """A model placed for translating, with its tokenizer and the text form it reads (``served_text_form``);
    ``model_dir``: where it was loaded from (the engines' exports are kept there), None for a model in memory."""

    model_dir: str | Path | None
    model: torch.nn.Module
    tokenizer: object
    form: TextForm

    @classmethod
    def of(cls, model, tokenizer, model_dir: str | Path | None = None) -> "LoadedModel":
        return cls(model_dir, model, tokenizer, served_text_form(model))

    def input_form(self, input_prepared: bool = False) -> TextForm:
        """What text given to the model still needs: its text form, or nothing where it already is in it
        (--prepared)."""
        return TextForm() if input_prepared else self.form


def load(model_dir: str | Path, options: EngineOptions) -> LoadedModel:
    """The model and tokenizer saved at ``model_dir`` (a directory or a Hub id), placed as ``options`` say (their
    refusals come before anything loads)."""
    device, dtype = options.placement()
    tokenizer = load_tokenizer(str(model_dir), options.trust_remote_code)
    model = place(load_model(str(model_dir), options.trust_remote_code), device, dtype)
    return LoadedModel.of(model, tokenizer, model_dir)


def load_members(
    model_dirs: Sequence[str], options: EngineOptions, weights: Sequence[float] | None, mode: str | None
) -> LoadedModel:
    """The ensemble of the models saved at ``model_dirs`` (``load_ensemble``: combined as ``mode`` says, default
    ``DEFAULT_MODE``, with ``weights``), placed as ``options`` say; in memory, so no engine exports it."""
    device, dtype = options.placement()
    model, tokenizer = load_ensemble(
        model_dirs, weights, mode or DEFAULT_MODE, options.trust_remote_code, device, dtype
    )
    return LoadedModel.of(model, tokenizer)


def build_engine(
    loaded: LoadedModel, decoding: Decoding, options: EngineOptions, input_prepared: bool = False
) -> Engine:
    """The engine ``options.kind`` for ``loaded``, searching as ``decoding`` says (``create_engine``), fed text in the
    model's text form (``input_prepared``: the text given already is, as --prepared says)."""
    if isinstance(loaded.model, VanillaTransformerEnsemble):  # decodes on generate() only (ensemble.py says why)
        engine = ensemble_engine(options.kind, loaded.model, loaded.tokenizer, decoding)
    else:
        engine = create_engine(
            options.kind,
            loaded.model_dir,
            loaded.model,
            loaded.tokenizer,
            decoding,
            options.quantization,
            options.dtype,
        )
    return prepared(engine, loaded.input_form(input_prepared))


def ctranslate2_unavailable(model_dir: str | Path | None, model, decoding: Decoding, quantization: str) -> str | None:
    """Why CTranslate2 cannot translate with ``model`` (saved in ``model_dir``, on its device) as ``decoding`` says:
    None if it can. What the converter itself refuses (a setting CTranslate2 lacks) is found when exporting."""
    if importlib.util.find_spec("ctranslate2") is None:
        return "the ctranslate2 package is not installed"
    if device_refusal(model.device):
        return device_refusal(model.device)
    if model.config.model_type != "vanilla_transformer":
        return f"a {model.config.model_type} model"
    if model_dir is None or not Path(model_dir).is_dir():
        return "the model is not a local directory"
    export = ctranslate2_dir(model_dir, quantization)
    if not export.is_dir() and not os.access(export.parent, os.W_OK):
        return f"{export.parent} is read-only"
    return decoding.ctranslate2_refusal()


def fallback(model, tokenizer, decoding: Decoding, reason: str, quantization: str | None) -> GenerateEngine:
    """``auto``'s ``generate()``, logged with why CTranslate2 does not run, and a --quantization it leaves unused."""
    unused = f"; --quantization {quantization}, CTranslate2's, is unused" if quantization else ""
    logger.info("engine: generate (%s%s)", reason, unused)
    return GenerateEngine(model, tokenizer, decoding)


def create_engine(
    kind: str,
    model_dir: str | Path | None,
    model,
    tokenizer,
    decoding: Decoding,
    quantization: str | None = None,
    dtype: str | None = None,
) -> Engine:
    """The engine ``kind`` (one of ``ENGINES``) for ``model`` loaded from ``model_dir``, searching as ``decoding``
    says, on the device ``model`` is on, in the precision it is in (``dtype``: --dtype as given, None for the
    default). ``ctranslate2`` exports the model on first use (kept in MODEL_DIR/ctranslate2-QUANTIZATION, float32
    where ``quantization`` is None), computing in ``ct2.compute_type``, and raises naming what it cannot run; ``auto``
    falls back to ``generate()`` instead, saying why. Either refuses a ``quantization`` that CTranslate2 does not run
    on the device; a flag the engine would drop is refused (``refuse_flags``)."""
    if kind not in ENGINES:
        raise ValueError(f"engine {kind!r} is not one of {ENGINES}")
    device = model.device
    refuse_flags(kind, device, dtype, quantization)
    if kind == "onnx":
        export = cached_onnx(model_dir)
        logger.info("engine: onnx (%s)", export)
        return OnnxEngine(export, tokenizer, decoding, model.config)
    if kind == "generate":
        logger.info("engine: generate")
        return GenerateEngine(model, tokenizer, decoding)
    weights = quantization or "float32"
    if kind == "auto":
        reason = ctranslate2_unavailable(model_dir, model, decoding, weights)
        if reason:
            return fallback(model, tokenizer, decoding, reason, quantization)
    if kind == "ctranslate2" and device_refusal(device):
        raise UsageError(f"--engine ctranslate2 on {device}: {device_refusal(device)}")
    computes = compute_type(weights, dtype)
    refusal = compute_type_refusal(computes, device)
    if refusal and dtype is None:
        check_compute_type(weights, device)
    if refusal:
        dtype_refusal = f"--dtype {dtype} (compute type {computes}) does not run on {device}: {refusal}"
        if kind == "auto":
            return fallback(model, tokenizer, decoding, dtype_refusal, quantization)
        raise UsageError(f"{dtype_refusal}, with the ctranslate2 engine (use --engine generate or another --dtype)")
    try:
        export = cached_ctranslate2(model_dir, weights)
    except ValueError as error:  # a setting CTranslate2 does not have, named by the converter
        if kind != "auto":
            raise
        return fallback(model, tokenizer, decoding, f"CTranslate2 cannot run this model: {error}", quantization)
    computing = "" if computes == weights else f" computing in {computes}"
    logger.info("engine: ctranslate2 %s%s on %s (%s)", weights, computing, device, export)
    return CTranslate2Engine(export, tokenizer, decoding, device=device, compute_type=computes)
