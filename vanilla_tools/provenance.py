"""Where a result came from: the commit of the code (and whether the work tree differed), the machine, and the
command as typed. Every run record (summary.json) and benchmark JSON starts with these."""

import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch
import transformers

from .hardware import cpu_features, cpuinfo

ROOT = Path(__file__).resolve().parent.parent
# What the repository's tools write from the records, not code: the records themselves and the pages generated
# from them (experiments/). A record written while they differ from the commit still names clean code; regenerating
# docs/table3.md after every Table 3 row made every later row "uncommitted" before this rule.
GENERATED = ("results/", "docs/results.md", "docs/table3.md", "docs/table3-curves/", "docs/recipe.md")
# The code a run executes: the installed packages (pyproject's packages.find) and the bundled data. Its git trees
# name it apart from the commit, so commits that only add records or docs keep it (experiments/table3.py compares
# a row with base seeds of the same code).
LIBRARY = ("modeling_vanilla", "vanilla_tools", "training", "inference", "hub_card", "data")
# A copy of the code without git (benchmarks/gpu_pack.py packs one for a lent GPU) names its commit in this file,
# git_commit's record as the packing checkout made it.
CODE_RECORD = "code.json"


def generated(path: str) -> bool:
    """Whether ``path`` (relative to the repository) is an output the repository's tools generate."""
    return any(path == name or (name.endswith("/") and path.startswith(name)) for name in GENERATED)


def packages(root: Path = ROOT) -> list[str]:
    """The repository's Python packages (every top-level folder with an ``__init__.py``), installed or not."""
    return sorted(path.parent.name for path in root.glob("*/__init__.py"))


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit(root: Path = ROOT) -> dict:
    """The commit of the code that ran and every file in which the tree differed from it (None outside a git
    checkout): tracked files changed, staged or not, and untracked files under the packages and data/ (a new
    module is code the commit does not have), less the generated outputs (``GENERATED``). ``code_tree`` names the
    code itself (the git trees of ``LIBRARY`` at the commit), None when any of it differed. Outside a checkout, a
    packed copy's ``CODE_RECORD``."""
    commit = _git(root, "rev-parse", "HEAD")
    if not commit:
        packed = root / CODE_RECORD
        return json.loads(packed.read_text()) if packed.is_file() else {"commit": None, "uncommitted_changes": None}
    tracked = (_git(root, "diff", "--name-only", "HEAD") or "").splitlines()
    code = sorted({*packages(root), *LIBRARY})
    untracked = (_git(root, "ls-files", "--others", "--exclude-standard", "--", *code) or "").splitlines()
    changed = sorted({path for path in tracked + untracked if not generated(path)})
    in_code = any(path.split("/")[0] in LIBRARY for path in changed)
    trees = _git(root, "ls-tree", "HEAD", "--", *LIBRARY)
    code_tree = hashlib.sha1(trees.encode()).hexdigest()[:12] if trees and not in_code else None
    return {
        "commit": commit,
        "uncommitted_changes": bool(changed),
        "changed_files": changed,
        "untracked_files": [path for path in changed if path in untracked],
        "code_tree": code_tree,
    }


def processor() -> str:
    """The CPU's model name (Linux lists it in /proc/cpuinfo; platform.processor() is often empty there)."""
    name = cpuinfo("model name")
    return f"{name} ({platform.machine()})" if name else platform.processor() or platform.machine()


def machine() -> dict:
    """What the run ran on."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "processor": processor(),
        "cpu_features": cpu_features(),
        "cpu_cores": os.cpu_count(),
        "gpus": gpus,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def command() -> str:
    """The command as a user would type it: the console script's name, or python -m for a module run as a script."""
    program = Path(sys.argv[0])
    name = f"python -m {program.parent.name}.{program.stem}" if program.suffix == ".py" else program.name
    return " ".join([name, shlex.join(sys.argv[1:])]).strip()


def provenance(**versions: str | None) -> dict:
    """A record's header; ``versions`` adds packages the run used beyond torch and transformers."""
    return {"command": command(), "code": git_commit(), "machine": {**machine(), **versions}}
