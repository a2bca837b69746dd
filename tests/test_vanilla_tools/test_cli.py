"""Console scripts: a user's mistake is one line and status 1; a bug keeps its traceback; on a transformers release
outside the tested range the model's one note comes first and nothing else changes."""

import subprocess
import sys

import pytest
import transformers
from helpers import release_notes

# the probe's second argument, where given, is the transformers release it runs as (set before the model is imported)
PROGRAM = """
import sys
import transformers
transformers.__version__ = sys.argv[2] if len(sys.argv) > 2 else transformers.__version__
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
    ("kind", "status", "lines"),
    [
        ("usage", 1, ["probe: error: --flag 3: must be even"]),
        ("file", 1, ["probe: error: [Errno 2] No such file or directory: '/no/such/file'"]),
        ("model", 1, ["probe: error: `dropout` must be in [0, 1), got 1.5"]),
        ("bug", 1, ["Traceback (most recent call last):", "ValueError: an internal invariant broke"]),
        ("none", 0, []),
    ],
)
def test_user_errors_are_one_line_and_bugs_keep_their_traceback(kind, status, lines, tmp_path):
    assert probe(tmp_path, kind) == (status, release_notes() + lines)


def probe(tmp_path, *argv: str) -> tuple[int, list[str]]:
    """The probe's exit status and its stderr's lines, a traceback cut to its first and last line."""
    program = tmp_path / "probe"
    program.write_text(PROGRAM)
    done = subprocess.run([sys.executable, str(program), *argv], capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    if "Traceback (most recent call last):" in lines:
        start = lines.index("Traceback (most recent call last):")
        lines = [*lines[: start + 1], lines[-1]]
    return done.returncode, lines


@pytest.mark.parametrize(
    ("kind", "status", "lines"), [("model", 1, ["probe: error: `dropout` must be in [0, 1), got 1.5"]), ("none", 0, [])]
)
def test_a_release_newer_than_the_tested_range_adds_one_note_and_changes_nothing_else(kind, status, lines, tmp_path):
    """As a fresh install will meet the first transformers release after the tested range: the model imports, logs
    note_untested_release's one line, and behaves as on a release tested."""
    newer = f"{transformers.__version__.split('.')[0]}.99.0"
    (note,) = release_notes(newer)
    assert probe(tmp_path, kind, newer) == (status, [note, *lines])
