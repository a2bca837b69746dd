"""Every private name (a leading underscore) of another library that the repository's code uses (vanilla-train and
its floor: ``training``, ``vanilla_tools``; the model: ``modeling_vanilla``; the entry points: ``inference``; and
``experiments``, ``benchmarks``), in one registry: the library, why no public way serves, the public alternative
where there is one (``public``), where the name lives (``find``) and, where that is cheap, a call showing it still
does what the code relies on (``behaves``). A private name may change in any release: tests/test_training/
test_trainer_hooks.py finds every use by parsing the code (tests/private_uses.py), fails on one used and not listed
here or listed and no longer used, and resolves and calls each entry on the installed release, whichever it is
(docs/architecture.md). Only the tests read this; modeling_vanilla/'s files, which travel to the Hub, never do."""

import argparse
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import datasets
import torch
import transformers
from helpers import tiny_model


@dataclass(frozen=True)
class PrivateUse:
    library: str
    why: str
    public: str | None  # the public alternative, if any, and why it does not serve
    find: Callable[[], Any]  # the name on the installed release (an AttributeError or ImportError where it is gone)
    behaves: Callable[[Any], bool] | None = None  # a cheap call on what ``find`` gave, True where it still serves
    instead: str | None = None  # the entry the code uses where a release has no such name


def parameters(function: Callable) -> list[str]:
    return list(inspect.signature(function).parameters)


def fingerprint(text: str) -> str:
    return datasets.Dataset.from_dict({"text": [text]})._fingerprint


def flags(*names: str) -> list[argparse.Action]:
    parser = argparse.ArgumentParser()
    for name in names:
        parser.add_argument(f"--{name}")
    return parser._actions


def inductor() -> Any:
    importlib.import_module("torch._inductor.config")
    return torch._inductor


def inductor_serves(module: Any) -> bool:
    """compiled.py's settings and its C++ compiler check, and the compile modes' table, as the code reads them."""
    importlib.import_module("torch._inductor.cpp_builder").get_cpp_compiler  # noqa: B018 (the import is the check)
    config = module.config
    return (
        isinstance(config.fallback_random, bool)
        and isinstance(config.triton.cudagraph_dynamic_shape_warn_limit, int)
        and isinstance(config.cpp.enable_kernel_profile, bool)
        and module.list_mode_options("reduce-overhead").get("triton.cudagraphs") is True
    )


def dynamo_serves(module: Any) -> bool:
    tensor = torch.zeros(2, 3)
    module.maybe_mark_dynamic(tensor, 0)
    module.maybe_mark_dynamic(tensor, 1)
    return isinstance(module.utils.counters, dict) and isinstance(module.utils.compilation_time_metrics, dict)


def attention_implementation_set(config: transformers.PreTrainedConfig) -> bool:
    config._attn_implementation = "sdpa"  # convert_marian copies Marian's onto a converted model so
    return config._attn_implementation == "sdpa"


def ties_made(default: None) -> bool:
    """transformers ties the embeddings a model's ``_tied_weights_keys`` declares (none by default): the tiny
    model's output projection is its shared embedding."""
    model = tiny_model()
    return default is None and model.get_output_embeddings().weight is model.get_input_embeddings().weight


