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
from dataclasses import asdict, dataclass
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
    ``Decoding`` for every engine, MarianMTModel's included), on ``device`` (a ``--device`` value) in ``dtype``
    (``--dtype``, as vanilla-translate's: CTranslate2's compute type too), fed text in the model's text form: loaded
    and built as vanilla-translate builds its engines (``inference.engines``)."""
    from dataclasses import replace

    from inference.engine import GenerateEngine, prepared
    from inference.engines import EngineOptions, build_engine, load
    from modeling_vanilla import to_marian
    from vanilla_tools.decoding import Decoding
    from vanilla_tools.device import place

    ct2 = name.startswith("ct2-")
    kind = "ctranslate2" if ct2 else "onnx" if name == "onnx" else "generate"
    options = EngineOptions(kind, device, dtype, quantization=name.removeprefix("ct2-") if ct2 else None)
    loaded = load(model_dir, options)
    decoding = Decoding.resolve(loaded.model.generation_config, num_beams)
    if name == "marian":
        marian = place(to_marian(loaded.model), loaded.model.device, loaded.model.dtype)
        return build_engine(replace(loaded, model=marian), decoding, options)
    if name == "generate-static-compiled":
        from transformers import CompileConfig

        model = loaded.model
        # On a CPU transformers compiles only when asked to (_compile_all_devices); dynamic shapes: one graph for
        # every batch size and cache length.
        compile_config = CompileConfig(dynamic=True, mode="default")
        compile_config._compile_all_devices = True
        model.generation_config.compile_config = compile_config
        if num_beams > 1:  # transformers' beam search calls the model uncompiled: its step is compiled here
            model.forward = torch.compile(model.forward, dynamic=True)
        return prepared(GenerateEngine(model, loaded.tokenizer, decoding, cache_implementation="static"), loaded.form)
    return build_engine(loaded, decoding, options)


def gpu_memory_mib(device: str) -> float:
    """MiB in use on ``device``'s GPU now (0 on a CPU): what the CUDA driver counts, so CTranslate2's allocations
    too, which PyTorch's counters do not see."""
    if not device.startswith("cuda"):
        return 0.0
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return (total - free) / 2**20


@dataclass(frozen=True)
class Job:
    """One measurement: ``engine`` (of ``ENGINES`` or ``GPU_ENGINES``) translating the file ``source`` with the model
    in ``model_dir``, ``num_beams`` beams, in batches of ``batch_size``, on ``device`` (a ``--device`` value) in
    ``dtype`` (``--dtype``; None: the default). ``warmup``: the first batch translated once before the clock starts
    (compilation, a GPU's first kernels), its seconds given apart."""

    engine: str
    model_dir: str
    source: str
    num_beams: int
    batch_size: int
    device: str = "cpu"
    dtype: str | None = None
    warmup: bool = False

    @property
    def file_name(self) -> str:
        return f"{self.engine}-{self.device}-{self.dtype}-beam{self.num_beams}-batch{self.batch_size}.json"


def worker(job: Job, output: str) -> None:
    """One measurement, ``job``: translate its source and write the figures and the translations to ``output``
    (JSON)."""
    from inference.translate import translate_stream

    torch.set_num_threads(os.cpu_count() or 1)
    before = gpu_memory_mib(job.device)
    counted = Counted(make_engine(job.engine, job.model_dir, job.num_beams, job.device, job.dtype))
    sentences = read(Path(job.source))
    batch_size = job.batch_size
    start = time.perf_counter()
    if job.warmup:
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
        **({"gpu_mib": round(gpu_memory_mib(job.device) - before, 1)} if job.device.startswith("cuda") else {}),
        **({"warmup_s": round(warmup_s, 2)} if job.warmup else {}),
        "translations": translations,
    }
    Path(output).write_text(json.dumps(figures))


def measure(job: Job, folder: Path, timeout: int) -> dict:
    """``worker``'s figures for ``job``, measured in a process of its own (so its peak memory is its own), its file
    written in ``folder``; ``timeout``: the seconds it may take."""
    output = folder / job.file_name
    command = [sys.executable, "-m", "inference.bench_engines", "worker", json.dumps(asdict(job)), str(output)]
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
    ``--device``; ``dtype``: ``--dtype``, as vanilla-translate's)."""
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
                    job = Job(name, str(model_dir), str(source), num_beams, batch_size, device, dtype)
                    figures = measure(job, Path(tmp), timeout)
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
        "--engines",
        nargs="+",
        choices=ENGINES + GPU_ENGINES,
        help="default: all (on CUDA: with CTranslate2's GPU compute types, without onnx, which runs on the CPU)",
    )
    parser.add_argument("--timeout", type=positive_int, default=900, help="seconds for one measurement")


def default_engines(device: str) -> list[str]:
    """The engines measured where ``--engines`` is not given: CTranslate2's GPU compute types on CUDA only, ONNX
    Runtime (float32 graphs on the CPU) on the CPU only (named on CUDA, it is refused as vanilla-translate refuses
    it)."""
    if device.startswith("cuda"):
        return [name for name in ENGINES if name != "onnx"] + list(GPU_ENGINES)
    return list(ENGINES)


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    worker(Job(**json.loads(sys.argv[2])), sys.argv[3])
