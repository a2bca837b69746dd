"""How the data path scales: time to the first training step (cold and warm caches), peak memory, and how fast the
training data loader feeds batches, for synthetic corpora of growing size.

    python -m benchmarks.data_scale --pairs 500000 1500000 4500000 --json results/benchmarks/data-scale.json

Two corpora of N pairs: ``wmt-like`` (``benchmarks/wmt_like.py``: words drawn from real English and German frequency
lists with a long tail of rare types, WMT's sentence lengths; millions of word types at 4.5M pairs, as WMT14 en-de
has) and ``multi30k-joined`` (the bundled Multi30k training sentences joined two by two, pair i joining sentences i
and 7i + 1: only Multi30k's ~25k word types at any size). At 4.5M pairs both are about WMT14 en-de's size. Each runs
``vanilla-train --config demo --dataset files --max_steps 1`` in its own process twice: with an empty cache (cold:
reading, the BPE vocabulary, tokenization) and again (warm: everything from the cache); the time to the first step
is what the run logs when its first step ends. Peak RSS is that of the largest process of the run (tokenizing
workers included). Then the training data loader of the warm run is iterated on its own: real (unpadded) source and
target tokens per second, in one process, over 30 seconds from its first batch (or one epoch, if shorter).
``--streaming`` adds the same for ``vanilla-train --streaming``.

Each cold start is also given as a ratio to the bare limit measured in the same run (the machine's speed varies
several-fold between days): reading the files, learning the BPE vocabulary from a sample of the same size with the
same recipe, and encoding every sentence with the tokenizer alone, in one process per core.
"""

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import wmt_like
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.provenance import provenance

FIRST_STEP = re.compile(r"first training step done (\d+\.\d+) s after start")
# Runs the command it is given and prints the peak RSS of the largest process it started (KiB).
PEAK_OF_CHILD = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
    "sys.stderr.write(r.stderr[-20000:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
)


