"""Translation on the device a machine has (issue 110, item 1), on a CPU with CUDA mocked: the device each --device
resolves to, the precision generate() runs in, the engine and compute type ``auto`` picks, and the refusals."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import ctranslate2
import pytest
import torch
from helpers import saved_model_with_tokenizer

from inference import engines
from inference.ct2 import CTranslate2Engine
from inference.engine import GenerateEngine
from modeling_vanilla import VanillaTransformerForSeq2Seq
from vanilla_tools import device as placement
from vanilla_tools import hardware
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding

GPU_TYPES = {"float32", "float16", "bfloat16", "int8", "int8_float32", "int8_float16"}  # an H200's, as CT2 lists them


def cuda(monkeypatch, devices: int, capability: tuple[int, int] = (9, 0)) -> None:
    """As if this machine had ``devices`` CUDA devices of ``capability``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: devices > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)


@pytest.mark.parametrize(
    ("devices", "flag", "resolved"),
    [(0, "auto", "cpu"), (2, "auto", "cuda:0"), (2, "cpu", "cpu"), (2, "cuda", "cuda:0"), (2, "cuda:1", "cuda:1")],
)
def test_each_device_flag_resolves_to_a_device_of_this_machine(monkeypatch, devices, flag, resolved):
    cuda(monkeypatch, devices)
    assert placement.resolve_device(placement.device_name(flag)) == torch.device(resolved)


@pytest.mark.parametrize(
    ("devices", "flag", "message"),
    [
        (0, "cuda", f"--device cuda: no CUDA device here (torch {torch.__version__} sees none)"),
        (0, "cuda:0", f"--device cuda:0: no CUDA device here (torch {torch.__version__} sees none)"),
        (2, "cuda:2", "--device cuda:2: this machine has 2 CUDA device(s), from cuda:0"),
    ],
)
def test_a_cuda_device_this_machine_lacks_is_refused(monkeypatch, devices, flag, message):
    cuda(monkeypatch, devices)
    with pytest.raises(UsageError) as refused:
        placement.resolve_device(flag)
    assert str(refused.value) == message


@pytest.mark.parametrize("flag", ["gpu", "cuda:x", "cuda:", "CPU"])
def test_a_device_name_is_checked_as_the_flag_is_read(flag):
    with pytest.raises(Exception, match=r"is not auto, cpu, cuda or cuda:N"):
        placement.device_name(flag)


def test_generate_runs_in_float32_by_default_on_either_device(monkeypatch):
    cuda(monkeypatch, 1)
    for device in ("cpu", "cuda:0"):
        assert placement.resolve_dtype(None, torch.device(device)) is torch.float32
    assert placement.resolve_dtype("float16", torch.device("cuda:0")) is torch.float16
    assert placement.resolve_dtype("bfloat16", torch.device("cuda:0")) is torch.bfloat16


@pytest.mark.parametrize(
    ("device", "dtype", "cpu_bf16", "message"),
    [
        ("cpu", "float16", True, "--dtype float16 on cpu: the CPU has no float16 matrix products: float16 is a GPU "),
        ("cpu", "bfloat16", False, "--dtype bfloat16 on cpu: this CPU has neither AVX512-BF16 nor AMX"),
        ("cuda:0", "bfloat16", True, "--dtype bfloat16 on cuda:0: cuda:0 (compute capability 7.5) has no bfloat16"),
    ],
)
def test_a_precision_the_device_cannot_run_is_refused_naming_both(monkeypatch, device, dtype, cpu_bf16, message):
    cuda(monkeypatch, 1, capability=(7, 5))
    monkeypatch.setattr(hardware, "cpu_bf16", lambda: cpu_bf16)
    with pytest.raises(UsageError) as refused:
        placement.resolve_dtype(dtype, torch.device(device))
    assert str(refused.value).startswith(message)


