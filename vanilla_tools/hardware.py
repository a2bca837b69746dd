"""What this machine computes fast: whether bf16 autocast pays here, the CPU features a record names, and its speed
now (the matrix-product peak a record and a benchmark give)."""

import statistics
import time
from collections.abc import Callable
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


def device_type(use_cpu: bool = False, cuda: bool | None = None) -> str:
    """The one rule for the device a run trains or a tool translates on where none is named: "cuda" (the first CUDA
    device) where there is one and ``use_cpu`` is off, else "cpu". ``cuda``: whether there is one (default: this
    machine; a record's machine, to say where a recorded run trained)."""
    cuda = torch.cuda.is_available() if cuda is None else cuda
    return "cuda" if cuda and not use_cpu else "cpu"


def native_bf16(device: torch.device) -> bool:
    """The one bf16 rule: ``device`` multiplies bf16 matrices in hardware, so bf16 is fast there. A CUDA device from
    compute capability 8.0 (Ampere; ROCm's GPUs all do), a CPU with AVX512-BF16 or AMX. Not
    ``torch.cuda.is_bf16_supported()``: by default it also counts a GPU that merely emulates bf16 (a T4, a V100:
    it creates a bf16 tensor there), and it asks of the current device only, not of ``device``."""
    if device.type != "cuda":
        return cpu_bf16()
    return bool(torch.version.hip) or torch.cuda.get_device_capability(device)[0] >= 8


def bf16_supported() -> bool:
    """bf16 autocast is fast and safe here: ``native_bf16`` on the device a run takes by default (``device_type``)."""
    return native_bf16(torch.device(device_type()))


def precision(mixed_precision: str) -> str:
    """How a run trains, in the words of its records and model card: ``mixed_precision`` is accelerate's name of
    what autocast runs ("no", "bf16", "fp16"; training.arguments.autocast_precision decides it)."""
    return "fp32" if mixed_precision == "no" else f"{mixed_precision} autocast"


def precision_line(mixed_precision: str, on_cpu: bool) -> str:
    """How a run trains and what the hardware says of it, for its log: vanilla-train's default ``--bf16`` picks bf16
    autocast where it runs fast (a GPU with bf16, a CPU with AVX512-BF16 or AMX), fp32 elsewhere."""
    if not on_cpu:
        return f"{precision(mixed_precision)} on the GPU"
    has = "has AVX512-BF16 or AMX" if cpu_bf16() else "has neither AVX512-BF16 nor AMX (bf16 would be emulated)"
    return f"{precision(mixed_precision)}: this CPU {has}"


def interleaved(functions: dict[str, Callable[[], None]], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call of each function, calls alternating between them."""
    for f in functions.values():
        for _ in range(warmup):
            f()
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, f in functions.items():
            start = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def matmul_peak(dtype: torch.dtype, n: int = 2048, repeats: int = 5, device: str = "cpu") -> float:
    """FLOP/s of an n^3 matrix product on random data on ``device``, the median of ``repeats`` after 2 warm-ups
    (on a GPU, each product waited for)."""
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    wait = torch.cuda.synchronize if a.is_cuda else (lambda: None)

    def product():
        torch.mm(a, b)
        wait()

    seconds = interleaved({"mm": product}, repeats, warmup=2)["mm"]
    return 2 * n**3 / seconds


def fp32_gflops(device: str = "cpu") -> float:
    """The machine's fp32 speed now, as records give it: GFLOP/s of a 1024^3 matrix product on ``device`` (median
    of 10). The same CPU type measures 57 to 332 on different days, so a time-bounded run's steps depend on it."""
    return round(matmul_peak(torch.float32, n=1024, repeats=10, device=device) / 1e9, 1)
