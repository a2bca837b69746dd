"""What the model refuses, by name: a wrong id, mask or embedding fails here with a message that names it, not deep
inside torch; a damaged or missing checkpoint is named on loading.

Shapes and dtypes are checked on every call (on the host). Values (an id out of range, a NaN, a mask that is not
0/1) can only be checked by reading the tensor back to the host, which on an accelerator waits for the device:
``generate()`` checks them once for the whole call (``values_checked``), and neither a decoding step nor a training
step's forward on an accelerator reads a value back (``may_read_values``). On the CPU a read waits for nothing, so
values are checked there on every call outside ``generate()``, training included.

This file travels to the Hub with ``modeling_vanilla.py`` (it imports only torch and transformers).
"""

import json
import os
import re
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import torch

_VALUES_CHECKED = ContextVar("vanilla_transformer_values_checked", default=False)


@contextmanager
def values_checked():
    """Within it (a ``generate()`` call whose inputs were checked), nothing reads a tensor's values back."""
    token = _VALUES_CHECKED.set(True)
    try:
        yield
    finally:
        _VALUES_CHECKED.reset(token)


def reads_synchronise(tensor: torch.Tensor) -> bool:
    """Whether reading ``tensor``'s values makes the host wait for a device: not for a CPU tensor."""
    return tensor.device.type != "cpu"


def may_read_values(tensor: torch.Tensor, training: bool = False) -> bool:
    """Whether reading ``tensor``'s values back to the host is allowed here: never while compiling (a data-dependent
    branch would break the graph); always where the read waits for no device; on an accelerator, neither in a training
    step (``training``: a synchronisation every step) nor inside ``values_checked``."""
    if torch.compiler.is_compiling():
        return False
    return not reads_synchronise(tensor) or not (training or _VALUES_CHECKED.get())


def checks_values(tensor: torch.Tensor, training: bool) -> bool:
    """Whether to check ``tensor``'s values: where they may be read, and not again inside a ``generate()`` call that
    checked its inputs once."""
    return may_read_values(tensor, training) and not _VALUES_CHECKED.get()  # compiling is asked first: no ContextVar


def check_token_ids(
    ids: torch.Tensor | None, vocab_size: int, name: str, ignore_index: int | None = None, training: bool = False
) -> None:
    """Raise ValueError unless ``ids`` is a non-empty (batch, length) integer tensor of ids in [0, vocab_size)
    (``ignore_index`` allowed too: -100 in labels). ``training``: the call is a training step's (``checks_values``)."""
    if ids is None:
        return
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"`{name}` must be a non-empty (batch, length) tensor, got shape {tuple(ids.shape)}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer token ids, got dtype {ids.dtype}")
    if not checks_values(ids, training):
        return
    bad = (ids < 0) | (ids >= vocab_size)
    if ignore_index is not None:
        bad &= ids != ignore_index
    if bad.any():
        allowed = f" or {ignore_index}" if ignore_index is not None else ""
        raise ValueError(f"`{name}` holds token id {int(ids[bad][0])}, outside [0, vocab_size={vocab_size}){allowed}")


def check_padding_mask(
    mask: torch.Tensor | None, shape: tuple[int, int], name: str, of: str | Callable[[], str], training: bool = False
) -> None:
    """A 2-D mask is (batch, keys) of 1 (token) and 0 (padding), as transformers' tokenizers return it. An additive
    mask (0 / -inf) would be read as its inverse, so values other than 0 and 1 are refused. ``of`` names what the
    shape comes from; a callable is formatted only on failure (compiled, formatting a length would fix it)."""
    if mask is None or mask.dim() == 4:  # 4-D: a ready-made attention mask, used as given
        return
    if tuple(mask.shape) != tuple(shape):
        of = of() if callable(of) else of
        raise ValueError(f"`{name}` has shape {tuple(mask.shape)} but must be {tuple(shape)}, the shape of {of}")
    if mask.dtype != torch.bool and checks_values(mask, training) and ((mask != 0) & (mask != 1)).any():
        value = mask[(mask != 0) & (mask != 1)][0].item()
        raise ValueError(
            f"`{name}` must hold 1 (attend) and 0 (padding), found {value}: an additive mask (0 / -inf) is not "
            "accepted; pass `mask == 0` instead"
        )


