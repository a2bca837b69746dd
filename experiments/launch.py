"""How the experiment runners start the package's programs: each in its own process from the checkout's root, as
``python -m`` of its module (the checkout's code, installed or not), and a stop by a signal or a failure reported in
one line that says what the runner does about it."""

import logging
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from training.api import stopping_signal
from vanilla_tools.cli import UsageError
from vanilla_tools.provenance import ROOT

logger = logging.getLogger("experiments")


def shown(path: Path) -> str:
    """A path as the record shows it: relative to the repository where it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def program(module: str) -> str:
    """The console script that runs ``module`` (pyproject's [project.scripts]), by the name users type."""
    scripts = (script.name for script in entry_points(group="console_scripts") if script.module == module)
    return next(scripts, f"python -m {module}")


def launch(
    module: str, argv: list[str], what: str, *, after_stop: str, after_failure: str = "its message above"
) -> None:
    """``python -m module argv``, logged under ``what``; the program's own output goes to the terminal. A stop by a
    signal (the status 128 + its number that vanilla-train leaves after saving a checkpoint) raises
    ``what: stopped by SIGTERM<after_stop>``; any other failure
    ``what: <its console script> exited with status N (<after_failure>)``."""
    name = program(module)
    logger.info("%s: %s %s", what, name, " ".join(argv))
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT)
    if (stopped := stopping_signal(done.returncode)) is not None:
        raise UsageError(f"{what}: stopped by {stopped}{after_stop}")
    if done.returncode:
        raise UsageError(f"{what}: {name} exited with status {done.returncode} ({after_failure})")
