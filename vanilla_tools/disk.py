"""A full disk, named in one line.

Writers report a full disk in their own ways: Python's ``OSError`` (errno 28), safetensors' ``SafetensorError`` ("os
error 28"), and ``torch.save``'s ``RuntimeError`` ("unexpected pos 576 vs 534", which says nothing about space). So a
failed write is judged by the error when it says so, else by the device: nearly no space left on it after the write
failed."""

import errno
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .cli import UsageError

NEARLY_FULL = 64 * 2**20  # bytes: less than this left after a failed write means the write filled the device


def free_bytes(path: str | Path) -> int | None:
    """Space available on the device of ``path`` (or of its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def out_of_space(error: BaseException, path: str | Path) -> bool:
    """Whether ``error``, raised while writing under ``path``, came from its device being full."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if "No space left on device" in str(error) or "os error 28" in str(error):
        return True
    free = free_bytes(path)
    return free is not None and free < NEARLY_FULL


@contextmanager
def disk_space_guard(
    path: str | Path, what: str, then: str, cleanup: Callable[[], None] | None = None
) -> Iterator[None]:
    """Around a write of ``what`` under ``path``: if the device fills up, ``cleanup()`` (remove the partial result)
    and raise one ``UsageError`` naming the device's path, what was being written and ``then`` (what to do)."""
    try:
        yield
    except Exception as error:
        if not out_of_space(error, path):
            raise
        if cleanup is not None:
            cleanup()
        free = free_bytes(path)
        left = f", {free / 2**20:.1f} MiB left" if free is not None else ""
        raise UsageError(f"no space left on the device of {path}{left} while writing {what}; {then}") from error
