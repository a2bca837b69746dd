"""One run per output directory.

Two runs pointed at the same ``--output_dir`` (a typo, a relaunch while the first still runs) would write over each
other's checkpoints. The first process of a run holds ``OUTPUT_DIR/.vanilla-train.lock`` for as long as it runs:
an exclusive ``flock`` on it, which the kernel releases whenever the process ends, however it ends (SIGKILL, a
crash), and in it the holder's PID, host and start time to name it. A second run is refused naming the first; a
lock left by a run that has ended is taken over, saying whose it was.

``flock`` is reliable on local disks; on a network filesystem that does not support it across hosts, two runs on
different machines are not kept apart.
"""

import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from transformers import Seq2SeqTrainingArguments

from vanilla_tools.cli import UsageError

from .checkpoints import output_guard

logger = logging.getLogger(__name__)
LOCK_FILE = ".vanilla-train.lock"


class OutputDirLock:
    """Held by the run's first process from ``acquire()`` until the process ends (or ``release()``)."""

    def __init__(self, output_dir: str | os.PathLike):
        self.path = Path(output_dir) / LOCK_FILE
        self.fd: int | None = None
        self.made_folder = False  # acquire() made the output directory

    def acquire(self) -> "OutputDirLock":
        self.made_folder = not self.path.parent.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # held through a read-only descriptor: a file kept open for writing would keep its file system from being
        # remounted read-only while the run goes on (the run then names EROFS at its next write)
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            raise UsageError(
                f"{self.path.parent} is in use by another run ({holder}); give this run another --output_dir, or "
                "wait for that one to end"
            ) from None
        previous = self._holder(fd)
        if previous != "unknown":
            logger.warning("taking over the lock of %s: that run has ended", previous)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        self.fd = fd
        try:
            self.path.write_text(json.dumps(record) + "\n")
        except OSError:
            self.release()
            raise
        return self

    def release(self) -> None:
        if self.fd is not None:
            with suppress(OSError):  # a clean end leaves no holder to name (a read-only one leaves it to take over)
                self.path.write_text("")
            os.close(self.fd)  # closing releases the flock
            self.fd = None
            if self.made_folder:
                self._remove_if_unused()

    def _remove_if_unused(self) -> None:
        """The output directory this lock made, removed if the lock is all it holds: a run that failed before
        writing anything (a bad corpus, say) leaves no folder behind that looks like a run's."""
        with suppress(OSError):
            if [p.name for p in self.path.parent.iterdir()] == [LOCK_FILE]:
                self.path.unlink()
                self.path.parent.rmdir()

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            record = json.loads(os.pread(fd, 4096, 0).decode() or "null")
            return f"PID {record['pid']} on {record['host']}, started {record['started']}"
        except (ValueError, TypeError, KeyError):
            return "unknown"


@contextmanager
def holding_output_dir(training_args: Seq2SeqTrainingArguments) -> Iterator[None]:
    """The run's first process holds the output directory while it runs (``OutputDirLock``; a crash releases it
    too)."""
    lock = None
    if training_args.process_index == 0:
        with output_guard(Path(training_args.output_dir), "the run's lock"):
            lock = OutputDirLock(training_args.output_dir).acquire()
    try:
        yield
    finally:
        if lock is not None:
            lock.release()
