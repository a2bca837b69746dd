"""--patience N: fairseq's early stopping on a validation metric, through transformers' EarlyStoppingCallback and
--metric_for_best_model, its count restored with each checkpoint. Here the flags, their refusals and what the resolved
run writes; test_relaunch.py carries the count over a relaunch."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from training_helpers import train_argv, write_corpus
from transformers import EarlyStoppingCallback

from training.arguments import parse_args
from training.build import resolve_run, run_callbacks
from training.finish import load_final_model
from training.train import main
from vanilla_tools.cli import UsageError


def resolved(tmp_path, *flags: str):
    model_args, data_args, training_args = parse_args(["--config", "demo", "--output_dir", str(tmp_path), *flags])
    return resolve_run(model_args, data_args, training_args), training_args


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (("--patience", "-1"), r"^--patience -1: a number of evaluations, or 0 to train to the end$"),
        (
            ("--patience", "3", "--eval_strategy", "no"),
            r"^--patience 3 counts evaluations, but --eval_strategy is no: give --eval_strategy steps or epoch$",
        ),
        (
            ("--patience", "3", "--metric_for_best_model", "accuracy"),
            r"^--metric_for_best_model accuracy: the evaluations compute loss, bleu, chrf, bleu_lc_tok$",
        ),
        (
            ("--final_model", "best"),
            r"^--final_model best: best by what\? give --metric_for_best_model \(loss, bleu\) or --patience$",
        ),
        (
            ("--final_model", "best", "--patience", "2", "--save_strategy", "steps", "--save_steps", "100"),
            r"^--final_model best loads the checkpoint of the best evaluation, but --save_strategy steps does not "
            r"save at each --eval_strategy epoch: give the same strategy, --save_steps a multiple of --eval_steps$",
        ),
    ],
)
def test_a_patience_that_could_not_act_is_refused_in_one_line(flags, refusal):
    with pytest.raises(UsageError, match=refusal):
        parse_args(["--config", "demo", "--output_dir", "x", *flags])


@pytest.mark.parametrize(
    ("flags", "metric", "higher"),
    [((), "loss", False), (("--metric_for_best_model", "bleu"), "bleu", True)],
)
def test_a_patience_tracks_its_metric_and_restores_its_count_with_each_checkpoint(tmp_path, flags, metric, higher):
    """Validation loss unless another metric is named (fairseq's --best-checkpoint-metric default); Trainer then
    keeps the best (state.best_model_checkpoint, which rotation keeps) and resumes the callback's count."""
    run, training_args = resolved(tmp_path, "--patience", "4", *flags)
    assert (run.patience, run.best_metric) == (4, metric)
    assert (training_args.metric_for_best_model, training_args.greater_is_better) == (metric, higher)
    assert training_args.restore_callback_states_from_checkpoint
    stops = [c for c in run_callbacks(run, training_args, None, None) if isinstance(c, EarlyStoppingCallback)]
    assert [(c.early_stopping_patience, c.early_stopping_threshold) for c in stops] == [(4, 0.0)]


def test_without_patience_nothing_is_tracked_or_stopped(tmp_path):
    run, training_args = resolved(tmp_path)
    assert (run.patience, run.best_metric, training_args.metric_for_best_model) == (0, None, None)
    assert not training_args.restore_callback_states_from_checkpoint
    assert not any(isinstance(c, EarlyStoppingCallback) for c in run_callbacks(run, training_args, None, None))


def test_a_patience_without_a_validation_set_is_refused_in_one_line(tmp_path):
    training_files = ("--dataset", "files", "--train_files", "train.en", "train.de")
    with pytest.raises(UsageError, match=r"^--patience 2 counts evaluations, but there is no validation set$"):
        resolved(tmp_path, "--patience", "2", *training_files)


def test_the_refusal_comes_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """vanilla-train --patience on a corpus without validation files: exit status 1 and the one line, before the
    data is read or a tokenizer learned and saved: the output directory it would have made is not there."""
    corpus = write_corpus(tmp_path / "data")
    del corpus["validation"]
    output = tmp_path / "out"
    argv = ["--config", "demo", *train_argv(corpus, output, "--patience", "2", "--cache_dir", str(tmp_path / "c"))]
    monkeypatch.setattr(sys, "argv", ["vanilla-train", *argv])
    with pytest.raises(SystemExit) as exit_status:
        main()
    assert exit_status.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "vanilla-train: error: --patience 2 counts evaluations, but there is no validation set"
    )
    assert not output.exists() and not (tmp_path / "c").exists()


class Finished:
    """A trained run's trainer as load_final_model sees it: its state, its metric, and the weights it loads."""

    def __init__(self, best: str | None):
        self.state = SimpleNamespace(best_model_checkpoint=best, best_metric=41.5)
        self.args = SimpleNamespace(metric_for_best_model="bleu")
        self.loaded: list = []

    def load_checkpoint_weights(self, checkpoint: Path) -> None:
        self.loaded.append(checkpoint)

    def average_newest(self, count: int) -> list[Path]:
        self.loaded.append(count)
        return [Path(f"run/checkpoint-{step}") for step in (8, 9, 10)[-count:]]


@pytest.mark.parametrize(
    ("final_model", "average_last", "best", "loaded", "said"),
    [
        (
            "best",
            3,
            "run/checkpoint-4",
            [Path("run/checkpoint-4")],
            {
                "model": "best",
                "checkpoints": ["checkpoint-4"],
                "why": "--final_model best: its validation bleu (41.5) was the run's best",
            },
        ),
        (
            "average",
            2,
            "run/checkpoint-4",
            [2],
            {
                "model": "average",
                "checkpoints": ["checkpoint-9", "checkpoint-10"],
                "why": "--final_model average: §6.1's average of the last 2 checkpoints (--average_last)",
            },
        ),
        ("last", 3, "run/checkpoint-4", [], {"model": "last", "checkpoints": [], "why": "--final_model last"}),
        (
            "average",
            0,
            None,
            [],
            {
                "model": "last",
                "checkpoints": [],
                "why": "--final_model average without --average_last: the last weights",
            },
        ),
        (
            "best",
            3,
            None,
            [],
            {
                "model": "last",
                "checkpoints": [],
                "why": "--final_model best, but no checkpoint holds an evaluation: the last weights",
            },
        ),
    ],
)
def test_the_final_model_is_the_one_chosen_and_the_record_says_why(final_model, average_last, best, loaded, said):
    trainer = Finished(best)
    assert load_final_model(trainer, final_model, average_last) == said
    assert trainer.loaded == loaded
