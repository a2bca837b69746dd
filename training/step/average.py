"""`vanilla-average-checkpoints RUN_DIR OUT_DIR [-n 5]`: §6.1 "a single model obtained by averaging the last 5
checkpoints" (base; 20 for big), written as a normal model directory that from_pretrained loads."""

import argparse
import logging
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.distributed.tensor import DTensor, distribute_tensor
from transformers import AutoModelForSeq2SeqLM

from vanilla_tools.cli import UsageError, console_script, positive_int
from vanilla_tools.disk import write_guard

from ..run.checkpoints import MODEL_FILES, complete_checkpoints, saved_on_signal
from .ties import named_parameters

logger = logging.getLogger(__name__)


def last_checkpoints(run_dir: str | Path, n: int) -> list[Path]:
    """The ``n`` newest completely written checkpoints of a run, oldest first."""
    if n < 1:
        raise UsageError(f"the number of checkpoints to average must be at least 1, got {n}")
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"no such run directory: {run_dir}")
    found = scheduled_checkpoints(run_dir)
    if len(found) < n:
        raise UsageError(
            f"{run_dir} has {len(found)} complete checkpoints written on schedule, fewer than the {n} to average"
        )
    return found[-n:]


def scheduled_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's complete checkpoints, oldest first, less those written off schedule because the run was stopped by
    a signal (averaged, one would weigh a point the others are not spaced from)."""
    return [p for p in complete_checkpoints(run_dir) if not saved_on_signal(p)]


def average_state_dict(checkpoints: list[Path]) -> dict[str, torch.Tensor]:
    """Parameter-wise mean of the checkpoints' saved weights (accumulated in float64), in their dtype. Every
    checkpoint must hold the same tensors with the same shapes (a tensor missing from one would come out scaled)."""
    total: dict[str, torch.Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for path in checkpoints:
        if not (path / "model.safetensors").is_file():
            raise UsageError(f"{path} holds no model.safetensors to average (a checkpoint FSDP saved sharded has none)")
        weights = load_file(path / "model.safetensors")
        if total and weights.keys() != total.keys():
            differ = sorted(weights.keys() ^ total.keys())
            raise UsageError(f"{path} and {checkpoints[0]} do not hold the same weights: {', '.join(differ[:5])}")
        for name, tensor in weights.items():
            if name in total and total[name].shape != tensor.shape:
                raise UsageError(f"{path}: {name} has shape {tuple(tensor.shape)}, others {tuple(total[name].shape)}")
            total[name] = total.get(name, 0) + tensor.double()
            dtypes[name] = tensor.dtype
    return {name: (t / len(checkpoints)).to(dtypes[name]) for name, t in total.items()}


def load_average(model: torch.nn.Module, checkpoints: list[Path]) -> None:
    """Replace ``model``'s weights by the checkpoints' mean (``load_weights``)."""
    load_weights(model, average_state_dict(checkpoints))


def load_weights(model: torch.nn.Module, averaged: dict[str, torch.Tensor]) -> None:
    """Replace ``model``'s weights by ``averaged`` (tied weights are stored once, then re-tied). A model sharded by
    FSDP (every rank calls this) takes its shards: FSDP 1's wrapper through ``set_model_state_dict`` (its inner
    module holds flat parameters), the model FSDP 2 sharded in place through ``load_shards`` (``load_state_dict``
    cannot copy a tensor into a DTensor); loaded in place, tied weights stay tied. A model that ``--torch_compile``
    wrapped takes them in the module it compiled."""
    model = getattr(model, "_orig_mod", model)  # compiled (torch.compile's wrapper, outside FSDP's): the module
    if isinstance(model, FullyShardedDataParallel):
        options = StateDictOptions(full_state_dict=True, strict=False)
        _, unexpected = set_model_state_dict(model, averaged, options=options)
    elif any(isinstance(p, DTensor) for p in model.parameters()):
        unexpected = load_shards(model, averaged)
    else:
        _, unexpected = model.load_state_dict(averaged, strict=False)
        model.tie_weights()
    if unexpected:
        raise UsageError(f"unexpected weights in the checkpoints: {unexpected}")


def load_shards(model: torch.nn.Module, full: dict[str, torch.Tensor]) -> list[str]:
    """FSDP 2: each parameter (a tied one once, from the first of its names that ``full`` holds: a model saved by
    ``save_pretrained`` holds one, a run under FSDP saves all of them) copied from its full tensor, distributed as the
    parameter is. Returns the names in ``full`` that no parameter has. Written out because torch's
    ``set_model_state_dict`` leaves a tied weight's other names (``model.encoder.embed_tokens.weight`` beside
    ``model.shared.weight``) full tensors and fails copying them into the DTensor (torch 2.11 on a lent H200, and
    2.13 here: training/step/ties.py)."""
    loaded = set()
    with torch.no_grad():
        for parameter, names in named_parameters(model):
            name = next((name for name in names if name in full), None)
            if name is None:
                continue
            value = full[name].to(parameter.device, parameter.dtype)
            if isinstance(parameter, DTensor):
                value = distribute_tensor(value, parameter.device_mesh, parameter.placements)
            parameter.copy_(value)
            loaded.update(names)
    return sorted(full.keys() - loaded)


def average_newest_into(model: torch.nn.Module, run_dir: str | Path, n: int) -> list[Path]:
    """What ``vanilla-train --average_last n`` does after training: ``model`` gets the mean of the run's ``n``
    newest complete checkpoints. A run stopped early (a time budget) may have written fewer: then those it has are
    averaged, with a warning, rather than failing after the training is done. A checkpoint written off schedule
    because the run was stopped by a signal is not one of them. Returns the averaged checkpoints."""
    checkpoints = scheduled_checkpoints(run_dir)[-n:]
    if len(checkpoints) < n:
        logger.warning("averaging the last %d checkpoints asked for, but %s has only %d", n, run_dir, len(checkpoints))
    if checkpoints:
        load_average(model, checkpoints)
    return checkpoints


def average_checkpoints(checkpoints: list[Path], output_dir: str | Path) -> Path:
    """The averaged weights saved with the newest checkpoint's config, code and tokenizer. ``output_dir`` must not
    hold a model already (it would be overwritten: a checkpoint, a model averaged before, an export). A failed write
    (a full disk) removes what this call wrote, and is named in one line."""
    output_dir = Path(output_dir)
    held = [name for name in MODEL_FILES if (output_dir / name).exists()]
    if held:
        raise UsageError(f"{output_dir} already holds a model ({', '.join(held)}); choose another output directory")
    averaged = average_state_dict(checkpoints)  # first: a checkpoint without weights is refused by name
    newest = checkpoints[-1]
    model = AutoModelForSeq2SeqLM.from_pretrained(newest)
    load_weights(model, averaged)
    there_before = set(output_dir.iterdir()) if output_dir.is_dir() else None

    def remove_written() -> None:
        if there_before is None:
            shutil.rmtree(output_dir)
            return
        for path in set(output_dir.iterdir()) - there_before:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()

    with write_guard(output_dir, "the averaged model", "run again (the checkpoints are untouched)", remove_written):
        model.save_pretrained(output_dir)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (newest / name).is_file():
                shutil.copy(newest / name, output_dir / name)
    return output_dir


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vanilla-average-checkpoints", description=__doc__)
    parser.add_argument("run_dir", help="a vanilla-train output directory holding checkpoint-N folders")
    parser.add_argument("output_dir", help="where to write the averaged model")
    parser.add_argument(
        "-n", "--last", type=positive_int, default=5, help="how many of the newest checkpoints (default 5)"
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    checkpoints = last_checkpoints(args.run_dir, args.last)
    out = average_checkpoints(checkpoints, args.output_dir)
    print(f"averaged {', '.join(p.name for p in checkpoints)} into {out}")


main = console_script(run)

if __name__ == "__main__":
    main()
