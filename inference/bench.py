"""`vanilla-bench`: our model against transformers' MarianMTModel on the same weights, in one process, and
(``--translate``) the translation engines on a trained model. An installed tool: it writes only where ``--json``
says.

One seeded random MarianMTModel is converted with ``from_marian``; both must give the same logits and greedy
tokens before anything is timed. Measurements alternate between the two models (A B A B ...) after a warm-up, and
the median of the repetitions is reported, on the CPU. ``--device`` places the engines of ``--translate``.

    vanilla-bench --config small base --json results/benchmarks/training.json
    vanilla-bench --translate runs/multi30k --json results/benchmarks/translation.json   (inference/bench_engines.py)
"""

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import MarianConfig, MarianMTModel

from modeling_vanilla import from_marian
from vanilla_tools.cli import UsageError, console_script, positive_int
from vanilla_tools.decoding import PAPER_LENGTH_PENALTY
from vanilla_tools.device import add_device_arguments, resolve_placement
from vanilla_tools.hardware import cpu_bf16, interleaved, matmul_peak
from vanilla_tools.provenance import provenance

from . import bench_engines

CONFIGS = {  # d_model, layers per stack, heads, d_ff, vocab
    "tiny": (64, 1, 2, 128, 1000),
    "small": (256, 3, 4, 1024, 10000),
    "base": (512, 6, 8, 2048, 37000),
}
TRAIN_BATCH, TRAIN_LENGTH = 64, 24  # 1,536 source + 1,536 target tokens a step
GEN_BATCH, GEN_SOURCE_LENGTH, GEN_NEW_TOKENS = 32, 24, 20


def random_marian(
    d_model: int, layers: tuple[int, int], heads: int, ffn_dim: int, vocab: int, seed: int = 0, **settings
) -> MarianMTModel:
    """A seeded random MarianMTModel of ``layers`` (encoder, decoder) layers, both stacks ``heads`` heads and
    ``ffn_dim`` wide, embeddings scaled by sqrt(d_model) (§3.4), and Marian's special tokens (pad and decoder start
    the vocabulary's last id, eos 0); ``settings``: its other MarianConfig fields."""
    torch.manual_seed(seed)
    config = MarianConfig(
        vocab_size=vocab,
        d_model=d_model,
        encoder_layers=layers[0],
        decoder_layers=layers[1],
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim,
        scale_embedding=True,
        pad_token_id=vocab - 1,
        decoder_start_token_id=vocab - 1,
        eos_token_id=0,
        **settings,
    )
    return MarianMTModel(config)


def marian_model(name: str, seed: int = 0) -> MarianMTModel:
    d_model, layers, heads, ffn, vocab = CONFIGS[name]
    return random_marian(
        d_model,
        (layers, layers),
        heads,
        ffn,
        vocab,
        seed,
        activation_function="relu",
        max_position_embeddings=512,
        dropout=0.1,
        forced_eos_token_id=None,
    )


def inputs(vocab: int, batch: int, length: int, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab - 1, (batch, length), generator=g)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": torch.randint(1, vocab - 1, (batch, length), generator=g),
    }


def check_equal(marian, ours, vocab: int) -> None:
    """The comparison is only meaningful if both compute the same function."""
    batch = inputs(vocab, 4, 12)
    marian.eval(), ours.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).logits, marian(**batch).logits, atol=1e-4, rtol=1e-4)
    kwargs = dict(attention_mask=batch["attention_mask"], num_beams=1, do_sample=False, max_new_tokens=8)
    if not torch.equal(ours.generate(batch["input_ids"], **kwargs), marian.generate(batch["input_ids"], **kwargs)):
        raise AssertionError("greedy tokens differ between the converted model and Marian")


