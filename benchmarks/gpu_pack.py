"""The folder a lent GPU's call carries (issue 121; docs/performance.md, "On a GPU"): the code, the wheels the
machine's Python lacks, and the inputs of the call's parts, in one ignored folder that the device tool's ``carry``
names. The working tree travels with it, and both together may hold 64 MiB.

    python -m benchmarks.gpu_pack step                          # .device/pack-step: the wmt14 step and FSDP
    python -m benchmarks.gpu_pack translate --model runs/demo   # .device/pack-translate: the translation

On the machine, from the repository's root: ``bash .device/pack-step/call.sh`` (benchmarks/gpu_pack_call.sh: it
unpacks the code outside any git checkout and runs its benchmarks/gpu_call.sh there). A pack holds:

- ``code.tgz``: the code as it is here (tracked and untracked-not-ignored files, without history, docs/, tests/ or
  results/ but for the records the call reads), with ``code.json``: the commit and every file that differed from it
  (vanilla_tools.provenance.git_commit here), which the records made there name, as no git is there;
- ``wheels/``: the packages the call needs that the machine's image lacks, at the versions this environment has,
  for the machine's Python (``--python``), each re-stored uncompressed and compressed with xz (CTranslate2's wheel
  is 42.8 MB as published and about 25 MB so); ``call.sh`` restores them;
- the inputs of each part: ``step``, the WMT-like corpus (``benchmarks/wmt14_step.py --prepare``, made when
  ``--corpus`` does not exist) as ``wmt-like.tgz``; ``translate``, the model of ``--model`` saved in float16 as
  ``translate-model/``, and CTranslate2's wheel;
- ``pack.json``: what it holds, each part's bytes, and the working tree's.

It is built beside its place and moved there only when it fits: at most ``--limit_mib`` (60) and, with the working
tree that travels with it, at most the call's 64 MiB; otherwise the command fails in one line naming the largest
parts, and no pack is left.
"""

import argparse
import importlib.metadata
import io
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import torch

from vanilla_tools.cli import UsageError, console_script, load_model, load_tokenizer
from vanilla_tools.provenance import CODE_RECORD, ROOT, git_commit

MIB = 2**20
CALL_MIB = 64  # what a call of the device tool carries: the working tree and the carried paths together
PARTS = ("step", "translate")
DEVICE_PYTHON = "3.12"  # /opt/torch/.venv/bin/python3 on the lent machines (results/benchmarks/gpu/*calls*.json)
# What the machine's image lacks (/work/.library/device/KINDS.md lists what it has: torch, transformers,
# accelerate, tokenizers, sacrebleu, pyarrow, pandas, numpy, pyyaml, ...): the Table 3 runs and the step's data
# need these, so every pack holds them; CTranslate2 is the translation's.
WHEELS = ("datasets", "evaluate", "dill", "multiprocess", "sacremoses")
PART_WHEELS = {"step": (), "translate": ("ctranslate2",)}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
# Not carried in the code: history, the pages, the tests and the records, but for those the call reads
# (benchmarks/gpu_model.py's inputs; results/table3, whose recorded runs the Table 3 sweep skips).
LEFT_OUT = ("docs/", "tests/", "results/")
KEPT = ("results/benchmarks/", "results/table3/")
CALL_SCRIPT = Path(__file__).with_name("gpu_pack_call.sh")


def travelling_files(root: Path = ROOT) -> list[str]:
    """The files of the working tree that a call sends (tracked and untracked-not-ignored, as they are now; links
    travel as links and are left out here), relative to ``root``."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return [name for name in listed if name and (root / name).is_file() and not (root / name).is_symlink()]


def code_files(root: Path = ROOT) -> list[str]:
    """Of ``travelling_files``, those the pack's code holds."""
    return [
        name
        for name in travelling_files(root)
        if not name.startswith(LEFT_OUT) or name.startswith(KEPT)
        if name != CODE_RECORD
    ]


def pack_code(folder: Path, root: Path = ROOT) -> dict:
    """``code.tgz``: the code as it is in ``root``, with ``code.json`` naming its commit and changes; that record."""
    record = {**git_commit(root), "packed_by": "benchmarks/gpu_pack.py"}
    code = json.dumps(record, indent=1).encode()
    with tarfile.open(folder / "code.tgz", "w:gz") as archive:
        for name in code_files(root):
            archive.add(root / name, arcname=name, recursive=False)
        info = tarfile.TarInfo(CODE_RECORD)
        info.size = len(code)
        archive.addfile(info, io.BytesIO(code))
    return record


