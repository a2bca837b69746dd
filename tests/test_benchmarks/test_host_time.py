"""benchmarks.host_time (issue 99, item 4 B): the host time of an optimizer step of vanilla-train's loop, split into
the wait for batches, the model's forward and backward, the optimizer, and Trainer with its callbacks."""

import json
import statistics

import pytest
import torch

from benchmarks import host_time


def test_the_loaders_wait_leaves_trainers_time_and_zero_grad_joins_the_optimizers():
    """A step as the clock tiles it (Trainer's time holding the wait) becomes the record's parts, which still add up
    to the step."""
    step = {
        "step_ms": 10.0,
        "loader_wait_ms": 1.0,
        "forward_backward_ms": 6.0,
        "optimizer_ms": 1.5,
        "trainer_other_ms": 2.5,
        "forwards": 1,
        "backwards": 1,
    }
    parts = host_time.split(step, zero_grad_ms=0.25)
    assert (parts["optimizer_ms"], parts["trainer_other_ms"], parts["loader_wait_ms"]) == (1.75, 1.25, 1.0)
    assert sum(parts[name] for name in host_time.PARTS) == parts["step_ms"]


def test_the_targets_are_the_wait_for_a_steps_batches_and_the_hosts_python():
    met = host_time.targets({"loader_wait_ms": 0.5, "trainer_other_ms": 1.5, "optimizer_python_ms": 0.75})
    assert met["loader_wait_ms"] == {"value": 0.5, "most": 1.0, "met": True}
    assert met["host_python_ms"] == {"value": 2.25, "most": 2.0, "met": False}


def test_the_loader_is_the_one_a_gpu_trains_with():
    """2 worker processes, 4 batches ahead each, kept across epochs: vanilla-train's defaults on CUDA."""
    flags = host_time.loader_flags()
    assert dict(zip(flags[::2], flags[1::2], strict=True)) == {
        "--dataloader_num_workers": "2",
        "--dataloader_prefetch_factor": "4",
        "--dataloader_persistent_workers": "True",
    }


@pytest.mark.slow
def test_each_timed_step_is_tiled_by_its_parts_and_the_record_is_written(tmp_path):
    """Both default modes at 2,048 tokens a side a step on 300 WMT-like pairs, 1 step of warm-up and 2 timed (about
    100 s on 2 shared cores): in every timed step the model's hooks fired once a micro-batch (1, or 8 of 256
    tokens), the parts add up to the step's time (they tile it on one clock, so only float rounding may differ) and
    none is negative, the figures are the steps' medians, and the record is the one returned."""
    pytest.importorskip("wordfreq")
    path = tmp_path / "host-time.json"
    argv = ["--pairs", "300", "--tokens_per_step", "2048", "--warmup", "1", "--steps", "2", "--json", str(path)]
    threads = torch.get_num_threads()
    record = host_time.main(argv)
    assert torch.get_num_threads() == threads  # set back after the training process's one thread
    assert json.loads(path.read_text()) == record and record["training_threads"] == host_time.TRAINING_THREADS
    assert {"command", "code", "machine"} <= set(record) and record["preset"] == "wmt14"
    assert list(record["modes"]) == list(host_time.DEFAULT_MODES)
    for mode, figures in record["modes"].items():
        micro_batches = host_time.MODES[mode][0]
        assert (figures["micro_batches"], figures["tokens_per_micro_batch"]) == (micro_batches, 2048 // micro_batches)
        assert figures["steps_timed"] == len(figures["steps"]) == 2
        for step in figures["steps"]:
            assert step["forwards"] == step["backwards"] == micro_batches
            assert sum(step[name] for name in host_time.PARTS) == pytest.approx(step["step_ms"], abs=1e-6)
            assert min(step[name] for name in host_time.PARTS) >= 0
        for name in ("step_ms", *host_time.PARTS):
            assert figures[name] == statistics.median(step[name] for step in figures["steps"])
        parts = figures["python_parts_ms"]
        assert figures["optimizer_python_ms"] == sum(parts[part] for part in host_time.OPTIMIZER_PYTHON)
        assert parts["optimizer_step"] > parts["torch_optimizer_step"] > 0 and min(parts.values()) > 0
        assert {name: type(target["met"]) for name, target in figures["targets"].items()} == {
            "loader_wait_ms": bool,
            "host_python_ms": bool,
        }
