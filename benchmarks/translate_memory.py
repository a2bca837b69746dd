"""Peak memory of `vanilla-translate` as its input grows: the command streams, so it should stay flat.

    python -m benchmarks.translate_memory --json results/benchmarks/translate-memory.json

Each size and engine (``--engine auto``, the default, which takes CTranslate2 where installed, and ``generate``)
runs the installed `vanilla-translate` console script in its own process on a generated file of real
Multi30k sentences (cycled), with a tiny random model whose outputs are capped at 8 tokens: what is measured is the
command's own memory (reading, chunking, writing), not a large model's. Peak RSS is the child's ru_maxrss; the
output is checked to have one line per input line.
"""

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from training.api import ModelArguments, build_model, train_tokenizer
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.provenance import provenance


def tiny_model_dir(folder: Path, sentences: list[str]) -> Path:
    tokenizer = train_tokenizer(sentences, vocab_size=500)
    torch.manual_seed(0)
    sizes = ModelArguments(d_model=32, encoder_layers=1, decoder_layers=1, num_attention_heads=2, ffn_dim=64)
    model = build_model(sizes, tokenizer)
    model.generation_config.update(num_beams=1, length_penalty=1.0, early_stopping=False, max_new_tokens=8)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# Runs the command it is given and prints that child's peak RSS: a fresh parent for every measurement, since a
# process's RUSAGE_CHILDREN is the largest of all its children so far.
PEAK_OF_CHILD = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def measure(model_dir: Path, source: Path, output: Path, engine: str) -> dict:
    """Run vanilla-translate once: its peak RSS (MiB; ru_maxrss is in KiB on Linux), seconds and output lines."""
    command = [
        str(Path(sys.executable).parent / "vanilla-translate"),
        "--model",
        str(model_dir),
        str(source),
        "--output",
        str(output),
        "--engine",
        engine,
    ]
    start = time.perf_counter()
    peak = subprocess.run([sys.executable, "-c", PEAK_OF_CHILD, *command], check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = sum(1 for _ in open(output, encoding="utf-8"))
    return {"peak_rss_mib": round(int(peak.stdout) / 1024, 1), "seconds": round(seconds, 1), "output_lines": lines}


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--engines", nargs="+", default=["auto", "generate"], help="vanilla-translate's --engine")
    parser.add_argument("--json", help="write the figures here")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    with gzip.open(BUNDLED_DIR / "train.en.gz", "rt", encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    results = {**provenance(), "runs": {engine: {} for engine in args.engines}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model_dir = tiny_model_dir(folder / "model", sentences[:5000])
        for count in args.lines:
            source = folder / f"in-{count}.en"
            source.write_text("".join(sentences[i % len(sentences)] + "\n" for i in range(count)), encoding="utf-8")
            for engine in args.engines:
                figures = measure(model_dir, source, folder / f"out-{count}.de", engine)
                assert figures["output_lines"] == count
                results["runs"][engine][count] = figures
                print(engine, count, figures, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
