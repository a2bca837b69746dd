"""The tied embedding (§3.4: one matrix for both embeddings and the pre-softmax projection) in the checkpoints of a
run under FSDP 2. The weight has four names (``model.shared.weight``, the two ``embed_tokens.weight`` and
``lm_head.weight``), and torch's loaders of a full state dict into a sharded model handle only one of them:
``set_model_state_dict`` distributes the weight under one name and leaves the others full tensors, which
``load_state_dict`` fails to copy into the DTensor ("mixed torch.Tensor and DTensor"), and with
``broadcast_from_rank0`` (accelerate's choice for several processes) it fails on the other names outright
(``KeyError``). Seen resuming on a lent H200 (torch 2.11) and here (2.13). So a sharded run's state dict holds the
weight once, and loading gives it to all its names (``hold_ties_once``).

A run of one or more whole replicas needs only the loading half (``load_ties_whole``): its checkpoint's
model.safetensors holds the weight under one name (safetensors keeps no shared tensors), so the Trainer's resume loads
it with three names missing and warns "There were missing keys in the checkpoint model loaded" (as it does for Bart and
T5: transformers#29128, #27972) about a run that resumed exactly."""

import torch
from torch.distributed.tensor import DTensor


def named_parameters(model: torch.nn.Module) -> list[tuple[torch.nn.Parameter, list[str]]]:
    """Each parameter of ``model`` once, with every name it has (a tied one has several, its first as
    ``named_parameters`` gives it)."""
    names: dict[int, list[str]] = {}
    parameters: dict[int, torch.nn.Parameter] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
        parameters[id(parameter)] = parameter
    return [(parameters[key], names[key]) for key in parameters]


def drop_other_names(model: torch.nn.Module, state_dict: dict, prefix: str, *_) -> None:
    """A ``state_dict`` post-hook: a tied weight under its first name only."""
    for _, names in named_parameters(model):
        for name in names[1:]:
            state_dict.pop(prefix + name, None)


def give_all_names(model: torch.nn.Module, state_dict: dict, prefix: str, *_) -> None:
    """A ``load_state_dict`` pre-hook: every name of a tied weight takes the value loaded under one of them (the
    distributed one where torch distributed one name only)."""
    for _, names in named_parameters(model):
        keys = [prefix + name for name in names]
        values = [state_dict[key] for key in keys if key in state_dict]
        if values:
            value = next((value for value in values if isinstance(value, DTensor)), values[0])
            state_dict.update(dict.fromkeys(keys, value))


def load_ties_whole(model: torch.nn.Module) -> None:
    """Loading a state dict into ``model`` gives a tied weight's value to every name it has."""
    model.register_load_state_dict_pre_hook(give_all_names)


def hold_ties_once(model: torch.nn.Module) -> None:
    """``model``'s state dicts hold each tied weight once, and loading one gives it to every name."""
    model.register_state_dict_post_hook(drop_other_names)
    load_ties_whole(model)
