"""Every failed write of a run ends as a full disk does: one line naming the path, what the errno means and what
to do, status 1, the previous checkpoint intact, nothing half-written that a later run would take as complete; and
the same command, once the cause is gone, goes on.

Real faults where this machine allows them: a full disk (size-limited tmpfs mounts; root), a read-only remount
mid-run (root), a file size limit mid-run (RLIMIT_FSIZE: the process must not die of SIGXFSZ), a directory made
read-only mid-run (not as root: root writes there anyway). Every write site with an injected OSError
(tests/write_failure_probe.py), so that each errno is seen once at the console."""

import errno
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from safetensors.torch import load_file
from training_helpers import assert_same_weights, train_argv, write_corpus

from vanilla_tools.disk import WRITE_ERRORS

pytestmark = pytest.mark.slow

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
    return train_argv(
        {"train": corpus["train"]}, output, "--max_steps", "9", "--save_steps", "3", "--save_total_limit", "1", *extra
    )


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    """The same run on a roomy disk: its final weights and how much one checkpoint takes."""
    output = tmp_path_factory.mktemp("roomy")
    done = run([str(BIN / "vanilla-train"), *checkpoint_argv(corpus, output)])
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = sum(p.stat().st_size for p in (output / "checkpoint-9").rglob("*") if p.is_file())
    return load_file(output / "model.safetensors"), checkpoint


def failed_write(result: subprocess.CompletedProcess, program: str, pattern: str) -> None:
    """``result`` ended with status 1 and the one line ``program: error: `` + ``pattern`` (a regex), no traceback."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert re.fullmatch(f"{program}: error: {pattern}", result.stderr.strip().splitlines()[-1]), result.stderr[-500:]


def cause(code: int) -> str:
    """The part of the line that names the errno and what to do, as a regex."""
    meaning, remedy = WRITE_ERRORS[code]
    detail = {errno.ENOSPC: r", [\d.]+ MiB left", errno.EFBIG: r"(?: \([\d,]+ bytes\))?"}.get(code, "")  # the limit
    return re.escape(meaning) + detail + re.escape(f" [{errno.errorcode[code]}: {os.strerror(code)}]; {remedy}")


def resumes_from(output: Path, step: int) -> str:
    return re.escape(
        f", then rerun the same command (it resumes from {output / f'checkpoint-{step}'}, complete and intact)"
    )


@pytest.mark.skipif(not MOUNTS, reason="cannot mount a small tmpfs here (needs root)")
def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(corpus, uninterrupted, small_disk, tmp_path):
    weights, checkpoint_bytes = uninterrupted
    disk = small_disk(int(1.5 * checkpoint_bytes) + 100 * 1024)  # the first checkpoint fits, not a second beside it
    output = disk / "run"
    argv = checkpoint_argv(corpus, output)
    full = run([str(BIN / "vanilla-train"), *argv])
    prefix = re.escape(f"cannot write checkpoint-6 under {output}: ")
    failed_write(full, "vanilla-train", prefix + cause(errno.ENOSPC) + resumes_from(output, 3))
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-3"]  # the partial one removed

    (disk / "filler").unlink()  # the user frees space
    resumed = run([str(BIN / "vanilla-train"), *argv])  # the same command
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-3'}" in resumed.stderr
    assert_same_weights(weights, output)


@pytest.mark.skipif(not MOUNTS, reason="cannot mount a small tmpfs here (needs root)")
def test_a_full_disk_under_the_data_cache_is_named_and_a_rerun_fills_it(corpus, small_disk, tmp_path):
    disk = small_disk(64 * 1024)  # 64 KiB: not even the corpus' Arrow table
    argv = train_argv(
        {"train": corpus["train"]},
        tmp_path / "out",
        "--max_steps",
        "2",
        "--save_strategy",
        "no",
        "--cache_dir",
        str(disk / "cache"),
    )
    full = run([str(BIN / "vanilla-train"), *argv])
    prefix = re.escape(f"cannot write datasets' cache under {disk / 'cache'}: ")
    failed_write(
        full, "vanilla-train", prefix + cause(errno.ENOSPC) + ", then rerun, or pass --cache_dir on another disk"
    )
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
    prefix = re.escape(f"cannot write the ctranslate2-float32 export under {disk / 'ct2'}: ")
    failed_write(
        full,
        "vanilla-export-ct2",
        prefix + cause(errno.ENOSPC) + re.escape(", then run again (the model itself is untouched)"),
    )
    assert not (disk / "ct2").exists()
    (disk / "filler").unlink()
    again = run([str(BIN / "vanilla-export-ct2"), str(model_dir), str(disk / "ct2"), "--quantization", "float32"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert (disk / "ct2" / "model.bin").is_file()


def checkpoint_fault(fault: str, output: Path) -> tuple[str, int]:
    """The probe's FAULT for making checkpoint-6 fail this way (see write_failure_probe.py), and its errno."""
    if fault == "readonly":
        return f"readonly={output.parent}", errno.EROFS
    if fault == "fsize-optimizer":  # over the model's file, under the optimizer state's: torch.save states no errno
        return "fsize=200000", errno.EFBIG
    if fault == "fsize-model":  # under the model's file: safetensors says "os error 27"
        return "fsize=100000", errno.EFBIG
    if fault == "chmod":
        return "chmod", errno.EACCES
    return fault, getattr(errno, fault)


