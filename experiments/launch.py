"""How the experiment runners start the package's programs: each in its own process from the checkout's root, as
``python -m`` of its module (the checkout's code, installed or not), and a stop by a signal or a failure reported in
one line that says what the runner does about it. Also what every runner does around a vanilla-train run: whether a
record already stands for it (``recorded``), and the run launched and its summary read back (``train``)."""

import argparse
import logging
import subprocess
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from training.api import stopping_signal
from vanilla_tools.cli import UsageError
from vanilla_tools.provenance import ROOT
from vanilla_tools.run_files import read_json

logger = logging.getLogger("experiments")
SUMMARY = "summary.json"  # vanilla-train's record of a run, in its --summary_dir


def shown(path: Path) -> str:
    """A path as the record shows it: relative to the repository where it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def program(module: str) -> str:
    """The console script that runs ``module`` (pyproject's [project.scripts]), by the name users type."""
    scripts = (script.name for script in entry_points(group="console_scripts") if script.module == module)
    return next(scripts, f"python -m {module}")


def launch(
    module: str, argv: list[str], what: str, *, after_stop: str, after_failure: str = "its message above"
) -> list[str]:
    """``python -m module argv``, logged under ``what``; the program's own output goes to the terminal. Returns the
    command that ran, by its console script's name (what a record states). A stop by a signal (the status 128 + its
    number that vanilla-train leaves after saving a checkpoint) raises ``what: stopped by SIGTERM<after_stop>``; any
    other failure ``what: <its console script> exited with status N (<after_failure>)``."""
    name = program(module)
    logger.info("%s: %s %s", what, name, " ".join(argv))
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT)
    if (stopped := stopping_signal(done.returncode)) is not None:
        raise UsageError(f"{what}: stopped by {stopped}{after_stop}")
    if done.returncode:
        raise UsageError(f"{what}: {name} exited with status {done.returncode} ({after_failure})")
    return [name, *argv]


def as_module(argv: list[str]) -> str:
    """vanilla-train's command line ``argv`` as the runners' own records state it, the way it runs: ``python -m
    training.train`` and its arguments."""
    return " ".join(["python -m training.train", *argv])


def record_folder(output_dir: Path) -> Path:
    """Where vanilla-train writes the summary of the run in ``output_dir`` until the runner files it: beside it, in
    ``<output_dir>-record``."""
    return output_dir.with_name(f"{output_dir.name}-record")


def recorded(
    path: Path,
    settings: list[str],
    remedy: str,
    *,
    alike: Iterable[list[str]] = (),
    role: str | None = None,
    name: str | None = None,
) -> dict | None:
    """The record at ``path`` (a filed summary.json, or a runner's own record) if its run was trained with
    ``settings`` (vanilla-train's arguments but the output folders), or with one of ``alike`` (settings that stand for
    them), and, given ``role``, filed in that role; else None, and the run is trained again (said in a warning where
    ``name``, the run, has a record of other settings there). A damaged record raises, naming ``remedy``."""
    record = read_json(path, dict, remedy)
    if record is None or (role is not None and record.get("role") != role):
        return None
    if record.get("settings") not in (settings, *alike):
        if name is not None:
            logger.warning("%s was recorded with other settings: training it again", name)
        return None
    return record


def trainer_argv(flags: list[str], output_dir: Path, summary_dir: Path) -> list[str]:
    """vanilla-train's command line: ``flags``, then where the run and its summary go (as the record shows them)."""
    return [*flags, "--output_dir", shown(output_dir), "--summary_dir", shown(summary_dir)]


def summary_of(summary_dir: Path, output_dir: Path, what: str, remedy: str) -> dict:
    """The summary.json vanilla-train wrote of the finished run in ``output_dir``; a folder without one (the run was
    found finished and its summary is gone) is refused in one line naming ``remedy``."""
    summary = read_json(summary_dir / SUMMARY, dict, remedy)
    if summary is None:
        raise UsageError(
            f"{what}: {shown(output_dir)} holds the finished run, but {shown(summary_dir)} has no {SUMMARY}; {remedy}"
        )
    return summary


def train(
    flags: list[str],
    output_dir: Path,
    what: str,
    *,
    remedy: str,
    summary_dir: Path | None = None,
    after_stop: str,
    after_failure: str = "its message above",
) -> tuple[list[str], dict]:
    """vanilla-train ``flags`` in its own process (``launch``), the run in ``output_dir`` and its summary in
    ``summary_dir`` (default ``record_folder``); returns the command that ran and the summary it wrote
    (``summary_of``)."""
    summary_dir = summary_dir or record_folder(output_dir)
    argv = trainer_argv(flags, output_dir, summary_dir)
    command = launch("training.train", argv, what, after_stop=after_stop, after_failure=after_failure)
    return command, summary_of(summary_dir, output_dir, what, remedy)


def add_record_arguments(parser: argparse.ArgumentParser, *, runs: Path, results: Path, page: Path) -> None:
    """The flags every experiment runner shares: ``--report`` (the page alone), where its runs, records and page go,
    and ``--pairs`` (a rehearsal, kept apart: the runners' budgets lay it out alike)."""
    parser.add_argument("--report", action="store_true", help="write the page from the records; run nothing")
    parser.add_argument("--runs", default=str(runs), help="the models and the data")
    parser.add_argument("--results", default=str(results), help="where the records go")
    parser.add_argument("--page", default=str(page), help="the page written from them")
    parser.add_argument(
        "--pairs",
        type=int,
        help="a rehearsal: the first N training pairs, N // 10 of validation and test2016 (its runs, data and "
        "records apart, in STEPS-steps-N-pairs/ and data-N-pairs/; with --report, its page)",
    )
