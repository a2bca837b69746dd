"""Translation on a GPU (issue 110, item 4): a trained model's test2016 (the bundled Multi30k), beam 4, at batches
64 and 1, with generate() (eager, and a static cache with torch.compile) and CTranslate2 in float16 and
int8_float16, against float32 on the CPU.

    python -m benchmarks.gpu_translate MODEL_DIR --json results/benchmarks/gpu/DATE-translate.json
    python -m benchmarks.gpu_translate MODEL_DIR --device cpu --limit 8 --json /tmp/translate.json  # the rehearsal

First the references: float32 on the CPU at each batch size (CTranslate2's, whose translations are generate()'s:
docs/performance.md; generate()'s where CTranslate2 is not installed). Then each mode in a process of its own
(``inference.bench_engines.measure``: sentences/s, output tokens/s, peak host RSS, the GPU memory it took), in the
order the targets need them, each timed after a first batch translated once (compilation and a GPU's first kernels,
whose seconds are given apart). Each is read against the reference at its batch size: the lines whose translation
differs, its BLEU and the reference's. The record is rewritten after every mode, so a call that runs out of time
keeps what it measured. A mode the device cannot run (CTranslate2's GPU compute types on a CPU) is recorded as
skipped, with the one line that refuses it; the CPU rehearsal runs every other line of the benchmark.

At batch 1 only the first ``--batch1_lines`` lines are translated (1,000 one at a time take generate() about 70 s
on an H200: issue 110). Targets, on the GPU: CTranslate2 float16 translates at least 98% of the lines as float32
does, within 0.1 BLEU; generate() at batch 64 runs at no less than half of CTranslate2 float16's speed. generate()
in float16 is measured too: whether it keeps the translations decides generate()'s default precision on CUDA
(vanilla_tools.device.DEFAULT_DTYPE).
"""

import argparse
import importlib.util
import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.bench_engines import Job, measure, package_version, read
from inference.ct2 import check_compute_type, device_refusal
from vanilla_tools.cli import UsageError, console_script, positive_int
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.device import device_name, dtype_refusal, resolve_device
from vanilla_tools.metrics import score_translations
from vanilla_tools.provenance import provenance

from . import write_record

NUM_BEAMS = 4
SAME_LINES_TARGET, BLEU_TARGET, SPEED_TARGET = 0.98, 0.1, 0.5


@dataclass(frozen=True)
class Mode:
    engine: str  # an engine of inference.bench_engines
    batch_size: int
    dtype: str | None = None  # generate()'s; None: the device's default

    @property
    def name(self) -> str:
        return f"{self.engine}{f'-{self.dtype}' if self.dtype else ''}, batch {self.batch_size}"


MODES = (  # what the targets read first: a call cut short keeps them
    Mode("ct2-float16", 64),
    Mode("generate", 64),
    Mode("ct2-int8_float16", 64),
    Mode("generate", 64, "float16"),
    Mode("ct2-float16", 1),
    Mode("ct2-int8_float16", 1),
    Mode("generate", 1),
    Mode("generate-static-compiled", 64),
    Mode("generate-static-compiled", 1),
)


def skip_reason(mode: Mode, device: torch.device) -> str | None:
    """Why ``mode`` cannot run on ``device`` (None if it can), in the words of the refusal a user would get."""
    if mode.engine.startswith("ct2-"):
        if importlib.util.find_spec("ctranslate2") is None:
            return "the ctranslate2 package is not installed"
        if device_refusal(device):
            return device_refusal(device)
        try:
            check_compute_type(mode.engine.removeprefix("ct2-"), device)
        except UsageError as refusal:
            return str(refusal)
    return dtype_refusal(mode.dtype, device) if mode.dtype else None


def compared(translations: list[str], reference: list[str], references: list[str]) -> dict:
    """A mode's translations read against the reference's at the same batch size (the same lines: the first
    ``len(translations)`` of ``references``)."""
    references = references[: len(translations)]
    differ = sum(a != b for a, b in zip(translations, reference, strict=True))
    bleu = score_translations(translations, references).bleu
    reference_bleu = score_translations(reference, references).bleu
    return {
        "lines_differing": differ,
        "same_share": round(1 - differ / len(translations), 4),
        "bleu": bleu,
        "reference_bleu": reference_bleu,
        "bleu_change": round(bleu - reference_bleu, 2),
    }


