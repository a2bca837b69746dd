"""A failed write named in one line: the cause read from each writer's error (or diagnosed where it says none), the
partial result removed, and any other error let through as it was."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vanilla_tools import disk
from vanilla_tools.cli import UsageError
from vanilla_tools.disk import WRITE_ERRORS, write_errno, write_guard

ROOT = Path(__file__).resolve().parents[2]


class SafetensorError(Exception):
    """As safetensors raises it: the errno only in its message."""


@pytest.mark.parametrize("code", sorted(WRITE_ERRORS), ids=lambda code: errno.errorcode[code])
def test_every_errno_a_writer_states_is_read(code, tmp_path):
    assert write_errno(OSError(code, os.strerror(code)), tmp_path) == code
    assert write_errno(SafetensorError(f"Error while serializing: I/O error: x (os error {code})"), tmp_path) == code
    pyarrow = OSError(f"Error writing bytes to file. Detail: [errno {code}] {os.strerror(code)}")  # no errno set
    assert write_errno(pyarrow, tmp_path) == code
    try:
        raise RuntimeError("wrapped") from OSError(code, os.strerror(code))
    except RuntimeError as wrapped:
        assert write_errno(wrapped, tmp_path) == code


def test_errors_that_are_not_failed_writes_are_not_claimed(tmp_path):
    assert write_errno(FileNotFoundError(errno.ENOENT, "No such file"), tmp_path) is None
    assert write_errno(ValueError("a bug"), tmp_path) is None  # the probe writes, and there is space


def test_a_write_that_states_no_cause_is_diagnosed(tmp_path, monkeypatch):
    torch_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    (tmp_path / "optimizer.pt").write_bytes(b"\0" * 4096)
    monkeypatch.setattr(disk, "file_size_limit", lambda: 4096)  # the file stopped at the limit
    assert write_errno(torch_error, tmp_path) == errno.EFBIG
    monkeypatch.setattr(disk, "file_size_limit", lambda: None)
    monkeypatch.setattr(disk, "probe_write", lambda path: errno.EDQUOT)  # a small write there fails too
    assert write_errno(torch_error, tmp_path) == errno.EDQUOT
    monkeypatch.setattr(disk, "probe_write", lambda path: None)
    monkeypatch.setattr(disk, "free_bytes", lambda path: 1024)  # it fits, but the device is nearly full
    assert write_errno(torch_error, tmp_path) == errno.ENOSPC
    # an error no writer raises for a failed write is not one, however full the disk (a refused input, a bug)
    assert write_errno(ValueError("holds a marian model"), tmp_path) is None
    monkeypatch.setattr(disk, "free_bytes", lambda path: 2**40)
    assert write_errno(torch_error, tmp_path) is None


def test_the_guard_names_the_failure_cleans_up_and_lets_other_errors_through(tmp_path):
    partial = tmp_path / "out" / "model.bin"
    partial.parent.mkdir()
    partial.write_bytes(b"half")
    with pytest.raises(UsageError) as raised:
        with write_guard(tmp_path / "out", "the export", "run again", partial.unlink):
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(partial))
    assert str(raised.value) == (
        f"cannot write the export under {tmp_path / 'out'}: the disk quota is exceeded [EDQUOT: Disk quota "
        "exceeded]; free space within your quota, or have it raised, then run again"
    )
    assert not partial.exists()

    def refused():  # a read-only device refuses the cleanup too: the failure is named all the same
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    with pytest.raises(UsageError, match=r"the file system is read-only \[EROFS"):
        with write_guard(tmp_path, "a file", "rerun", refused):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    with pytest.raises(UsageError, match="^named inside$"):  # a guard inside already named it
        with write_guard(tmp_path, "a file", "rerun"):
            raise UsageError("named inside")
    with pytest.raises(KeyError):
        with write_guard(tmp_path, "a file", "rerun"):
            raise KeyError("a bug")


TORCH_SAVE_UNDER_A_LIMIT = """
import resource, sys, torch
from vanilla_tools.cli import console_script
from vanilla_tools.disk import write_guard

def run(argv):
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
    with write_guard(sys.argv[1], "the state", "rerun"):
        torch.save({"a": torch.zeros(100_000)}, sys.argv[1] + "/state.pt")

console_script(run)()
"""


def test_torch_save_past_the_file_size_limit_is_efbig_not_sigxfsz(tmp_path):
    """A real RLIMIT_FSIZE: torch.save's RuntimeError ("unexpected pos ...") is named as EFBIG, and the console
    script ignores SIGXFSZ so that the process lives to say it."""
    probe = tmp_path / "probe"
    probe.write_text(TORCH_SAVE_UNDER_A_LIMIT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(probe), str(tmp_path)], capture_output=True, text=True, env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"probe: error: cannot write the state under {tmp_path}: a file reached this process's file size limit "
        "(100,000 bytes) [EFBIG: File too large]; raise the limit (ulimit -f unlimited), then rerun"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory without write permission")
def test_a_directory_without_write_permission_is_diagnosed_as_eacces(tmp_path):
    tmp_path.chmod(0o555)
    try:
        assert write_errno(RuntimeError("unexpected pos 576 vs 534"), tmp_path / "checkpoint-6") == errno.EACCES
    finally:
        tmp_path.chmod(0o755)
