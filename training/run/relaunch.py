"""What a launch of vanilla-train does with what its --output_dir already holds, so that the same command run again
(a scheduler's requeue, a restart, ``torchrun --max-restarts``, a person) goes on where the run stopped:

- complete checkpoints of the same run (``run_settings``): resume from the newest, saying which and why;
- checkpoints of a run with other settings, or that do not record them: refused in one line naming the settings
  that differ and the ways on (--overwrite_output_dir, another --output_dir);
- the finished run of the same settings: nothing to do, said so (exit status 0);
- a saved model but neither checkpoints nor a finished run (a CTranslate2 export, another tool's model, a run
  stopped after saving its model): refused, as training would write over it;
- nothing of a run: train from scratch.

--resume_from_checkpoint auto decides the same way; --resume_from_checkpoint PATH resumes from PATH as asked (warning
of the settings that differ); --overwrite_output_dir starts over, and only then are the checkpoints there deleted,
each named. Every process decides alike from the same files; the first one decides first, as it alone deletes."""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from vanilla_tools.cli import UsageError
from vanilla_tools.run_files import FinishedRun

from .checkpoints import (
    BATCH_PLAN,
    MODEL_FILES,
    NEWEST,
    NO_RESUME,
    checkpoint_settings,
    checkpoint_step,
    complete_checkpoints,
    remove_checkpoint,
    resolve_checkpoint,
    verify_checkpoint,
)
from .run_settings import BATCHES, continuable, differences

logger = logging.getLogger(__name__)

WAYS_ON = "pass --overwrite_output_dir to start over there, or give another --output_dir"


# The files of a run that the next run in its directory would read as its own: deleted when starting over.
RUN_STATE_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "learning_curve.csv",
    "learning_curve.json",
    FinishedRun.FILE,
)


@dataclass(frozen=True)
class Start:
    """How a launch begins: from ``checkpoint`` (None: from scratch), or not at all (``finished``); ``message``
    says which and why. ``detected``: the checkpoint was chosen here, not named by --resume_from_checkpoint."""

    checkpoint: Path | None = None
    finished: bool = False
    detected: bool = False
    message: str = ""

    def check_batches(self, batches: dict) -> None:
        """The check that the resumed run keeps its batches (``batches``, ``check_resume``); a checkpoint found in the
        output directory (not named by --resume_from_checkpoint) is refused with the other ways on too."""
        try:
            check_resume(self.checkpoint, batches)
        except UsageError as refusal:
            if not self.detected:
                raise
            raise UsageError(f"{refusal}; or {WAYS_ON}") from None


def plan_start(
    output_dir: str | Path, settings: dict, resume: str | bool | None, overwrite: bool, may_delete: bool
) -> Start:
    """How the launch of ``settings`` with --resume_from_checkpoint ``resume`` and --overwrite_output_dir
    ``overwrite`` begins in ``output_dir``; ``may_delete`` on the process that writes the run's files (the first)."""
    output_dir = Path(output_dir)
    if overwrite:
        start_over(output_dir, resume, may_delete)  # (refused with a checkpoint it deletes)
        start = Start() if resume in NO_RESUME else asked_for(output_dir, Path(resume), settings)
    elif resume is None or resume in NEWEST:
        start = newest_of_this_run(output_dir, settings, said_auto=resume is not None)
    elif resume in NO_RESUME:
        start = without_resuming(output_dir, resume)
    else:
        start = asked_for(output_dir, Path(resume), settings)
    if may_delete and not start.finished:  # this launch trains: the run is not finished until it ends
        (output_dir / FinishedRun.FILE).unlink(missing_ok=True)
    return start


def start_over(output_dir: Path, resume: str | bool | None, may_delete: bool) -> None:
    """--overwrite_output_dir: delete the checkpoints of ``output_dir`` (naming each) and the files of its run that
    this one would read as its own. Refused with --resume_from_checkpoint naming a checkpoint it would delete."""
    if resume not in NO_RESUME and (resume in NEWEST or output_dir.resolve() in Path(resume).resolve().parents):
        raise UsageError(
            f"--overwrite_output_dir starts over, deleting the checkpoints in {output_dir}: it cannot "
            f"be given with --resume_from_checkpoint {resume}"
        )
    if not may_delete:
        return
    folders = [p for p in output_dir.glob("checkpoint-*") if p.is_dir() and checkpoint_step(p) is not None]
    for folder in sorted(folders, key=checkpoint_step):
        logger.warning("--overwrite_output_dir: deleting %s", folder)
        remove_checkpoint(folder)
    for name in RUN_STATE_FILES:
        (output_dir / name).unlink(missing_ok=True)


def without_resuming(output_dir: Path, resume: str | bool) -> Start:
    """--resume_from_checkpoint false: from scratch, refused where a run is (it would delete its checkpoints in
    rotation, or overwrite its model)."""
    if complete_checkpoints(output_dir) or FinishedRun.read(output_dir) is not None:
        raise UsageError(
            f"--resume_from_checkpoint {resume}: {output_dir} holds a run (checkpoints or a finished model); {WAYS_ON}"
        )
    refuse_a_model(output_dir)
    return Start()


