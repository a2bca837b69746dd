import subprocess

import pytest

from experiments import launch
from vanilla_tools.cli import UsageError


def test_a_program_is_named_by_its_console_script():
    assert launch.program("training.train") == "vanilla-train"
    assert launch.program("inference.translate") == "vanilla-translate"
    assert launch.program("experiments.backtranslation") == "python -m experiments.backtranslation"


def test_a_failure_is_one_line_naming_the_program_and_its_status():
    """A real process: a module that is not there exits with status 1."""
    with pytest.raises(UsageError, match=r"^seed 2: python -m experiments\.not_there exited with status 1 \(see it\)$"):
        launch.launch("experiments.not_there", [], "seed 2", after_stop="; never", after_failure="see it")


@pytest.mark.parametrize(("status", "signal"), [(143, "SIGTERM"), (130, "SIGINT")])
def test_a_stop_by_a_signal_says_what_the_runner_does_next(monkeypatch, status, signal):
    monkeypatch.setattr(launch.subprocess, "run", lambda command, cwd: subprocess.CompletedProcess(command, status))
    with pytest.raises(UsageError, match=rf"^seed 2: stopped by {signal}; it goes on$"):
        launch.launch("training.train", ["--seed", "2"], "seed 2", after_stop="; it goes on")


def test_a_path_is_shown_relative_to_the_checkout_where_it_is_inside(tmp_path):
    assert launch.shown(launch.ROOT / "results" / "x") == "results/x"
    assert launch.shown(tmp_path) == str(tmp_path)
