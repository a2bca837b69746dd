"""The crash-safe checkpoint store of a run's output directory.

Checkpoints survive a crash at any point: each is marked complete (with the size of every file in it and the run's
settings) only once all its files are on disk, only complete ones are resumed from, and older ones are deleted only
after a newer one is complete, and only if they are of the same run. A complete checkpoint with a missing or shorter
file is refused by name; a write that fails leaves the previous checkpoint as it was and no partial one."""

import copy
import json
import logging
import os
import re
import shutil
from pathlib import Path

import torch
from accelerate import PartialState
from transformers import TrainerCallback, TrainingArguments
from transformers.trainer import TRAINING_ARGS_NAME

from vanilla_tools.cli import UsageError
from vanilla_tools.disk import write_guard

from ..data.batching import TrainingSet
from .launches import Launches
from .run_settings import same_run
from .stopping import WEIGHTS_ALONE, SaveOnSignal

logger = logging.getLogger(__name__)

COMPLETE_MARKER = ".checkpoint-complete"
ON_SIGNAL_MARKER = "saved-on-signal"  # in a checkpoint written off schedule because the run was told to stop
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
# --resume_from_checkpoint's values that mean no checkpoint, and the newest complete one
NO_RESUME = (None, False, "", "false", "False")
NEWEST = (True, "true", "True", "auto", "last")
# What a saved model consists of (transformers' weights and config, a CTranslate2 export's model.bin): a folder
# holding one of these is not written into by a run or by averaging.
MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "model.bin")
FSDP_MODEL = "pytorch_model_fsdp"  # accelerate's name for FSDP's checkpoint of the model: a file or folder per kind
BATCH_PLAN = "batch_plan.json"  # in a checkpoint: how its run cut the data into steps
# What resuming reads besides the weights: transformers' optimizer.pt (or .bin), or FSDP's optimizer_0 folder; a
# checkpoint of --save_only_model has none.
OPTIMIZER_STATE = "optimizer"
RERUN = "rerun the same command"  # how a run goes on after it failed: the relaunch resumes it (``relaunch``)


def saved_on_signal(folder: Path) -> bool:
    """Whether ``folder`` was written off the save schedule when the run was stopped by a signal: kept to resume
    from, not averaged (the run would then average other weights than an uninterrupted one), and deleted once a
    newer complete checkpoint exists."""
    return (folder / ON_SIGNAL_MARKER).is_file()


def checkpoint_step(path: Path) -> int | None:
    match = _CHECKPOINT_DIR.match(path.name)
    return int(match.group(1)) if match else None