def emulating_gpus(monkeypatch, capabilities: dict[int, tuple[int, int]]) -> None:
    """As if this machine had a CUDA device of each of ``capabilities`` (by index), every one of which creates bf16
    tensors, as torch's default ``is_bf16_supported()`` counts: emulated below compute capability 8."""
    cuda(monkeypatch, len(capabilities))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capabilities[device.index or 0])
    monkeypatch.setattr(torch.cuda, "_check_bf16_tensor_supported", lambda device: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", None)


@pytest.mark.parametrize(("capability", "native"), [((7, 5), False), ((7, 0), False), ((8, 0), True), ((9, 0), True)])
def test_one_bf16_rule_for_training_and_translating_native_bf16_only(monkeypatch, capability, native):
    """vanilla-train's default --bf16 and vanilla-translate's --dtype bfloat16 agree: a GPU that only emulates bf16
    (which torch.cuda.is_bf16_supported() counts by default) gets neither."""
    emulating_gpus(monkeypatch, {0: capability})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: type("P", (), {"major": capability[0]}))
    assert torch.cuda.is_bf16_supported()  # torch's default rule says yes to all of them
    assert hardware.bf16_supported() is native
    assert hardware.native_bf16(torch.device("cuda:0")) is native
    assert (placement.dtype_refusal("bfloat16", torch.device("cuda:0")) is None) is native


def test_the_bf16_rule_asks_of_the_device_named_not_the_current_one(monkeypatch):
    emulating_gpus(monkeypatch, {0: (7, 5), 1: (9, 0)})
    assert not hardware.native_bf16(torch.device("cuda:0")) and hardware.native_bf16(torch.device("cuda:1"))
    assert placement.resolve_dtype("bfloat16", torch.device("cuda:1")) is torch.bfloat16


@pytest.mark.parametrize("has", [True, False])
def test_on_a_cpu_the_bf16_rule_is_avx512_bf16_or_amx(monkeypatch, has):
    cuda(monkeypatch, 0)
    monkeypatch.setattr(hardware, "cpu_bf16", lambda: has)
    assert hardware.bf16_supported() is has and hardware.native_bf16(torch.device("cpu")) is has
    assert (placement.dtype_refusal("bfloat16", torch.device("cpu")) is None) is has


@pytest.mark.parametrize(
    ("devices", "use_cpu", "cuda_present", "kind"),
    [(0, False, None, "cpu"), (1, False, None, "cuda"), (1, True, None, "cpu"), (0, False, True, "cuda")],
)
def test_one_device_rule_for_a_run_a_translation_and_a_record(monkeypatch, devices, use_cpu, cuda_present, kind):
    """hardware.device_type: vanilla-translate's --device auto, vanilla-train's default and table3's reading of a
    recorded machine (``cuda_present``: that machine's GPUs) all take it."""
    from experiments.table3 import device_kind
    from training.arguments import on_cpu

    cuda(monkeypatch, devices)
    assert hardware.device_type(use_cpu, cuda_present) == kind
    if cuda_present is None:
        assert on_cpu(type("Args", (), {"use_cpu": use_cpu})()) is (kind == "cpu")
    if cuda_present is None and not use_cpu:
        assert device_kind() == kind and placement.resolve_device("auto").type == kind


def test_bfloat16_on_a_cpu_with_it_in_hardware_casts_the_model(monkeypatch, tokenizer, tmp_path):
    monkeypatch.setattr(hardware, "cpu_bf16", lambda: True)
    model = VanillaTransformerForSeq2Seq.from_pretrained(saved_model_with_tokenizer(tmp_path, tokenizer))
    placed = placement.place(model, *placement.resolve_placement("cpu", "bfloat16"))
    assert {p.dtype for p in placed.parameters()} == {torch.bfloat16} and not placed.training


class Translator:
    """ctranslate2.Translator as built: its arguments kept, nothing loaded."""

    def __init__(self, path: str, **options):
        self.path, self.options = path, options


