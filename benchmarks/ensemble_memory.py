"""Peak memory of an ensemble of N models (inference/ensemble.py) decoding, N = 1, 2, 3: what N costs.

    python -m benchmarks.ensemble_memory --json results/benchmarks/ensemble-memory.json

Each N runs in its own process: N randomly initialised models of the paper's base size (``--vocab_size`` shared
tokens) are built, made one ensemble, and decode one batch of random source ids by beam search for a fixed number
of tokens (``min_new_tokens`` = ``max_new_tokens``, so every N decodes the same length). Recorded: the bytes of
the weights the ensemble holds, the bytes of its decoding cache at the end, the process's RSS once the models are
built, and its peak RSS (ru_maxrss), each in MiB.
"""

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

import torch

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq
from vanilla_tools.provenance import provenance


def rss_mib() -> float:
    """This process's resident memory now, from /proc (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def measure(models: int, vocab_size: int, batch: int, source_length: int, new_tokens: int, beams: int) -> dict:
    """One ensemble of ``models`` base-size models decoding one batch (run in a fresh process: ``main``)."""
    from inference.ensemble import EnsembleCache, VanillaTransformerEnsemble
    from modeling_vanilla.compat import CACHE_NAME

    torch.manual_seed(0)
    start = rss_mib()
    config = VanillaTransformerConfig(vocab_size=vocab_size, pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)
    ensemble = VanillaTransformerEnsemble([VanillaTransformerForSeq2Seq(config).eval() for _ in range(models)])
    built = rss_mib()
    ids = torch.randint(3, vocab_size, (batch, source_length))
    out = ensemble.generate(
        input_ids=ids,
        num_beams=beams,
        min_new_tokens=new_tokens,
        max_new_tokens=new_tokens,
        return_dict_in_generate=True,
    )
    cache = getattr(out, CACHE_NAME)
    assert isinstance(cache, EnsembleCache)
    return {
        "models": models,
        "weights_mib": round(ensemble.get_memory_footprint() / 2**20, 1),
        "cache_mib": round(cache.nbytes() / 2**20, 1),
        "rss_before_mib": round(start, 1),
        "rss_built_mib": round(built, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "output_shape": list(out.sequences.shape),
    }


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--vocab_size", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--source_length", type=int, default=20)
    parser.add_argument("--new_tokens", type=int, default=30)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one measurement, in this process
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    settings = dict(
        vocab_size=args.vocab_size,
        batch=args.batch,
        source_length=args.source_length,
        new_tokens=args.new_tokens,
        beams=args.beams,
    )
    if args.child is not None:
        figures = measure(args.child, **settings)
        print(json.dumps(figures))
        return figures
    results = {**provenance(), "settings": settings, "runs": []}
    for models in args.models:
        flags = [word for name, value in settings.items() for word in (f"--{name}", str(value))]
        command = [sys.executable, "-m", "benchmarks.ensemble_memory", *flags, "--child", str(models)]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        results["runs"].append(figures)
        print(figures, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
