"""The files a training run leaves in its model directory besides what ``save_pretrained`` writes, read and written
only here: ``training_recipe.json`` (how the model was trained: vanilla-translate reads the length it was trained
on, the model card the recipe) and ``eval_results.json`` (its scores: the model card's results).

Each is written whole to a temporary file and renamed, so a reader never sees half of one."""

import json
import os
from contextlib import suppress
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .cli import UsageError
from .decoding import PAPER_LENGTH_PENALTY, PAPER_NUM_BEAMS

RECIPE_FILE = "training_recipe.json"
RESULTS_FILE = "eval_results.json"
JSON_KINDS = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def write_whole(path: Path, text: str) -> None:
    """``text`` as ``path``, whole or not at all: written aside, flushed to the device, then renamed (a failed write,
    a kill or a power loss during it leaves the earlier file as it was; a kill may leave the staged copy, which the
    next write replaces). Written as given: no newline translation (a CSV's \\r\\n stays)."""
    staged = path.with_name(path.name + ".tmp")
    try:
        with open(staged, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(staged, path)
    finally:
        with suppress(OSError):  # after a failure; a read-only device refuses this too
            staged.unlink(missing_ok=True)


def write_json(path: Path, record: dict | list) -> None:
    """``record`` as ``path``, whole or not at all (``write_whole``)."""
    write_whole(path, json.dumps(record, indent=2) + "\n")


def read_json(path: Path, kind: type = dict, remedy: str = "rewrite or delete it") -> dict | list | None:
    """The JSON ``kind`` (an object or a list) that ``path`` holds; None where there is no such file. A file that is
    not JSON, or holds another kind, is named in one line with what to do (``remedy``)."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except ValueError as error:
        raise UsageError(f"{path} is not valid JSON ({error}): {remedy}") from error
    if not isinstance(record, kind):
        raise UsageError(f"{path} holds {JSON_KINDS[type(record)]}, not {JSON_KINDS[kind]}: {remedy}")
    return record


class RunFile:
    """A JSON file of a model directory, written whole and read back as the dataclass it was written from (keys
    this code does not know, written by a later version, are left out)."""

    FILE: str

    def as_dict(self) -> dict:
        return asdict(self)

    def write(self, model_dir: str | Path) -> Path:
        path = Path(model_dir) / self.FILE
        write_json(path, self.as_dict())
        return path

    @classmethod
    def read(cls, model_dir: str | Path):
        """The file of ``model_dir`` as a ``cls``, or None if it has none (a model not trained by vanilla-train)."""
        record = read_json(Path(model_dir) / cls.FILE)
        if record is None:
            return None
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in record.items() if key in known})


@dataclass
class TrainingRecipe(RunFile):
    """``training_recipe.json``: the data and decoding a model was trained and evaluated with, and the recipe as
    the model card reports it (a human-readable description of each part)."""

    source_lang: str = "en"
    target_lang: str = "de"
    max_source_length: int | None = None  # vanilla-translate warns about longer inputs
    max_target_length: int | None = None
    dataset: str = "multi30k"
    num_beams: int = PAPER_NUM_BEAMS
    length_penalty: float = PAPER_LENGTH_PENALTY
    parameters: int | None = None
    recipe: dict[str, object] = field(default_factory=dict)

    FILE = RECIPE_FILE


@dataclass
class EvalResults(RunFile):
    """``eval_results.json``: the metrics of each split (``validation``, ``test``: keys ``<split>_bleu``,
    ``<split>_chrf``, ``<split>_signature``, ...), of training (``train``), and what the final evaluation chose."""

    train: dict = field(default_factory=dict)
    validation: dict | None = None
    test: dict | None = None
    length_penalty_search: dict[str, float] | None = None  # alpha -> validation BLEU (§6.1)
    averaged_checkpoints: list[str] | None = None
    final_model: dict | None = None  # the model evaluated: which, of which checkpoints, why (training/finish.py)

    def split(self, name: str) -> dict:
        """The metrics of split ``name`` (validation or test), {} if it was not evaluated."""
        return getattr(self, name) or {}

    FILE = RESULTS_FILE

    def as_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class FinishedRun(RunFile):
    """``run_finished.json``: written last, once everything the command asked for is done (trained, saved,
    evaluated, exported, summarised, pushed): the step the run ended at and its settings. It says what the directory
    holds to a relaunch of the command (training/run/relaunch.py), and is no part of the model (vanilla-push leaves
    it)."""

    step: int = 0
    settings: dict = field(default_factory=dict)

    FILE = "run_finished.json"