@pytest.fixture
def on_cuda(monkeypatch, tokenizer, tmp_path):
    """A saved model, loaded and reporting cuda:0 as its device (its weights stay on the CPU: nothing runs), with
    CTranslate2 seeing one CUDA device of an H200's compute types and building no translator."""
    folder = saved_model_with_tokenizer(tmp_path / "model", tokenizer)
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder)
    monkeypatch.setattr(type(model), "device", property(lambda self: torch.device("cuda", 0)))
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda device, index=0: GPU_TYPES)
    monkeypatch.setattr(ctranslate2, "Translator", Translator)
    return folder, model, tokenizer


def engine_on(folder, model, tokenizer, kind: str = "auto", quantization: str | None = None, dtype: str | None = None):
    decoding = Decoding.resolve(model.generation_config)
    return engines.create_engine(kind, folder, model, tokenizer, decoding, quantization, dtype)


@pytest.mark.parametrize("quantization", ["float32", "float16", "int8_float16"])
def test_auto_on_cuda_builds_ctranslate2_on_the_gpu_in_one_worker(on_cuda, caplog, quantization):
    folder = on_cuda[0]
    with caplog.at_level(logging.INFO, logger="inference.engines"):
        engine = engine_on(*on_cuda, quantization=quantization)
    assert isinstance(engine, CTranslate2Engine) and engine.workers == 1
    assert engine.translator.path == str(folder / f"ctranslate2-{quantization}")
    assert engine.translator.options == {
        "device": "cuda",
        "device_index": 0,
        "compute_type": quantization,
        "inter_threads": 1,
        "intra_threads": 1,
    }
    assert caplog.messages == [f"engine: ctranslate2 {quantization} on cuda:0 ({folder}/ctranslate2-{quantization})"]


def test_auto_on_cuda_takes_generate_where_ctranslate2_sees_no_gpu(on_cuda, monkeypatch, caplog):
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    with caplog.at_level(logging.INFO, logger="inference.engines"):
        engine = engine_on(*on_cuda)
    assert isinstance(engine, GenerateEngine) and engine.shapes.num_batch_buckets == 8  # CUDA's batch shapes
    assert caplog.messages == [
        "engine: generate (CTranslate2 sees 0 CUDA device(s), not cuda:0 (a build without CUDA, or another CUDA "
        "runtime))"
    ]


def test_ctranslate2_named_on_a_gpu_it_does_not_see_is_refused(on_cuda, monkeypatch):
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    with pytest.raises(UsageError, match=r"^--engine ctranslate2 on cuda:0: CTranslate2 sees 0 CUDA device\(s\)"):
        engine_on(*on_cuda, kind="ctranslate2")


def test_a_compute_type_the_gpu_lacks_is_refused_naming_both(on_cuda, monkeypatch):
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda d, i=0: GPU_TYPES - {"bfloat16"})
    with pytest.raises(UsageError) as refused:
        engine_on(*on_cuda, quantization="bfloat16")
    assert str(refused.value) == (
        "--quantization bfloat16 does not run on cuda:0: CTranslate2 runs float16, float32, int8, int8_float16, "
        "int8_float32 there"
    )


def test_a_gpu_compute_type_on_this_cpu_is_refused_naming_both(tokenizer, tmp_path):
    """This machine's CTranslate2, unmocked."""
    folder = saved_model_with_tokenizer(tmp_path / "model", tokenizer)
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder)
    runs = ", ".join(sorted(ctranslate2.get_supported_compute_types("cpu")))
    for kind in ("auto", "ctranslate2"):
        with pytest.raises(UsageError) as refused:
            engine_on(folder, model, tokenizer, kind, "float16")
        assert str(refused.value) == f"--quantization float16 does not run on cpu: CTranslate2 runs {runs} there"
    assert not (folder / "ctranslate2-float16").exists()  # refused before exporting


