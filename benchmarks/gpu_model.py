"""`python -m benchmarks.gpu_model`: a model of the wmt14 step on a GPU (issue 99, item 4), from the CPU proxies and
the H200's record: each step's time predicted as max(the GPU's work, the host's launches x its time a launch + the
host's other time a step), for the steps ``benchmarks/wmt14_step.py`` measures. Its inputs:

- **Launches** (item 4 A, results/benchmarks/step-dispatch.json): the operators the compiled step dispatches, with
  the step's tokens in 8 micro-batches and in 1, scaled by the H200's host launches over the proxy's count for the
  same 8-batch step (``Calibration``). A step captured in CUDA graphs launches its forward and backward graphs
  (``GRAPH_LAUNCHES``) and what is outside them (``IN_GRAPHS`` names what is inside).
- **Host time a launch**: the H200's compiled 8-batch step (results/benchmarks/gpu/h200-2026-11-28-calls-5-7.json,
  call 5: 0.221 s, 7,859 launches, no host syncs), which was host-bound (9.5 ms of matrix products at the measured
  peak): its time less the data loader's then (``CALIBRATION_LOADER_MS``), over its launches.
- **The host's other time a step**: the loader's wait, the optimizer's Python, and Trainer's with its callbacks (item
  4 B, results/benchmarks/host-time.json: ``--host_time_mode`` names the mode read), or, until that record exists, a
  placeholder stated on the command line (``--host_other_ms``).
- **The GPU's work**: the step's matrix-product FLOPs (the H200's 8-batch step's; one batch pads more, by item 4 C's
  epoch at each budget, results/benchmarks/epoch-shapes.json) at ``--gpu_fraction`` of the bf16 peak measured in
  the same call, or the GPU-busy milliseconds a record measured.

    python -m benchmarks.gpu_model --host_other_ms 3 --json results/benchmarks/gpu-model.json
"""

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks import write_record
from training.api import load_preset
from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.provenance import provenance

RESULTS = Path(__file__).resolve().parents[1] / "results" / "benchmarks"
DISPATCH = RESULTS / "step-dispatch.json"  # item 4 A
HOST_TIME = RESULTS / "host-time.json"  # item 4 B
SHAPES = RESULTS / "epoch-shapes.json"  # item 4 C
CALIBRATION = RESULTS / "gpu" / "h200-2026-11-28-calls-5-7.json"
# The calibration step's data loader, in the training process then: about 3 ms a micro-batch, 8 a step (issue 99)
CALIBRATION_LOADER_MS = 24.0
GPU_FRACTION = 0.4  # the share of the measured peak assumed for the step's matrix products: issue 99's target
# A step is host-bound when the GPU is busy less than this share of it: the host's launches run ahead of a GPU-bound
# step, so its GPU idles only in the gaps between steps (the loader's hand-over, the optimizer's Python)
HOST_BOUND_BELOW = 0.8
# What a compiled one-batch step dispatches inside inductor's graphs (CUDA graphs capture it): inductor's kernels and
# the ATen operators its code calls (matrix products, attention, dropout's seeds; the proxy's CPU names)
IN_GRAPHS = frozenset(
    {
        "inductor kernel",
        "aten::mm",
        "aten::addmm",
        "aten::randint",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    }
)
GRAPH_LAUNCHES = 2  # a captured step replays its forward graph and its backward graph
HOST_TIME_FIELDS = ("loader_wait_ms", "optimizer_python_ms", "trainer_other_ms")  # B's fields outside the launches
STEP_TOKENS = load_preset("wmt14")["tokens_per_step"]  # the step's tokens a side, in 8 micro-batches or in 1
# The steps of benchmarks/wmt14_step.py modelled: (micro-batches a step, captured in CUDA graphs)
STEPS = {"compiled": (8, False), "compiled-one-batch": (1, False), "cudagraphs": (1, True)}
CALIBRATION_STEP = "compiled"  # the H200's measured step: its micro-batches are STEPS'


@dataclass(frozen=True)
class Calibration:
    """The H200's compiled 8-batch step (call 5) and the proxy's count of the same step."""

    step_ms: float
    host_launches: float
    flops: float  # matrix-product FLOPs a step, padded batches
    peak_flops_per_s: float  # the bf16 matrix-product peak measured in the same call
    proxy_dispatched: int  # item 4 A's compiled 8-batch step

    @property
    def launches_per_dispatch(self) -> float:
        return self.host_launches / self.proxy_dispatched

    @property
    def host_us_per_launch(self) -> float:
        return (self.step_ms - CALIBRATION_LOADER_MS) / self.host_launches * 1e3


@dataclass(frozen=True)
class Prediction:
    mode: str
    micro_batches: int
    host_launches: float
    host_ms: float
    gpu_ms: float
    step_ms: float
    bound: str  # "host" or "GPU"


def read(path: Path) -> dict:
    if not path.is_file():
        raise UsageError(f"{path} is not there: the GPU model reads it")
    return json.loads(path.read_text())


