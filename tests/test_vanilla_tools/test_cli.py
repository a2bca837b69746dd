"""Console scripts: a user's mistake is one line and status 1; a bug keeps its traceback."""

import subprocess
import sys

import pytest

PROGRAM = """
import sys
from vanilla_tools.cli import UsageError, console_script
from modeling_vanilla import VanillaTransformerConfig

def run(argv):
    kind = sys.argv[1]
    if kind == "usage":
        raise UsageError("--flag 3: must be even")
    if kind == "file":
        open("/no/such/file")
    if kind == "model":
        VanillaTransformerConfig(dropout=1.5)
    if kind == "bug":
        raise ValueError("an internal invariant broke")

console_script(run)()
"""


@pytest.mark.parametrize(
    ("kind", "status", "last_line"),
    [
        ("usage", 1, "probe: error: --flag 3: must be even"),
        ("file", 1, "probe: error: [Errno 2] No such file or directory: '/no/such/file'"),
        ("model", 1, "probe: error: `dropout` must be in [0, 1), got 1.5"),
        ("bug", 1, "ValueError: an internal invariant broke"),
        ("none", 0, None),
    ],
)
def test_user_errors_are_one_line_and_bugs_keep_their_traceback(kind, status, last_line, tmp_path):
    probe = tmp_path / "probe"
    probe.write_text(PROGRAM)
    done = subprocess.run([sys.executable, str(probe), kind], capture_output=True, text=True, timeout=60)
    assert done.returncode == status
    lines = done.stderr.strip().splitlines()
    if last_line is None:
        assert not lines
    elif kind == "bug":
        assert lines[0] == "Traceback (most recent call last):" and lines[-1] == last_line
    else:
        assert lines == [last_line]