@pytest.mark.parametrize(
    ("quantization", "dtype", "computes"),
    [
        (None, "float16", "float16"),
        (None, "bfloat16", "bfloat16"),
        ("int8", "float16", "int8_float16"),
        ("int8_float32", "float16", "int8_float16"),
        ("float16", "float32", "float32"),
        ("int8", None, "int8"),
    ],
)
def test_dtype_is_ctranslate2s_compute_type_under_auto_and_by_name(on_cuda, caplog, quantization, dtype, computes):
    """--dtype applies to CTranslate2 too: its compute type, with the export's int8 weights where it has them."""
    folder = on_cuda[0]
    weights = quantization or "float32"
    for kind in ("auto", "ctranslate2"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="inference.engines"):
            engine = engine_on(*on_cuda, kind=kind, quantization=quantization, dtype=dtype)
        assert isinstance(engine, CTranslate2Engine) and engine.translator.options["compute_type"] == computes
        assert engine.translator.path == str(folder / f"ctranslate2-{weights}")
        computing = "" if computes == weights else f" computing in {computes}"
        export = f"{folder}/ctranslate2-{weights}"
        assert caplog.messages == [f"engine: ctranslate2 {weights}{computing} on cuda:0 ({export})"]


def test_a_dtype_ctranslate2_cannot_compute_is_refused_by_name_and_left_to_generate_by_auto(
    on_cuda, monkeypatch, caplog
):
    runs = "bfloat16, float16, float32, int8, int8_float16, int8_float32"  # an H200's: no int8_bfloat16
    line = f"--dtype bfloat16 (compute type int8_bfloat16) does not run on cuda:0: CTranslate2 runs {runs} there"
    with pytest.raises(UsageError) as refused:
        engine_on(*on_cuda, kind="ctranslate2", quantization="int8", dtype="bfloat16")
    assert str(refused.value) == f"{line}, with the ctranslate2 engine (use --engine generate or another --dtype)"
    with caplog.at_level(logging.INFO, logger="inference.engines"):
        engine = engine_on(*on_cuda, quantization="int8", dtype="bfloat16")
    assert isinstance(engine, GenerateEngine)
    assert caplog.messages == [f"engine: generate ({line}; --quantization int8, CTranslate2's, is unused)"]


@pytest.mark.parametrize(
    ("kind", "device", "dtype", "quantization", "message"),
    [
        ("generate", "cpu", None, "int8", "--quantization int8 is CTranslate2's: the generate engine has none"),
        ("onnx", "cpu", None, "float32", "--quantization float32 is CTranslate2's: the onnx engine has none"),
        ("onnx", "cpu", "bfloat16", None, "--dtype bfloat16: the onnx engine runs float32 only"),
        ("onnx", "cuda", None, None, "--device cuda:0: the onnx engine runs on the CPU only"),
    ],
)
def test_a_flag_an_engine_would_drop_is_refused_before_the_model_loads(
    monkeypatch, kind, device, dtype, quantization, message
):
    cuda(monkeypatch, 1)
    options = engines.EngineOptions(kind, device, dtype, quantization)
    with pytest.raises(UsageError) as refused:
        engines.load("/no/such/model", options)  # refused before it is read
    assert str(refused.value).startswith(message)


def test_onnx_takes_the_cpu_under_device_auto_and_float32_by_name(monkeypatch):
    cuda(monkeypatch, 1)
    assert engines.EngineOptions("onnx").placement() == (torch.device("cpu"), torch.float32)
    assert engines.EngineOptions("onnx", dtype="float32").placement() == (torch.device("cpu"), torch.float32)
    assert engines.EngineOptions("generate").placement() == (torch.device("cuda", 0), torch.float32)