def proxy_count(dispatch: dict, micro_batches: int) -> dict:
    """Item 4 A's count of the compiled step at ``micro_batches`` a step."""
    return dispatch["counts"][f"compiled, {micro_batches} micro-batch{'es' * (micro_batches > 1)}"]


def calibration(record: dict, dispatch: dict) -> Calibration:
    """The calibration from the H200 record (its call 5's compiled step) and item 4 A's record."""
    call = record["call_5"]
    step = call["step_compiled"]
    return Calibration(
        step_ms=step["step_s"] * 1e3,
        host_launches=step["host_launches_per_step"],
        flops=step["train_flops_per_s"] * step["step_s"],
        peak_flops_per_s=call["step_peak_bf16_flops_per_s"],
        proxy_dispatched=proxy_count(dispatch, STEPS[CALIBRATION_STEP][0])["dispatched"],
    )


def padding(shapes: dict, micro_batches: int, step_tokens: int) -> float:
    """The padding of item 4 C's epoch at ``step_tokens / micro_batches`` tokens a micro-batch."""
    budget = step_tokens // micro_batches
    found = [epoch["padding"] for epoch in shapes["epochs"] if epoch["budget"] == budget]
    if not found:
        raise UsageError(f"epoch-shapes.json has no epoch at {budget} tokens a micro-batch")
    return found[0]


def step_flops(calibrated: Calibration, shapes: dict, micro_batches: int, step_tokens: int) -> float:
    """The step's matrix-product FLOPs at ``micro_batches`` a step: the same real tokens as the calibration's 8, so
    the padded ones (and the FLOPs, nearly linear in them at these lengths) grow by the fill of item 4 C's epochs."""
    calibrated_fill = 1 - padding(shapes, STEPS[CALIBRATION_STEP][0], step_tokens)
    return calibrated.flops * calibrated_fill / (1 - padding(shapes, micro_batches, step_tokens))


def host_launches(dispatch: dict, calibrated: Calibration, micro_batches: int, captured: bool) -> float:
    """The kernels the host launches a step: the proxy's dispatches at ``micro_batches`` (compiled) scaled to the
    H200's; captured, only those outside inductor's graphs, and one launch a graph."""
    operators = proxy_count(dispatch, micro_batches)["by_operator"]
    counted = sum(count for op, count in operators.items() if not (captured and op in IN_GRAPHS))
    return counted * calibrated.launches_per_dispatch + (GRAPH_LAUNCHES if captured else 0)


def step_ms(gpu_ms: float, launches: float, us_per_launch: float, host_other_ms: float) -> tuple[float, float, str]:
    """The step's time, the host's, and which bounds it: max(the GPU's work, launches x time a launch + other)."""
    host_ms = launches * us_per_launch / 1e3 + host_other_ms
    return max(gpu_ms, host_ms), host_ms, "host" if host_ms >= gpu_ms else "GPU"


def predict(
    mode: str,
    calibrated: Calibration,
    dispatch: dict,
    shapes: dict,
    host_other_ms: float,
    gpu_fraction: float = GPU_FRACTION,
    step_tokens: int = STEP_TOKENS,
    gpu_busy_ms: float | None = None,
) -> Prediction:
    """The step of ``mode`` (``STEPS``): its GPU work is ``gpu_busy_ms`` where measured, else its FLOPs at
    ``gpu_fraction`` of the calibration's measured peak."""
    micro_batches, captured = STEPS[mode]
    launches = host_launches(dispatch, calibrated, micro_batches, captured)
    if gpu_busy_ms is None:
        flops = step_flops(calibrated, shapes, micro_batches, step_tokens)
        gpu_busy_ms = flops / (gpu_fraction * calibrated.peak_flops_per_s) * 1e3
    total, host_ms, bound = step_ms(gpu_busy_ms, launches, calibrated.host_us_per_launch, host_other_ms)
    return Prediction(mode, micro_batches, launches, host_ms, gpu_busy_ms, total, bound)


def host_time_modes(record: dict) -> dict[str, dict]:
    """Item 4 B's modes: each mapping in the record, at its top or one level down, that holds ``HOST_TIME_FIELDS``,
    by its key (the record's layout is its benchmark's; these fields are what the model reads)."""
    found = {}
    for key, value in record.items():
        if not isinstance(value, Mapping):
            continue
        if all(field in value for field in HOST_TIME_FIELDS):
            found[key] = value
        found.update(
            {k: v for k, v in value.items() if isinstance(v, Mapping) and all(f in v for f in HOST_TIME_FIELDS)}
        )
    return found


def host_other_ms(given: float | None, mode: str | None, host_time: Path = HOST_TIME) -> tuple[float, str]:
    """The host's other time a step and where it comes from: ``given`` (a placeholder on the command line), or
    the sum of ``HOST_TIME_FIELDS`` of item 4 B's ``mode``."""
    if given is not None:
        return given, "--host_other_ms (a placeholder: item 4 B's record not read)"
    if not host_time.is_file():
        raise UsageError(
            f"{host_time} (item 4 B) is not there yet: give the host's other time a step with --host_other_ms"
        )
    modes = host_time_modes(json.loads(host_time.read_text()))
    if mode not in modes:
        raise UsageError(f"name one of {host_time.name}'s modes with --host_time_mode: {', '.join(modes) or 'none'}")
    return sum(modes[mode][field] for field in HOST_TIME_FIELDS), f"{host_time.name}, mode {mode!r}"


