"""Data-parallel training with torchrun and accelerate (2 CPU processes over gloo), and resuming after SIGKILL."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import train_argv, write_corpus

TESTS = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=TESTS.parent)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    files = write_corpus(tmp_path_factory.mktemp("data"))
    return {"train": files["train"], "validation": [], "test": []}


def ddp_argv(corpus, output: Path, tokens_per_device: int) -> list[str]:
    # SGD: Adam's first steps divide by |gradient|, which magnifies rounding differences of near-zero gradients
    # between a 1- and a 2-process sum; SGD keeps the comparison about data parallelism itself.
    argv = train_argv(corpus, output, "--max_steps", "5", "--save_strategy", "no", "--optim", "sgd", "--bf16",
                      "false", "--max_tokens_per_batch", str(tokens_per_device))  # fmt: skip
    return [a for a in argv if a not in ("--validation_files", "--test_files")]


@pytest.fixture(scope="module")
def single_process_weights(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("single")
    result = run([sys.executable, str(TESTS / "ddp_probe.py"), *ddp_argv(corpus, output, 512)])
    assert result.returncode == 0, result.stderr[-3000:]
    return load_file(output / "rank0-of-1.safetensors")


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_processes_equal_one_with_the_same_global_batch(launcher, corpus, single_process_weights, tmp_path):
    port = str(free_port())
    if launcher == "torchrun":
        command = [str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_port", port]
    else:  # on a CPU machine this starts 2 processes over gloo through torchrun
        command = [
            str(BIN / "accelerate"),
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--main_process_port",
            port,
        ]
    result = run([*command, str(TESTS / "ddp_probe.py"), *ddp_argv(corpus, tmp_path, 256)])
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [load_file(tmp_path / f"rank{r}-of-2.safetensors") for r in (0, 1)]
    assert ranks[0].keys() == single_process_weights.keys()
    for name, tensor in ranks[0].items():
        assert torch.equal(tensor, ranks[1][name]), name  # DDP keeps the replicas identical
        torch.testing.assert_close(tensor, single_process_weights[name], atol=1e-6, rtol=1e-5, msg=name)
    assert not torch.equal(ranks[0]["model.shared.weight"], torch.zeros_like(ranks[0]["model.shared.weight"]))


def test_sigkill_then_resume_gives_the_weights_of_an_uninterrupted_run(corpus, tmp_path):
    argv = [a for a in train_argv(corpus, tmp_path / "x", "--max_steps", "12", "--save_steps", "3")
            if a not in ("--validation_files", "--test_files")]  # fmt: skip
    output_at = argv.index("--output_dir") + 1

    uninterrupted = tmp_path / "uninterrupted"
    argv[output_at] = str(uninterrupted)
    result = run([sys.executable, "-m", "training.train", *argv])
    assert result.returncode == 0, result.stderr[-3000:]

    interrupted = tmp_path / "interrupted"
    argv[output_at] = str(interrupted)
    killed = run([sys.executable, str(TESTS / "kill_probe.py"), "8", *argv])
    assert killed.returncode == -signal.SIGKILL
    assert not (interrupted / "model.safetensors").exists()
    # a checkpoint whose writing was cut off (no completion marker) must never be resumed from
    partial = interrupted / "checkpoint-9"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"truncated")

    resumed = run([sys.executable, "-m", "training.train", *argv, "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "ignoring" in resumed.stderr and "checkpoint-9: it was not completely written" in resumed.stderr
    assert f"resuming from {interrupted / 'checkpoint-6'}" in resumed.stderr
    expected = load_file(uninterrupted / "model.safetensors")
    got = load_file(interrupted / "model.safetensors")
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
