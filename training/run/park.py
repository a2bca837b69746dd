"""A vanilla-train run parked in one archive, so that another machine goes on with it.

The experiments' runs live under runs/, which does not survive a change of machine, and a run of their budgets can
outlast a session (a multi30k-tiny teacher: 8,000 steps, 2-3.5 hours on the 2-core CPUs seen). Parked, the run's
folder becomes one archive (tar.gz; experiments.distill keeps it under results/, committed); unparked into an empty
folder, vanilla-train resumes it as if it had stayed (its checkpoint's launches, batch position, optimizer and RNG
states travel whole, and the relaunch checks the run's settings as always).

What the archive holds (``parked_files``):
- the run folder's own files: tokenizer, learning curve, and, once the run has finished, its final model (what the
  experiment's later stages load), but not the run's lock;
- its newest complete checkpoint, whole: what vanilla-train resumes from;
- the older complete checkpoints written on schedule that the run's final average can still reach (fewer than the
  run's ``save_total_limit`` scheduled saves after them up to ``max_steps``), as their weights alone and marked
  complete with the files kept, so that nothing resumes from them (``verify_checkpoint`` refuses weights alone).
  Other checkpoints would only be rotated away: they stay behind.

A finished run (``finished``) parks its own files alone: its model, without checkpoints.
"""

import io
import json
import math
import tarfile
import time
from pathlib import Path

import torch
from transformers.trainer import TRAINER_STATE_NAME, TRAINING_ARGS_NAME

from vanilla_tools.cli import UsageError
from vanilla_tools.provenance import git_commit

from .checkpoints import (
    COMPLETE_MARKER,
    OPTIMIZER_STATE,
    checkpoint_settings,
    checkpoint_step,
    complete_checkpoints,
    saved_on_signal,
)
from .launches import LAUNCHES_FILE
from .run_lock import LOCK_FILE, OutputDirLock

WEIGHTS = "model.safetensors"
# A checkpoint kept for its weights alone: what averaging reads and what says which step and run it is.
WEIGHTS_ALONE_FILES = (WEIGHTS, "config.json", TRAINER_STATE_NAME)


def scheduled_saves_after(step: int, spacing: int, max_steps: int) -> int:
    """How many checkpoints the run still writes on schedule after ``step``: one every ``spacing`` steps and one at
    ``max_steps`` (Trainer saves where the run ends)."""
    return math.ceil((max_steps - step) / spacing)


def save_total_limit(checkpoint: Path) -> int | None:
    """The run's own ``--save_total_limit``, as its checkpoint records it (``CompleteCheckpoints``)."""
    args = torch.load(checkpoint / TRAINING_ARGS_NAME, weights_only=False)
    return args.save_total_limit


def reachable_by_average(run_dir: Path, newest: Path) -> list[Path]:
    """The older scheduled checkpoints that the run may still average at its end: with ``keep`` its limit and
    ``spacing`` the steps between its two newest scheduled checkpoints, those after which fewer than ``keep``
    scheduled saves remain. A limit of none keeps them all; one scheduled checkpoint alone gives no spacing, and is
    kept."""
    scheduled = [p for p in complete_checkpoints(run_dir) if p != newest and not saved_on_signal(p)]
    if not scheduled:
        return []
    keep = save_total_limit(newest)
    max_steps = checkpoint_settings(newest)["max_steps"]
    steps = [checkpoint_step(p) for p in scheduled] + ([] if saved_on_signal(newest) else [checkpoint_step(newest)])
    if keep is None or len(steps) < 2:
        return scheduled
    spacing = steps[-1] - steps[-2]
    return [p for p in scheduled if scheduled_saves_after(checkpoint_step(p), spacing, max_steps) < keep]


def parked_files(run_dir: Path, finished: bool) -> list[tuple[str, Path | bytes]]:
    """What an archive of ``run_dir`` holds, each by its name in the archive and its file (or its contents where the
    archive's differ from the folder's: a weights-alone checkpoint's marker). See the module's docstring."""
    files: list[tuple[str, Path | bytes]] = [
        (p.name, p) for p in sorted(run_dir.iterdir()) if p.is_file() and p.name != LOCK_FILE
    ]
    if finished:
        return files
    checkpoints = complete_checkpoints(run_dir)
    if not checkpoints:
        raise UsageError(f"{run_dir} holds no complete checkpoint to go on from: nothing to park")
    newest = checkpoints[-1]
    files += [(f"{newest.name}/{p.relative_to(newest)}", p) for p in sorted(newest.rglob("*")) if p.is_file()]
    for older in reachable_by_average(run_dir, newest):
        files += [(f"{older.name}/{name}", older / name) for name in WEIGHTS_ALONE_FILES]
        files.append((f"{older.name}/{COMPLETE_MARKER}", weights_alone_marker(older)))
    return files


