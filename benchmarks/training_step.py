"""`python -m benchmarks.training_step`: where the Multi30k preset's training step goes, and how fast it runs.

``--profile`` trains the preset (``vanilla-train --config multi30k``, or ``--preset``'s: its data path, BPE-dropout,
token batches, bf16 autocast where the CPU has it, Trainer's loop) for a few steps, times ``--steps`` steps, then runs
``torch.profiler`` over ``--profile_steps`` more and sorts every operator's own time into what the step spends it on:
matrix products, attention, LayerNorm, dropout, autocast's casts, other ops, the loss, the optimizer, the data
loader, and the Python between operators. The limit beside it: the step's matrix-product FLOPs at the bf16 (or fp32)
matrix-product peak measured in the same run.

``--interleaved`` times the preset's step eager and compiled in one process, alternating step by step on the same
batches (the loop Trainer runs, without Trainer), with the first compiled step's time (the compilation).

``--compare REV`` times the preset's training at REV (``git archive``, the code and the bundled data) against this
checkout, each in its own process, alternating (A B B A ...): tokens per second after the first ``--warmup`` steps,
and the time to the end of those steps (data, model and, where the preset compiles, the compilation).

    python -m benchmarks.training_step --profile --json results/benchmarks/training-step-profile.json
    python -m benchmarks.training_step --interleaved --json results/benchmarks/training-step-compiled.json
    python -m benchmarks.training_step --compare 30a8cb7 --json results/benchmarks/training-step.json

``--curves STEPS`` records the training loss of the first STEPS steps, eager and compiled, for ``--seeds``.

    python -m benchmarks.training_step --curves 500 --json results/benchmarks/training-step-curves.json

``--launches`` counts the operators one step launches on the preset's model (fp32), eager and compiled (ATen
operators that compute, and inductor's kernels), and what an epoch of the preset's batch shapes compiles, once per
shape and with dynamic shapes (graphs, recompiles, graph breaks, seconds), in a first process and again in a second
that finds the first one's caches; the flags after ``--`` bound the shapes (without them an epoch has hundreds,
each compiled once):

    python -m benchmarks.training_step --launches --json results/benchmarks/training-step-launches.json -- \
        --required_batch_size_multiple 8 --required_seq_len_multiple 8 --num_batch_buckets 8

Every measurement starts from an empty inductor cache, so a compiled step pays its whole compilation, as a first
run does (``--launches`` then measures a second run too). Flags after ``--`` go to vanilla-train in this checkout
(``--compare`` runs REV's preset as it was).
"""

import argparse
import contextlib
import copy
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import unittest.mock
from collections import Counter, defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from transformers import TrainerCallback

from benchmarks import write_record
from modeling_vanilla import modeling_vanilla as modeling
from training.api import (
    PRESETS,
    build_trainer,
    compile_counts,
    configure_inductor,
    keep_freed_memory,
    mark_dynamic,
    parse_args,
    resolve_run,
)
from vanilla_tools.hardware import bf16_supported, matmul_peak, precision
from vanilla_tools.provenance import ROOT, provenance

PRESET = "multi30k"
# --compare's budget: the tokens each tree trains in the 54 minutes that bounded the preset until its budget became
# steps (7,200 of them, the same on every machine): the measure of a faster step that its records were made with
COMPARE_BUDGET_S = 54 * 60
# The model's regions the profile names, labelled while profiling (record_function); a backward operator belongs to
# the region of the forward operator that made it (the profiler's sequence numbers).
REGIONS = {"vanilla.loss": "loss", "vanilla.attention": "attention", "vanilla.dropout": "dropout"}
# Operators by what they compute, where no region claims them; the innermost match names an operator's own time.
FAMILIES = {
    "matrix products": (
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "MmBackward0",
        "AddmmBackward0",
        "BmmBackward0",
        "LinearBackward0",
    ),
    "LayerNorm": (
        "aten::layer_norm",
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "NativeLayerNormBackward0",
    ),
    "casts (autocast)": ("aten::to", "aten::_to_copy", "ToCopyBackward0"),
}
MATMUL_FLOPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")  # the operators the profiler counts
ORDER = (
    "matrix products",
    "attention",
    "LayerNorm",
    "dropout",
    "casts (autocast)",
    "fused kernels (inductor)",
    "other ops",
    "loss",
    "optimizer",
    "data loader",
    "Python and framework",
)


