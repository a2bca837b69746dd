"""`python -m benchmarks.load_check`: what the NaN/infinity scan of ``from_pretrained`` costs on the paper's base model.

``VanillaTransformerPreTrainedModel.from_pretrained`` refuses weights that loaded NaN or infinite (a damaged file
would otherwise translate into garbage; ``checks.check_loaded_weights``). This saves the base model (vocabulary
37,000) once, then loads it with the scan and without it, interleaved, and times the scan alone: the scan as it runs
(each tensor's smallest and largest value, one read-back) and as it ran before (``isfinite(tensor).all()`` a tensor: a
boolean mask and a read-back each). Medians of ``--repeats``; the matrix-product speed of the machine beside them.

    python -m benchmarks.load_check --json results/benchmarks/load-check.json
"""

import argparse
import json
import statistics
import tempfile
import time

import torch

from benchmarks import write_record
from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq, checks
from modeling_vanilla import modeling_vanilla as modeling
from vanilla_tools.hardware import fp32_gflops
from vanilla_tools.provenance import provenance


def scan_per_tensor(model: torch.nn.Module, name: str) -> None:
    """The scan before: a boolean mask and a read-back for every tensor."""
    for weight, tensor in model.named_parameters():
        if not torch.isfinite(tensor).all():
            raise ValueError(f"{name}: weight `{weight}` holds NaN or infinite values")


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(config: VanillaTransformerConfig, repeats: int) -> dict:
    torch.manual_seed(0)
    model = VanillaTransformerForSeq2Seq(config)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        load = lambda: VanillaTransformerForSeq2Seq.from_pretrained(folder)  # noqa: E731
        load()  # warm: the file in the page cache, the code imported
        with_scan, without_scan = [], []
        for _ in range(repeats):  # interleaved, so a change of machine speed falls on both
            with_scan.append(median_seconds(load, 1))
            original, modeling.check_loaded_weights = modeling.check_loaded_weights, lambda *args: None
            try:
                without_scan.append(median_seconds(load, 1))
            finally:
                modeling.check_loaded_weights = original
        loaded = load()
    scan = median_seconds(lambda: checks.check_loaded_weights(loaded, "base"), repeats)
    before = median_seconds(lambda: scan_per_tensor(loaded, "base"), repeats)
    load_s = statistics.median(with_scan)
    return {
        "parameters": sum(p.numel() for p in loaded.parameters()),
        "threads": torch.get_num_threads(),
        "from_pretrained_s": round(load_s, 4),
        "from_pretrained_without_scan_s": round(statistics.median(without_scan), 4),
        "scan_s": round(scan, 4),
        "scan_share_of_load": round(scan / load_s, 4),
        "scan_per_tensor_before_s": round(before, 4),
        "repeats": repeats,
    }


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("--repeats", type=int, default=7, help="loads and scans timed, each (median)")
    parser.add_argument("--vocab_size", type=int, default=37000, help="the base model's vocabulary (§5.1: 37,000)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    before = fp32_gflops()
    measurement = measure(VanillaTransformerConfig.base(vocab_size=args.vocab_size), args.repeats)
    machine_speed = {"fp32_gflops_before": before, "fp32_gflops_after": fp32_gflops()}
    record = {**provenance(), "arguments": vars(args), "machine_speed": machine_speed, "measurement": measurement}
    print(json.dumps({**measurement, **machine_speed}, indent=1))
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
