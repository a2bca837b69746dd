"""The training step compiled: Trainer's ``--torch_compile`` (transformers hands the training loop's model to
``torch.compile``; evaluation and ``generate()`` stay eager), fitted to this model's training.

- Inductor's CPU backend builds C++ kernels: where it finds no C++ compiler (or no Python headers), the run trains
  eagerly and says so in one line, rather than failing at its first step.
- Token batches change their (batch, length) shape at every step: their tensors are marked dynamic, so the first
  compilation serves every shape. Unmarked, the first shape compiles a static graph and the second compiles again.
- CUDA graphs (``--torch_compile_mode reduce-overhead`` or ``max-autotune``) are decided in ``settle_cuda_graphs``:
  with one micro-batch a step on one GPU the step records them unless a mode is given; with gradient accumulation on
  a GPU they are refused, since torch's CUDA graph trees break it.
- What compiling cost is logged when training ends (it is counted in the run's time, ``--max_train_minutes``), with
  what the run found in inductor's caches: a second run on the machine loads its graphs instead of compiling them.

The model itself compiles whole (no graph breaks; ``tests/test_training/test_compiled.py``), its fused loss included.
What it buys: ``python -m benchmarks.training_step`` (docs/performance.md).
"""

import logging
import sysconfig
from pathlib import Path

import torch
from transformers import Seq2SeqTrainingArguments, TrainerCallback

from vanilla_tools.cli import UsageError

logger = logging.getLogger(__name__)

CUDA_GRAPHS_MODE = "reduce-overhead"  # torch.compile's mode that records CUDA graphs without autotuning
# CUDA graphs an epoch may record a compiled graph (one a batch shape; issue 99): the bucketed wmt14 epoch has 52-61
# shapes (benchmarks/epoch_shapes.py). Inductor warns past it, rather than past its default of 8.
MOST_CUDA_GRAPHS = 64