def preset_trainer(steps: int, output_dir: str, extra: list[str], preset: str = PRESET):
    """The preset's trainer for ``steps`` steps, without evaluation, checkpoints or a time budget, in a process
    whose allocator keeps freed memory, as vanilla-train's does."""
    keep_freed_memory()
    model_args, data_args, training_args = parse_args(
        [
            "--config",
            preset,
            "--output_dir",
            output_dir,
            "--max_steps",
            str(steps),
            "--eval_strategy",
            "no",
            "--save_strategy",
            "no",
            "--max_train_minutes",
            "0",
            "--disable_tqdm",
            "true",
            "--report_to",
            "none",
            *extra,
        ]
    )
    run = resolve_run(model_args, data_args, training_args)
    trainer, _ = build_trainer(model_args, data_args, training_args, run)
    return trainer, training_args


class TokenCount:
    """Wraps the collator: the shape (pairs, source length, target length) and the real (unpadded) source + target
    tokens of each batch, in the order training takes them (the loader runs in the training process: the presets
    set no workers); a step is ``gradient_accumulation_steps`` batches (``step_tokens``)."""

    def __init__(self, collate):
        self.collate, self.shapes, self.tokens = collate, [], []

    def __call__(self, features):
        batch = self.collate(features)
        self.shapes.append((*batch["input_ids"].shape, batch["labels"].shape[1]))
        self.tokens.append(int(batch["attention_mask"].sum()) + int((batch["labels"] != -100).sum()))
        return batch


class StepClock(TrainerCallback):
    """The time each step ends; with ``profile_from``, a profile of the ``profile_steps`` steps after it (of the
    ``activities`` asked; a GPU's work is waited for at the window's end)."""

    def __init__(
        self,
        profile_from: int | None = None,
        profile_steps: int = 0,
        activities: tuple[ProfilerActivity, ...] = (ProfilerActivity.CPU,),
        with_flops: bool = True,
    ):
        self.ends: list[float] = []
        self.start = 0.0
        self.profile_from, self.profile_steps, self.activities = profile_from, profile_steps, list(activities)
        self.with_flops = with_flops  # the profiler's FLOP counts (its host overhead is in the window)
        self.profiler: profile | None = None
        self.window = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def step_seconds(self, first: int, stop: int) -> list[float]:
        """The durations of steps ``first + 1`` to ``stop`` (counted from 1)."""
        return [self.ends[i] - self.ends[i - 1] for i in range(first, stop)]

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())
        if state.global_step == self.profile_from:
            self.wait_for_gpu()
            self.profiler = profile(activities=self.activities, with_flops=self.with_flops)
            self.profiler.__enter__()
            self.window = time.perf_counter()
        elif self.profiler is not None and state.global_step == self.profile_from + self.profile_steps:
            self.wait_for_gpu()
            self.window = time.perf_counter() - self.window
            self.profiler.__exit__(None, None, None)

    def wait_for_gpu(self) -> None:
        """The window holds its own steps' GPU work, no more: the steps before are done when it opens."""
        if ProfilerActivity.CUDA in self.activities:
            torch.cuda.synchronize()


def labelled(function, label: str):
    def run(*args, **kwargs):
        with record_function(label):
            return function(*args, **kwargs)

    return run


