"""Run by the write-failure tests: vanilla-train (its console script) whose write at SITE fails as FAULT makes it.

    write_failure_probe.py SITE FAULT ARGS...

SITE is the write that fails:
    checkpoint-N   the checkpoint of step N (injected: at its optimizer state, the model already written)
    lock           the output directory's lock, the run's first write
    cache          datasets' cache, while the data is read
    tokenizer      the tokenizer saved in the output directory (half of tokenizer.json written)
    model          the final model (half of model.safetensors written)
    files          eval_results.json, training_recipe.json and the card
    summary        the run's summary (--summary_dir)
    export         the CTranslate2 export (--export_ct2; part of it written)
FAULT is how:
    ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EIO   that OSError, raised there
    fsize=BYTES      (checkpoint-N) the file size limit (ulimit -f) set to BYTES at the end of step N
    readonly=MOUNT   (checkpoint-N) MOUNT remounted read-only at the end of step N
    chmod            (checkpoint-N) the output directory made read-only (chmod a-w) at the end of step N
"""

import errno
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from probe_helpers import before_optimizer_write, run_train_with
from transformers import PreTrainedTokenizerBase, TrainerCallback

from training import build, finish
from training.run import run_lock
from training.step.trainer import PaperSeq2SeqTrainer
from vanilla_tools import exports


def fail(code: int, path: Path) -> NoReturn:
    raise OSError(code, os.strerror(code), str(path))


def half_written(path: Path, code: int) -> NoReturn:
    """What a writer leaves when the device fails it midway: part of the file, then the error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * 100)
    fail(code, path)


class AtStepEnd(TrainerCallback):
    """``action(output_dir)`` at the end of step ``step``, before its checkpoint is written."""

    def __init__(self, step: int, action: Callable[[str], None]):
        self.step, self.action = step, action

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            self.action(args.output_dir)


def real_fault(fault: str) -> Callable[[str], None]:
    kind, _, value = fault.partition("=")
    if kind == "fsize":
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        return lambda output: resource.setrlimit(resource.RLIMIT_FSIZE, (int(value), hard))
    if kind == "readonly":
        return lambda output: subprocess.run(["mount", "-o", "remount,ro", value], check=True)
    if kind == "chmod":
        return lambda output: os.chmod(output, 0o555)
    sys.exit(f"unknown fault {fault!r}")


def inject(site: str, code: int, output: Path) -> None:
    """Make the first write at ``site`` fail with ``code`` (sites other than a checkpoint)."""
    if site == "lock":
        run_lock.OutputDirLock.acquire = lambda self: fail(code, self.path)
    elif site == "cache":
        build.load_parallel_data = lambda *args, **kwargs: fail(code, Path("datasets-cache"))
    elif site == "tokenizer":
        save_tokenizer = PreTrainedTokenizerBase.save_pretrained

        def save_pretrained(self, directory, *args, **kwargs):
            if Path(directory) == output:
                half_written(output / "tokenizer.json", code)
            return save_tokenizer(self, directory, *args, **kwargs)

        PreTrainedTokenizerBase.save_pretrained = save_pretrained
    elif site == "model":
        save_model = PaperSeq2SeqTrainer.save_model

        def final_model(self, output_dir=None, _internal_call=False):
            if output_dir is None:  # the final model, not a checkpoint's
                half_written(output / "model.safetensors", code)
            return save_model(self, output_dir, _internal_call)

        PaperSeq2SeqTrainer.save_model = final_model
    elif site == "files":
        finish.write_recipe = lambda *args, **kwargs: fail(code, output / "training_recipe.json")
    elif site == "summary":
        finish.write_summary = lambda folder, *args, **kwargs: fail(code, folder / "summary.json")
    elif site == "export":
        exports.export_ctranslate2 = lambda model_dir, folder, *args, **kwargs: half_written(
            Path(folder) / "model.bin", code
        )
    else:
        sys.exit(f"unknown site {site!r}")


if __name__ == "__main__":
    site, fault, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    output = Path(argv[argv.index("--output_dir") + 1])
    code = getattr(errno, fault, None)
    if site.startswith("checkpoint-"):
        step = int(site.split("-")[1])

        def change(trainer) -> None:
            if code is None:
                trainer.add_callback(AtStepEnd(step, real_fault(fault)))
            else:
                before_optimizer_write(trainer, site, lambda folder: fail(code, Path(folder) / "optimizer.pt"))

    else:
        inject(site, code, output)

        def change(trainer) -> None:
            pass

    run_train_with(change, argv)