def train_step(model, optimizer, batch, bf16: bool) -> Callable[[], None]:
    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def train_flops(config, batch: int, length: int, target_length: int | None = None) -> float:
    """FLOPs of one training step (forward + backward = 3x forward) on ``batch`` pairs of ``length`` source and
    ``target_length`` (default ``length``) target tokens: every matrix product, attention and the output layer."""
    source, target = length, length if target_length is None else target_length
    d, ff = config.d_model, config.ffn_dim
    # multiply-adds a pair: projections and FFN a token; QK^T and AV per query and key (self and cross attention);
    # the cross-attention's keys and values are projected from the source's tokens
    encoder = config.encoder_layers * (source * (4 * d * d + 2 * d * ff) + 2 * source * source * d)
    decoder = config.decoder_layers * (
        target * (6 * d * d + 2 * d * ff) + source * 2 * d * d + 2 * target * target * d + 2 * target * source * d
    )
    return 3 * 2 * batch * (encoder + decoder + target * d * config.vocab_size)


def peak_step_memory(model, batch) -> float:
    """MiB allocated at the peak of one fp32 training step, from the profiler's allocation record (CPU tensors have
    no allocator counter): running sum of every operator's allocations and frees, in order."""
    step = train_step(model, torch.optim.AdamW(model.parameters(), lr=1e-5), batch, False)
    model.train()
    step()  # optimizer state exists before the measured step, as in any step but the first
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    current = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        current += event.self_cpu_memory_usage
        peak = max(peak, current)
    return peak / 2**20


def run(config_name: str, repeats: int) -> dict:
    marian = marian_model(config_name)
    ours = from_marian(marian)
    vocab = marian.config.vocab_size
    check_equal(marian, ours, vocab)
    models = {"ours": ours, "marian": marian}
    result: dict = {
        "config": dict(zip(("d_model", "layers", "heads", "ffn_dim", "vocab"), CONFIGS[config_name], strict=True))
    }
    step_tokens = 2 * TRAIN_BATCH * TRAIN_LENGTH
    batch = inputs(vocab, TRAIN_BATCH, TRAIN_LENGTH)
    flops = train_flops(ours.config, TRAIN_BATCH, TRAIN_LENGTH)
    # bf16 only where the CPU has it: emulated, a bf16 matrix product runs at about 1 GFLOP/s, nothing worth a ratio
    result["precisions"] = ["fp32", "bf16"] if cpu_bf16() else ["fp32"]
    for precision in result["precisions"]:
        bf16 = precision == "bf16"
        steps = {}
        for name, model in models.items():
            model.train()
            steps[name] = train_step(model, torch.optim.AdamW(model.parameters(), lr=1e-5), batch, bf16)
        seconds = interleaved(steps, repeats)
        peak = matmul_peak(torch.bfloat16 if bf16 else torch.float32)
        result[f"train_{precision}"] = {
            name: {"tokens_per_s": step_tokens / s, "seconds_per_step": s} for name, s in seconds.items()
        }
        result[f"mfu_{precision}"] = {
            "train_flops_per_s": flops / seconds["ours"],
            "matmul_peak_flops_per_s": peak,
            "mfu": flops / seconds["ours"] / peak,
        }
    source = inputs(vocab, GEN_BATCH, GEN_SOURCE_LENGTH)
    for label, beams in (("generate_greedy", 1), ("generate_beam4", 4)):
        calls = {}
        for name, model in models.items():
            model.eval()
            calls[name] = lambda m=model, b=beams: m.generate(
                source["input_ids"],
                attention_mask=source["attention_mask"],
                num_beams=b,
                do_sample=False,
                max_new_tokens=GEN_NEW_TOKENS,
                min_new_tokens=GEN_NEW_TOKENS,
                length_penalty=PAPER_LENGTH_PENALTY,
            )
        with torch.no_grad():
            seconds = interleaved(calls, repeats)
        result[label] = {name: {"new_tokens_per_s": GEN_BATCH * GEN_NEW_TOKENS / s} for name, s in seconds.items()}
    one = inputs(vocab, 1, GEN_SOURCE_LENGTH)
    start = torch.full((1, 1), marian.config.decoder_start_token_id)
    first_step = {
        name: lambda m=model: m(
            input_ids=one["input_ids"], attention_mask=one["attention_mask"], decoder_input_ids=start, use_cache=True
        )
        for name, model in models.items()
    }
    with torch.no_grad():
        result["first_step_latency_ms"] = {n: 1000 * s for n, s in interleaved(first_step, repeats * 3).items()}
    result["peak_memory_mib"] = {name: peak_step_memory(model, batch) for name, model in models.items()}
    result["ratios"] = {
        **{f"train_{p}": ratio(result[f"train_{p}"], "tokens_per_s") for p in result["precisions"]},
        "generate_greedy": ratio(result["generate_greedy"], "new_tokens_per_s"),
        "generate_beam4": ratio(result["generate_beam4"], "new_tokens_per_s"),
        "peak_memory": result["peak_memory_mib"]["ours"] / result["peak_memory_mib"]["marian"],
    }
    return result