@contextlib.contextmanager
def labelled_regions():
    """The model's dropout, attention core and fused loss, each inside a profiler label (``REGIONS``)."""
    model_class = modeling.VanillaTransformerForSeq2Seq
    saved = modeling.residual_dropout, modeling.eager_attention_forward, model_class.fused_loss
    modeling.residual_dropout = labelled(saved[0], "vanilla.dropout")
    modeling.eager_attention_forward = labelled(saved[1], "vanilla.attention")
    model_class.fused_loss = labelled(saved[2], "vanilla.loss")
    try:
        yield
    finally:
        modeling.residual_dropout, modeling.eager_attention_forward, model_class.fused_loss = saved


def region(event, forward_regions: dict[int, str]) -> str | None:
    name = event.name
    if name.startswith("enumerate(DataLoader)"):
        return "data loader"
    if name.startswith("Optimizer."):  # step and zero_grad
        return "optimizer"
    if name in REGIONS:
        return REGIONS[name]
    if name.startswith("autograd::engine::evaluate_function"):
        return forward_regions.get(event.sequence_nr)
    return None


def family(name: str) -> str | None:
    if name.startswith("cpp_fused") or name.startswith("## Call CompiledFxGraph"):
        return "fused kernels (inductor)"
    return next((family for family, names in FAMILIES.items() if name in names), None)


def by_time(item: tuple[str, float]) -> float:
    return -item[1]


def chain(event):
    while event is not None:
        yield event
        event = event.cpu_parent


def categorize(events, window_s: float, steps: int) -> dict:
    """Milliseconds a step in each of ``ORDER`` (with the matrix products inside each), and the FLOPs of its matrix
    products. An operator's own time goes to its innermost region, else to its innermost family; the labels' own
    time and the time outside every operator are the Python between operators."""
    forward_regions = {}
    for event in events:
        named = next((region(e, {}) for e in chain(event) if region(e, {})), None)
        if named in REGIONS.values() and event.sequence_nr >= 0:
            forward_regions[event.sequence_nr] = named
    spent, matmul, operators = defaultdict(float), defaultdict(float), defaultdict(float)
    covered = flops = 0.0
    for event in events:
        if event.cpu_parent is None and not event.name.startswith("ProfilerStep"):
            covered += event.cpu_time_total
        if event.name in MATMUL_FLOPS:
            flops += event.flops or 0
        own = event.self_cpu_time_total
        if event.name in REGIONS:
            spent["Python and framework"] += own
            continue
        where = next((r for e in chain(event) if (r := region(e, forward_regions))), None)
        kind = next((f for e in chain(event) if (f := family(e.name))), None)
        category = where or kind or "other ops"
        spent[category] += own
        operators[f"{event.name} ({category})"] += own
        if kind == "matrix products":
            matmul[category] += own
    spent["Python and framework"] += max(0.0, 1e6 * window_s - covered)
    scale = 1e-3 / steps  # us over the window -> ms a step
    return {
        "ms_per_step": {name: spent[name] * scale for name in ORDER if name in spent},
        "matrix_products_ms_per_step": {name: ms * scale for name, ms in matmul.items()},
        "matmul_flops_per_step": flops / steps,
        "top_operators_ms_per_step": {name: ms * scale for name, ms in sorted(operators.items(), key=by_time)[:30]},
    }


def step_tokens(batch_tokens: list[int], accumulation: int) -> list[int]:
    """The tokens of each step: its ``accumulation`` batches' together."""
    return [sum(batch_tokens[i : i + accumulation]) for i in range(0, len(batch_tokens), accumulation)]


