"""What every benchmark's JSON records besides its figures: the command, the commit of the code, the machine."""

import shlex
import sys
from pathlib import Path

from training.train import git_commit, machine


def command() -> str:
    """The command as a user would type it: the console script's name, or python -m for a module run as a script."""
    program = Path(sys.argv[0])
    name = f"python -m benchmarks.{program.stem}" if program.suffix == ".py" else program.name
    return " ".join([name, shlex.join(sys.argv[1:])]).strip()


def provenance(**versions: str | None) -> dict:
    """The record's header; `versions` adds packages the benchmark used beyond torch and transformers."""
    return {"command": command(), "code": git_commit(), "machine": {**machine(), **versions}}
