"""benchmarks/gpu_model.py: the GPU step predicted from the CPU proxies (issue 99, item 4), on the records it reads."""

import json

import pytest

from benchmarks import gpu_model
from vanilla_tools.cli import UsageError


@pytest.fixture(scope="module")
def records():
    dispatch, shapes = gpu_model.read(gpu_model.DISPATCH), gpu_model.read(gpu_model.SHAPES)
    return gpu_model.calibration(gpu_model.read(gpu_model.CALIBRATION), dispatch), dispatch, shapes


def test_the_calibration_is_the_h200_compiled_step_and_the_proxy_count_of_it(records):
    """Call 5's compiled 8-batch step: 0.221 s, 7,859 launches, 6.98 TFLOP at a peak of 733 TFLOP/s; the proxy
    counted 4,845 dispatches of the same step, so the H200 launches 1.62 a dispatch; less the loader's 24 ms, a
    launch costs the host 25.1 us (the issue's 28 us counted the loader in)."""
    calibrated, _, _ = records
    assert calibrated.step_ms == pytest.approx(221.36, abs=0.01) and calibrated.host_launches == 7859
    assert calibrated.flops == pytest.approx(6.980e12, rel=1e-3) and calibrated.peak_flops_per_s == pytest.approx(
        732.8e12, rel=1e-3
    )
    assert calibrated.proxy_dispatched == 4845 and calibrated.launches_per_dispatch == pytest.approx(1.6221, abs=1e-4)
    assert calibrated.host_us_per_launch == pytest.approx(25.11, abs=0.01)


def test_the_8_batch_step_of_the_h200_is_reproduced_from_the_proxy_launches(records):
    """With the host's other time of then (its loader in the training process, 24 ms) the model gives call 5's
    0.221 s: exactly, since the time a launch is calibrated on that step (the check is of the arithmetic, and that
    the proxy's 4,845 dispatches scale to the 7,859 launches measured). Host-bound: 23.8 ms of GPU work at 40% of the
    peak. With the loader in worker processes (3 ms of other host time) the control predicts 200 ms."""
    calibrated, dispatch, shapes = records
    then = gpu_model.predict("compiled", calibrated, dispatch, shapes, host_other_ms=24.0)
    assert then.host_launches == pytest.approx(7859) and then.step_ms == pytest.approx(221.36, abs=0.01)
    assert then.bound == "host" and then.gpu_ms == pytest.approx(23.81, abs=0.01)
    assert gpu_model.predict("compiled", calibrated, dispatch, shapes, 3.0).step_ms == pytest.approx(200.36, abs=0.01)


def test_the_one_batch_steps_are_predicted_gpu_bound(records):
    """One micro-batch of 25,000 tokens: the proxy's 456 dispatches scale to 740 launches, 18.6 ms of the host's
    + 3 = 21.6 ms; captured, the 21 operators outside inductor's graphs scale to 34 launches, + 2 graphs: 3.9 ms.
    The GPU's work: 20.9% padding against 16.9% at 3,125 tokens (item 4 C) makes 7.34 TFLOP, 25.0 ms at 40% of the
    peak: both one-batch steps are bound by the GPU, at 25.0 ms, 8.0x faster than the 8-batch control."""
    calibrated, dispatch, shapes = records
    one = gpu_model.predict("compiled-one-batch", calibrated, dispatch, shapes, 3.0)
    captured = gpu_model.predict("cudagraphs", calibrated, dispatch, shapes, 3.0)
    assert one.host_launches == pytest.approx(739.7, abs=0.1) and one.host_ms == pytest.approx(21.57, abs=0.01)
    assert captured.host_launches == pytest.approx(21 * 1.6221 + 2, abs=0.01)
    assert captured.host_ms == pytest.approx(3.91, abs=0.01)
    assert one.gpu_ms == captured.gpu_ms == pytest.approx(25.03, abs=0.01)
    assert (one.bound, captured.bound) == ("GPU", "GPU") and captured.step_ms == captured.gpu_ms


def test_a_measured_gpu_busy_time_replaces_the_assumed_fraction(records):
    """At the eager profile's 80 ms of kernels a step (2026-11-26), the one-batch step takes 80 ms; the 8-batch
    control stays host-bound. A smaller share of the peak moves the GPU's work inversely."""
    calibrated, dispatch, shapes = records
    assert gpu_model.predict("cudagraphs", calibrated, dispatch, shapes, 3.0, gpu_busy_ms=80.0).step_ms == 80.0
    control = gpu_model.predict("compiled", calibrated, dispatch, shapes, 3.0, gpu_busy_ms=80.0)
    assert control.bound == "host" and control.step_ms == pytest.approx(200.36, abs=0.01)
    fifth = gpu_model.predict("cudagraphs", calibrated, dispatch, shapes, 3.0, gpu_fraction=0.2)
    assert fifth.gpu_ms == pytest.approx(2 * 25.03, abs=0.02)