@pytest.mark.parametrize(
    "fault",
    [
        "EDQUOT",  # injected at the optimizer's write
        "EIO",
        "fsize-optimizer",  # a real file size limit, set after step 6
        "fsize-model",
        pytest.param("readonly", marks=pytest.mark.skipif(not MOUNTS, reason="cannot mount a tmpfs here (root)")),
        pytest.param("chmod", marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes without permission")),
    ],
)
def test_a_failed_checkpoint_write_keeps_the_previous_one_and_the_same_command_resumes(
    fault, corpus, uninterrupted, small_disk, tmp_path
):
    weights, _ = uninterrupted
    output = (small_disk(64 * MiB) if fault == "readonly" else tmp_path) / "run"
    argv = checkpoint_argv(corpus, output)
    probe, code = checkpoint_fault(fault, output)
    failed = run([sys.executable, str(TESTS / "write_failure_probe.py"), "checkpoint-6", probe, *argv])
    prefix = re.escape(f"cannot write checkpoint-6 under {output}: ")
    failed_write(failed, "vanilla-train", prefix + cause(code) + resumes_from(output, 3))
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-3"]
    if fault == "readonly":
        subprocess.run(["mount", "-o", "remount,rw", str(output.parent)], check=True)
    elif fault == "chmod":
        output.chmod(0o755)
    resumed = run([str(BIN / "vanilla-train"), *argv])  # the limit was the probe's alone
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-3'}" in resumed.stderr
    assert_same_weights(weights, output)


def finishing_argv(corpus, output: Path, *extra: str) -> list[str]:
    """3 steps and the checkpoint of the last: the writes after training have a checkpoint to go on from."""
    return train_argv({"train": corpus["train"]}, output, "--max_steps", "3", "--save_steps", "3", *extra)


THEN = {
    "cache": ", then rerun, or pass --cache_dir on another disk",
    "export": re.escape(", then run again (the model itself is untouched)"),
}
# site -> (its errno here, what the line calls it, the partial file it leaves behind, then removed)
SITES = {
    "lock": (errno.EROFS, "the run's lock", None),
    "cache": (errno.EIO, "datasets' cache", None),
    "tokenizer": (errno.EACCES, "the tokenizer", "tokenizer.json"),
    "model": (errno.ENOSPC, "the final model", "model.safetensors"),
    "files": (errno.EDQUOT, "the run's files (eval_results.json, training_recipe.json, README.md)", None),
    "summary": (errno.EFBIG, "the run's summary", None),
    "export": (errno.EIO, "the int8 export", "ctranslate2-int8"),
}


@pytest.mark.parametrize("site", SITES)
def test_a_failed_write_at_each_site_is_one_line_and_the_same_command_goes_on(site, corpus, tmp_path):
    """Each of the run's other writes failing: the line names where (the output directory, datasets' cache, the
    summary's folder, the export's), the partial file is gone, the run is not taken as finished, and where it had
    trained, the same command ends it with the weights it had."""
    code, what, partial = SITES[site]
    output, cache, summary = tmp_path / "run", tmp_path / "cache", tmp_path / "summary"
    extra = {"summary": ["--summary_dir", str(summary)], "export": ["--export_ct2", "int8"]}.get(site, [])
    argv = finishing_argv(corpus, output, "--cache_dir", str(cache), *extra)
    failed = run([sys.executable, str(TESTS / "write_failure_probe.py"), site, errno.errorcode[code], *argv])
    where = {"cache": cache, "summary": summary, "export": output / "ctranslate2-int8"}.get(site, output)
    then = THEN.get(site, ", then rerun the same command")
    failed_write(failed, "vanilla-train", re.escape(f"cannot write {what} under {where}: ") + cause(code) + then)
    assert not (output / "run_finished.json").exists() and not (summary / "summary.json").exists()
    if partial:
        assert not (output / partial).exists()
    if not (output / "checkpoint-3").is_dir():  # it failed before training
        return
    trained = load_file(output / "checkpoint-3" / "model.safetensors")
    again = run([str(BIN / "vanilla-train"), *argv])
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-3'}" in again.stderr
    assert_same_weights(trained, output)
    assert (output / "run_finished.json").is_file()
    assert (summary / "summary.json").is_file() or site != "summary"
