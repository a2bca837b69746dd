"""vanilla-translate's n-best lists, run as a user runs the console script."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = str(Path(sys.executable).parent / "vanilla-translate")
LINES = ["Two young men are playing football.", "", "A woman in a red coat walks a dog across the street."]


def translate(model_dir: Path, source: Path, *args: str) -> subprocess.CompletedProcess:
    command = [SCRIPT, "--model", str(model_dir), str(source), "--engine", "generate", *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def model_and_source(trained_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("nbest")
    shutil.copytree(trained_run["output"], folder / "model", ignore=shutil.ignore_patterns("checkpoint-*"))
    (folder / "in.en").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return folder / "model", folder / "in.en"


def test_nbest_lists_in_moses_format(model_and_source):
    model_dir, source = model_and_source
    best = translate(model_dir, source, "--num_beams", "4")
    nbest = translate(model_dir, source, "--num_beams", "4", "--nbest", "3")
    assert best.returncode == 0 and nbest.returncode == 0, nbest.stderr
    entries = [line.split(" ||| ") for line in nbest.stdout.splitlines()]
    assert [int(number) for number, _, _ in entries] == [0, 0, 0, 1, 2, 2, 2]  # the empty line: one empty entry
    assert entries[3][1:] == ["", "0.0000"]
    for number in (0, 2):
        scores = [float(score) for n, _, score in entries if int(n) == number]
        assert scores == sorted(scores, reverse=True) and all(score < 0 for score in scores)
        assert len({text for n, text, _ in entries if int(n) == number}) == 3  # three different hypotheses
    # the first of each list is the translation vanilla-translate writes without --nbest
    firsts = {}
    for n, text, _ in entries:
        firsts.setdefault(n, text)
    assert list(firsts.values()) == best.stdout.splitlines()


def test_an_nbest_longer_than_the_beam_is_refused(model_and_source):
    done = translate(*model_and_source, "--num_beams", "2", "--nbest", "3")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "vanilla-translate: error: an n-best list of 3 needs 1 <= n <= num_beams (2)"
    )