def profile_preset(steps: int, profile_steps: int, warmup: int, extra: list[str], preset: str = PRESET) -> dict:
    """Train ``preset`` for warmup + steps + profile_steps steps: time the middle ones, profile the last ones."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer, training_args = preset_trainer(warmup + steps + profile_steps, tmp, extra, preset)
        trainer.data_collator = counter = TokenCount(trainer.data_collator)
        clock = StepClock(profile_from=warmup + steps, profile_steps=profile_steps)
        trainer.add_callback(clock)
        # compiled, the regions are fused together: its kernels are named instead
        with contextlib.nullcontext() if training_args.torch_compile else labelled_regions():
            trainer.train()
    step_times = clock.step_seconds(warmup, warmup + steps)
    tokens = step_tokens(counter.tokens, training_args.gradient_accumulation_steps)[warmup : warmup + steps]
    dtype = torch.bfloat16 if training_args.bf16 else torch.float32
    peak = matmul_peak(dtype)
    split = categorize(clock.profiler.events(), clock.window, profile_steps)
    total = sum(split["ms_per_step"].values())
    return {
        "preset": preset,
        "vanilla_train_flags": extra,
        "gradient_accumulation_steps": training_args.gradient_accumulation_steps,
        "precision": precision(training_args.mixed_precision),
        "threads": torch.get_num_threads(),
        "steps_timed": steps,
        "step_s_median": statistics.median(step_times),
        "tokens_per_s": sum(tokens) / sum(step_times),
        "tokens_per_step_median": statistics.median(tokens),
        "steps_profiled": profile_steps,
        "profiled_step_ms": total,
        **split,
        "matmul_peak_flops_per_s": peak,
        "limit_ms_per_step": 1e3 * split["matmul_flops_per_step"] / peak,
    }


def profile_table(result: dict) -> str:
    total = result["profiled_step_ms"]
    rows = ["| where | ms a step | share | of which matrix products (ms) |", "| --- | ---: | ---: | ---: |"]
    for name, ms in result["ms_per_step"].items():
        inner = result["matrix_products_ms_per_step"].get(name)
        rows.append(f"| {name} | {ms:.1f} | {100 * ms / total:.1f}% | {'' if inner is None else f'{inner:.1f}'} |")
    rows.append(f"| **step (profiled)** | **{total:.1f}** | 100% | |")
    rows.append(
        f"\nunprofiled: {1e3 * result['step_s_median']:.1f} ms a step (median of {result['steps_timed']}), "
        f"{result['tokens_per_s']:,.0f} tokens/s; matrix products {result['matmul_flops_per_step'] / 1e9:.2f} GFLOP "
        f"a step at the {result['matmul_peak_flops_per_s'] / 1e9:.0f} GFLOP/s peak measured: "
        f"{result['limit_ms_per_step']:.1f} ms a step (the limit)"
    )
    return "\n".join(rows)


# ---- --interleaved: eager against compiled, step by step in one process ----------------------------------------
def interleaved(steps: int, warmup: int, extra: list[str]) -> dict:
    """The preset's step eager and compiled (``--torch_compile``: its dynamic batches and settings) in one process,
    alternating step by step (A B B A ...) on the same batches after ``warmup`` steps of each: the same initial
    weights twice, each with its own fused AdamW, under the preset's autocast. The loop is Trainer's without its
    own per-step work (about 10 ms a step in the profile's Python share)."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer, training_args = preset_trainer(warmup + steps, tmp, ["--torch_compile", "true", *extra])
        batches = list(itertools.islice(trainer.get_train_dataloader(), warmup + steps))
    models = {"eager": trainer.model.train(), "compiled": copy.deepcopy(trainer.model).train()}
    compiled = torch.compile(
        models["compiled"], backend=training_args.torch_compile_backend, mode=training_args.torch_compile_mode
    )
    forwards = {"eager": models["eager"], "compiled": compiled}
    optimizers = {
        name: torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        for name, model in models.items()
    }

    def step(name: str, batch: dict) -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=training_args.bf16):
            loss = forwards[name](**batch).loss
        loss.backward()
        optimizers[name].step()
        optimizers[name].zero_grad(set_to_none=True)
        return time.perf_counter() - start

    first = [step("compiled", batch) for batch in batches[:warmup]]
    for batch in batches[:warmup]:
        step("eager", batch)
    times = defaultdict(list)
    for i, batch in enumerate(batches[warmup:]):
        for name in ("eager", "compiled") if i % 2 == 0 else ("compiled", "eager"):
            times[name].append(step(name, batch))
    tokens = sum(int(b["attention_mask"].sum()) + int((b["labels"] != -100).sum()) for b in batches[warmup:])
    return {
        "steps": steps,
        "step_s_median": {name: statistics.median(t) for name, t in times.items()},
        "tokens_per_s": {name: tokens / sum(t) for name, t in times.items()},
        "speedup": sum(times["eager"]) / sum(times["compiled"]),
        "first_compiled_step_s": first[0],
        "compile": compile_counts(),
        "matmul_peak_flops_per_s": matmul_peak(torch.bfloat16 if training_args.bf16 else torch.float32),
    }


