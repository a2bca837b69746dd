"""The compiled training step (``--torch_compile``, training/step/compiled.py): eager's gradients, one graph for every
batch shape, the flag through vanilla-train, and eager training where inductor has no C++ compiler."""

import itertools
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers import batch_of, tiny_model
from safetensors.torch import load_file
from torch._dynamo.backends.common import aot_autograd
from training_helpers import built, train_argv, write_corpus
from transformers import Seq2SeqTrainingArguments

from modeling_vanilla import speedups
from training.arguments import parse_args
from training.build import resolve_run
from training.data.batching import TokenBatchSampler
from training.step import compiled
from training.step.compiled import MOST_CUDA_GRAPHS, compile_counts, configure_inductor, fit_for_compile, mark_dynamic
from training.train import run
from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.cli import UsageError

WMT_LIKE = Path(__file__).parents[1] / "fixtures" / "wmt-like-lengths.npz"  # benchmarks/epoch_shapes.py's epoch

pytestmark = pytest.mark.slow


def loss_and_gradients(model, forward, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    loss = forward(**batch).loss
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


def test_compiled_step_gives_eager_gradients(fresh_dynamo):
    """Inductor's kernels (the fused loss's among them) compute eager's loss and gradients: to rtol 1e-4, atol 1e-6
    in float32, where only the order of the sums differs. Dropout is off: compiled, its masks come from another
    generator."""
    batch = batch_of((3, 7, 6))
    results = []
    for compiled_step in (False, True):
        model = tiny_model(label_smoothing=0.1).train()
        forward = torch.compile(model, backend="inductor", fullgraph=True) if compiled_step else model
        results.append(loss_and_gradients(model, forward, batch))
    (loss, grads), (compiled_loss, compiled_grads) = results
    torch.testing.assert_close(compiled_loss, loss, rtol=1e-4, atol=1e-6)
    assert compiled_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_one_graph_for_every_batch_shape(fresh_dynamo, monkeypatch):
    """Batches marked dynamic (``mark_dynamic``) compile once, dropout and the fused loss included, whatever their
    (batch, source, target) shape, with as many loss chunks (here 2 of up to 16 rows: 18, 32, 25 and 22 target
    positions; 32, a multiple of the chunk, once needed a graph of its own); fullgraph=True fails on any graph
    break."""
    monkeypatch.setattr(speedups, "LOSS_CHUNK_ROWS", 16)
    model = tiny_model(dropout=0.1, label_smoothing=0.1).train()
    forward = torch.compile(model, backend="aot_eager", fullgraph=True)
    for shape in ((3, 7, 6), (4, 5, 8), (5, 9, 5), (2, 4, 11)):
        forward(**mark_dynamic(batch_of(shape))).loss.backward()
    assert compile_counts()["graphs"] == 1


def test_a_changed_autograd_function_is_compiled_again_not_loaded_from_the_cache(fresh_dynamo, tmp_path, monkeypatch):
    """With training's settings AOTAutograd's cache takes graphs that hold a custom autograd.Function, which torch
    leaves out by default. Its forward and backward are traced into the graph the cache is keyed on: a Function
    whose backward changed (scaling the gradient by 3, not 2) misses the cache and gives its own gradient, and the
    first one, compiled again, is found in it."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # empty; read at each compilation
    configure_inductor()

    def scaling_the_gradient_by(scale: float) -> type[torch.autograd.Function]:
        class Scaled(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.exp()

            @staticmethod
            def backward(ctx, grad):
                return grad * scale

        return Scaled

    def compiled_gradient(function: type[torch.autograd.Function]) -> tuple[float, dict]:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        x = torch.zeros(3, requires_grad=True)
        torch.compile(lambda x: function.apply(x).sum(), backend="inductor", fullgraph=True)(x).backward()
        return x.grad.tolist(), compile_counts()["aot_autograd_cache"]

    miss, hit = {"hit": 0, "miss": 1, "bypass": 0}, {"hit": 1, "miss": 0, "bypass": 0}
    assert compiled_gradient(scaling_the_gradient_by(2.0)) == ([2.0] * 3, miss)
    assert compiled_gradient(scaling_the_gradient_by(3.0)) == ([3.0] * 3, miss)
    assert compiled_gradient(scaling_the_gradient_by(2.0)) == ([2.0] * 3, hit)


def test_vanilla_train_compiles_the_step(tmp_path, caplog, fresh_dynamo):
    """--torch_compile through vanilla-train, as the Multi30k preset runs it: training compiles one graph for the
    run's batches of many shapes, and the run says what it cost; evaluation with generate(), checkpoints and their
    average see the model itself (no ``_orig_mod.`` names)."""
    corpus = write_corpus(tmp_path / "data")
    argv = train_argv(
        corpus,
        tmp_path / "out",
        "--max_steps",
        "4",
        "--dropout",
        "0.1",
        "--torch_compile",
        "true",
        "--torch_compile_backend",
        "aot_eager",
        "--final_splits",
        "validation",
        "--num_beams",
        "1",
        "--translate_examples",
        "0",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "2",
        "--predict_with_generate",
        "true",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--average_last",
        "2",
    )
    with caplog.at_level(logging.INFO):
        results = run(argv)
    assert results["train"]["train_loss"] > 0
    curve = json.loads((tmp_path / "out" / "learning_curve.json").read_text())
    assert [(row["step"], row["eval_bleu"] is not None) for row in curve] == [(2, True), (4, True)], curve
    assert results["averaged_checkpoints"] == ["checkpoint-2", "checkpoint-4"]
    saved = load_file(tmp_path / "out" / "model.safetensors")
    assert saved and not [name for name in saved if "_orig_mod" in name]
    report = [r.getMessage() for r in caplog.records if r.getMessage().startswith("torch.compile:")]
    assert report and report[0].startswith("torch.compile: 1 graph(s), 0 graph break(s)"), report


@pytest.mark.parametrize("marked", [True, False], ids=["as-the-trainer-takes-them", "as-they-arrive"])
def test_batches_read_by_worker_processes_compile_once(tmp_path, fresh_dynamo, marked):
    """Dynamo's marks are attributes of a tensor, which a worker process's hand-over drops: batches of several
    shapes straight from a loader with a worker compile again (dynamo's automatic dynamic shapes), and taken as the
    trainer's loop takes them (``get_batch_samples``, which marks them) compile one graph."""
    argv = train_argv(
        write_corpus(tmp_path / "data"),
        tmp_path / "out",
        *("--torch_compile", "true", "--torch_compile_backend", "aot_eager", "--dataloader_num_workers", "1"),
    )
    trainer, _ = built(argv)
    loader = iter(trainer.get_train_dataloader())
    if marked:
        batches, _ = trainer.get_batch_samples(loader, 4, trainer.args.device)
    else:
        batches = list(itertools.islice(loader, 4))
    assert len({(*batch["input_ids"].shape, batch["labels"].shape[1]) for batch in batches}) > 2
    forward = torch.compile(trainer.model.train(), backend="aot_eager", fullgraph=True)
    for batch in batches:
        forward(**batch).loss.backward()
    assert compile_counts()["graphs"] == (1 if marked else 2)


def test_no_cpp_compiler_trains_eagerly(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(compiled, "cannot_build_kernels", lambda: "g++ not found")
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), torch_compile=True, use_cpu=True, report_to="none")
    model_args, data_args, _ = parse_args(["--output_dir", str(tmp_path)])
    with caplog.at_level(logging.WARNING):
        resolve_run(model_args, data_args, args)  # (it writes the arguments)
        fit_for_compile(args)
    assert not args.torch_compile and args.torch_compile_backend is None
    assert [r.getMessage() for r in caplog.records if r.name == "training.step.compiled"] == [
        "--torch_compile: inductor cannot build CPU kernels here (g++ not found); training eagerly"
    ]


def test_missing_python_headers_are_found_before_training(tmp_path, monkeypatch):
    """Inductor's kernels include Python.h: a compiler without the headers would fail at the first step."""
    from torch._inductor import cpp_builder

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", lambda: "g++")
    monkeypatch.setattr(compiled.sysconfig, "get_path", lambda name: str(tmp_path))
    reason = compiled.cannot_build_kernels()
    assert reason == f"no Python.h in {tmp_path}: the Python development headers are not installed"


def training_args(mode: str | None, accumulation: int, device: str, processes: int = 1) -> SimpleNamespace:
    """What settle_cuda_graphs reads of the arguments, a stand-in for a GPU's."""
    return SimpleNamespace(
        torch_compile=True,
        torch_compile_mode=mode,
        gradient_accumulation_steps=accumulation,
        world_size=processes,
        device=torch.device(device),
    )


def settle_cuda_graphs(args: SimpleNamespace) -> None:
    """The mode ``compiled.settle_cuda_graphs`` decides, written into ``args`` as ``arguments.resolve`` does."""
    args.torch_compile_mode = compiled.settle_cuda_graphs(args, args.gradient_accumulation_steps)


@pytest.mark.parametrize(
    ("mode", "accumulation", "device", "refused"),
    [
        ("reduce-overhead", 8, "cuda", True),
        ("max-autotune", 2, "cuda", True),
        ("reduce-overhead", 1, "cuda", False),  # one batch a step: .grad is read before the next replay
        ("max-autotune-no-cudagraphs", 8, "cuda", False),
        (None, 8, "cuda", False),
        ("reduce-overhead", 8, "cpu", False),  # inductor records no CUDA graph on a CPU
    ],
)
def test_cuda_graphs_are_refused_with_gradient_accumulation_on_a_gpu(mode, accumulation, device, refused):
    """The modes inductor says record CUDA graphs, with more than one batch a step, on CUDA, are refused in one line
    that names the fix; the others keep their mode."""
    args = training_args(mode, accumulation, device)
    if refused:
        with pytest.raises(
            UsageError,
            match=rf"--torch_compile_mode {mode} records CUDA graphs, which break "
            rf"gradient accumulation \({accumulation} batches a step.*"
            "--max_tokens_per_batch at --tokens_per_step",
        ):
            settle_cuda_graphs(args)
    else:
        settle_cuda_graphs(args)
        assert args.torch_compile_mode == mode


@pytest.mark.parametrize(
    ("mode", "accumulation", "device", "processes", "chosen"),
    [
        (None, 1, "cuda", 1, "reduce-overhead"),  # one micro-batch on one GPU: the step in CUDA graphs
        ("default", 1, "cuda", 1, "default"),  # a mode given stays
        ("max-autotune-no-cudagraphs", 1, "cuda", 1, "max-autotune-no-cudagraphs"),
        (None, 2, "cuda", 1, None),  # accumulation: no CUDA graphs
        (None, 1, "cuda", 8, None),  # several processes: their collectives were not run under CUDA graphs
        (None, 1, "cpu", 1, None),
    ],
)
def test_one_micro_batch_on_one_gpu_records_cuda_graphs_unless_a_mode_is_given(
    mode, accumulation, device, processes, chosen, caplog
):
    args = training_args(mode, accumulation, device, processes)
    with caplog.at_level(logging.INFO):
        settle_cuda_graphs(args)
    assert args.torch_compile_mode == chosen
    assert compiled.captures_cuda_graphs(args.torch_compile_mode) == (chosen == "reduce-overhead")
    chose = [r.getMessage() for r in caplog.records if r.name == "training.step.compiled"]
    assert chose == (
        [
            "--torch_compile on one GPU with one micro-batch a step: --torch_compile_mode reduce-overhead, the forward "
            "and backward pass replayed as CUDA graphs, one per batch shape"
        ]
        if mode != chosen
        else []
    )


@pytest.mark.parametrize(("device", "fallback_random"), [("cpu", True), ("cuda", False)])
def test_aten_random_numbers_on_a_cpu_only(device, fallback_random):
    """fallback_random (ATen's generator in the graph) is the CPU's: on CUDA inductor's Philox draws inside the fused
    dropout kernels. CUDA graph trees warn past 64 recordings of a graph, not past their default of 8."""
    config = torch._inductor.config
    with config.patch({"fallback_random": not fallback_random, "triton.cudagraph_dynamic_shape_warn_limit": 8}):
        configure_inductor(device)
        assert config.fallback_random is fallback_random
        assert config.triton.cudagraph_dynamic_shape_warn_limit == MOST_CUDA_GRAPHS == 64


def test_a_cuda_graphed_epoch_records_one_graph_per_bucket_shape(fresh_dynamo):
    """The CUDA graphs an epoch of the wmt14 stand-in records at one micro-batch a step (25,000 tokens a side, bucketed
    as on CUDA: 87 batches), counted on a CPU: the step compiled with its batches marked dynamic, as training compiles
    it, with AOTAutograd's forward and backward graphs keyed as torch 2.13's CUDA graph trees key their recordings
    (``torch._inductor.cudagraph_trees.cudagraphify``: one a distinct tuple of the graph's integer inputs). Each of the
    epoch's 52 distinct shapes records one forward and one backward graph, at most ``MOST_CUDA_GRAPHS``; a shape met
    again replays its graphs. One layer a side: the count does not depend on depth, and the CPU runs each shape once."""
    lengths = np.load(WMT_LIKE)
    sampler = TokenBatchSampler(
        lengths["source"], lengths["target"], 25_000, seed=1, shapes=BatchShapes.for_device("cuda", 128)
    )
    shapes = sampler.batch_shapes()
    assert (len(shapes), len(set(shapes))) == (87, 52)
    recordings = {"forward": [], "backward": []}  # one key set a compiled graph: each graph has its own recordings

    def keyed_as_cuda_graph_trees(kind: str):
        def compiler(graph, example_inputs):
            keys = set()
            recordings[kind].append(keys)

            def run(inputs):
                keys.add(tuple(value for value in inputs if isinstance(value, int)))
                return graph(*inputs)

            run._boxed_call = True  # AOTAutograd's calling convention: the inputs as one list
            return run

        return compiler

    model = tiny_model(
        dropout=0.1, label_smoothing=0.1, max_position_embeddings=128, encoder_layers=1, decoder_layers=1
    ).train()
    backend = aot_autograd(
        fw_compiler=keyed_as_cuda_graph_trees("forward"), bw_compiler=keyed_as_cuda_graph_trees("backward")
    )
    forward = torch.compile(model, backend=backend, fullgraph=True)
    for shape in [*dict.fromkeys(shapes), *shapes[:3]]:  # each shape as the epoch first meets it, then 3 again
        forward(**mark_dynamic(batch_of(shape))).loss.backward()
        model.zero_grad(set_to_none=True)
    graphs = {kind: sum(len(keys) for keys in compiled_graphs) for kind, compiled_graphs in recordings.items()}
    assert graphs == {"forward": 52, "backward": 52}
    assert compile_counts()["graphs"] == 1  # one dynamo graph for every shape: the recordings are its
    assert max(graphs.values()) <= MOST_CUDA_GRAPHS
