"""Run by the disk-full tests where no small disk can be mounted: vanilla-train whose write of the optimizer state
into the checkpoint named CHECKPOINT fails as a full disk makes it fail.

    enospc_probe.py CHECKPOINT ARGS...
"""

import errno
import os
import sys

from probe_helpers import before_optimizer_write, run_train_with


def full(folder: str) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(folder, "optimizer.pt"))


if __name__ == "__main__":
    checkpoint, argv = sys.argv[1], sys.argv[2:]
    run_train_with(lambda trainer: before_optimizer_write(trainer, checkpoint, full), argv)
