"""A full disk while a checkpoint, datasets' cache or a CTranslate2 export is written: one line naming the device's
path and what was written, status 1, nothing complete lost, and a rerun after freeing space that goes on.

The disks are size-limited tmpfs mounts (the test needs root and permission to mount; without them, the checkpoint
case runs with an injected ENOSPC at the optimizer's write instead)."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from safetensors.torch import load_file
from training_helpers import assert_same_weights, train_argv, write_corpus

TESTS = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MiB = 2**20


def run(command: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=TESTS.parent)


def can_mount() -> bool:
    probe = Path(f"/tmp/vanilla-mount-probe-{uuid.uuid4().hex}")
    probe.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(probe)], capture_output=True)
        if mounted.returncode == 0:
            subprocess.run(["umount", str(probe)], check=True)
        return mounted.returncode == 0
    except OSError:
        return False
    finally:
        probe.rmdir()


MOUNTS = can_mount()


@pytest.fixture
def small_disk(tmp_path):
    """``make(free_bytes)``: a tmpfs mounted under tmp_path with about ``free_bytes`` free; ``free(path)`` deletes
    the filler that took the rest, as a user freeing space would."""
    mounts = []

    def make(free: int) -> Path:
        folder = tmp_path / f"disk{len(mounts)}"
        folder.mkdir()
        size = free + 8 * MiB
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
        mounts.append(folder)
        with open(folder / "filler", "wb") as f:
            f.write(b"\0" * (size - free))
        return folder

    yield make
    for folder in mounts:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"))


def checkpoint_argv(corpus, output: Path, *extra: str) -> list[str]:
    return train_argv({"train": corpus["train"]}, output, "--max_steps", "9", "--save_steps", "3",
                      "--save_total_limit", "1", *extra)  # fmt: skip


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    """The same run on a roomy disk: its final weights and how much one checkpoint takes."""
    output = tmp_path_factory.mktemp("roomy")
    done = run([str(BIN / "vanilla-train"), *checkpoint_argv(corpus, output)])
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = sum(p.stat().st_size for p in (output / "checkpoint-9").rglob("*") if p.is_file())
    return load_file(output / "model.safetensors"), checkpoint


@pytest.mark.skipif(not MOUNTS, reason="cannot mount a small tmpfs here (needs root); see the injected variant")
def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(corpus, uninterrupted, small_disk, tmp_path):
    weights, checkpoint_bytes = uninterrupted
    disk = small_disk(int(1.5 * checkpoint_bytes) + 100 * 1024)  # the first checkpoint fits, not a second beside it
    output = disk / "run"
    argv = checkpoint_argv(corpus, output)
    full = run([str(BIN / "vanilla-train"), *argv])
    assert full.returncode == 1, full.stderr[-3000:]
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith(f"vanilla-train: error: no space left on the device of {output}")
    assert "while writing checkpoint-6;" in last and f"{output / 'checkpoint-3'} is complete and intact" in last
    assert "Traceback" not in full.stderr
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-3"]  # the partial one removed

    (disk / "filler").unlink()  # the user frees space
    resumed = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-3'}" in resumed.stderr
    assert_same_weights(weights, output)


@pytest.mark.skipif(not MOUNTS, reason="cannot mount a small tmpfs here (needs root)")
def test_a_full_disk_under_the_data_cache_is_named_and_a_rerun_fills_it(corpus, small_disk, tmp_path):
    disk = small_disk(64 * 1024)  # 64 KiB: not even the corpus' Arrow table
    argv = train_argv({"train": corpus["train"]}, tmp_path / "out", "--max_steps", "2", "--save_strategy", "no",
                      "--cache_dir", str(disk / "cache"))  # fmt: skip
    full = run([str(BIN / "vanilla-train"), *argv])
    assert full.returncode == 1, full.stderr[-3000:]
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith(f"vanilla-train: error: no space left on the device of {disk / 'cache'}")
    assert "while writing datasets' cache; free space there, or pass --cache_dir on another disk" in last
    (disk / "filler").unlink()
    again = run([str(BIN / "vanilla-train"), *argv])
    assert again.returncode == 0, again.stderr[-3000:]


@pytest.mark.skipif(not MOUNTS, reason="cannot mount a small tmpfs here (needs root)")
def test_a_full_disk_during_a_ctranslate2_export_leaves_no_partial_export(tokenizer, small_disk, tmp_path):
    pytest.importorskip("ctranslate2")
    from helpers import saved_model_with_tokenizer

    model_dir = saved_model_with_tokenizer(tmp_path / "model", tokenizer)
    disk = small_disk(16 * 1024)
    full = run([str(BIN / "vanilla-export-ct2"), str(model_dir), str(disk / "ct2"), "--quantization", "float32"])
    assert full.returncode == 1, full.stderr[-3000:]
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith(f"vanilla-export-ct2: error: no space left on the device of {disk / 'ct2'}")
    assert "while writing the ctranslate2-float32 export" in last and not (disk / "ct2").exists()
    (disk / "filler").unlink()
    again = run([str(BIN / "vanilla-export-ct2"), str(model_dir), str(disk / "ct2"), "--quantization", "float32"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert (disk / "ct2" / "model.bin").is_file()


def test_an_injected_enospc_at_the_optimizer_write_keeps_the_previous_checkpoint(corpus, uninterrupted, tmp_path):
    """Where no small disk can be mounted: the optimizer's write of checkpoint-6 raises ENOSPC."""
    weights, _ = uninterrupted
    argv = checkpoint_argv(corpus, tmp_path)
    full = run([sys.executable, str(TESTS / "enospc_probe.py"), "checkpoint-6", *argv])
    assert full.returncode == 1, full.stderr[-3000:]
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith(f"vanilla-train: error: no space left on the device of {tmp_path}")
    assert f"{tmp_path / 'checkpoint-3'} is complete and intact" in last
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-3"]
    resumed = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_weights(weights, tmp_path)
