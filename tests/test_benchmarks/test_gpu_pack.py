"""benchmarks/gpu_pack.py: the folder a lent GPU's call carries, built with the real wheels (downloaded from PyPI into
.device/wheels-PYTHON, kept there) and sized, then unpacked and run on the CPU as the machine runs it: from the pack
alone, its wheels installed without an index into a Python that lacks them."""

import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_pack as gpu_pack_module

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20
HOST_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CARRIED = ("datasets", "evaluate", "dill", "multiprocess", "sacremoses", "ctranslate2")


def gpu_pack(*args: str) -> subprocess.CompletedProcess:
    """``python -m benchmarks.gpu_pack ARGS`` from the repository's root, as the docs run it."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_pack", *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The step's WMT-like corpus at its real size (40,000 pairs and the preset's 37k BPE)."""
    from benchmarks.wmt14_step import prepare

    folder = tmp_path_factory.mktemp("corpus") / "wmt-like"
    prepare(folder, 40_000)
    return folder


def test_a_pack_of_every_part_fits_the_call_with_the_real_wheels_and_a_model_of_the_demo_size(
    tmp_path, tokenizer, corpus
):
    """The step's corpus, the translation's model (random, of the demo preset's size: 7.6M parameters, saved in
    float32) and the wheels for the machine's Python 3.12, CTranslate2's included: within 60 MiB, and within the
    call's 64 MiB with this checkout's working tree; the model carried in float16; the code without history, docs or
    tests, naming its commit. With a lower limit the command fails in one line naming the largest parts, and leaves
    no pack."""
    from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq
    from training.arguments import load_preset
    from vanilla_tools.cli import load_model

    preset = load_preset("demo")
    size = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "num_attention_heads", "ffn_dim")
    model = VanillaTransformerForSeq2Seq(VanillaTransformerConfig(**{key: preset[key] for key in size}))
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(tmp_path / "demo-sized")
    tokenizer.save_pretrained(tmp_path / "demo-sized")
    pack = tmp_path / "pack"
    done = gpu_pack(
        "step", "translate", "--model", str(tmp_path / "demo-sized"), "--corpus", str(corpus), "--pack", str(pack)
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((pack / "pack.json").read_text())
    parts = manifest["bytes"]
    wheels = {name.split("/")[1].split("-")[0]: size for name, size in parts.items() if name.startswith("wheels/")}
    assert sorted(wheels) == sorted(CARRIED) and "-cp312-" in next(n for n in parts if "ctranslate2" in n)
    assert set(parts) - {f"wheels/{name}" for name in os.listdir(pack / "wheels")} == {
        "call.sh",
        "code.tgz",
        "translate-model",
        "wmt-like.tgz",
    }
    total, tree = sum(parts.values()), manifest["working_tree_bytes"]
    print({name: round(size / MIB, 2) for name, size in parts.items()}, total / MIB, tree / MIB)
    assert total <= 60 * MIB and total + tree <= 64 * MIB  # the kept models set aside, as the call sets them
    assert manifest["set_aside"] == gpu_pack_module.kept_models()
    assert all("/models/" in n for n in manifest["set_aside"])
    assert 20 * MIB < wheels["ctranslate2"] < 30 * MIB  # 40.8 MiB as published, the same files
    assert 2 * parameters < parts["translate-model"] < 2 * parameters + MIB  # float16, and the tokenizer and code
    assert load_model(str(pack / "translate-model")).dtype == torch.float16
    assert 4 * MIB < parts["wmt-like.tgz"] < 8 * MIB and parts["code.tgz"] < 3 * MIB
    with tarfile.open(pack / "code.tgz") as archive:
        names = archive.getnames()
        code = json.load(archive.extractfile("code.json"))
    assert not [name for name in names if name.startswith(("docs/", "tests/", ".git/"))]
    assert {"benchmarks/gpu_call.sh", "training/train.py", "results/benchmarks/host-time.json"} <= set(names)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert code["commit"] == head == manifest["code"]["commit"] and "changed_files" in code

    small = tmp_path / "small"
    flags = ["--model", str(tmp_path / "demo-sized"), "--corpus", str(corpus), "--pack", str(small)]
    refused = gpu_pack("step", "translate", *flags, "--limit_mib", "30")
    (error,) = [line for line in refused.stderr.splitlines() if "error:" in line]  # after transformers' progress
    assert refused.returncode == 1 and error == refused.stderr.strip().splitlines()[-1], refused.stderr
    assert error.startswith("gpu_pack.py: error: ") and "over 30 MiB" in error
    assert "largest parts: wheels/ctranslate2-" in error and "translate-model 14." in error
    assert not small.exists() and not small.with_name("small.partial").exists()


def image_python(folder: Path) -> Path:
    """A fresh virtual environment standing for the lent machine's image: with pip, and with every package this one
    has but those a pack carries, linked into its site-packages (where the machine has them: datasets' pickling
    takes a package outside the interpreter's prefix for the user's code and pickles pyarrow's types by value). Its
    bin folder."""
    hidden = {file.parts[0] for name in CARRIED for file in importlib.metadata.distribution(name).files}
    subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
    image = folder / "venv" / "lib" / f"python{HOST_PYTHON}" / "site-packages"
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name not in hidden and entry.suffix != ".pth" and not (image / entry.name).exists():
            (image / entry.name).symlink_to(entry)
    return folder / "venv" / "bin"


def test_a_pack_runs_its_call_from_the_unpacked_code_on_the_cpu_as_the_machine_would(tmp_path, tokenizer, corpus):
    """A pack of every part for this Python, run as the machine runs it (`bash PACK/call.sh`, away from this
    checkout, with a Python lacking the carried packages): its wheels install without an index, and gpu_call.sh runs
    every part it can on a CPU: the step refuses (no GPU; FSDP left out), the translation runs its CPU modes on a
    tiny model carried in float16, CTranslate2's (the carried wheel) the reference, and a tiny Table 3 sweep trains
    its run. The records name the commit of the pack's code.json, as there is no git there."""
    from helpers import saved_model_with_tokenizer
    from training_helpers import tiny_preset

    model = saved_model_with_tokenizer(tmp_path / "tiny-model", tokenizer, end_bias=8.0)
    pack = tmp_path / "pack"
    flags = ["--python", HOST_PYTHON, "--model", str(model), "--corpus", str(corpus), "--pack", str(pack)]
    done = gpu_pack("step", "translate", *flags)
    assert done.returncode == 0, done.stderr
    code = json.loads((pack / "pack.json").read_text())["code"]
    bin_folder = image_python(tmp_path)
    absent = subprocess.run([bin_folder / "python3", "-c", "import ctranslate2"], capture_output=True)
    assert absent.returncode == 1  # the image lacks what the pack carries
    out, preset = tmp_path / "out", tiny_preset(tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        OUT=str(out),
        RUNS=str(tmp_path / "runs"),
        CHECK_FSDP="0",
        DEADLINE_S="900",  # this shared CPU's pace: a lent GPU's call runs in 540
        TRANSLATE_S="450",
        TRANSLATE_ARGS="--limit 4 --batch1_lines 2",
        HF_HUB_OFFLINE="1",
        PATH=f"{bin_folder}:{os.environ['PATH']}",
    )
    sweep = ["--config", str(preset), "--rows", "base", "--steps", "2", "--curve_steps", "1", "--seeds", "1"]
    call = subprocess.run(
        ["bash", str(pack / "call.sh"), *sweep, "--precision", "fp32"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(call.stdout)
    assert call.returncode == 0, call.stderr
    assert "gpu_pack_call: " in call.stdout and "gpu_wheels" not in call.stdout  # installed
    assert "gpu_translate exit 0" in call.stdout and "experiments.table3 exit 0" in call.stdout
    assert sorted(path.name for path in out.rglob("*")) == [
        "gpu-translate.json",
        "logs.tgz",
        "new-records.txt",
        "table3-records.tgz",
    ]
    installed = subprocess.run(
        [bin_folder / "python3", "-c", "import ctranslate2, datasets; print(ctranslate2.__file__, datasets.__file__)"],
        capture_output=True,
        text=True,
    )
    assert installed.stdout.count(str(tmp_path / "venv")) == 2, installed
    translation = json.loads((out / "gpu-translate.json").read_text())
    assert translation["code"]["commit"] == code["commit"] and translation["code"]["packed_by"]
    assert translation["machine"]["ctranslate2"] == importlib.metadata.version("ctranslate2")
    assert [(row["engine"], row["batch_size"]) for row in translation["references"]] == [
        ("ct2-float32", 64),
        ("ct2-float32", 1),
    ]
    ran = sorted({row["engine"] for row in translation["modes"] if "sentences_per_s" in row})
    assert ran == ["generate", "generate-static-compiled"], translation["modes"]
    with tarfile.open(out / "logs.tgz") as logs:
        machine = logs.extractfile("./machine.txt").read().decode()
        step_log = logs.extractfile("./step.log").read().decode()
    assert "no git here: code.json" in machine and code["commit"] in machine and '"parts"' in machine
    assert "measures a GPU's step: no CUDA device here" in step_log
    with tarfile.open(out / "table3-records.tgz") as archive:
        archive.extractall(tmp_path / "records", filter="data")
    (record,) = (tmp_path / "records").rglob("table3.json")
    assert json.loads(record.read_text())["run"]["code"]["commit"] == code["commit"]