def refuse_a_model(output_dir: Path) -> None:
    """Refused if ``output_dir`` holds a saved model that is no run's (no checkpoint, no finished run): the run
    would write its own model over it."""
    found = [name for name in MODEL_FILES if (output_dir / name).is_file()]
    if found:
        raise UsageError(
            f"{output_dir} holds a saved model ({', '.join(found)}) but no checkpoint and no finished "
            f"run of vanilla-train: training would write over it; {WAYS_ON}"
        )


def newest_of_this_run(output_dir: Path, settings: dict, said_auto: bool) -> Start:
    """The finished run of ``settings`` (nothing to do), else its newest complete checkpoint, else from scratch;
    refused if ``output_dir`` holds a run of other settings."""
    found = complete_checkpoints(output_dir)
    newest = found[-1] if found else None
    finished = FinishedRun.read(output_dir)
    if finished is not None:
        changed = differences(finished.settings, settings)
        if not changed:
            return Start(
                finished=True,
                message=f"{output_dir} holds the finished run of these settings (step "
                f"{finished.step}): nothing to do. --overwrite_output_dir trains it again",
            )
        if newest is None or differences(finished.settings, settings, continuable(settings) + BATCHES):
            raise UsageError(f"{output_dir} holds a finished run of other settings ({'; '.join(changed)}); {WAYS_ON}")
    if newest is None:
        if finished is None:
            refuse_a_model(output_dir)
        if said_auto:
            logger.warning("no complete checkpoint in %s: training from scratch", output_dir)
        return Start()
    saved = checkpoint_settings(newest)
    if saved is None:
        raise UsageError(
            f"{newest} does not record the settings of its run (an earlier vanilla-train wrote it): "
            f"--resume_from_checkpoint {newest} continues from it, or {WAYS_ON}"
        )
    # the batches are compared by check_resume, which says how to keep them on other processes
    changed = differences(saved, settings, continuable(settings) + BATCHES)
    if changed:
        raise UsageError(
            f"{output_dir} holds checkpoints of a run with other settings ({newest.name}: "
            f"{'; '.join(changed)}); {WAYS_ON}"
        )
    verify_checkpoint(newest)
    why = f"the newest complete checkpoint in {output_dir}, of a run with the same settings"
    return Start(newest, detected=True, message=f"resuming from {newest}: {why} (--overwrite_output_dir starts over)")


def asked_for(output_dir: Path, checkpoint: Path, settings: dict) -> Start:
    """--resume_from_checkpoint PATH: from PATH (verified), as asked, warning of the settings that differ."""
    checkpoint = Path(resolve_checkpoint(str(checkpoint), str(output_dir)))
    saved = checkpoint_settings(checkpoint)
    changed = differences(saved, settings, BATCHES) if saved is not None else []
    if changed:
        logger.warning("%s was written with other settings: %s", checkpoint, "; ".join(changed))
    return Start(checkpoint, message=f"resuming from {checkpoint}, as --resume_from_checkpoint asks")


def check_resume(checkpoint: Path, now: dict) -> None:
    """Resuming on another number of processes keeps the data order exactly when the sampler's batches and the
    accumulation stay the same (the batches are cut from the data before they are dealt out); otherwise the
    resumed run would see other pairs, some twice, so it is refused naming the flag that keeps them. ``now``: this
    launch's ``resolved.ResolvedRun.batch_plan``."""
    path = Path(checkpoint) / BATCH_PLAN
    if not path.is_file():
        return  # written before batch plans were recorded
    saved = json.loads(path.read_text())
    keys = ("tokens_per_batch", "gradient_accumulation_steps")
    if all(saved[key] == now[key] for key in keys):
        if saved["processes"] != now["processes"]:
            logger.warning(
                "resuming a run of %d processes on %d: the same batches of %d tokens in the same order; dropout's "
                "random numbers differ (each process had its own generator)",
                saved["processes"],
                now["processes"],
                now["tokens_per_batch"],
            )
        return
    fits = saved["tokens_per_batch"] % now["processes"] == 0
    advice = (
        f"pass --max_tokens_per_batch {saved['tokens_per_batch'] // now['processes']} and "
        f"--gradient_accumulation_steps {saved['gradient_accumulation_steps']}"
        if fits
        else f"run it on {saved['processes']} processes"
    )
    raise UsageError(
        f"{checkpoint} was trained in batches of {saved['processes']} processes x {saved['max_tokens_per_batch']} "
        f"tokens x {saved['gradient_accumulation_steps']} accumulated; this run would take "
        f"{now['processes']} x {now['max_tokens_per_batch']} x {now['gradient_accumulation_steps']}, other pairs "
        f"in each step. To resume with the same batches, {advice}"
    )