def ratio(figures: dict, key: str) -> float:
    return figures["ours"][key] / figures["marian"][key]


def table(results: dict) -> str:
    rows = ["| config | measure | ours | Marian | ours / Marian |", "| --- | --- | --- | --- | --- |"]
    for name, r in results["configs"].items():
        for label, key, unit in (
            *((f"train_{p}", "tokens_per_s", "tokens/s") for p in r["precisions"]),
            ("generate_greedy", "new_tokens_per_s", "new tokens/s"),
            ("generate_beam4", "new_tokens_per_s", "new tokens/s"),
        ):
            ours, marian = r[label]["ours"][key], r[label]["marian"][key]
            rows.append(f"| {name} | {label} ({unit}) | {ours:,.0f} | {marian:,.0f} | {ours / marian:.2f}x |")
        latency = r["first_step_latency_ms"]
        rows.append(
            f"| {name} | encoder + first step, batch 1 (ms) | {latency['ours']:.2f} | {latency['marian']:.2f} | "
            f"{latency['marian'] / latency['ours']:.2f}x faster |"
        )
        memory = r["peak_memory_mib"]
        rows.append(
            f"| {name} | training step peak memory (MiB) | {memory['ours']:.0f} | {memory['marian']:.0f} | "
            f"{r['ratios']['peak_memory']:.2f} |"
        )
        for precision in r["precisions"]:
            m = r[f"mfu_{precision}"]
            rows.append(
                f"| {name} | MFU {precision} (train FLOP/s / matmul peak) | "
                f"{m['train_flops_per_s'] / 1e9:.1f} / {m['matmul_peak_flops_per_s'] / 1e9:.0f} GFLOP/s | | "
                f"{100 * m['mfu']:.1f}% |"
            )
    return "\n".join(rows)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", nargs="+", default=["small"], choices=sorted(CONFIGS))
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--json", help="write the figures here")
    bench_engines.add_arguments(parser)
    add_device_arguments(parser)
    return parser


def check_json_path(path: Path) -> None:
    """--json, checked before the measurements (minutes to an hour) rather than when they are done."""
    if path.is_dir():
        raise UsageError(f"--json {path} is a folder: name the file to write")
    if not path.parent.is_dir():
        raise UsageError(f"--json {path}: there is no folder {path.parent}")


def bench(argv: list[str] | None = None) -> dict:
    """vanilla-bench: measures, prints the table, writes --json; returns the results."""
    args = arguments().parse_args(argv)
    if args.json:
        check_json_path(Path(args.json))
    if args.translate:
        device = str(resolve_placement(args.device, args.dtype)[0])
        engines = args.engines or bench_engines.default_engines(device)
        results = {
            **provenance(ctranslate2=bench_engines.package_version("ctranslate2")),
            **bench_engines.run(
                args.translate,
                Path(args.source),
                Path(args.references),
                args.batch_sizes,
                engines,
                args.timeout,
                device,
                args.dtype,
            ),
        }
        print(bench_engines.table(results))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        return results
    if args.device not in ("auto", "cpu"):
        raise UsageError(f"--device {args.device} measures --translate MODEL_DIR only: the comparison runs on the CPU")
    results = {
        **provenance(threads=torch.get_num_threads()),
        "configs": {name: run(name, args.repeats) for name in args.config},
    }
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return results


main = console_script(bench)  # exit status 0 on success, one line on a user's error

if __name__ == "__main__":
    main()
