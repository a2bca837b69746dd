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