# ---- --compare: this checkout against another commit, process by process -----------------------------------------
def train_timed(steps: int, warmup: int, extra: list[str]) -> dict:
    """One process's measurement (``--worker``): the preset trained for ``steps`` steps."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = preset_trainer(steps, tmp, extra)
        trainer.data_collator = counter = TokenCount(trainer.data_collator)
        clock = StepClock()
        trainer.add_callback(clock)
        built = time.perf_counter()
        trainer.train()
    timed = clock.ends[-1] - clock.ends[warmup - 1]
    return {
        "build_s": built - start,
        "first_steps_s": clock.ends[warmup - 1] - clock.start,
        "first_steps_tokens": sum(counter.tokens[:warmup]),
        "steps_timed": steps - warmup,
        "tokens_per_s": sum(counter.tokens[warmup:steps]) / timed,
        "step_s_median": statistics.median(clock.step_seconds(warmup, steps)),
    }


def checkout(rev: str, folder: Path) -> Path:
    """The tracked files of ``rev`` (the code and the bundled data) in ``folder``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run_checked(command: list[str], tree: Path = ROOT) -> str:
    """What a worker process (this file's, with its imports from ``tree``) printed; its error, should it fail."""
    done = subprocess.run(
        command, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"the worker at {tree} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def run_worker(tree: Path, steps: int, warmup: int, extra: list[str]) -> dict:
    """This file's ``--worker`` in a new process whose imports come from ``tree``."""
    command = [sys.executable, __file__, "--worker", "--steps", str(steps), "--warmup", str(warmup), "--", *extra]
    return json.loads(run_checked(command, tree).strip().splitlines()[-1])


def compare(rev: str, rounds: int, steps: int, warmup: int, extra: list[str]) -> dict:
    """The preset at ``rev`` (as it was) and in this checkout (with ``extra``), ``rounds`` processes each, in turn:
    tokens/s after the first steps, the first steps' time (compilation included), and the tokens each would train
    in the preset's time budget (the first steps as measured, then the median speed)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True)
    runs = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": (checkout(rev, Path(tmp)), []), "now": (ROOT, extra)}
        for round_ in range(rounds):
            for name in ("before", "now") if round_ % 2 == 0 else ("now", "before"):
                tree, flags = trees[name]
                runs[name].append(run_worker(tree, steps, warmup, flags))
                print(name, json.dumps(runs[name][-1]), flush=True)
    peak = matmul_peak(torch.bfloat16 if bf16_supported() else torch.float32)  # the precision the preset trains in
    median = {
        key: {name: statistics.median(run[key] for run in results) for name, results in runs.items()}
        for key in ("tokens_per_s", "first_steps_s", "first_steps_tokens")
    }
    budget = COMPARE_BUDGET_S
    in_budget = {
        name: median["first_steps_tokens"][name]
        + median["tokens_per_s"][name] * (budget - median["first_steps_s"][name])
        for name in runs
    }
    return {
        "before": commit.stdout.strip(),
        "runs": dict(runs),
        **median,
        "budget_s": budget,
        "tokens_in_budget": in_budget,
        "speedup": median["tokens_per_s"]["now"] / median["tokens_per_s"]["before"],
        "speedup_in_budget": in_budget["now"] / in_budget["before"],
        "matmul_peak_flops_per_s": peak,
    }


# ---- --launches: the operators a step launches, eager and compiled; what an epoch of shapes compiles ----------------
def makes_views_only(name: str) -> bool:
    """Whether the ATen operator the profiler names ``name`` ("aten::view") returns views of its inputs in every
    overload: it launches no kernel."""
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    schemas = [getattr(packet, overload)._schema for overload in packet.overloads()] if packet is not None else []
    return bool(schemas) and all(
        schema.returns and all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        for schema in schemas
    )


def inside_an_operator(event) -> bool:
    parent = event.cpu_parent
    while parent is not None and not parent.name.startswith("aten::"):
        parent = parent.cpu_parent
    return parent is not None


def launched(events) -> Counter:
    """The operators that profiled ``events`` launched, by name: ATen operators called from Python or autograd (not
    from inside another, whose work they are) that compute something (not views), and inductor's C++ kernels (their
    names, with ``cpp.enable_kernel_profile``, hold "cpp_fused"), counted as "inductor kernel"."""
    counts = Counter()
    for event in events:
        if "cpp_fused" in event.name:
            counts["inductor kernel"] += 1
        elif event.name.startswith("aten::") and not makes_views_only(event.name) and not inside_an_operator(event):
            counts[event.name] += 1
    return counts


def step_launches(model, batch: dict, compiled: bool, backend: str = "inductor") -> Counter:
    """The operators one training step (forward, backward, the presets' fused AdamW) launches on the CPU, counted
    on the second step (the first compiles), with training's inductor settings."""
    configure_inductor()
    forward = torch.compile(model, backend=backend, fullgraph=True) if compiled else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step():
        forward(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    with unittest.mock.patch.object(torch._inductor.config.cpp, "enable_kernel_profile", True):
        step()
        with profile(activities=[ProfilerActivity.CPU]) as profiled:
            step()
    return launched(profiled.events())


def epoch_compiles(model, batches: list[dict], dynamic: bool, backend: str = "inductor") -> dict:
    """What compiling the training step costs over ``batches`` (an epoch's, or its distinct shapes), with training's
    inductor settings (``configure_inductor``): ``dynamic`` marks each batch's dimensions dynamic, as vanilla-train's
    collator does, to serve every shape with one graph; else it compiles once per shape (dynamo's automatic dynamic
    shapes off, and room in its cache for every shape). fullgraph=True fails on a graph break, so no frame falls
    back to eager. Counted with dynamo's counters: the graphs (the model is one frame: each graph after the first is
    a recompile), the seconds compiling and what the caches held (``compile_counts``); and the seconds the epoch
    took, compiling and training each batch once."""
    configure_inductor()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch._dynamo.utils.compilation_time_metrics.clear()
    settings = {"automatic_dynamic_shapes": dynamic, "recompile_limit": max(8, len(batches))}
    start = time.perf_counter()
    with unittest.mock.patch.multiple(torch._dynamo.config, **settings):
        forward = torch.compile(model, backend=backend, fullgraph=True, dynamic=None if dynamic else False)
        for batch in batches:
            forward(**(mark_dynamic(batch) if dynamic else batch)).loss.backward()
    counts = compile_counts()
    shapes = {tuple(batch["input_ids"].shape) + tuple(batch["labels"].shape[1:]) for batch in batches}
    return {
        "dynamic": dynamic,
        "batches": len(batches),
        "distinct_shapes": len(shapes),
        **counts,
        "recompiles": counts["graphs"] - 1,
        "epoch_s": time.perf_counter() - start,
    }


def compiles_in_new_processes(model, batches: list[dict], runs: int = 2) -> list[list[dict]]:
    """``epoch_compiles`` once per shape and with dynamic shapes, in ``runs`` new processes one after another (a
    process a run of vanilla-train), from one inductor cache, empty for the first: what the first run on a machine
    pays, and what later runs find in the caches."""
    with tempfile.TemporaryDirectory() as tmp, cold_inductor_cache():
        saved = Path(tmp) / "epoch.pt"
        torch.save({"model": model, "batches": batches}, saved)
        command = [sys.executable, "-m", "benchmarks.training_step", "--compiles_worker", str(saved)]
        return [json.loads(run_checked(command).strip().splitlines()[-1]) for _ in range(runs)]


def compiles_worker(saved: str) -> list[dict]:
    """One process's ``epoch_compiles``, once per shape, then with dynamic shapes, each on a copy of the model."""
    epoch = torch.load(saved, weights_only=False)
    return [epoch_compiles(copy.deepcopy(epoch["model"]), epoch["batches"], dynamic) for dynamic in (False, True)]


def batch_shape(batch: dict) -> tuple[int, int, int]:
    return (*batch["input_ids"].shape, batch["labels"].shape[1])


def launches_and_compiles(extra: list[str]) -> dict:
    """The preset's model on its own batches (the collator's padding with ``extra``'s batch-shape flags), in fp32:
    the operators a step launches on its first batch, eager and compiled; then, on one batch of each distinct shape
    of an epoch, the graphs compiled once per shape and with dynamic shapes, the seconds each took, and the same in a
    second process that finds the first one's caches."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = preset_trainer(1, tmp, [*extra, "--torch_compile", "false"])  # batches not marked dynamic
        batches = list(trainer.get_train_dataloader())
    distinct = list({batch_shape(batch): batch for batch in batches}.values())
    model = trainer.model.train()
    cold, warm = compiles_in_new_processes(model, distinct)
    launched = {
        name: step_launches(copy.deepcopy(model), batches[0], name == "compiled") for name in ("eager", "compiled")
    }
    return {
        "vanilla_train_flags": extra,
        "epoch_batches": len(batches),
        "distinct_shapes": len(distinct),
        "first_batch": batch_shape(batches[0]),
        "launched_per_step": {name: sum(counts.values()) for name, counts in launched.items()},
        "launched_by_operator": {name: dict(counts.most_common()) for name, counts in launched.items()},
        "compiles": cold,
        "compiles_from_the_cache": warm,
    }


LAUNCHES_SUMMARY = ("epoch_batches", "distinct_shapes", "launched_per_step", "compiles", "compiles_from_the_cache")
COMPARISON_SUMMARY = ("tokens_per_s", "first_steps_s", "speedup", "speedup_in_budget")
INTERLEAVED_SUMMARY = ("step_s_median", "tokens_per_s", "speedup", "first_compiled_step_s", "compile")


# ---- --curves: the first steps' training loss, eager and compiled --------------------------------------------------
def loss_curves(steps: int, seeds: list[int], extra: list[str]) -> dict:
    """The training loss every 10 steps of ``steps``, for each seed, eager and with ``--torch_compile``, in turn.
    Seeds differ in the initial weights, dropout and batch order; BPE-dropout draws from a generator no seed
    reaches, and compiled dropout from inductor's own, so two runs never share masks."""
    curves = defaultdict(dict)
    for seed in seeds:
        for name in ("eager", "compiled"):
            flags = ["--torch_compile", str(name == "compiled").lower()]
            with tempfile.TemporaryDirectory() as tmp:
                trainer, _ = preset_trainer(steps, tmp, ["--seed", str(seed), "--logging_steps", "10", *flags, *extra])
                trainer.train()
            curves[name][seed] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
            print(name, seed, curves[name][seed][-5:], flush=True)
    return {
        "steps": steps,
        "logged_every": 10,
        "loss": dict(curves),
        "summary": curve_summary(curves),
        "compile_in_all_runs": compile_counts(),
    }


def curve_summary(curves: dict) -> dict:
    """The mean loss over seeds at a few points, eager and compiled, and the spread of the seeds' losses there."""
    summary = {}
    for name, by_seed in curves.items():
        runs = list(by_seed.values())
        points = range(min(len(run) for run in runs))
        at = [[run[i] for run in runs] for i in points]
        summary[name] = {
            "mean": [statistics.mean(losses) for losses in at],
            "spread": [max(losses) - min(losses) for losses in at],
        }
    return summary


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.training_step",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--profile", action="store_true", help="profile the preset's step")
    mode.add_argument("--interleaved", action="store_true", help="the step eager and compiled, step by step")
    mode.add_argument("--compare", metavar="REV", help="the preset's tokens/s at REV against this checkout")
    mode.add_argument("--curves", type=int, metavar="STEPS", help="first STEPS steps: loss, eager and compiled")
    mode.add_argument("--launches", action="store_true", help="operators a step launches; an epoch's compiles")
    mode.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    mode.add_argument("--compiles_worker", metavar="EPOCH", help=argparse.SUPPRESS)
    parser.add_argument(
        "--preset",
        choices=PRESETS,
        help=f"--profile: the preset profiled (default {PRESET}, what the other modes time)",
    )
    parser.add_argument("--steps", type=int, default=100, help="steps timed (--compare: steps a process trains)")
    parser.add_argument("--profile_steps", type=int, default=20, help="steps profiled after the timed ones")
    parser.add_argument("--warmup", type=int, default=20, help="first steps left out of the timing")
    parser.add_argument("--rounds", type=int, default=3, help="--compare: processes each side")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="--curves: the seeds")
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("train_args", nargs="*", help="more vanilla-train flags (after --)")
    return parser


