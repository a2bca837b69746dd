import json
import logging
import subprocess
import sys

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


def test_the_command_that_ran_is_returned_by_its_console_scripts_name(monkeypatch):
    ran = []

    def run(command, cwd):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(launch.subprocess, "run", run)
    command = launch.launch("inference.translate", ["in.txt", "--model", "m"], "test", after_stop="")
    assert command == ["vanilla-translate", "in.txt", "--model", "m"]
    assert ran == [[sys.executable, "-m", "inference.translate", "in.txt", "--model", "m"]]


def test_a_record_stands_for_a_run_only_with_its_settings_and_role(tmp_path, caplog):
    """One lookup for every runner: the settings (or settings that stand for them), the role where one is asked;
    a record of other settings in the run's own place is said to be trained again."""
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"settings": ["--seed", "1"], "role": "control"}))
    assert launch.recorded(path, ["--seed", "1"], "fix it")["role"] == "control"
    assert launch.recorded(path, ["--seed", "1"], "fix it", role="reproduction") is None
    assert launch.recorded(path, ["--seed", "2"], "fix it", alike=[["--seed", "1"]]) is not None
    assert launch.recorded(tmp_path / "none.json", ["--seed", "1"], "fix it") is None
    with caplog.at_level(logging.WARNING, logger="experiments"):
        assert launch.recorded(path, ["--seed", "2"], "fix it", name="seed 2") is None
    assert "seed 2 was recorded with other settings: training it again" in caplog.text
    path.write_text("{")
    with pytest.raises(UsageError, match=r"summary.json is not valid JSON .*: fix it$"):
        launch.recorded(path, ["--seed", "1"], "fix it")
