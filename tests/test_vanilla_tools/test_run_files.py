"""The run folder's files, typed: what training writes is what vanilla-translate and the model card read."""

import errno
import json
import os

import pytest

from vanilla_tools import run_files
from vanilla_tools.cli import UsageError
from vanilla_tools.run_files import RECIPE_FILE, RESULTS_FILE, EvalResults, TrainingRecipe


def test_recipe_and_results_round_trip(tmp_path):
    recipe = TrainingRecipe(
        source_lang="de",
        target_lang="en",
        max_source_length=64,
        dataset="files",
        num_beams=2,
        length_penalty=1.5,
        parameters=1234,
        recipe={"dropout": 0.1},
    )
    results = EvalResults(train={"train_loss": 2.5}, test={"test_bleu": 12.3}, averaged_checkpoints=["checkpoint-4"])
    recipe.write(tmp_path)
    results.write(tmp_path)
    assert TrainingRecipe.read(tmp_path) == recipe
    assert EvalResults.read(tmp_path) == results
    written = {"train": {"train_loss": 2.5}, "test": {"test_bleu": 12.3}, "averaged_checkpoints": ["checkpoint-4"]}
    assert json.loads((tmp_path / RESULTS_FILE).read_text()) == written
    assert results.split("validation") == {} and results.split("test") == {"test_bleu": 12.3}
    assert not list(tmp_path.glob("*.tmp"))  # written aside, then renamed


def test_missing_files_read_as_none_and_unknown_keys_are_ignored(tmp_path):
    assert TrainingRecipe.read(tmp_path) is None and EvalResults.read(tmp_path) is None
    (tmp_path / RECIPE_FILE).write_text(json.dumps({"max_source_length": 9, "added_later": True}))
    assert TrainingRecipe.read(tmp_path).max_source_length == 9


def test_a_damaged_file_is_named(tmp_path):
    (tmp_path / RECIPE_FILE).write_text("{not json")
    with pytest.raises(UsageError, match=rf"{RECIPE_FILE} is not valid JSON"):
        TrainingRecipe.read(tmp_path)
    (tmp_path / RESULTS_FILE).write_text("[1, 2]")
    with pytest.raises(UsageError, match=rf"{RESULTS_FILE} holds a list, not an object: rewrite or delete it"):
        EvalResults.read(tmp_path)


def test_a_failed_write_leaves_neither_the_file_nor_its_staged_copy(tmp_path, monkeypatch):
    def full(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(run_files.os, "replace", full)  # the staged copy is written, the rename fails
    with pytest.raises(OSError, match="No space left"):
        EvalResults(train={"train_loss": 2.5}).write(tmp_path)
    assert list(tmp_path.iterdir()) == []
