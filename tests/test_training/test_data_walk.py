"""The data settings' paths are one-way (issue 111): followed from vanilla-train's assembly (``train_and_evaluate``:
``build.resolve_run``, then ``build.build_trainer``) as a call graph, the DataArguments come back to a file they had
left at most 4 times and never go from a lower layer up to a higher one. Measured as the code runs, not read from it:
the assembly runs on a tiny corpus under ``sys.setprofile`` (this thread: a tiny corpus is read and tokenized
in the process) and stops where training would begin.

The walk, defined:

- a call *holds* the settings when its frame holds the DataArguments object, read as the frame returns (its
  arguments and the locals it set): as one of them, in a tuple or list that is one, or as an attribute of one
  (``self.args``);
- the walk is the calls in the repository's packages that hold them, in the order they are made; each one's caller is
  the nearest enclosing call that holds them, the first (``train_and_evaluate``) has none;
- a call into another file than its caller's is a *move*; its return goes back and is not a move; calls within a file
  are not moves;
- the *files entered*: the files of the walk, the first call's included;
- a *comeback*: a move into a file the walk had entered before. Every call counts: two calls from build.py into
  corpus.py are one entry and one comeback, as the second call of train.py into build.py is;
- an *upward* move: from a module of a lower layer into one of a higher: the package's layer first, then, inside
  training, its part's (tests/test_architecture.py's LAYERS and TRAINING_PARTS, docs/architecture.md's tables).
"""

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_architecture import LAYERS, ROOT, TRAINING_PARTS, module_name, training_part
from training_helpers import train_argv, write_corpus

from training import build, train
from training.arguments import parse_args
from training.step.trainer import PaperSeq2SeqTrainer

MOST_COMEBACKS = 4  # the bar
PACKAGES = tuple(f"{ROOT / package}/" for package in LAYERS)


@dataclass(frozen=True)
class Call:
    """One call in the repository's packages: its file (relative to the root), function, and the index of the nearest
    enclosing such call (None for the outermost)."""

    file: str
    function: str
    caller: int | None


def holds(value: object, target: object) -> bool:
    """Whether ``value`` is ``target``, a tuple or list holding it, or an object with it as an attribute."""
    if value is target:
        return True
    if isinstance(value, (tuple, list)) and any(item is target for item in value):
        return True
    attributes = getattr(value, "__dict__", None)
    return isinstance(attributes, dict) and any(item is target for item in attributes.values())


def walk_of(target: object, call: Callable[[], object]) -> list[tuple[Call, Call | None]]:
    """The calls that hold ``target`` while ``call()`` runs, each with its caller in the walk (the nearest enclosing
    call holding it), in the order they are made. Every call in the packages is recorded with its enclosing one,
    and whether it holds ``target`` is decided when it returns (a local is set after the frame is entered)."""
    calls: list[Call] = []
    held: list[bool] = []
    open_frames = []

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGES):
            file = str(Path(frame.f_code.co_filename).relative_to(ROOT))
            calls.append(Call(file, frame.f_code.co_name, open_frames[-1][1] if open_frames else None))
            held.append(False)
            open_frames.append((frame, len(calls) - 1))
        elif event == "return" and open_frames and open_frames[-1][0] is frame:
            index = open_frames.pop()[1]
            held[index] = any(holds(value, target) for value in frame.f_locals.values())

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)

    def holding_caller(index: int | None) -> int | None:
        while index is not None and not held[index]:
            index = calls[index].caller
        return index

    walk = []
    for index, one in enumerate(calls):
        if held[index]:
            caller = holding_caller(one.caller)
            walk.append((one, calls[caller] if caller is not None else None))
    return walk


def layer(file: str) -> tuple[int, int]:
    """A file's place in the layers: its package's layer, then (inside training) its part's."""
    module = module_name(ROOT / file)
    package = module.split(".")[0]
    return LAYERS[package], TRAINING_PARTS[training_part(module)] if package == "training" else 0


@dataclass(frozen=True)
class WalkCount:
    """What the issue counts of a walk: the files entered, and the moves that come back or go up (as
    ``caller -> callee`` lines)."""

    files: list[str]
    comebacks: list[str]
    upward: list[str]

    def __str__(self) -> str:
        return f"{len(self.files)} files entered, {len(self.comebacks)} comebacks, {len(self.upward)} upward"


def counted(walk: list[tuple[Call, Call | None]]) -> WalkCount:
    """The walk's files, comebacks and upward moves (module docstring)."""
    files, comebacks, upward = [], [], []
    for call, caller in walk:
        if caller is not None and call.file == caller.file:
            continue
        move = f"{caller.file}:{caller.function} -> {call.file}:{call.function}" if caller else ""
        if call.file in files:
            comebacks.append(move)
        else:
            files.append(call.file)
        if caller is not None and layer(caller.file) < layer(call.file):
            upward.append(move)
    return WalkCount(files, comebacks, upward)


class TrainingBegins(Exception):
    """Raised where training would begin: the assembly is done."""


def assembly_walk(folder: Path, monkeypatch, *flags: str) -> WalkCount:
    """The walk of the data settings through vanilla-train's assembly (``train_and_evaluate`` up to training) of a
    tiny run with ``flags``."""

    def begins(*_args, **_kwargs):
        raise TrainingBegins

    monkeypatch.setattr(PaperSeq2SeqTrainer, "train", begins)
    argv = train_argv(write_corpus(folder / "data"), folder / "run", "--max_steps", "2", *flags)
    model_args, data_args, training_args = parse_args(argv)

    def assemble():
        with pytest.raises(TrainingBegins):
            train.train_and_evaluate(argv, time.monotonic(), model_args, data_args, training_args)

    count = counted(walk_of(data_args, assemble))
    print(f"data settings' walk {' '.join(flags) or '(default)'}: {count}: {count.files}; comebacks {count.comebacks}")
    return count


@pytest.mark.parametrize(
    "flags", [(), ("--bpe_dropout", "0.1"), ("--streaming",)], ids=["default", "bpe_dropout", "streaming"]
)
def test_the_data_settings_walk_is_one_way(tmp_path, monkeypatch, flags):
    """The issue's bar, on the plain run and on each kind of training set whose assembly reads the settings
    elsewhere (BPE-dropout's pairs, --streaming's stream)."""
    count = assembly_walk(tmp_path, monkeypatch, *flags)
    assert count.files[:2] == ["training/train.py", "training/build.py"]
    assert not count.upward, count.upward
    assert len(count.comebacks) <= MOST_COMEBACKS, f"{count}: {count.comebacks}"


PLANTED = """
def planted(data_args, training_args):
    check_streaming(data_args, training_args, ())
    check_streaming(data_args, training_args, ())
"""


def test_the_walk_counts_a_planted_upward_call_and_comeback(tmp_path):
    """A function of training's data path (the lowest part) that calls build.py (a higher one) twice: two upward moves,
    the second a comeback."""
    code = compile(PLANTED, str(ROOT / "training" / "data" / "planted.py"), "exec")
    namespace = {"check_streaming": build.check_streaming}
    exec(code, namespace)
    _, data_args, training_args = parse_args(train_argv(write_corpus(tmp_path), tmp_path / "run", "--max_steps", "2"))
    count = counted(walk_of(data_args, lambda: namespace["planted"](data_args, training_args)))
    move = "training/data/planted.py:planted -> training/build.py:check_streaming"
    assert (count.files, count.comebacks, count.upward) == (
        ["training/data/planted.py", "training/build.py"],
        [move],
        [move, move],
    )
