"""training's front: what the repository's tools (experiments/, benchmarks/) use of vanilla-train, and all they may
import of it (tests/test_architecture.py holds them to it). The modules behind it may move; these names stay."""

from .arguments import LOADER_ON_CUDA, PRESETS, ModelArguments, load_preset, on_cpu, parse_args
from .build import build_model, build_trainer, resolve_run
from .data.batching import TokenBatchSampler
from .data.corpus import lengths, load_parallel_data, text_form, tokenize_splits
from .data.tokenizer import SPECIAL_TOKENS, train_tokenizer
from .run.checkpoints import checkpoint_step, complete_checkpoints
from .run.plot_curve import curve_columns
from .run.record import check_run_record, resolved_arguments, run_launches, run_record, run_train_minutes
from .run.stopping import stopping_signal
from .step.allocator import keep_freed_memory
from .step.compiled import compile_counts, configure_inductor, mark_dynamic

__all__ = [
    "LOADER_ON_CUDA",
    "ModelArguments",
    "PRESETS",
    "SPECIAL_TOKENS",
    "TokenBatchSampler",
    "build_model",
    "build_trainer",
    "check_run_record",
    "checkpoint_step",
    "compile_counts",
    "complete_checkpoints",
    "configure_inductor",
    "curve_columns",
    "keep_freed_memory",
    "lengths",
    "load_parallel_data",
    "load_preset",
    "mark_dynamic",
    "on_cpu",
    "parse_args",
    "resolve_run",
    "resolved_arguments",
    "run_launches",
    "run_record",
    "run_train_minutes",
    "stopping_signal",
    "text_form",
    "tokenize_splits",
    "train_tokenizer",
]