def weights_alone_marker(checkpoint: Path) -> bytes:
    """The completion marker of ``checkpoint`` parked as its weights alone: its step and settings, and the files kept
    with their sizes."""
    marker = json.loads((checkpoint / COMPLETE_MARKER).read_text())
    kept = {name: size for name, size in marker["files"].items() if name in WEIGHTS_ALONE_FILES}
    return (json.dumps({**marker, "files": kept}, indent=1) + "\n").encode()


def park(run_dir: Path, archive: Path, *, finished: bool) -> dict:
    """``run_dir`` written to ``archive`` (a tar.gz: written aside, then renamed, so a failure leaves the previous
    archive as it was); returns the record of the park (``describe``). Refused while a run holds the folder's lock: a
    run in progress writes as it is read."""
    if not run_dir.is_dir():
        raise UsageError(f"no run to park at {run_dir}")
    lock = OutputDirLock(run_dir).acquire()  # refused, naming the run, while one trains there
    try:
        files = parked_files(run_dir, finished)
        archive.parent.mkdir(parents=True, exist_ok=True)
        staged = archive.with_name(f"{archive.name}.part")
        with tarfile.open(staged, "w:gz") as tar:
            for name, source in files:
                if isinstance(source, Path):
                    tar.add(source, arcname=name)
                else:
                    info = tarfile.TarInfo(name)
                    info.size = len(source)
                    tar.addfile(info, io.BytesIO(source))
        staged.replace(archive)
    finally:
        lock.release()
    return describe(archive, files, finished)


def launches_of(files: list[tuple[str, Path | bytes]], checkpoint: str) -> list[dict]:
    """The launches that trained a parked checkpoint (its launches.json), each in a line's worth: steps, minutes,
    commit, processor, precision."""
    source = dict(files).get(f"{checkpoint}/{LAUNCHES_FILE}")
    if not isinstance(source, Path):
        return []
    return [
        {
            "steps": [launch["first_step"], launch["last_step"]],
            "train_minutes": launch.get("train_minutes"),
            "commit": launch["code"]["commit"],
            "processor": launch["machine"]["processor"],
            "precision": launch.get("precision"),
        }
        for launch in json.loads(source.read_text())
    ]


def describe(archive: Path, files: list[tuple[str, Path | bytes]], finished: bool) -> dict:
    """The record of a park: the archive's size, whether the run had finished, each checkpoint parked (whole, or its
    weights alone), the step the run goes on from and the launches that trained it, when and by which code it was
    parked."""
    folders = {name.split("/")[0] for name, _ in files if "/" in name}
    # whole: with the optimizer's state, as verify_checkpoint tells a checkpoint that a run can resume from
    whole = {name.split("/")[0] for name, _ in files if name.split("/")[-1].startswith(OPTIMIZER_STATE)}
    checkpoints = {folder: "whole" if folder in whole else "weights alone" for folder in folders}
    resumes = max((checkpoint_step(Path(folder)) for folder in whole), default=None)
    return {
        "archive": archive.name,
        "bytes": archive.stat().st_size,
        "finished": finished,
        "resumes_from_step": resumes,
        "checkpoints": dict(sorted(checkpoints.items(), key=lambda item: checkpoint_step(Path(item[0])))),
        "launches": launches_of(files, f"checkpoint-{resumes}") if resumes is not None else [],
        "parked": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": git_commit(),
    }


def park_summary(record: dict) -> str:
    """A park's record in a few words."""
    size = f"{record['bytes'] / 2**20:.1f} MiB"
    if record["finished"]:
        return f"the finished run's model, {size}"
    return f"goes on from step {record['resumes_from_step']:,}, {size}"


def unpark(archive: Path, run_dir: Path) -> None:
    """The run parked in ``archive`` unpacked into ``run_dir``, which must hold no checkpoint or model of its own
    (a run's folder is newer than any archive of it: it is never overwritten). Member names are checked to stay
    inside ``run_dir`` (tarfile's "data" filter)."""
    held = [p.name for p in (*run_dir.glob("checkpoint-*"), run_dir / "config.json") if p.exists()]
    if held:
        raise UsageError(f"{run_dir} already holds {', '.join(sorted(held))}: not unparking {archive} over it")
    run_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(run_dir, filter="data")
