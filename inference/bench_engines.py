"""Translation speed on the same weights: our generate(), MarianMTModel's generate() (``to_marian``), our generate()
with a static cache compiled by torch.compile, CTranslate2 in float32 and int8, and ONNX Runtime (float32, our search
over the exported decoder step).

    vanilla-bench --translate runs/multi30k --json results/benchmarks/translation.json

Each measurement runs in its own process (so peak memory is its own): the test set (default: the bundled test2016)
is translated whole, in the batches ``vanilla-translate`` makes (sorted by length within chunks), greedy and with
beam 4 (the model's length penalty), at batch 1 and 64. Reported: sentences/s, output tokens/s (the tokens of each
translation up to and including its end token: no padding, no repeated end tokens), peak RSS, sacreBLEU, and the
share of translations identical to our generate()'s. One thread per core for every engine.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from vanilla_tools.cli import positive_int
from vanilla_tools.corpora import BUNDLED_DIR

if TYPE_CHECKING:
    from vanilla_tools.text_form import TextForm

ENGINES = ("generate", "marian", "generate-static-compiled", "ct2-float32", "ct2-int8", "onnx")
GPU_ENGINES = ("ct2-float16", "ct2-int8_float16")  # CTranslate2's GPU compute types: measured by default on CUDA
STATIC_BEAMS = (1,)  # transformers compiles the decoding step of greedy search; beam search is not measured so


def read(path: Path) -> list[str]:
    from inference.translate import read_lines

    return list(read_lines(str(path)))


def check_inputs(model_dir: str, sources: list[str], references: list[str], reference_path: Path) -> "TextForm":
    """Before the measurements (an hour on this CPU), rather than in each one's cells of the table: the model and its
    tokenizer load, and the test set has one reference per sentence. Returns the model's text form."""
    from vanilla_tools.cli import UsageError, load_model, load_tokenizer
    from vanilla_tools.text_form import served_text_form

    load_tokenizer(model_dir)
    form = served_text_form(load_model(model_dir))
    if len(sources) != len(references):
        raise UsageError(f"{len(sources)} source sentences but {len(references)} references in {reference_path}")
    return form


class Counted:
    """An engine wrapper that adds up the output tokens of every batch."""

    def __init__(self, engine):
        self.engine, self.decoding, self.tokens = engine, engine.decoding, 0

    def __call__(self, sentences: list[str]):
        done = self.engine(sentences)
        self.tokens += sum(done.output_lengths)
        return done


def make_engine(name: str, model_dir: str, num_beams: int, device: str = "cpu", dtype: str | None = None):
    """The engine ``name`` for the model in ``model_dir``, decoding as the model does with ``num_beams`` beams (one
    ``Decoding`` for every engine, MarianMTModel's included), on ``device`` (a ``--device`` value; ``dtype``:
    generate()'s ``--dtype``), fed text in the model's text form."""
    from inference.engine import prepared
    from modeling_vanilla import VanillaTransformerForSeq2Seq
    from vanilla_tools.text_form import served_text_form

    model = VanillaTransformerForSeq2Seq.from_pretrained(model_dir).eval()
    return prepared(built_engine(name, model_dir, model, num_beams, device, dtype), served_text_form(model))


def built_engine(name: str, model_dir: str, model, num_beams: int, device: str, dtype: str | None):
    """``make_engine``'s engine before it is fed the model's text form."""
    from inference.engine import GenerateEngine
    from inference.engines import create_engine
    from modeling_vanilla import to_marian
    from vanilla_tools.cli import load_tokenizer
    from vanilla_tools.decoding import Decoding
    from vanilla_tools.device import place, resolve_placement

    placement = resolve_placement(device, dtype)
    tokenizer = load_tokenizer(model_dir)
    decoding = Decoding.resolve(model.generation_config, num_beams)
    if name == "marian":
        return GenerateEngine(place(to_marian(model), *placement), tokenizer, decoding)
    model = place(model, *placement)
    if name == "generate-static-compiled":
        from transformers import CompileConfig

        # On a CPU transformers compiles only when asked to (_compile_all_devices); dynamic shapes: one graph for
        # every batch size and cache length.
        compile_config = CompileConfig(dynamic=True, mode="default")
        compile_config._compile_all_devices = True
        model.generation_config.compile_config = compile_config
        if num_beams > 1:  # transformers' beam search calls the model uncompiled: its step is compiled here
            model.forward = torch.compile(model.forward, dynamic=True)
        return GenerateEngine(model, tokenizer, decoding, cache_implementation="static")
    if name in ("generate", "onnx"):
        return create_engine(name, model_dir, model, tokenizer, decoding)
    return create_engine("ctranslate2", model_dir, model, tokenizer, decoding, quantization=name.removeprefix("ct2-"))


def gpu_memory_mib(device: str) -> float:
    """MiB in use on ``device``'s GPU now (0 on a CPU): what the CUDA driver counts, so CTranslate2's allocations
    too, which PyTorch's counters do not see."""
    if not device.startswith("cuda"):
        return 0.0
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return (total - free) / 2**20