def complete_checkpoints(output_dir: str | os.PathLike, writing: Path | None = None) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir`` that were completely written, oldest first (any other is
    named in a warning, but ``writing``, the one being written now)."""
    complete = []
    for path in Path(output_dir).glob("checkpoint-*"):
        step = checkpoint_step(path)
        if step is not None and (path / COMPLETE_MARKER).is_file():
            complete.append((step, path))
        elif step is not None and path != writing:
            logger.warning("ignoring %s: it was not completely written", path)
    return [path for _, path in sorted(complete)]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_complete(folder: Path, step: int, settings: dict | None = None) -> None:
    """Flush every file of the checkpoint to disk, then write the marker listing them with their sizes, and the
    run's ``settings`` (``run_settings``), atomically (written aside, then renamed), so that a crash or power loss at
    any point never leaves a marked checkpoint with a missing or short file."""
    staged = folder / f"{COMPLETE_MARKER}.tmp"
    marks = (folder / COMPLETE_MARKER, staged)  # not files of the checkpoint: a marker never lists one
    files = {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p not in marks
    }
    for name in files:
        _fsync(folder / name)
    record = {"step": step, "files": files, **({"settings": settings} if settings is not None else {})}
    staged.write_text(json.dumps(record, indent=1) + "\n")
    _fsync(staged)
    os.replace(staged, folder / COMPLETE_MARKER)
    _fsync(folder)


def _marker(folder: Path) -> dict | int:
    marker = folder / COMPLETE_MARKER
    try:
        return json.loads(marker.read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"{marker} is unreadable ({error}): cannot tell what the checkpoint holds") from error


def checkpoint_settings(folder: Path) -> dict | None:
    """The settings of the run that wrote the complete checkpoint ``folder``; None if its marker does not record
    them (written by vanilla-train before it did)."""
    record = _marker(folder)
    return record.get("settings") if isinstance(record, dict) else None


def verify_checkpoint(folder: Path) -> None:
    """Raise UsageError naming the first file of a complete checkpoint that is missing or not the size it had when
    written (resuming would otherwise start a fresh optimizer or fail deep inside torch.load), or one that FSDP saved
    sharded, or one that holds the weights alone."""
    if not (folder / "model.safetensors").is_file() and any(folder.glob(f"{FSDP_MODEL}*")):
        raise UsageError(
            f"cannot resume from {folder}: FSDP saved it sharded (not a FULL_STATE_DICT), which "
            "vanilla-train no longer trains with (such a run ends without its model); "
            "--overwrite_output_dir starts over"
        )
    record = _marker(folder)
    if isinstance(record, int):  # a marker of vanilla-train before file lists: the step number alone
        logger.warning("%s was marked complete without a file list: its files cannot be verified", folder)
        return
    written = record["files"]
    for name, size in written.items():
        path = folder / name
        if not path.is_file():
            raise UsageError(f"cannot resume from {folder}: {name} is missing")
        if path.stat().st_size != size:
            raise UsageError(f"cannot resume from {folder}: {name} has {path.stat().st_size} bytes, {size} when saved")
    if not any(name.startswith(OPTIMIZER_STATE) for name in written):
        # transformers resumes such a checkpoint without a word, from a fresh Adam and the schedule's first step
        raise UsageError(f"cannot resume from {folder}: {WEIGHTS_ALONE}; --overwrite_output_dir starts over")


def remove_checkpoint(folder: Path) -> None:
    """Unmark, then delete: a crash halfway leaves an unmarked folder, which is never resumed from."""
    (folder / COMPLETE_MARKER).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


def rotate_complete_checkpoints(
    output_dir: str | os.PathLike, keep: int | None, protect: str | None = None, settings: dict | None = None
) -> None:
    """``save_total_limit``: keep the ``keep`` newest complete checkpoints (and ``protect``, the best one); drop the
    older ones and any unfinished folder older than the newest complete one (left by a crash). A checkpoint saved on
    a signal goes as soon as a newer complete one exists, whatever the limit. With the run's ``settings``, only the
    run's own checkpoints are counted and deleted (see ``run_settings.same_run``): never another run's."""
    complete = complete_checkpoints(output_dir)
    own = [p for p in complete if settings is None or same_run(checkpoint_settings(p), settings)]
    doomed = [p for p in own[:-1] if saved_on_signal(p)]
    if keep and keep > 0:
        kept = [p for p in own if p not in doomed]
        doomed += [p for p in kept[:-keep] if protect is None or p.resolve() != Path(protect).resolve()]
        if own:
            newest = checkpoint_step(own[-1])
            doomed += [
                p
                for p in Path(output_dir).glob("checkpoint-*")
                if p not in complete and (step := checkpoint_step(p)) is not None and step < newest
            ]
    for folder in doomed:
        logger.info("deleting %s (%s)", folder, "superseded" if saved_on_signal(folder) else f"save_total_limit={keep}")
        remove_checkpoint(folder)


def checkpoint_folder(args: TrainingArguments, step: int) -> tuple[Path, Path]:
    """The run's output directory and its checkpoint of ``step``, where Trainer saves it (outside a hyperparameter
    search)."""
    run_dir = Path(args.output_dir)
    return run_dir, run_dir / f"checkpoint-{step}"


def trainer_arguments(args: TrainingArguments) -> TrainingArguments:
    """``args`` as the run's Trainer takes them: a copy without Trainer's own rotation (``save_total_limit``), which
    deletes old checkpoints as soon as the new one's files are written, before the on_save callbacks complete it (a
    crash in between left no complete checkpoint). ``CompleteCheckpoints`` rotates with the run's limit instead,
    once the checkpoint is complete; the run's record keeps ``args`` as they are."""
    own = copy.copy(args)
    own.save_total_limit = None
    return own