PRIVATE_USES = {
    # transformers: Trainer's private methods overridden or called
    "_get_train_sampler": PrivateUse(
        "transformers",
        (
            "overridden: Trainer's _get_dataloader hands the token sampler, a BatchRebalanceSampler, to the "
            "DataLoader as its batch sampler and keeps Accelerate from sharding it again; get_train_dataloader "
            "would repeat that work"
        ),
        "get_train_dataloader (it would repeat Trainer's _get_dataloader)",
        lambda: transformers.Trainer._get_train_sampler,
        lambda method: parameters(method) == ["self", "train_dataset"],
    ),
    "_save_checkpoint": PrivateUse(
        "transformers",
        (
            "overridden, so that a failed write removes the unmarked folder and keeps the previous complete "
            "checkpoint (no callback runs before or around Trainer's writes); called by save_checkpoint: no "
            "public method writes a resumable one"
        ),
        "save_model writes no resumable checkpoint; callbacks run only after the write",
        lambda: transformers.Trainer._save_checkpoint,
        lambda method: parameters(method) == ["self", "model", "trial"],
    ),
    # the model's and the pipeline's hooks (modeling_vanilla/)
    "_attn_implementation": PrivateUse(
        "transformers",
        (
            "the attention implementation a model was loaded with (attn_implementation=...), read by the attention "
            "layers and copied onto a model converted from Marian"
        ),
        "none: PreTrainedConfig has no public attribute for it (its constructor takes attn_implementation)",
        lambda: transformers.PreTrainedConfig(attn_implementation="eager"),
        lambda config: config._attn_implementation == "eager" and attention_implementation_set(config),
    ),
    "_init_weights": PrivateUse(
        "transformers",
        ("overridden: tensor2tensor's initialisation, which post_init and from_pretrained apply to each module"),
        "none: post_init applies it; transformers' models initialise so",
        lambda: transformers.PreTrainedModel._init_weights,
        lambda method: parameters(method) == ["self", "module"],
    ),
    "_tied_weights_keys": PrivateUse(
        "transformers",
        (
            "the tied embeddings (§3.4: the shared source, target and output matrices), by target and source, "
            "which saving, loading and tie_weights read"
        ),
        "none: each transformers model declares its ties so",
        lambda: transformers.PreTrainedModel._tied_weights_keys,
        ties_made,
    ),
    "_prepare_cache_for_generation": PrivateUse(
        "transformers",
        (
            "overridden: generate()'s encoder-decoder cache under --attention_window is remade full (cross-attention "
            "sees the whole source), where transformers would make it of sliding-window layers"
        ),
        "past_key_values given to generate(): every caller (pipelines, Hub users) would have to build it",
        lambda: transformers.GenerationMixin._prepare_cache_for_generation,
        lambda method: parameters(method)[:3] == ["self", "generation_config", "model_kwargs"],
    ),
    "_sanitize_parameters": PrivateUse(
        "transformers",
        "the translation pipeline (pipeline_vanilla.py) sorts a call's arguments into its steps",
        "none: transformers' documentation of a new pipeline names the methods it implements",
        lambda: transformers.Pipeline._sanitize_parameters,
    ),
    "_forward": PrivateUse(
        "transformers",
        "the translation pipeline's generate() call",
        "none, as for _sanitize_parameters",
        lambda: transformers.Pipeline._forward,
    ),
    "_prepare_generate_kwargs": PrivateUse(
        "transformers",
        "the pipeline's generate() arguments over the call's, as a direct generate() call gets them (5.20 on)",
        "none: the pipeline's generation_config holds transformers' defaults filled in",
        lambda: transformers.Pipeline._prepare_generate_kwargs,
        instead="_prepare_generation_config",
    ),
    "_prepare_generation_config": PrivateUse(
        "transformers",
        "before 5.20: the model's own generation config so prepared, from which the pipeline's differs",
        "none, as for _prepare_generate_kwargs",
        lambda: transformers.GenerationMixin._prepare_generation_config,
        instead="_prepare_generate_kwargs",
    ),
    # the entry points (inference/)
    "_compile_all_devices": PrivateUse(
        "transformers",
        (
            "vanilla-bench's generate-static-compiled mode on a CPU: transformers compiles generate()'s step on "
            "CUDA only unless it is set"
        ),
        "none: CompileConfig takes no public flag for it",
        lambda: transformers.CompileConfig._compile_all_devices,
        lambda default: default is None,  # off unless set, as generate()'s auto-compile check reads it
    ),
    "_actions": PrivateUse(
        "argparse",
        (
            "HfArgumentParser's (argparse's) flags, whose destinations a preset's fields are checked against: no "
            "public list of them"
        ),
        None,
        lambda: flags("max_tokens", "warmup_steps"),
        lambda actions: {action.dest for action in actions} == {"help", "max_tokens", "warmup_steps"},
    ),
    "_fingerprint": PrivateUse(
        "datasets",
        (
            "the content hash of a Dataset (the identity datasets caches its transforms under): the cache keys of"
            " the learned tokenizer and of --moses_lowercase_tokenize's text are derived from it, so a changed "
            "corpus is a new key"
        ),
        (
            "none: datasets exposes no public hash of a Dataset's content (Hasher.hash of the whole Dataset reads"
            " its every row)"
        ),
        lambda: fingerprint("Ein Mann."),
        lambda key: key == fingerprint("Ein Mann.") != fingerprint("Eine Frau."),
    ),
    "_generate_tables": PrivateUse(
        "datasets",
        (
            "ParallelText (an ArrowBasedBuilder) writes the pairs' Arrow tables here, and its code is hashed into"
            " the builder's cache key"
        ),
        (
            "none: datasets' documentation names _info, _split_generators and _generate_tables as the methods a "
            "builder implements"
        ),
        lambda: datasets.ArrowBasedBuilder._generate_tables,
    ),
    "_info": PrivateUse(
        "datasets",
        "ParallelText's features (source, target), the method a builder implements",
        "none, as for _generate_tables",
        lambda: datasets.DatasetBuilder._info,
    ),
    "_split_generators": PrivateUse(
        "datasets",
        "ParallelText's one split, the method a builder implements",
        "none, as for _generate_tables",
        lambda: datasets.DatasetBuilder._split_generators,
    ),
    "_is_avx512_bf16_supported": PrivateUse(
        "torch",
        (
            "whether the CPU multiplies bf16 in hardware (vanilla_tools.hardware.cpu_bf16): the default "
            "precision, and the refusal of an emulated bf16 at 1 GFLOP/s"
        ),
        "none: torch.backends.cpu.get_cpu_capability names the vector ISA (AVX512), not its BF16 extension",
        lambda: torch.cpu._is_avx512_bf16_supported,
        lambda probe: isinstance(probe(), bool),
    ),
    "_is_amx_tile_supported": PrivateUse(
        "torch",
        "whether the CPU has AMX tiles, the other way to bf16 in hardware (cpu_bf16)",
        "none, as for AVX512-BF16",
        lambda: torch.cpu._is_amx_tile_supported,
        lambda probe: isinstance(probe(), bool),
    ),
    "_inductor": PrivateUse(
        "torch",
        (
            "inductor's settings (fallback_random, the CUDA graph warning limit), its table of what each compile "
            "mode sets, and its C++ compiler check (compiled.py)"
        ),
        "torch.compile(options=...) takes the settings per call, but Trainer makes the torch.compile call",
        inductor,
        inductor_serves,
    ),
    "_dynamo": PrivateUse(
        "torch",
        "maybe_mark_dynamic on a batch's tensors, and dynamo's counters and timers of a compilation (compiled.py)",
        (
            "torch._dynamo.mark_dynamic is documented (torch.compiler's docs) under this module; torch.compiler "
            "has no counters"
        ),
        lambda: torch._dynamo,
        dynamo_serves,
    ),
    "_functorch": PrivateUse(
        "torch",
        "AOTAutograd's cache switch for custom autograd.Functions (configure_inductor)",
        "none (pytorch/pytorch#149751 leaves it off by default)",
        lambda: importlib.import_module("torch._functorch.config"),
        lambda config: isinstance(config.autograd_cache_allow_custom_autograd_functions, bool),
    ),
}