def cannot_build_kernels() -> str | None:
    """Why inductor cannot build CPU kernels here (no C++ compiler, or no Python headers, which its kernels'
    bindings include), or None."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except Exception as error:  # InvalidCxxCompiler; on a bare torch build, the import itself
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    headers = Path(sysconfig.get_path("include"))
    if not (headers / "Python.h").is_file():
        return f"no Python.h in {headers}: the Python development headers are not installed"
    return None


def compiles_on_cpu(args: Seq2SeqTrainingArguments) -> bool:
    return args.torch_compile and args.torch_compile_backend == "inductor" and args.device.type == "cpu"


def captures_cuda_graphs(mode: str | None) -> bool:
    """Whether ``torch.compile``'s ``mode`` records CUDA graphs (inductor's own table of what each mode sets)."""
    return bool(torch._inductor.list_mode_options(mode or "default").get("triton.cudagraphs"))


def settle_cuda_graphs(args: Seq2SeqTrainingArguments, accumulation: int) -> str | None:
    """The ``--torch_compile_mode`` the compiled step runs with ``accumulation`` batches a step,
    deciding whether it records CUDA graphs; ``build.resolve_run`` holds it in the resolved run, which writes it.

    - One micro-batch a step in one process on a GPU, no ``--torch_compile_mode`` given: ``reduce-overhead``
      (logged). The forward and the backward graph replay as CUDA graphs (inductor's CUDA graph trees), one
      recording each per batch shape: the batches are marked dynamic (``mark_dynamic``) and torch 2.13 records a
      graph per distinct value of a graph's integer inputs, its dynamic sizes (``cudagraph_trees.cudagraphify``'s
      ``fn_cache`` keyed on ``get_ints(inputs)``), rather than skip dynamic graphs
      (``torch._inductor.config.triton.cudagraph_skip_dynamic_graphs`` is False). The optimizer step is not in them:
      Trainer calls it eagerly between replays (fused AdamW, a few multi-tensor launches). Several processes keep the
      default mode: DDP's and FSDP's collectives in the backward pass have not been run under CUDA graphs here.
    - A mode that records CUDA graphs with gradient accumulation on a GPU is refused. Inductor's CUDA graph trees hand
      a backward graph's output to ``.grad`` as it is, and the next batch's replay overwrites it: the accumulation
      then fails ("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run",
      pytorch/pytorch#169545, met by ``benchmarks/wmt14_step.py`` on an H200 with torch 2.11) or keeps only the last
      batch's gradient (pytorch/pytorch#96693).

    A given mode stays: ``--torch_compile_mode default`` (or ``max-autotune-no-cudagraphs``) compiles without CUDA
    graphs."""
    if not (args.torch_compile and args.device.type == "cuda"):  # inductor records no CUDA graph elsewhere
        return args.torch_compile_mode
    if accumulation > 1 and captures_cuda_graphs(args.torch_compile_mode):
        raise UsageError(
            f"--torch_compile_mode {args.torch_compile_mode} records CUDA graphs, which break gradient "
            f"accumulation ({accumulation} batches a step; pytorch/pytorch#169545): "
            "train one batch a step (--max_tokens_per_batch at --tokens_per_step) or compile without "
            "CUDA graphs (the default mode, or max-autotune-no-cudagraphs)"
        )
    if accumulation == 1 and args.world_size == 1 and args.torch_compile_mode is None:
        logger.info(
            "--torch_compile on one GPU with one micro-batch a step: --torch_compile_mode %s, the forward and "
            "backward pass replayed as CUDA graphs, one per batch shape",
            CUDA_GRAPHS_MODE,
        )
        return CUDA_GRAPHS_MODE
    return args.torch_compile_mode


def compiles(args: Seq2SeqTrainingArguments) -> bool:
    """Whether the step is compiled: ``--torch_compile``, unless inductor cannot build CPU kernels here, where the run
    trains eagerly (logged; ``resolved.ResolvedRun.write`` turns the flag off)."""
    if compiles_on_cpu(args) and (reason := cannot_build_kernels()):
        logger.warning("--torch_compile: inductor cannot build CPU kernels here (%s); training eagerly", reason)
        return False
    return args.torch_compile


def fit_for_compile(args: Seq2SeqTrainingArguments) -> None:
    """Readies this process for the compiled step where ``--torch_compile`` (as ``resolved.ResolvedRun.write`` left it)
    asks for one: inductor's settings, and on CUDA no cuDNN attention. The trainer marks its batches dynamic
    (``mark_dynamic``)."""
    if args.torch_compile:
        configure_inductor(args.device.type)
        if args.device.type == "cuda" and torch.backends.cuda.cudnn_sdp_enabled():
            # what speedups.sdpa_without_cudnn does for eager attention, which compiled code cannot do per call
            logger.info("--torch_compile on CUDA: cuDNN's attention off (it plans every new batch shape)")
            torch.backends.cuda.enable_cudnn_sdp(False)


def configure_inductor(device_type: str = "cpu") -> None:
    """Inductor's settings for this model's compiled step on ``device_type``, in training and in its benchmarks alike
    (process-wide).

    - On a CPU, ATen's random numbers inside the graph (``fallback_random``): inductor's own CPU generator draws a
      Philox number an element, 2x the time of ATen's (measured with dropout), which residual_dropout's draws serve
      two elements of. On CUDA inductor's own Philox draws inside the fused dropout kernels, where ATen's would add
      random-number kernels to every step.
    - CUDA graph trees warn past ``MOST_CUDA_GRAPHS`` recordings of a graph (one a batch shape), not past 8.
    - AOTAutograd's cache takes graphs that hold custom autograd.Functions (the fused loss, the compiled ReLU). torch
      leaves them out by default while it tests the switch more widely (pytorch/pytorch#149751): without it every
      run traces the joint graph and partitions it again, and only inductor's kernels come from the cache (what a
      second run saves: docs/performance.md). The Functions' forward and backward are traced into the graph the
      cache is keyed on, so a changed Function misses it (tests/test_training/test_compiled.py).
    """
    torch._inductor.config.fallback_random = device_type == "cpu"
    torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit = MOST_CUDA_GRAPHS
    torch._functorch.config.autograd_cache_allow_custom_autograd_functions = True


def mark_dynamic(batch: dict) -> dict:
    """Marks the batch and length dimensions of a batch's 2-D tensors (ids, masks, labels) dynamic for
    ``torch.compile``, so the first compilation serves every shape (a no-op when nothing compiles). The marks are
    attributes of the tensor objects, which a DataLoader's worker process does not hand over (pickling keeps a
    tensor's data): a batch is marked in the process that runs the step."""
    for tensor in batch.values():
        if isinstance(tensor, torch.Tensor) and tensor.dim() == 2:
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
            torch._dynamo.maybe_mark_dynamic(tensor, 1)
    return batch


# dynamo's timers of a compilation: the forward graph's (tracing and the backend's compilation), and the backward
# graph's, which the backend compiles at the first backward pass
COMPILE_TIMERS = ("_compile.compile_inner", "compile_fx.<locals>.bw_compiler")


def compile_counts() -> dict:
    """Graphs compiled so far in this process, graph breaks, the seconds spent compiling, the compiled graphs that
    ``mode="reduce-overhead"`` left without CUDA graphs (inductor logs why under ``TORCH_LOGS=cudagraphs``), and what
    the on-disk caches held: AOTAutograd's (a forward graph with its backward, traced and partitioned; ``bypass``:
    a graph it cannot take) and inductor's FX graph cache (the kernels of a forward or a backward graph)."""
    counters, timers = torch._dynamo.utils.counters, torch._dynamo.utils.compilation_time_metrics
    aot, inductor = counters["aot_autograd"], counters["inductor"]
    return {
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "compile_s": sum(sum(timers.get(name, ())) for name in COMPILE_TIMERS),
        "cudagraph_skips": inductor["cudagraph_skips"],
        "aot_autograd_cache": {
            "hit": aot["autograd_cache_hit"],
            "miss": aot["autograd_cache_miss"],
            "bypass": aot["autograd_cache_bypass"],
        },
        "inductor_cache": {"hit": inductor["fxgraph_cache_hit"], "miss": inductor["fxgraph_cache_miss"]},
    }


class CompileReport(TrainerCallback):
    """Logs, when training ends, what compiling the step cost: graphs (one per shape that could not reuse a graph),
    graph breaks, seconds, and the graphs found in the caches of an earlier run (AOTAutograd's, where a whole graph
    with its backward loads; inductor's, whose kernels spare only the C++ compiler)."""

    def on_train_end(self, args, state, control, **kwargs):
        if args.torch_compile:
            counts = compile_counts()
            aot, kernels = counts["aot_autograd_cache"], counts["inductor_cache"]
            logger.info(
                "torch.compile: %d graph(s), %d graph break(s), %.1f s compiling; found in earlier runs' "
                "caches: AOTAutograd %d of %d, inductor %d of %d",
                counts["graphs"],
                counts["graph_breaks"],
                counts["compile_s"],
                aot["hit"],
                sum(aot.values()),
                kernels["hit"],
                sum(kernels.values()),
            )
