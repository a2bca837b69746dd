"""A failed write, named in one line: the path, what the error means, what to do.

Writers report a failed write in their own ways: Python's ``OSError`` (its errno), pyarrow's ``OSError`` without one
("[errno 27] File too large"), safetensors' ``SafetensorError`` ("... (os error 28)"), and ``torch.save``'s
``RuntimeError`` ("unexpected pos 576 vs 534", which says nothing of the cause). So the cause is read from the error
where it says so, else diagnosed where the write failed: a file grown to this process's file size limit (EFBIG), a
small probe file written there (it fails the same way on a read-only, over-quota, full or failing device), or nearly
no space left; only for the types writers raise (an ``OSError``, a ``RuntimeError``), so that a refused input or a bug
on a nearly full disk is not called a full disk.

This module decides it once for every writer: checkpoints, datasets' cache, the run's files, exports."""

import errno
import os
import re
import resource
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .cli import UsageError

NEARLY_FULL = 64 * 2**20  # bytes: less than this left after a failed write means the write filled the device
PROBE_BYTES = 64 * 1024
# errno -> (what it means for the write, what the user does about it)
WRITE_ERRORS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on the device", "free space"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space within your quota, or have it raised"),
    errno.EFBIG: ("a file reached this process's file size limit", "raise the limit (ulimit -f unlimited)"),
    errno.EROFS: ("the file system is read-only", "make it writable (mount it read-write)"),
    errno.EACCES: ("permission denied", "give this user write permission there"),
    errno.EPERM: ("operation not permitted", "give this user write permission there"),
    errno.EIO: ("the device reported an input/output error", "check the device and its file system (dmesg)"),
}
# What a writer raises when its error states no cause: pyarrow's OSError without an errno, torch.save's RuntimeError.
UNSTATED_WRITE_ERRORS = (OSError, RuntimeError)
_STATED_ERRNO = re.compile(r"(?:os error|errno) (\d+)", re.IGNORECASE)  # safetensors, pyarrow


def free_bytes(path: str | Path) -> int | None:
    """Space available on the device of ``path`` (or of its nearest existing parent)."""
    try:
        return shutil.disk_usage(existing_parent(path)).free
    except OSError:
        return None


def existing_parent(path: str | Path) -> Path:
    """``path``, or its nearest parent that exists."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def file_size_limit() -> int | None:
    """This process's file size limit (RLIMIT_FSIZE, ``ulimit -f``) in bytes, None if unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def stated_errno(error: BaseException) -> int | None:
    """The errno ``error`` (or an error it was raised from) states, as an attribute or in its message."""
    while error is not None:
        if isinstance(error, OSError) and error.errno is not None:
            return error.errno
        stated = _STATED_ERRNO.search(str(error))
        if stated:
            return int(stated.group(1))
        error = error.__cause__ or error.__context__
    return None


def probe_write(path: str | Path) -> int | None:
    """The errno of writing a small file where ``path`` is (or would be), None if that succeeds."""
    try:
        fd, name = tempfile.mkstemp(prefix=".write-probe-", dir=existing_parent(path))
    except OSError as error:
        return error.errno
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
        os.fsync(fd)
        return None
    except OSError as error:
        return error.errno
    finally:
        os.close(fd)
        with suppress(OSError):
            os.unlink(name)


def diagnosed_errno(path: str | Path) -> int | None:
    """Why a write under ``path`` that stated no cause failed: a file there reached the file size limit (the kernel
    writes up to it, then refuses), a probe write fails, or the device is nearly full; None if none of these."""
    limit = file_size_limit()
    if limit is not None and any(p.is_file() and p.stat().st_size >= limit for p in existing_parent(path).rglob("*")):
        return errno.EFBIG
    probed = probe_write(path)
    if probed in WRITE_ERRORS:
        return probed
    free = free_bytes(path)
    return errno.ENOSPC if free is not None and free < NEARLY_FULL else None


def write_errno(error: BaseException, path: str | Path) -> int | None:
    """The errno (one of WRITE_ERRORS) that made a write under ``path`` fail with ``error``; None if ``error`` is
    not a failed write (a missing file, a bug)."""
    stated = stated_errno(error)
    if stated is not None:
        return stated if stated in WRITE_ERRORS else None
    if not isinstance(error, UNSTATED_WRITE_ERRORS):  # a bug or a refused input, even on a nearly full disk
        return None
    return diagnosed_errno(path)


def write_failure(code: int, path: str | Path, what: str, then: str) -> str:
    """The line that names a failed write: where, what was written, what the errno means, what to do."""
    meaning, remedy = WRITE_ERRORS[code]
    detail = ""
    if code == errno.ENOSPC and (free := free_bytes(path)) is not None:
        detail = f", {free / 2**20:.1f} MiB left"
    elif code == errno.EFBIG and (limit := file_size_limit()) is not None:
        detail = f" ({limit:,} bytes)"
    return (
        f"cannot write {what} under {path}: {meaning}{detail} [{errno.errorcode[code]}: {os.strerror(code)}]; "
        f"{remedy}, then {then}"
    )


@contextmanager
def write_guard(path: str | Path, what: str, then: str, cleanup: Callable[[], None] | None = None) -> Iterator[None]:
    """Around a write of ``what`` under ``path``: if it fails for a reason of WRITE_ERRORS, ``cleanup()`` (remove
    the partial result, so that nothing later takes it as complete) and raise one ``UsageError`` naming the path,
    the cause and what to do, ending with ``then`` (how to go on). Any other error goes through as it was."""
    try:
        yield
    except UsageError:  # already named, by a guard inside this one
        raise
    except Exception as error:
        code = write_errno(error, path)
        if code is None:
            raise
        if cleanup is not None:
            with suppress(OSError):  # a read-only or failing device may refuse to delete too
                cleanup()
        raise UsageError(write_failure(code, path, what, then)) from error