def worker(
    name: str,
    model_dir: str,
    source: str,
    num_beams: int,
    batch_size: int,
    output: str,
    device: str,
    dtype: str,
    warmup: bool,
) -> None:
    """One measurement: translate ``source`` and write the figures and the translations to ``output`` (JSON).
    ``dtype`` "default": the device's default. ``warmup``: the first batch translated once before the clock starts
    (compilation, a GPU's first kernels), its seconds given apart."""
    from inference.translate import translate_stream

    torch.set_num_threads(os.cpu_count() or 1)
    before = gpu_memory_mib(device)
    counted = Counted(make_engine(name, model_dir, num_beams, device, None if dtype == "default" else dtype))
    sentences = read(Path(source))
    start = time.perf_counter()
    if warmup:
        list(translate_stream(counted.engine, sentences[:batch_size], batch_size))
        warmup_s = time.perf_counter() - start
        start = time.perf_counter()
    translations = list(translate_stream(counted, sentences, batch_size))
    seconds = time.perf_counter() - start
    figures = {
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(sentences) / seconds, 2),
        "output_tokens_per_s": round(counted.tokens / seconds, 1),
        "output_tokens": counted.tokens,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        # both engines' allocators keep what they took at the peak: what the process holds at the end, beyond the
        # CUDA context PyTorch made before the engine (CTranslate2's own context included)
        **({"gpu_mib": round(gpu_memory_mib(device) - before, 1)} if device.startswith("cuda") else {}),
        **({"warmup_s": round(warmup_s, 2)} if warmup else {}),
        "translations": translations,
    }
    Path(output).write_text(json.dumps(figures))


def measure(
    name, model_dir, source, num_beams, batch_size, folder: Path, timeout: int, device="cpu", dtype=None, warmup=False
) -> dict:
    """``worker``'s figures, measured in a process of its own (so its peak memory is its own)."""
    output = folder / f"{name}-{device}-{dtype}-beam{num_beams}-batch{batch_size}.json"
    command = [
        sys.executable,
        "-m",
        "inference.bench_engines",
        "worker",
        name,
        str(model_dir),
        str(source),
        str(num_beams),
        str(batch_size),
        str(output),
        device,
        dtype or "default",
        "warm" if warmup else "cold",
    ]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timed_out_after_s": timeout}
    except subprocess.CalledProcessError as error:
        return {"failed": error.stderr.strip().splitlines()[-1] if error.stderr.strip() else "no output"}
    return json.loads(output.read_text())


def run(
    model_dir: str, source: Path, references: Path, batches, engines, timeout: int, device="cpu", dtype=None
) -> dict:
    """Every engine at every batch size, greedy and beam 4, each in a fresh process, on ``device`` (a resolved
    ``--device``; ``dtype``: generate()'s)."""
    import tempfile

    from vanilla_tools.metrics import score_translations

    refs = read(references)
    form = check_inputs(model_dir, read(source), refs, references)
    refs = [form.target(line) for line in refs]  # scored as the run record is: in the model's text form
    results = {
        "model": str(model_dir),
        "source": str(source),
        "sentences": len(refs),
        "device": device,
        "dtype": dtype,
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for num_beams in (1, 4):
            reference_outputs = None
            for batch_size in batches:
                for name in engines:
                    if name == "generate-static-compiled" and num_beams not in STATIC_BEAMS:
                        continue
                    figures = measure(name, model_dir, source, num_beams, batch_size, Path(tmp), timeout, device, dtype)
                    translations = figures.pop("translations", None)
                    row = {"engine": name, "num_beams": num_beams, "batch_size": batch_size, **figures}
                    if translations is not None:
                        if name == "generate" and reference_outputs is None:
                            reference_outputs = translations
                        row["bleu"] = score_translations(translations, refs).bleu
                        if reference_outputs is not None:
                            same = sum(a == b for a, b in zip(translations, reference_outputs, strict=True))
                            row["identical_to_generate"] = round(same / len(translations), 4)
                    results["runs"].append(row)
                    print(json.dumps(row), flush=True)
    return results


def package_version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def table(results: dict) -> str:
    rows = [
        "| engine | beams | batch | sentences/s | output tokens/s | peak RSS (MiB) | BLEU | same as generate() |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["runs"]:
        if "sentences_per_s" not in r:
            status = f"timed out after {r['timed_out_after_s']} s" if "timed_out_after_s" in r else r["failed"]
            rows.append(f"| {r['engine']} | {r['num_beams']} | {r['batch_size']} | {status} | | | | |")
            continue
        same = f"{100 * r['identical_to_generate']:.1f}%" if "identical_to_generate" in r else ""
        speed = f"{r['sentences_per_s']:.1f} | {r['output_tokens_per_s']:,.0f}"
        rows.append(
            f"| {r['engine']} | {r['num_beams']} | {r['batch_size']} | {speed} | {r['peak_rss_mib']:.0f} | "
            f"{r['bleu']:.2f} | {same} |"
        )
    return "\n".join(rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--translate", metavar="MODEL_DIR", help="measure translation with this trained model")
    parser.add_argument("--source", default=str(BUNDLED_DIR / "test_2016_flickr.en.gz"))
    parser.add_argument("--references", default=str(BUNDLED_DIR / "test_2016_flickr.de.gz"))
    parser.add_argument("--batch_sizes", type=positive_int, nargs="+", default=[1, 64])
    parser.add_argument(
        "--engines", nargs="+", choices=ENGINES + GPU_ENGINES, help="default: all (on CUDA, and float16 CTranslate2)"
    )
    parser.add_argument("--timeout", type=positive_int, default=900, help="seconds for one measurement")


def default_engines(device: str) -> list[str]:
    """The engines measured where ``--engines`` is not given: CTranslate2's GPU compute types on CUDA only."""
    return list(ENGINES + GPU_ENGINES) if device.startswith("cuda") else list(ENGINES)


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    name, model_dir, source, beams, batch, output, device, dtype, warmup = sys.argv[2:11]
    worker(name, model_dir, source, int(beams), int(batch), output, device, dtype, warmup == "warm")