def check_embeddings(embeds: torch.Tensor | None, width: int, name: str, training: bool = False) -> None:
    """``inputs_embeds`` must be a non-empty float (batch, length, d_model) tensor of finite values."""
    if embeds is None:
        return
    if embeds.dim() != 3 or embeds.shape[0] == 0 or embeds.shape[1] == 0 or embeds.shape[2] != width:
        raise ValueError(f"`{name}` must be (batch, length, d_model={width}), got shape {tuple(embeds.shape)}")
    if not embeds.dtype.is_floating_point:
        raise ValueError(f"`{name}` must be a floating-point tensor, got dtype {embeds.dtype}")
    if checks_values(embeds, training) and not torch.isfinite(embeds).all():
        raise ValueError(f"`{name}` holds NaN or infinite values")


# A Hub model id: "name" or "namespace/name" (anything else that is no directory is a missing local path).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def local_model_dir(name: str | os.PathLike) -> Path | None:
    """The directory ``name`` is; None if it is no directory but can be a Hub id; else FileNotFoundError (rather
    than the Hub's error about a malformed repo id, or an offline error after a minute of retries, for a local path
    that does not exist). "runs/typo" where ``runs`` is a local folder is such a path, not a Hub id."""
    if Path(name).is_dir():
        return Path(name)
    namespace = Path(name).parent
    hub_shaped = HUB_ID.match(str(name)) is not None
    if hub_shaped and not (namespace != Path(".") and namespace.is_dir()):
        return None
    where = f" (read as a path: {namespace} is a folder here)" if hub_shaped else ""
    raise FileNotFoundError(f"no such model directory: {name}{where}")


def check_safetensors_file(path: Path) -> None:
    """Raise OSError naming ``path`` unless its header is whole and its tensors fill the rest of the file exactly
    (safetensors' own error for a file cut short names no file)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little") if size >= 8 else size
        try:
            header = json.loads(f.read(header_size)) if 8 + header_size <= size else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            header = None
    if not isinstance(header, dict):
        raise OSError(f"{path} is not a safetensors file, or its header is damaged ({size} bytes)")
    data_size = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    if 8 + header_size + data_size != size:
        raise OSError(
            f"{path} holds {size} bytes but its header describes {8 + header_size + data_size}: the file "
            "was cut short or damaged"
        )


def check_checkpoint_files(folder: Path, config_given: bool) -> None:
    """A local model directory must hold config.json (unless a config is passed) and whole safetensors files."""
    if not (folder / "config.json").is_file() and not config_given:
        raise FileNotFoundError(f"{folder} has no config.json: it is not a saved model directory")
    for weights in sorted(folder.glob("*.safetensors")):
        check_safetensors_file(weights)


def check_loaded_weights(model: torch.nn.Module, name: str) -> None:
    """Weights that loaded NaN or infinite come from a damaged file: they would translate into garbage. Each tensor's
    smallest and largest value (NaN if it holds one, infinite if it does) are computed where it lives, in one pass
    (``aminmax``, several times faster here than a norm or an ``isfinite`` mask), and all are read back at once: one
    synchronisation per load (``benchmarks/load_check.py`` measures it against the load)."""
    weights = [(weight, t.detach()) for weight, t in model.named_parameters() if t.device.type != "meta" and t.numel()]
    if not weights:
        return
    device = weights[0][1].device
    bounds = torch.stack([torch.stack(torch.aminmax(t)).float().to(device) for _, t in weights])  # (tensors, 2)
    finite = torch.isfinite(bounds).all(dim=1).tolist()  # the one read-back
    if not all(finite):
        weight = weights[finite.index(False)][0]
        raise ValueError(f"{name}: weight `{weight}` holds NaN or infinite values; the checkpoint is damaged")