def targets(modes: list[dict]) -> dict:
    """The issue's targets, read from the modes measured so far (None: not measured)."""
    measured = {(m["engine"], m["batch_size"], m["dtype"]): m for m in modes if "sentences_per_s" in m}
    float16, generate = measured.get(("ct2-float16", 64, None)), measured.get(("generate", 64, None))
    same = None
    if float16:
        same = float16["same_share"] >= SAME_LINES_TARGET and abs(float16["bleu_change"]) <= BLEU_TARGET
    speed = generate["sentences_per_s"] / float16["sentences_per_s"] if float16 and generate else None
    return {
        "ct2_float16_keeps_the_translations": {
            "target": f"the same line as float32 on >= {SAME_LINES_TARGET:.0%}, within {BLEU_TARGET} BLEU",
            "met": same,
        },
        "generate_batch64_over_ct2_float16": {
            "target": f">= {SPEED_TARGET}",
            "measured": round(speed, 3) if speed is not None else None,
            "met": speed >= SPEED_TARGET if speed is not None else None,
        },
    }


def reference_engine() -> str:
    return "ct2-float32" if importlib.util.find_spec("ctranslate2") else "generate"


def line_files(folder: Path, sources: list[str], batch1_lines: int) -> dict[int, Path]:
    """The lines each batch size translates, as files: all of them at batch 64, the first ``batch1_lines`` at 1."""
    files = {}
    for batch, lines in ((64, sources), (1, sources[:batch1_lines])):
        files[batch] = folder / f"batch-{batch}.txt"
        files[batch].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


def run(args: argparse.Namespace) -> dict:
    device = resolve_device(args.device)
    sources = list(itertools.islice(read(Path(args.source)), args.limit))
    references = list(itertools.islice(read(Path(args.references)), args.limit))
    record = {
        **provenance(ctranslate2=package_version("ctranslate2")),
        "model": str(args.model),
        "device": str(device),
        "num_beams": NUM_BEAMS,
        "lines": len(sources),
        "batch1_lines": min(args.batch1_lines, len(sources)),
        "references": [],
        "modes": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = line_files(folder, sources, args.batch1_lines)
        engine = reference_engine()
        # at each batch size: a batch's output length limit is its longest source's + 50, so a line that reaches it
        # may end elsewhere in another batch
        cpu = {}
        for batch, lines in files.items():
            job = Job(engine, str(args.model), str(lines), NUM_BEAMS, batch, "cpu", "float32")
            figures = measure(job, folder, args.timeout)
            cpu[batch] = figures.pop("translations", None)
            record["references"].append({"engine": engine, "device": "cpu", "batch_size": batch, **figures})
            write_record(record, args.json)
            if cpu[batch] is None:
                raise UsageError(f"the reference, {engine} on the CPU at batch {batch}, did not translate: {figures}")
            record["references"][-1]["bleu"] = score_translations(cpu[batch], references[: len(cpu[batch])]).bleu
        for mode in MODES:
            row = {"engine": mode.engine, "batch_size": mode.batch_size, "dtype": mode.dtype}
            reason = skip_reason(mode, device)
            if reason:
                row["skipped"] = reason
            else:
                lines = str(files[mode.batch_size])
                job = Job(
                    mode.engine, str(args.model), lines, NUM_BEAMS, mode.batch_size, str(device), mode.dtype, True
                )
                figures = measure(job, folder, args.timeout)
                translations = figures.pop("translations", None)
                row.update(figures)
                if translations is not None:
                    row.update(lines=len(translations), **compared(translations, cpu[mode.batch_size], references))
            record["modes"].append(row)
            record["targets"] = targets(record["modes"])
            write_record(record, args.json)
            print(f"{mode.name}: {row}", flush=True)
    return record


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_translate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="a trained model's folder, with its tokenizer")
    parser.add_argument("--json", required=True, help="the record, rewritten after each mode")
    parser.add_argument("--device", type=device_name, default="auto", help="where the modes run: auto, cpu, cuda:N")
    parser.add_argument("--source", default=str(BUNDLED_DIR / "test_2016_flickr.en.gz"))
    parser.add_argument("--references", default=str(BUNDLED_DIR / "test_2016_flickr.de.gz"))
    parser.add_argument("--limit", type=positive_int, default=None, help="the first N lines only (a rehearsal)")
    parser.add_argument("--batch1_lines", type=positive_int, default=200, help="lines translated one at a time")
    parser.add_argument("--timeout", type=positive_int, default=240, help="seconds for one mode")
    return parser


main = console_script(lambda argv: run(arguments().parse_args(argv)))

if __name__ == "__main__":
    main()