def pinned(names: tuple[str, ...]) -> list[str]:
    """``name==version`` for each of ``names`` as this environment has it (the versions its tests ran)."""
    try:
        return [f"{name}=={importlib.metadata.version(name)}" for name in names]
    except importlib.metadata.PackageNotFoundError as error:
        message = f"{error.name} is not installed here: the pack carries the versions this environment has"
        raise UsageError(message) from None


def download(requirements: list[str], python: str, cache: Path) -> list[Path]:
    """The wheels of ``requirements`` for CPython ``python`` on x86-64 Linux, downloaded into ``cache`` (pip reuses
    a file already there)."""
    platforms = [flag for platform in PLATFORMS for flag in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python, "--implementation", "cp", *platforms, "-d", str(cache), *requirements]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise UsageError(f"pip download failed for Python {python}: {done.stderr.strip().splitlines()[-1]}")
    wheels = []
    for requirement in requirements:
        name, version = requirement.split("==")
        found = sorted(cache.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        if len(found) != 1:
            raise UsageError(f"{cache} holds {len(found)} wheels of {requirement}: keep one folder per Python")
        wheels.append(found[0])
    return wheels


def restored(wheel: Path, cache: Path) -> Path:
    """``wheel`` re-stored without compression and compressed with xz (kept in ``cache``: about 20 s for
    CTranslate2's): the same files, which call.sh restores to a wheel pip installs."""
    packed = cache / "xz" / f"{wheel.name}.xz"
    if packed.is_file() and packed.stat().st_mtime >= wheel.stat().st_mtime:
        return packed
    packed.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        stored = Path(tmp) / wheel.name
        with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as target:
            for info in source.infolist():
                target.writestr(info, source.read(info), compress_type=zipfile.ZIP_STORED)
        with stored.open("rb") as data, lzma.open(packed.with_suffix(".partial"), "wb", preset=6) as out:
            shutil.copyfileobj(data, out)
    packed.with_suffix(".partial").replace(packed)
    return packed


def pack_corpus(folder: Path, corpus: Path) -> None:
    """``wmt-like.tgz``: the step's corpus, prepared first where ``corpus`` does not exist."""
    if not corpus.exists():
        from benchmarks.wmt14_step import prepare

        prepare(corpus, 40_000)
    if not (corpus / "tokenizer").is_dir():
        raise UsageError(f"{corpus} holds no prepared corpus (python -m benchmarks.wmt14_step --prepare {corpus})")
    with tarfile.open(folder / "wmt-like.tgz", "w:gz") as archive:
        archive.add(corpus, arcname="wmt-like")


def pack_model(folder: Path, model_dir: Path) -> None:
    """``translate-model/``: the model of ``model_dir`` in float16 with its tokenizer and generation settings (no
    checkpoints); gpu_translate casts it to each mode's precision."""
    if not model_dir.is_dir():
        raise UsageError(f"--model {model_dir}: no such folder (train one: vanilla-train --config demo)")
    model = load_model(str(model_dir)).to(torch.float16)
    model.save_pretrained(folder / "translate-model")
    load_tokenizer(str(model_dir)).save_pretrained(folder / "translate-model")


def bytes_in(path: Path) -> int:
    """Bytes of a file, or of every file in a folder."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def sizes(folder: Path) -> dict[str, int]:
    """Bytes of each part of a pack (each wheel apart), by its path in the pack."""
    parts = [path for path in folder.iterdir() if path.name != "wheels"] + [*(folder / "wheels").iterdir()]
    return {path.relative_to(folder).as_posix(): bytes_in(path) for path in sorted(parts)}


def kept_models(root: Path = ROOT) -> list[str]:
    """The models the results keep (results/**/models/: experiments.distill's finished runs, about 5 MiB each, eight
    in the end): set aside before a call (moved out of the checkout, back after; docs/performance.md), they do not
    travel."""
    return [name for name in travelling_files(root) if name.startswith("results/") and "/models/" in name]


def tree_bytes(root: Path = ROOT) -> int:
    """Bytes of the working tree a call sends besides the carried paths (shared/ included where there is one), the
    models the results keep set aside (``kept_models``)."""
    names = set(travelling_files(root)) - set(kept_models(root))
    if (root / "shared").is_dir():
        names |= {path.relative_to(root).as_posix() for path in (root / "shared").rglob("*") if path.is_file()}
    return sum((root / name).stat().st_size for name in names)


def check_fits(parts: dict[str, int], tree: int, limit_mib: float, pack: Path) -> None:
    """Refuses, in one line naming the largest parts, a pack over ``limit_mib`` or over the call's 64 MiB with the
    working tree."""
    total = sum(parts.values())
    largest = ", ".join(f"{name} {size / MIB:.1f} MiB" for name, size in sorted(parts.items(), key=lambda p: -p[1])[:3])
    if total > limit_mib * MIB or total + tree > CALL_MIB * MIB:
        raise UsageError(
            f"{pack} would be {total / MIB:.1f} MiB, over {limit_mib:g} MiB or, with the working tree's "
            f"{tree / MIB:.1f} MiB, over the call's {CALL_MIB} MiB: its largest parts: {largest}"
        )


def build(parts: list[str], pack: Path, python: str, model: Path, corpus: Path, wheels: Path, limit_mib: float) -> dict:
    """The pack of ``parts`` at ``pack`` (see the module's docstring); its manifest."""
    partial = pack.with_name(f"{pack.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "wheels").mkdir(parents=True)
    try:
        names = WHEELS + tuple(name for part in parts for name in PART_WHEELS[part])
        requirements = pinned(names)
        wheels.mkdir(parents=True, exist_ok=True)
        for wheel in download(requirements, python, wheels):
            shutil.copy(restored(wheel, wheels), partial / "wheels")
        code = pack_code(partial)
        if "step" in parts:
            pack_corpus(partial, corpus)
        if "translate" in parts:
            pack_model(partial, model)
        shutil.copy(CALL_SCRIPT, partial / "call.sh")
        manifest = {
            "parts": parts,
            "python": python,
            "wheels": requirements,
            "model": str(model) if "translate" in parts else None,
            "code": code,
            "bytes": sizes(partial),
            "working_tree_bytes": tree_bytes(),
            "set_aside": kept_models(),  # moved out of the checkout before the call, back after
        }
        check_fits(manifest["bytes"], manifest["working_tree_bytes"], limit_mib, pack)
        (partial / "pack.json").write_text(json.dumps(manifest, indent=1) + "\n")
        shutil.rmtree(pack, ignore_errors=True)
        partial.replace(pack)
        return manifest
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="+", choices=PARTS, help="what the call runs: step (and FSDP), translate")
    parser.add_argument("--pack", type=Path, help="the folder (default: .device/pack-PARTS)")
    parser.add_argument("--python", default=DEVICE_PYTHON, help="the machine's Python, for the wheels")
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "demo", help="translate: saved in float16")
    parser.add_argument("--corpus", type=Path, default=ROOT / ".device" / "wmt-like", help="step: the prepared one")
    parser.add_argument("--wheels", type=Path, help="where downloaded wheels are kept (default: .device/wheels-PYTHON)")
    parser.add_argument("--limit_mib", type=float, default=60, help="the pack's most MiB")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    parts = [part for part in PARTS if part in args.parts]
    pack = args.pack or ROOT / ".device" / f"pack-{'-'.join(parts)}"
    wheels = args.wheels or ROOT / ".device" / f"wheels-{args.python}"
    manifest = build(parts, pack, args.python, args.model, args.corpus, wheels, args.limit_mib)
    total, tree = sum(manifest["bytes"].values()), manifest["working_tree_bytes"]
    for name, size in manifest["bytes"].items():
        print(f"{size / MIB:7.2f} MiB  {name}")
    print(f"{total / MIB:7.2f} MiB  {pack}: {(total + tree) / MIB:.2f} MiB with the working tree's {tree / MIB:.2f}")
    if folders := sorted({name.split("/models/")[0] + "/models" for name in manifest["set_aside"]}):
        print(f"before the call, set aside (move out of the checkout, back after): {', '.join(folders)}")
    if pack.resolve().is_relative_to(ROOT):
        where = pack.resolve().relative_to(ROOT)
        print(f'the call: carry ["{where}"], command "bash {where}/call.sh" (docs/performance.md, "The calls")')
    else:
        print("the call cannot carry it from outside the checkout: --pack under .device/ for a call")
    return manifest


if __name__ == "__main__":
    console_script(main)()
