"""What a trained vanilla-train run leaves (``train`` conducts): the final model, the run's files and record, and
the mark that it finished, each write named in one line when it fails (``checkpoints.output_guard``)."""

import logging
import time
from pathlib import Path

from transformers.utils import SAFE_WEIGHTS_NAME

from hub_card import write_model_card
from vanilla_tools.decoding import Decoding
from vanilla_tools.exports import cached_ctranslate2
from vanilla_tools.run_files import EvalResults, FinishedRun

from .run.checkpoints import output_guard
from .run.record import RunReport, write_recipe, write_summary
from .step.trainer import PaperSeq2SeqTrainer

logger = logging.getLogger("vanilla_train")


def load_final_model(trainer: PaperSeq2SeqTrainer, final_model: str, average_last: int) -> dict:
    """The model the run evaluates and saves (--final_model), loaded into ``trainer``'s model, and what the record
    says of it: which model (``model``), made of which checkpoints (``checkpoints``), and why (``why``). ``best``
    is the checkpoint Trainer found best on --metric_for_best_model (kept through rotation); a run that saved no
    evaluation has none, and keeps its last weights, so said. ``average`` is §6.1's, of ``average_last`` checkpoints
    (none asked: the last weights)."""
    state, metric = trainer.state, trainer.args.metric_for_best_model
    if final_model == "best" and state.best_model_checkpoint:
        best = Path(state.best_model_checkpoint)
        trainer.load_checkpoint_weights(best)
        why = f"--final_model best: its validation {metric} ({state.best_metric:g}) was the run's best"
        return {"model": "best", "checkpoints": [best.name], "why": why}
    if final_model == "average" and average_last:
        averaged = [path.name for path in trainer.average_newest(average_last)]
        why = f"--final_model average: §6.1's average of the last {average_last} checkpoints (--average_last)"
        return {"model": "average", "checkpoints": averaged, "why": why}
    why = {
        "best": "--final_model best, but no checkpoint holds an evaluation: the last weights",
        "average": "--final_model average without --average_last: the last weights",
        "last": "--final_model last",
    }[final_model]
    return {"model": "last", "checkpoints": [], "why": why}


def save_final_model(trainer: PaperSeq2SeqTrainer, decoding: Decoding, metrics: dict) -> None:
    """The trained model, saved with ``decoding`` (the one its final evaluation chose, alpha included), and the
    training ``metrics``."""
    output_dir = Path(trainer.args.output_dir)
    with output_guard(output_dir, "the final model", (output_dir / SAFE_WEIGHTS_NAME).unlink):
        trainer.save_final_model(decoding)
        trainer.save_metrics("train", metrics)


def write_run_files(trainer: PaperSeq2SeqTrainer, report: RunReport) -> None:
    """The first process's files of a trained run: the CTranslate2 export, eval_results.json, training_recipe.json,
    the model card, and with --summary_dir the run's summary (``record.write_summary``)."""
    model_args, data_args, training_args = report.arguments
    output_dir = Path(training_args.output_dir)
    if model_args.export_ct2:
        logger.info("exported for CTranslate2 to %s", cached_ctranslate2(output_dir, model_args.export_ct2))
    with output_guard(output_dir, "the run's files (eval_results.json, training_recipe.json, README.md)"):
        EvalResults(**report.results).write(output_dir)
        write_recipe(output_dir, model_args, data_args, training_args, report.model, report.decoding, report.run)
        write_model_card(output_dir, training_args.hub_model_id)
    record = ""
    if model_args.summary_dir:
        folder = Path(model_args.summary_dir.format(date=time.strftime("%Y-%m-%d")))
        with output_guard(folder, "the run's summary"):
            write_summary(folder, report, output_dir)
        record = f"; the record: {folder / 'summary.json'}"
    state = trainer.state
    print(
        f"trained {state.global_step} steps ({state.epoch:.2f} epochs) in {clock(report.train_minutes)}, the whole "
        f"command took {clock(report.wall_minutes)}{record}"
    )


def clock(minutes: float) -> str:
    """``minutes`` as "3 min 21 s"."""
    seconds = round(minutes * 60)
    return f"{seconds // 60} min {seconds % 60} s"


def mark_finished(trainer: PaperSeq2SeqTrainer, settings: dict) -> None:
    """The run marked finished (``FinishedRun``, of its ``settings``), last: a rerun of the same command then has
    nothing to do."""
    output_dir = Path(trainer.args.output_dir)
    with output_guard(output_dir, FinishedRun.FILE):
        FinishedRun(step=trainer.state.global_step, settings=settings).write(output_dir)