@contextlib.contextmanager
def cold_inductor_cache():
    """An empty inductor cache (its compiled kernels and graphs) for the measurement: a compiled step pays its whole
    compilation, as the first run on a machine does; later runs find the kernels in the cache."""
    with tempfile.TemporaryDirectory() as cache:
        before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # read at each compilation, and by worker processes
        try:
            yield
        finally:
            if before is None:
                del os.environ["TORCHINDUCTOR_CACHE_DIR"]
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


def main(argv: list[str] | None = None) -> dict:
    parser = arguments()
    args = parser.parse_args(argv)
    if args.preset is not None and not args.profile:
        parser.error(f"--preset {args.preset}: only --profile profiles another preset than {PRESET}")
    # a --compiles_worker process compiles from the cache its parent chose for it (compiles_in_new_processes)
    with contextlib.nullcontext() if args.compiles_worker else cold_inductor_cache():
        return measure(args)


def measure(args: argparse.Namespace) -> dict:
    if args.worker:
        print(json.dumps(train_timed(args.steps, args.warmup, args.train_args)))
        return {}
    if args.compiles_worker:
        print(json.dumps(compiles_worker(args.compiles_worker)))
        return {}
    if args.profile:
        record = {
            **provenance(),
            "profile": profile_preset(
                args.steps, args.profile_steps, args.warmup, args.train_args, args.preset or PRESET
            ),
        }
        print(profile_table(record["profile"]))
    elif args.interleaved:
        record = {**provenance(), "interleaved": interleaved(args.steps, args.warmup, args.train_args)}
        print(json.dumps({key: record["interleaved"][key] for key in INTERLEAVED_SUMMARY}))
    elif args.launches:
        record = {**provenance(), "launches": launches_and_compiles(args.train_args)}
        print(json.dumps({key: record["launches"][key] for key in LAUNCHES_SUMMARY}))
    elif args.curves:
        record = {**provenance(), "curves": loss_curves(args.curves, args.seeds, args.train_args)}
    else:
        record = {
            **provenance(),
            "comparison": compare(args.compare, args.rounds, args.steps, args.warmup, args.train_args),
        }
        print(json.dumps({key: record["comparison"][key] for key in COMPARISON_SUMMARY}))
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