def write_joined_corpus(folder: Path, pairs: int) -> list[str]:
    """``pairs`` pairs of Multi30k sentences joined two by two, as two plain-text files; returns their paths."""
    sides = {}
    for lang in ("en", "de"):
        with gzip.open(BUNDLED_DIR / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            sides[lang] = [line.rstrip("\n") for line in f]
    paths = []
    for lang, sentences in sides.items():
        path = folder / f"train.{lang}"
        n = len(sentences)
        with open(path, "w", encoding="utf-8") as f:
            for start in range(0, pairs, 100_000):
                f.write(
                    "".join(
                        f"{sentences[i % n]} {sentences[(7 * i + 1) % n]}\n"
                        for i in range(start, min(pairs, start + 100_000))
                    )
                )
        paths.append(str(path))
    return paths


CORPORA = {"wmt-like": wmt_like.write_corpus, "multi30k-joined": write_joined_corpus}


def encode_part(tokenizer_json: str, files: list[str], part: int, parts: int) -> int:
    """Encode every ``parts``-th line (from ``part``) of ``files`` with the tokenizer alone; the tokens made."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokens = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()[part::parts]
        for start in range(0, len(lines), 10_000):
            tokens += sum(len(e.ids) for e in tokenizer.encode_batch_fast(lines[start : start + 10_000]))
    return tokens


def bare_limit(files: list[str]) -> dict:
    """What the cold start cannot go below: read the files, learn the BPE vocabulary (the demo preset's size, from
    a sample of as many sentences as vanilla-train samples, training.data.tokenizer's recipe), encode every sentence
    with the Rust tokenizer alone in one process per core."""
    import multiprocessing
    import os

    import numpy as np

    from training.api import parse_args, train_tokenizer

    _, data_args, _ = parse_args(["--config", "demo", "--dataset", "files", "--train_files", *files])
    start = time.perf_counter()
    sides = [Path(path).read_text(encoding="utf-8").splitlines() for path in files]
    read = time.perf_counter()
    pairs = len(sides[0])
    rows = np.arange(pairs)
    if 2 * pairs > data_args.tokenizer_sample:
        rows = np.sort(np.random.default_rng(0).choice(pairs, size=data_args.tokenizer_sample // 2, replace=False))
    tokenizer = train_tokenizer((side[i] for side in sides for i in rows), data_args.vocab_size)
    learned = time.perf_counter()
    del sides
    workers = os.cpu_count() or 1
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        tokens = sum(
            pool.starmap(
                encode_part, [(tokenizer.backend_tokenizer.to_str(), files, part, workers) for part in range(workers)]
            )
        )
    done = time.perf_counter()
    return {
        "read_s": round(read - start, 1),
        "learn_bpe_s": round(learned - read, 1),
        "encode_s": round(done - learned, 1),
        "total_s": round(done - start, 1),
        "tokens": tokens,
        "processes": workers,
    }


def word_types(files: list[str]) -> int:
    """Distinct whitespace-separated words of both sides."""
    types = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                types.update(line.split())
    return len(types)


def time_to_first_step(files: list[str], cache: Path, output: Path, extra: list[str]) -> dict:
    # --summary_dir "": a timing run leaves no record in results/
    command = [
        str(Path(sys.executable).parent / "vanilla-train"),
        "--config",
        "demo",
        "--dataset",
        "files",
        "--train_files",
        *files,
        "--max_steps",
        "1",
        "--eval_strategy",
        "no",
        "--save_strategy",
        "no",
        "--output_dir",
        str(output),
        "--cache_dir",
        str(cache),
        "--disable_tqdm",
        "true",
        "--summary_dir",
        "",
        *extra,
    ]
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", PEAK_OF_CHILD, *command], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"vanilla-train failed: {result.stderr[-3000:]}")
    first = FIRST_STEP.search(result.stderr)
    return {
        "first_step_s": float(first.group(1)) if first else None,
        "command_s": round(wall, 1),
        "peak_rss_mib": round(int(result.stdout.split()[-1]) / 1024),
    }


def loader_throughput(files: list[str], cache: Path, output: Path, extra: list[str], seconds: float = 30) -> dict:
    """Real (unpadded) source + target tokens per second out of the training DataLoader (collated batches), one
    process, over ``seconds`` from its first batch (streaming: several windows of reading and tokenizing)."""
    from training.api import build_trainer, parse_args, resolve_run

    argv = [
        "--config",
        "demo",
        "--dataset",
        "files",
        "--train_files",
        *files,
        "--output_dir",
        str(output),
        "--cache_dir",
        str(cache),
        "--disable_tqdm",
        "true",
        "--max_steps",
        "100000",
        "--eval_strategy",
        "no",
        *extra,
    ]
    arguments = parse_args(argv)
    trainer, _ = build_trainer(*arguments, resolve_run(*arguments))
    batches = iter(trainer.get_train_dataloader())
    next(batches)
    tokens, count, start = 0, 0, time.perf_counter()
    for batch in batches:  # for ``seconds``, or to the end of the epoch
        tokens += int(batch["attention_mask"].sum()) + int((batch["labels"] != -100).sum())
        count += 1
        if time.perf_counter() - start >= seconds:
            break
    return {"loader_tokens_per_s": round(tokens / (time.perf_counter() - start)), "loader_batches": count}


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, nargs="+", default=[500_000, 1_500_000, 4_500_000])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--streaming", action="store_true", help="also measure vanilla-train --streaming")
    parser.add_argument("--workdir", help="where the corpora and caches go (default: a temporary folder)")
    parser.add_argument("--json", help="write the figures here")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    results = {**provenance(), "runs": []}
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="data-scale-"))
    try:
        for pairs in args.pairs:
            for corpus in args.corpora:
                folder = workdir / f"{corpus}-{pairs}"
                folder.mkdir(parents=True, exist_ok=True)
                files = CORPORA[corpus](folder, pairs)
                limit = bare_limit(files)
                modes = [("arrow", [])] + ([("streaming", ["--streaming", "true"])] if args.streaming else [])
                for mode, extra in modes:
                    cache = folder / f"cache-{mode}"
                    row = {
                        "pairs": pairs,
                        "corpus": corpus,
                        "mode": mode,
                        "word_types": word_types(files),
                        "corpus_mib": round(sum(Path(f).stat().st_size for f in files) / 2**20),
                        "bare_limit": limit,
                    }
                    row["cold"] = time_to_first_step(files, cache, folder / "out-cold", extra)
                    row["cold"]["ratio_to_bare_limit"] = round(row["cold"]["first_step_s"] / limit["total_s"], 2)
                    row["warm"] = time_to_first_step(files, cache, folder / "out-warm", extra)  # a new run, same cache
                    row.update(loader_throughput(files, cache, folder / "out-warm", extra))
                    results["runs"].append(row)
                    print(json.dumps(row), flush=True)
                shutil.rmtree(folder)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