def inputs() -> tuple[Calibration, dict, dict]:
    """The calibration, item 4 A's record and item 4 C's, read from results/benchmarks."""
    dispatch = read(DISPATCH)
    return calibration(read(CALIBRATION), dispatch), dispatch, read(SHAPES)


def host_bound(gpu_busy_ms: float | None, step_ms: float) -> bool | None:
    """Whether a measured step was bound by the host (``HOST_BOUND_BELOW``); None where its GPU-busy time is not
    known."""
    return None if gpu_busy_ms is None else gpu_busy_ms < HOST_BOUND_BELOW * step_ms


def beside(mode: str, measured_ms: float, gpu_busy_ms: float | None, host_other: tuple[float, str] | str) -> dict:
    """The model's prediction of ``mode``'s step beside its measured time, for a measurement's record: the
    prediction (GPU work at ``GPU_FRACTION`` of the peak), measured over predicted, and the prediction with the
    measured GPU-busy time as the GPU's work (which tests the host's part alone); ``host_other`` is
    ``host_other_ms``'s answer, or why there is none (then so is the prediction)."""
    if mode not in STEPS:
        return {"prediction": f"the model covers {', '.join(STEPS)}, not {mode}"}
    if isinstance(host_other, str):
        return {"prediction": host_other}
    calibrated, dispatch, shapes = inputs()
    other_ms, source = host_other
    predicted = predict(mode, calibrated, dispatch, shapes, other_ms)
    with_busy = (
        None if gpu_busy_ms is None else predict(mode, calibrated, dispatch, shapes, other_ms, gpu_busy_ms=gpu_busy_ms)
    )
    return {
        "prediction": {**asdict(predicted), "gpu_fraction": GPU_FRACTION, "host_other_from": source},
        "predicted_step_ms": predicted.step_ms,
        "measured_over_predicted": measured_ms / predicted.step_ms,
        "predicted_with_measured_busy_ms": None if with_busy is None else with_busy.step_ms,
    }


def model(host_other: float, source: str, gpu_fraction: float = GPU_FRACTION) -> dict:
    """Every step of ``STEPS`` predicted from the records, with the inputs and the assumptions."""
    calibrated, dispatch, shapes = inputs()
    predictions = [asdict(predict(mode, calibrated, dispatch, shapes, host_other, gpu_fraction)) for mode in STEPS]
    return {
        "inputs": {
            "calibration": {
                **asdict(calibrated),
                "record": CALIBRATION.relative_to(RESULTS.parent.parent).as_posix(),
                "loader_ms": CALIBRATION_LOADER_MS,
                "launches_per_dispatch": calibrated.launches_per_dispatch,
                "host_us_per_launch": calibrated.host_us_per_launch,
            },
            "host_other_ms": host_other,
            "host_other_from": source,
            "gpu_fraction": gpu_fraction,
        },
        "assumptions": [
            "the calibration step was host-bound: its time less the loader's is launches x one time a launch",
            "a launch costs the host the same at 1 micro-batch as at 8, and the same inside or outside a graph",
            "the H200 launches the proxy's count x the calibration's launches per dispatch",
            "captured: only the operators outside inductor's graphs launch, and one launch a graph",
            "the host's other time is the same a step at 1 micro-batch and at 8 (the loader in worker processes)",
            "the GPU's work is the step's matrix-product FLOPs at gpu_fraction of the measured peak",
            f"host-bound when the GPU is busy less than {HOST_BOUND_BELOW:.0%} of the step",
        ],
        "predictions": predictions,
    }


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_model", description=__doc__.split("\n\n")[0])
    other = parser.add_mutually_exclusive_group()
    other.add_argument("--host_other_ms", type=float, help="the host's other time a step, a stated placeholder")
    other.add_argument("--host_time_mode", help="read the host's other time from this mode of host-time.json")
    parser.add_argument("--gpu_fraction", type=float, default=GPU_FRACTION, help="share of the peak assumed")
    parser.add_argument("--json", help="write the record here")
    return parser


def table(predictions: list[dict]) -> str:
    rows = [
        "| step | micro-batches | host launches | host ms | GPU ms | step ms | bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in predictions:
        rows.append(
            f"| {p['mode']} | {p['micro_batches']} | {p['host_launches']:,.0f} | {p['host_ms']:.1f} "
            f"| {p['gpu_ms']:.1f} | {p['step_ms']:.1f} | {p['bound']} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    record = {**provenance(), **model(*host_other_ms(args.host_other_ms, args.host_time_mode), args.gpu_fraction)}
    print(table(record["predictions"]))
    print("\n".join(["assumptions:", *record["assumptions"]]))
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    console_script(main)()
