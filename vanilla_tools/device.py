"""Where and in what precision a translating tool runs (``--device``, ``--dtype`` of ``vanilla-translate``,
``vanilla-bench`` and ``vanilla-demo``): the device a flag names, resolved once and refused in one line where the
machine lacks it, and the precision ``generate()`` runs in there."""

import argparse
import logging

import torch

from .cli import UsageError
from .hardware import device_type, native_bf16

logger = logging.getLogger(__name__)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# generate()'s precision where --dtype is not given. float32 on a GPU too: on an H200 bf16 changed 76 of 1,000
# test2016 translations of the demo model and cost 0.11 BLEU (issue 110), more than the translations may move
# (CTranslate2's float16 target: the same line on 98%, within 0.1 BLEU); float16 has not been measured on a GPU yet
# (benchmarks/gpu_translate.py measures it). docs/performance.md, "Translating on a GPU", gives the figures.
DEFAULT_DTYPE = "float32"


def device_name(text: str) -> str:
    """argparse type of ``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    kind, _, index = text.partition(":")
    if text in ("auto", "cpu", "cuda") or (kind == "cuda" and index.isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not auto, cpu, cuda or cuda:N")


def resolve_device(name: str) -> torch.device:
    """The device ``name`` (``device_name``'s) stands for here: ``auto`` is the first CUDA device where there is one,
    else the CPU; a CUDA device this machine lacks is refused."""
    if name == "auto":
        name = device_type()
        logger.info("device: %s (auto: %s)", name, "CUDA is present" if name == "cuda" else "no CUDA device here")
    device = torch.device(name)
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        raise UsageError(f"--device {name}: no CUDA device here (torch {torch.__version__} sees none)")
    device = torch.device("cuda", device.index or 0)
    if device.index >= torch.cuda.device_count():
        raise UsageError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s), from cuda:0")
    return device


def dtype_refusal(dtype: str, device: torch.device) -> str | None:
    """Why ``generate()`` cannot run in ``dtype`` on ``device`` (None if it can): a precision the device has no fast
    matrix products for, where it would run emulated, many times slower than float32."""
    if dtype == "float32":
        return None
    if device.type == "cuda":
        if dtype == "bfloat16" and not native_bf16(device):
            major, minor = torch.cuda.get_device_capability(device)
            return f"{device} (compute capability {major}.{minor}) has no bfloat16 (from 8.0): use float16"
        return None
    if dtype == "float16":
        return "the CPU has no float16 matrix products: float16 is a GPU precision"
    if not native_bf16(device):
        return "this CPU has neither AVX512-BF16 nor AMX (bfloat16 would be emulated, about 100x slower than float32)"
    return None


def resolve_dtype(dtype: str | None, device: torch.device) -> torch.dtype:
    """The precision ``generate()`` runs in on ``device``: ``dtype`` (a key of ``DTYPES``), else ``DEFAULT_DTYPE``;
    one the device cannot run is refused, naming both."""
    dtype = dtype or DEFAULT_DTYPE
    refusal = dtype_refusal(dtype, device)
    if refusal:
        raise UsageError(f"--dtype {dtype} on {device}: {refusal}")
    return DTYPES[dtype]


def resolve_placement(device: str, dtype: str | None) -> tuple[torch.device, torch.dtype]:
    """``--device`` and ``--dtype`` resolved together, before a model is loaded (a refusal costs no loading)."""
    resolved = resolve_device(device)
    return resolved, resolve_dtype(dtype, resolved)


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device`` and ``--dtype``, as every translating tool takes them."""
    parser.add_argument(
        "--device",
        type=device_name,
        default="auto",
        help="auto (default): the first CUDA device where there is one, else the CPU; cpu; cuda; cuda:N",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=None,
        help=f"the precision the engine computes in (default {DEFAULT_DTYPE}: docs/performance.md says why): "
        "generate()'s, CTranslate2's compute type (with --quantization int8: int8 weights, the rest in it; without "
        "--dtype: the --quantization), refused by the onnx engine (float32 only)",
    )


def place(model, device: torch.device, dtype: torch.dtype):
    """``model`` moved to ``device`` in ``dtype`` (weights and activations: generate() runs in it), in eval mode."""
    logger.info("generate() on %s in %s", device, str(dtype).removeprefix("torch."))
    return model.to(device=device, dtype=dtype).eval()
