"""Table 1, measured: self-attention costs O(n^2 d) per layer, restricted self-attention O(r n d). The encoder of
Table 1's setting scaled down (d_model 256, 3 layers, 4 heads, d_ff 1024) runs forward on one sequence of n tokens,
with full attention and with a window of r = 64, in each attention implementation.

    python -m benchmarks.restricted_attention --json results/benchmarks/restricted-attention.json \\
        --plot docs/restricted-attention.png

Each measurement runs in its own process (so its peak memory is its own): one warm-up forward, then the median of
``--repeats``. Reported: seconds per forward, peak RSS, and the memory the forward added (peak RSS less the RSS
before it); for each implementation the crossover, the smallest n at which the window is faster; and the machine's
fp32 matrix-product speed in the same run, since it varies several-fold from day to day. A measurement that fails or
runs past ``--timeout`` is recorded with its reason.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import torch

from benchmarks import write_record
from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq
from vanilla_tools.hardware import fp32_gflops
from vanilla_tools.provenance import provenance

LENGTHS = (256, 1024, 4096, 16384)
IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
WINDOW = 64
ENCODER = {"d_model": 256, "encoder_layers": 3, "decoder_layers": 1, "num_attention_heads": 4, "ffn_dim": 1024}


def encoder(n: int, window: int | None, implementation: str) -> torch.nn.Module:
    torch.manual_seed(0)
    config = VanillaTransformerConfig(
        vocab_size=1000,
        dropout=0.0,
        max_position_embeddings=n,
        attention_window=window,
        attn_implementation=implementation,
        **ENCODER,
    )
    return VanillaTransformerForSeq2Seq(config).get_encoder().eval()


def worker(n: int, window: int | None, implementation: str, repeats: int) -> dict:
    """One measurement, in this process: seconds per forward (median), peak RSS and what the forward added."""
    model = encoder(n, window, implementation)
    ids = torch.randint(3, 1000, (1, n), generator=torch.Generator().manual_seed(1))
    before = psutil.Process().memory_info().rss
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first is the warm-up (and flex attention's compilation)
            start = time.perf_counter()
            model(input_ids=ids)
            times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "seconds": round(statistics.median(times[1:]), 4),
        "first_seconds": round(times[0], 3),
        "peak_rss_mib": round(peak / 2**20, 1),
        "forward_mib": round(max(peak - before, 0) / 2**20, 1),
    }


def measure(n: int, window: int | None, implementation: str, repeats: int, timeout: int) -> dict:
    command = [
        sys.executable,
        "-m",
        "benchmarks.restricted_attention",
        "--worker",
        str(n),
        str(window or 0),
        implementation,
        "--repeats",
        str(repeats),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"ran past {timeout} s"}
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def by_setting(rows: list[dict]) -> dict[tuple, dict]:
    """The rows by their (n, implementation, window)."""
    return {(r["n"], r["implementation"], r["window"]): r for r in rows}


def crossover(rows: list[dict], implementation: str) -> int | None:
    """The smallest n at which the window is faster than full attention in ``implementation``."""
    found = by_setting(rows)
    for n in sorted({row["n"] for row in rows}):
        full, restricted = (found.get((n, implementation, window), {}).get("seconds") for window in (None, WINDOW))
        if full and restricted and restricted < full:
            return n
    return None


def seconds(value: float) -> str:
    return f"{value:.3f} s" if value < 1 else f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def table(record: dict) -> str:
    """The record as docs/performance.md shows it: seconds per forward for each n, full and windowed in each
    implementation, flex's ratio of the two, and the memory the forward added at the largest n."""
    window = record["window"]
    found = by_setting(record["rows"])
    columns = [(impl, w) for impl in IMPLEMENTATIONS for w in (None, window)]
    names = {"eager": "eager", "sdpa": "SDPA", "flex_attention": "flex"}
    header = [f"{names[impl]} {'full' if w is None else f'r={w}'}" for impl, w in columns]
    lines = [
        "| n | " + " | ".join(header) + f" | flex: r={window} / full |",
        "| ---: |" + " ---: |" * (len(header) + 1),
    ]
    lengths = sorted({r["n"] for r in record["rows"]})

    def cell(row: dict | None, key: str, shown) -> str:
        return shown(row[key]) if row and key in row else (row or {}).get("error", "not run")

    for n in lengths:
        flex = [found.get((n, "flex_attention", w), {}).get("seconds") for w in (None, window)]
        ratio = f"{flex[1] / flex[0]:.2f}" if all(flex) else ""
        cells = [cell(found.get((n, impl, w)), "seconds", seconds) for impl, w in columns]
        lines.append(f"| {n:,} | " + " | ".join(cells) + f" | {ratio} |")
    memory = [
        cell(found.get((lengths[-1], impl, w)), "forward_mib", lambda mib: f"{mib:,.0f} MiB") for impl, w in columns
    ]
    lines.append(f"| memory the forward added at {lengths[-1]:,} | " + " | ".join(memory) + " | |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Seconds and added memory against n, log-log, with the O(n^2) and O(n r) slopes drawn through the first
    full-attention and restricted points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, key, label in ((axes[0], "seconds", "seconds per forward"), (axes[1], "forward_mib", "MiB added")):
        for implementation in IMPLEMENTATIONS:
            for window, style in ((None, "-"), (WINDOW, "--")):
                points = [
                    (r["n"], r[key])
                    for r in rows
                    if r["implementation"] == implementation and r["window"] == window and r.get(key)
                ]
                if points:
                    name = f"{implementation}, {'full' if window is None else f'r = {window}'}"
                    axis.plot(*zip(*points, strict=True), style, marker="o", label=name)
        lengths = sorted({r["n"] for r in rows})
        for window, slope, name in ((None, 2, "O(n²)"), (WINDOW, 1, "O(n·r)")):
            anchor = next((r[key] for r in rows if r["window"] == window and r.get(key) and r["n"] == lengths[0]), None)
            if anchor:
                axis.plot(lengths, [anchor * (n / lengths[0]) ** slope for n in lengths], ":", color="grey")
                axis.annotate(name, (lengths[-1], anchor * (lengths[-1] / lengths[0]) ** slope), color="grey")
        axis.set(xscale="log", yscale="log", xlabel="n (tokens)", ylabel=label)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.suptitle(f"Encoder (d_model 256, 3 layers, 4 heads): full vs restricted (r = {WINDOW}) self-attention")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--implementations", nargs="+", choices=IMPLEMENTATIONS, default=list(IMPLEMENTATIONS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=600, help="seconds one measurement may take")
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("--plot", help="draw time and memory against n here (PNG)")
    parser.add_argument("--worker", nargs=3, metavar=("N", "WINDOW", "IMPLEMENTATION"), help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    if args.worker:
        n, window, implementation = args.worker
        figures = worker(int(n), int(window) or None, implementation, args.repeats)
        print(json.dumps(figures))
        return figures
    record = {
        **provenance(),
        "encoder": ENCODER,
        "window": WINDOW,
        "matmul_gflops_fp32": fp32_gflops(),
        "threads": torch.get_num_threads(),
        "rows": [],
    }
    for implementation in args.implementations:
        for n in args.lengths:
            for window in (None, WINDOW):
                row = {
                    "n": n,
                    "implementation": implementation,
                    "window": window,
                    **measure(n, window, implementation, args.repeats, args.timeout),
                }
                print(json.dumps(row), flush=True)
                record["rows"].append(row)
    record["crossover"] = {impl: crossover(record["rows"], impl) for impl in args.implementations}
    record["matmul_gflops_fp32_after"] = fp32_gflops()
    write_record(record, args.json)
    print(table(record))
    if args.plot:
        plot(record["rows"], Path(args.plot))
    return record


if __name__ == "__main__":
    main()