class CompleteCheckpoints(TrainerCallback):
    """Completes each checkpoint once Trainer has written its files (``on_save``, on every process): the training
    set's position (each process its own), the batch plan, the run's launches (``launches``), training_args.bin
    with the run's ``save_total_limit`` (``keep``: the Trainer's arguments rotate nothing, ``trainer_arguments``),
    the mark of one saved off schedule on a signal; then the marker (``mark_complete``) and rotation
    (``rotate_complete_checkpoints``). A failed write is named in one line, the unmarked folder removed and the
    previous complete checkpoint left as it was."""

    def __init__(
        self,
        training_set: TrainingSet,
        plan: dict,
        settings: dict | None,
        stop: SaveOnSignal | None = None,
        launches: Launches | None = None,
        keep: int | None = None,
    ):
        self.training_set = training_set
        self.keep = keep  # the run's --save_total_limit
        self.plan = plan  # resolved.ResolvedRun.batch_plan: what a resumed run must keep (relaunch.check_resume)
        self.settings = settings  # run_settings(): what a relaunch and rotation compare
        self.stop = stop
        self.launches = launches  # the run's launches so far, for its record after a relaunch

    def on_save(self, args, state, control, **kwargs):
        run_dir, folder = checkpoint_folder(args, state.global_step)
        with checkpoint_write_guard(run_dir, folder):
            self.training_set.save(folder, state.global_step * args.gradient_accumulation_steps)
            PartialState().wait_for_everyone()  # every rank's files (RNG states, streams) are on disk before the marker
            if not args.should_save:
                return
            (folder / BATCH_PLAN).write_text(json.dumps(self.plan) + "\n")
            if self.launches is not None:
                self.launches.write(folder, state.global_step)
            recorded = copy.copy(args)  # the Trainer's, with the run's limit
            recorded.save_total_limit = self.keep
            torch.save(recorded, folder / TRAINING_ARGS_NAME)
            signal_name = self.stop.off_schedule(args, state) if self.stop is not None else None
            if signal_name is not None:
                (folder / ON_SIGNAL_MARKER).write_text(signal_name + "\n")
            mark_complete(folder, state.global_step, settings=self.settings)
            rotate_complete_checkpoints(run_dir, self.keep, state.best_model_checkpoint, self.settings)


def output_guard(path: Path, what: str, cleanup=None):
    """A failed write of ``what`` under ``path`` named in one line (``write_guard``); the same command goes on."""
    return write_guard(path, what, RERUN, cleanup)


def checkpoint_write_guard(run_dir: Path, folder: Path):
    """Around the write of checkpoint ``folder``: a failed write (a full disk, a quota, a file size limit, a
    read-only or failing device) is named in one line, and the unmarked folder removed (it would never be resumed
    from); the previous complete checkpoint stays as it was."""
    previous = complete_checkpoints(run_dir, writing=folder)
    kept = f"it resumes from {previous[-1]}, complete and intact" if previous else "no checkpoint was complete before"
    return write_guard(run_dir, folder.name, f"{RERUN} ({kept})", lambda: remove_checkpoint(folder))


def resolve_checkpoint(resume: str | bool | None, output_dir: str) -> str | None:
    """``--resume_from_checkpoint``: a path (must be complete), or True/"auto"/"last" for the newest complete one.
    Either way its files are verified against the sizes recorded when it was written."""
    if resume in NO_RESUME:
        return None
    if resume in NEWEST:
        found = complete_checkpoints(output_dir)
        if not found:
            logger.warning("no complete checkpoint in %s: training from scratch", output_dir)
            return None
        resume = found[-1]
    elif not Path(resume).is_dir():
        raise UsageError(f"--resume_from_checkpoint {resume}: no such directory")
    elif not (Path(resume) / COMPLETE_MARKER).is_file():
        raise UsageError(f"{resume} is not a complete checkpoint (no {COMPLETE_MARKER}); it may have been interrupted")
    verify_checkpoint(Path(resume))
    return str(resume)
