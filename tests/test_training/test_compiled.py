"""The compiled training step (``--torch_compile``, training/compiled.py): eager's gradients, one graph for every
batch shape, the flag through vanilla-train, and eager training where inductor has no C++ compiler."""

import json
import logging

import pytest
import torch
from helpers import batch_of, tiny_model
from safetensors.torch import load_file
from training_helpers import train_argv, write_corpus
from transformers import Seq2SeqTrainingArguments

from modeling_vanilla import speedups
from training import compiled
from training.compiled import DynamicBatches, compile_counts, configure_inductor, fit_for_compile
from training.train import run

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
    """Batches marked dynamic (``DynamicBatches``) compile once, dropout and the fused loss included, whatever their
    (batch, source, target) shape, with as many loss chunks (here 2 of up to 16 rows: 18, 32, 25 and 22 target
    positions; 32, a multiple of the chunk, once needed a graph of its own); fullgraph=True fails on any graph
    break."""
    monkeypatch.setattr(speedups, "LOSS_CHUNK_ROWS", 16)
    model = tiny_model(dropout=0.1, label_smoothing=0.1).train()
    forward = torch.compile(model, backend="aot_eager", fullgraph=True)
    collate = DynamicBatches(lambda shape: batch_of(shape))
    for shape in ((3, 7, 6), (4, 5, 8), (5, 9, 5), (2, 4, 11)):
        forward(**collate(shape)).loss.backward()
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
    argv = train_argv(corpus, tmp_path / "out", "--max_steps", "4", "--dropout", "0.1", "--torch_compile", "true",
                      "--torch_compile_backend", "aot_eager", "--final_splits", "validation", "--num_beams", "1",
                      "--translate_examples", "0", "--eval_strategy", "steps", "--eval_steps", "2",
                      "--predict_with_generate", "true", "--save_strategy", "steps", "--save_steps", "2",
                      "--average_last", "2")  # fmt: skip
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


def test_no_cpp_compiler_trains_eagerly(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(compiled, "cannot_build_kernels", lambda: "g++ not found")
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), torch_compile=True, use_cpu=True, report_to="none")
    collate = object()
    with caplog.at_level(logging.WARNING):
        assert fit_for_compile(args, collate) is collate
    assert not args.torch_compile and args.torch_compile_backend is None
    assert [r.getMessage() for r in caplog.records if r.name == "training.compiled"] == [
        "--torch_compile: inductor cannot build CPU kernels here (g++ not found); training eagerly"
    ]


def test_missing_python_headers_are_found_before_training(tmp_path, monkeypatch):
    """Inductor's kernels include Python.h: a compiler without the headers would fail at the first step."""
    from torch._inductor import cpp_builder

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", lambda: "g++")
    monkeypatch.setattr(compiled.sysconfig, "get_path", lambda name: str(tmp_path))
    reason = compiled.cannot_build_kernels()
    assert reason == f"no Python.h in {tmp_path}: the Python development headers are not installed"


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
    """check_cuda_graphs reads the arguments only (a stand-in for a GPU's): the modes inductor says record CUDA
    graphs, with more than one batch a step, on CUDA, are refused in one line that names the fix."""
    from types import SimpleNamespace

    from vanilla_tools.cli import UsageError

    args = SimpleNamespace(torch_compile=True, torch_compile_mode=mode, gradient_accumulation_steps=accumulation,
                           device=torch.device(device))  # fmt: skip
    if refused:
        with pytest.raises(UsageError, match=rf"--torch_compile_mode {mode} records CUDA graphs, which break "
                                             rf"gradient accumulation \({accumulation} batches a step.*"
                                             "--max_tokens_per_batch at --tokens_per_step"):  # fmt: skip
            compiled.check_cuda_graphs(args)
    else:
        compiled.check_cuda_graphs(args)
