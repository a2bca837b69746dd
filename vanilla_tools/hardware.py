"""What this machine computes fast: whether bf16 autocast pays here, and the CPU features a record names."""

from pathlib import Path

import torch

# The CPU features that decide how fast a run is and how it computes: bf16 autocast pays only on a CPU with
# AVX512-BF16 or AMX (without them a bf16 matrix product runs at about 1 GFLOP/s here, against 110 in fp32), and a
# model name alone ("AMD EPYC") does not say which a CPU has.
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpuinfo(field: str) -> str | None:
    """The first ``field`` of Linux's /proc/cpuinfo ("model name", "flags"); None where it cannot be read."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(field)), None)


def cpu_features() -> list[str]:
    """Which of ``CPU_FEATURES`` the CPU has (the cpuinfo flags; [] where they cannot be read)."""
    present = set((cpuinfo("flags") or "").split())
    return [name for name in CPU_FEATURES if name in present]


def cpu_bf16() -> bool:
    """The CPU multiplies bf16 matrices in hardware (AVX512-BF16 or AMX)."""
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def bf16_supported() -> bool:
    """bf16 autocast is fast and safe here: CUDA with bf16, or a CPU with AVX512-BF16 / AMX."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return cpu_bf16()


def precision(bf16: bool | None) -> str:
    """How a run trains (``--bf16``), in the words of its records and model card."""
    return "bf16 autocast" if bf16 else "fp32"


def precision_line(bf16: bool, on_cpu: bool) -> str:
    """How a run trains and what the hardware says of it, for its log: vanilla-train's default ``--bf16`` picks bf16
    autocast where it runs fast (a GPU with bf16, a CPU with AVX512-BF16 or AMX), fp32 elsewhere."""
    if not on_cpu:
        return f"{precision(bf16)} on the GPU"
    has = "has AVX512-BF16 or AMX" if cpu_bf16() else "has neither AVX512-BF16 nor AMX (bf16 would be emulated)"
    return f"{precision(bf16)}: this CPU {has}"