def test_the_host_other_time_is_given_or_read_from_the_host_time_record(tmp_path):
    """No silent default: a placeholder on the command line, or item 4 B's record, whose mode is named; its loader
    wait, optimizer Python and Trainer time are the host's other time (the launches are counted apart)."""
    absent = tmp_path / "host-time.json"
    assert gpu_model.host_other_ms(3.0, None, absent)[0] == 3.0
    with pytest.raises(UsageError, match="host-time.json \\(item 4 B\\) is not there yet: give .* --host_other_ms"):
        gpu_model.host_other_ms(None, None, absent)
    fields = {"forward_backward_ms": 50.0, "optimizer_ms": 9.0, "step_ms": 70.0}
    one = {**fields, "loader_wait_ms": 0.5, "optimizer_python_ms": 1.0, "trainer_other_ms": 1.5}
    absent.write_text(json.dumps({"command": "x", "modes": {"one batch": one, "eight": {**one, "loader_wait_ms": 4}}}))
    assert gpu_model.host_other_ms(None, "one batch", absent) == (3.0, "host-time.json, mode 'one batch'")
    assert gpu_model.host_other_ms(None, "eight", absent)[0] == 6.5
    with pytest.raises(UsageError, match="name one of host-time.json's modes with --host_time_mode: one batch, eight"):
        gpu_model.host_other_ms(None, "two", absent)


def test_the_record_holds_the_inputs_the_assumptions_and_each_step(tmp_path):
    record = gpu_model.main(["--host_other_ms", "3", "--json", str(tmp_path / "model.json")])
    assert json.loads((tmp_path / "model.json").read_text()) == record
    assert [p["mode"] for p in record["predictions"]] == ["compiled", "compiled-one-batch", "cudagraphs"]
    assert record["inputs"]["host_other_from"].startswith("--host_other_ms (a placeholder")
    assert record["inputs"]["calibration"]["record"] == "results/benchmarks/gpu/h200-2026-11-28-calls-5-7.json"


def test_the_gpu_busy_time_is_the_summed_time_of_the_gpus_kernels_and_copies():
    """wmt14_step's profiled steps: the GPU-busy milliseconds a step sum the kernels' and copies' own time (a
    graph's kernels each), not the profiler's ranges on the GPU's timeline, which span kernels; none seen (a CPU),
    the field is None and says why."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from benchmarks.wmt14_step import kernel_launches

    def event(key, device, microseconds=0, count=1, annotation=False):
        return SimpleNamespace(
            key=key,
            count=count,
            device_type=device,
            is_user_annotation=annotation,
            self_device_time_total=microseconds,
        )

    def clock(*events):
        return SimpleNamespace(profiler=SimpleNamespace(key_averages=lambda: list(events)))

    profiled = clock(
        event("cudaGraphLaunch", DeviceType.CPU, count=4),
        event("cudaLaunchKernel", DeviceType.CPU, count=60),
        event("triton_poi_fused_add_0", DeviceType.CUDA, 30_000, count=40),
        event("Memcpy HtoD (Pinned -> Device)", DeviceType.CUDA, 2_000, count=20),
        event("CompiledFunction", DeviceType.CUDA, 31_000, annotation=True),
    )
    assert kernel_launches(profiled, 2) == {
        "host_launches_per_step": 32.0,
        "gpu_kernels_per_step": 30.5,
        "gpu_busy_ms": 16.0,
    }
    cpu_only = kernel_launches(clock(event("aten::mm", DeviceType.CPU)), 2)
    assert cpu_only["gpu_busy_ms"] is None and cpu_only["gpu_busy_note"] == "the profiler saw no CUDA kernels"


def test_a_measured_step_is_recorded_beside_its_prediction(records):
    """The H200's 8-batch step (221.4 ms) against the control's prediction with the loader in workers (200.4 ms):
    1.105 times; with a GPU-busy time measured, the prediction taking it as the GPU's work tests the host's part
    alone. Host-bound: the GPU busy less than 80% of the step. Eager steps and a missing input are named."""
    record = gpu_model.beside("compiled", 221.36, 40.0, (3.0, "--host_other_ms"))
    assert record["predicted_step_ms"] == pytest.approx(200.36, abs=0.01)
    assert record["measured_over_predicted"] == pytest.approx(1.105, abs=0.001)
    assert record["predicted_with_measured_busy_ms"] == pytest.approx(200.36, abs=0.01)
    assert record["prediction"]["bound"] == "host" and record["prediction"]["host_other_from"] == "--host_other_ms"
    captured = gpu_model.beside("cudagraphs", 50.0, 45.0, (3.0, "--host_other_ms"))
    assert captured["predicted_step_ms"] == pytest.approx(25.03, abs=0.01)
    assert captured["predicted_with_measured_busy_ms"] == 45.0
    assert gpu_model.beside("cudagraphs", 50.0, None, (3.0, "x"))["predicted_with_measured_busy_ms"] is None
    assert gpu_model.beside("eager", 490.0, 80.0, (3.0, "x")) == {
        "prediction": "the model covers compiled, compiled-one-batch, cudagraphs, not eager"
    }
    assert gpu_model.beside("compiled", 221.36, 40.0, "not predicted: no input") == {
        "prediction": "not predicted: no input"
    }
    assert gpu_model.host_bound(40.0, 221.36) and not gpu_model.host_bound(45.0, 50.0)
    assert gpu_model.host_bound(None, 50.0) is None