def test_bfloat16_on_this_cpu_is_ctranslate2s_where_it_computes_it_else_refused_or_left_to_generate(
    monkeypatch, tokenizer, tmp_path, caplog
):
    """This machine's CTranslate2, unmocked (bfloat16 on a CPU: some builds and CPUs only)."""
    monkeypatch.setattr(hardware, "cpu_bf16", lambda: True)  # generate() may run it, whatever this CPU has
    folder = saved_model_with_tokenizer(tmp_path / "model", tokenizer)
    options = engines.EngineOptions("auto", "cpu", "bfloat16")
    loaded = engines.load(folder, options)
    assert loaded.model.dtype == torch.bfloat16
    decoding = Decoding.resolve(loaded.model.generation_config)
    supported = ctranslate2.get_supported_compute_types("cpu")
    with caplog.at_level(logging.INFO, logger="inference.engines"):
        engine = engines.build_engine(loaded, decoding, options)
    if "bfloat16" in supported:
        assert isinstance(engine, CTranslate2Engine) and caplog.messages[-1].startswith(
            "engine: ctranslate2 float32 computing in bfloat16 on cpu"
        )
        return
    runs = ", ".join(sorted(supported))
    line = f"--dtype bfloat16 (compute type bfloat16) does not run on cpu: CTranslate2 runs {runs} there"
    assert isinstance(engine, GenerateEngine) and caplog.messages == [f"engine: generate ({line})"]
    with pytest.raises(UsageError, match=r"with the ctranslate2 engine \(use --engine generate or another --dtype\)$"):
        engines.build_engine(loaded, decoding, engines.EngineOptions("ctranslate2", "cpu", "bfloat16"))


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).parent / name), *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
@pytest.mark.parametrize(
    ("script", "args", "line"),
    [
        (
            "vanilla-translate",
            ["--device", "cuda"],
            f"vanilla-translate: error: --device cuda: no CUDA device here (torch {torch.__version__} sees none)",
        ),
        (
            "vanilla-translate",
            ["--dtype", "float16"],
            "vanilla-translate: error: --dtype float16 on cpu: the CPU has no float16 matrix products: float16 is a "
            "GPU precision",
        ),
        (
            "vanilla-translate",
            ["--engine", "generate", "--quantization", "int8"],
            "vanilla-translate: error: --quantization int8 is CTranslate2's: the generate engine has none (use "
            "--engine ctranslate2 or auto, or drop --quantization)",
        ),
        (
            "vanilla-translate",
            ["--engine", "onnx", "--dtype", "float16"],
            "vanilla-translate: error: --dtype float16: the onnx engine runs float32 only (use --engine generate or "
            "ctranslate2)",
        ),
        (
            "vanilla-bench",
            ["--device", "cuda"],
            "vanilla-bench: error: --device cuda measures --translate MODEL_DIR only: the comparison runs on the CPU",
        ),
        (
            "vanilla-bench",
            ["--translate", "MODEL", "--device", "cuda:1"],
            f"vanilla-bench: error: --device cuda:1: no CUDA device here (torch {torch.__version__} sees none)",
        ),
    ],
)
def test_console_scripts_refuse_a_device_they_lack_in_one_line(tmp_path, script, args, line):
    """Refused before the model loads: a model folder that does not exist is never read."""
    args = [str(tmp_path / "none") if arg == "MODEL" else arg for arg in args]
    done = run_script(script, *(["--model", str(tmp_path / "none")] if script == "vanilla-translate" else []), *args)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == line


def test_a_device_name_that_is_none_exits_2_naming_it(tmp_path):
    done = run_script("vanilla-translate", "--model", str(tmp_path), "--device", "gpu")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "vanilla-translate: error: argument --device: 'gpu' is not auto, cpu, cuda or cuda:N"
    )


def test_the_bench_measures_onnx_runtime_on_the_cpu_only():
    """vanilla-bench --translate's default engines: on CUDA, CTranslate2's GPU compute types, and not ONNX Runtime,
    whose float32 graphs run on the CPU (named on CUDA, it is refused as vanilla-translate refuses it)."""
    from inference.bench_engines import ENGINES, GPU_ENGINES, default_engines

    assert default_engines("cpu") == list(ENGINES)
    assert default_engines("cuda:0") == [name for name in ENGINES if name != "onnx"] + list(GPU_ENGINES)
