"""`vanilla-train`: the paper's recipe through Seq2SeqTrainer, on the bundled Multi30k by default.

    vanilla-train --config demo --output_dir runs/demo
    vanilla-train --config multi30k --output_dir runs/m30k --num_train_epochs 20
    torchrun --nproc_per_node 2 -m training.train --config demo ...      (or: accelerate launch ...)

Every Seq2SeqTrainingArguments flag works; ``--config NAME`` loads ``training/configs/NAME.yaml`` as defaults that
any flag on the command line overrides. The same command run again resumes from the newest complete checkpoint of
the run, and does nothing once the run has finished (``relaunch``); ``--overwrite_output_dir`` starts over.

This module conducts (parse, resolve, build, train, evaluate, save, record); the arguments are in ``arguments``,
every value derived from them and the machine in ``resolved`` (decided once by ``build.resolve_run``, which also
refuses a combination that could not run and writes the arguments, before anything is built or saved), what is built
before training in ``build``, what a relaunch does in ``relaunch``, the final evaluation in ``evaluation``, what a
trained run leaves in ``finish``; the Trainer subclass (``trainer``) keeps what must be an override, its ``train()``
the resume checks and the signal stop. Every write names its failure in one line (vanilla_tools.disk).
"""

import logging
import time
from pathlib import Path

from accelerate import PartialState
from transformers import Seq2SeqTrainingArguments

from vanilla_tools.cli import console_script
from vanilla_tools.run_files import EvalResults

from .arguments import DataArguments, ModelArguments, parse_args
from .build import build_trainer, resolve_run
from .finish import load_final_model, mark_finished, save_final_model, write_run_files
from .run.checkpoints import checkpoint_step
from .run.hub_push import HubPush
from .run.launches import Launches
from .run.process import check_launcher
from .run.record import PhaseMinutes, RunReport, evaluation_minutes, machine_speed, text_tokens
from .run.relaunch import plan_start
from .run.run_lock import holding_output_dir
from .step.allocator import keep_freed_memory
from .step.evaluation import final_evaluation

logger = logging.getLogger("vanilla_train")


def run(argv: list[str] | None = None) -> dict:
    """vanilla-train: train, average, evaluate, save; returns the results (what eval_results.json holds)."""
    run_start = time.monotonic()
    model_args, data_args, training_args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=log_level(training_args))
    check_launcher(training_args)
    keep_freed_memory()
    with holding_output_dir(training_args):
        results = train_and_evaluate(argv, run_start, model_args, data_args, training_args)
    # Gloo's threads outlive a process group left to the interpreter's exit, where they can abort it (SIGABRT,
    # "terminate called without an active exception") after a run that succeeded: end it while Python is whole.
    # The trainer, gone with train_and_evaluate's frame, no longer holds it (tests/ddp_probe.py checks).
    PartialState().destroy_process_group()
    return results


def log_level(training_args: Seq2SeqTrainingArguments) -> int:
    """The run's story (INFO) from the process where transformers logs (``should_log``: each machine's first, or
    the very first with --log_on_each_node false); the others log at --log_level_replica (warning by default), as
    transformers' example scripts set it, so a line is not repeated once a process."""
    return logging.INFO if training_args.should_log else training_args.get_process_log_level()


def train_and_evaluate(
    argv,
    run_start: float,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: Seq2SeqTrainingArguments,
) -> dict:
    """The run after its arguments: how it begins in its output directory (``relaunch``), then train, average,
    evaluate, save, push, and record it finished."""
    output_dir = Path(training_args.output_dir)
    resolved = resolve_run(model_args, data_args, training_args)
    with training_args.main_process_first(local=False, desc="reading the output directory"):  # the first deletes
        begin = plan_start(
            output_dir,
            resolved.settings,
            training_args.resume_from_checkpoint,
            model_args.overwrite_output_dir,
            training_args.should_save,
        )
    if begin.message:
        logger.info(begin.message)
    if begin.finished:
        return (EvalResults.read(output_dir) or EvalResults()).as_dict()
    hub = HubPush(training_args) if training_args.push_to_hub else None  # a wrong repo or token fails here
    launches = Launches(resolved)
    trainer, data = build_trainer(model_args, data_args, training_args, resolved, hub=hub, launches=launches)
    if begin.checkpoint:
        begin.check_batches(resolved.batch_plan)
        trainer.training_set.resume(begin.checkpoint)
        launches.resume(begin.checkpoint)
    measure = bool(model_args.summary_dir) and trainer.is_world_process_zero()
    first_step = checkpoint_step(begin.checkpoint) if begin.checkpoint else 0
    with machine_speed(str(training_args.device), measure) as speed:
        start = time.monotonic()
        train_result = trainer.train(resume_from_checkpoint=str(begin.checkpoint) if begin.checkpoint else None)
    results = {"train": {**train_result.metrics, "steps": train_result.global_step}}
    final_model = load_final_model(trainer, model_args.final_model, model_args.average_last)
    results["final_model"] = final_model
    if final_model["model"] == "average":  # §6.1
        results["averaged_checkpoints"] = final_model["checkpoints"]
    logger.info("evaluating the %s model (%s)", final_model["model"], final_model["why"])
    train_minutes = (time.monotonic() - start) / 60
    trainer.log_metrics("train", train_result.metrics)
    final_start = time.monotonic()
    evaluated, decoding = final_evaluation(
        trainer,
        data,
        trainer.decoding.final,
        model_args.length_penalty_candidates,
        model_args.translate_examples,
        tuple(model_args.final_splits),
        data_args.target_lang,
    )
    results.update(evaluated)
    final_minutes = (time.monotonic() - final_start) / 60
    save_final_model(trainer, decoding, train_result.metrics)  # with the decoding it was evaluated with
    if trainer.is_world_process_zero():
        prepare_minutes, wall_minutes = (start - run_start) / 60, (time.monotonic() - run_start) / 60
        report = RunReport(
            arguments=(model_args, data_args, training_args),
            run=resolved,
            argv=argv,
            results=results,
            decoding=decoding,
            model=trainer.model,
            train_minutes=train_minutes,
            wall_minutes=wall_minutes,
            speed=speed,
            launches=launches.history(trainer.state.global_step, train_minutes),
            phases=PhaseMinutes(
                prepare=prepare_minutes,
                train=train_minutes,
                evaluations_in_training=evaluation_minutes(trainer.state.log_history, first_step),
                final_evaluation=final_minutes,
                rest=wall_minutes - prepare_minutes - train_minutes - final_minutes,
            ),
            train_tokens=text_tokens(data),
        )
        write_run_files(trainer, report)
    if hub is not None:
        hub.push_final(training_args)
    if trainer.is_world_process_zero():  # last: a rerun of the same command now has nothing to do
        mark_finished(trainer, resolved.settings)
    return results


main = console_script(run)

if __name__ == "__main__":
    main()
