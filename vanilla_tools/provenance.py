"""Where a result came from: the commit of the code (and whether the work tree differed), the machine, and the
command as typed. Every run record (summary.json) and benchmark JSON starts with these."""

import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch
import transformers


def git_commit() -> dict:
    """The commit of the code that ran, whether the work tree differed from it and in which files (None outside a
    git checkout)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {"commit": None, "uncommitted_changes": None}
    changed = (git("diff", "--name-only", "HEAD") or "").splitlines()  # tracked files, staged or not
    # which tracked files differed (a generated page is not a code change): the first 20
    return {"commit": commit, "uncommitted_changes": bool(changed), "changed_files": changed[:20]}


def processor() -> str:
    """The CPU's model name (Linux lists it in /proc/cpuinfo; platform.processor() is often empty there)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({platform.machine()})"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the run ran on."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"processor": processor(), "cpu_cores": os.cpu_count(), "gpus": gpus,
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__}  # fmt: skip


def command() -> str:
    """The command as a user would type it: the console script's name, or python -m for a module run as a script."""
    program = Path(sys.argv[0])
    name = f"python -m {program.parent.name}.{program.stem}" if program.suffix == ".py" else program.name
    return " ".join([name, shlex.join(sys.argv[1:])]).strip()


def provenance(**versions: str | None) -> dict:
    """A record's header; ``versions`` adds packages the run used beyond torch and transformers."""
    return {"command": command(), "code": git_commit(), "machine": {**machine(), **versions}}
