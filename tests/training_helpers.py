"""A tiny real corpus (the first pairs of the bundled Multi30k), a tiny training command line, the trainer of a
command line as vanilla-train builds it, and tiny tokenized pairs with the padding of their batches."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import datasets
import torch
from helpers import PAD, tiny_model
from safetensors.torch import load_file
from transformers import Seq2SeqTrainingArguments

from training.arguments import parse_args
from training.build import build_trainer, resolve_run
from training.data.batching import TokenizedPairs
from training.resolved import RunDecoding
from training.schedules import NoamSchedule
from training.step.trainer import PaperSeq2SeqTrainer
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.decoding import Decoding
from vanilla_tools.provenance import ROOT

GERMAN = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch."]
ENGLISH = ["A dog runs across the meadow.", "Two men play football.", "A woman reads a book."]

# The shape of the tiny model every test that trains one uses; TINY_MODEL adds its vocabulary, batches and dropout.
TINY_SHAPE = [
    "--d_model",
    "32",
    "--encoder_layers",
    "1",
    "--decoder_layers",
    "1",
    "--num_attention_heads",
    "2",
    "--ffn_dim",
    "64",
]
TINY_MODEL = [
    *TINY_SHAPE,
    "--vocab_size",
    "300",
    "--max_tokens_per_batch",
    "256",
    "--dropout",
    "0.0",
]


def write_corpus(folder: Path, pairs: int = 120) -> dict[str, list[str]]:
    """train / validation / test files of real Multi30k sentences; returns the --*_files arguments."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for lang in ("en", "de"):
        with gzip.open(BUNDLED_DIR / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = [next(f) for _ in range(pairs + 40)]
        for split, part in (
            ("train", lines[:pairs]),
            ("validation", lines[pairs : pairs + 20]),
            ("test", lines[pairs + 20 :]),
        ):
            path = folder / f"{split}.{lang}"
            path.write_text("".join(part), encoding="utf-8")
            files.setdefault(split, []).append(str(path))
    return files


def train_argv(corpus: dict[str, list[str]], output_dir: Path, *extra: str) -> list[str]:
    """vanilla-train's arguments for ``corpus`` (the splits it has) and a tiny model."""
    files = [
        arg
        for split in ("train", "validation", "test")
        if corpus.get(split)
        for arg in (f"--{split}_files", *corpus[split])
    ]
    return [
        "--dataset",
        "files",
        *files,
        "--output_dir",
        str(output_dir),
        "--report_to",
        "none",
        "--warmup_steps",
        "4",
        "--lr_scale",
        "2.0",
        "--label_smoothing_factor",
        "0.1",
        "--seed",
        "7",
        "--disable_tqdm",
        "true",
        *TINY_MODEL,
        *extra,
    ]


def built(argv: list[str]):
    """vanilla-train's trainer of ``argv`` and the data's splits, built the way vanilla-train builds them: the
    arguments parsed, the run resolved (``resolve_run``: refusals, then the arguments written), ``build_trainer``."""
    arguments = parse_args(argv)
    return build_trainer(*arguments, resolve_run(*arguments))


def assert_same_weights(expected: dict, folder: Path) -> None:
    """The final model in ``folder`` has exactly the tensors ``expected`` (a run's ``model.safetensors``)."""
    got = load_file(folder / "model.safetensors")
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name


def synthetic_run(
    precision: str = "fp32",
    code: str = "new",
    max_steps: int | None = 1000,
    minutes: float | None = None,
    device: str = "cpu",
    tokens: int = 2048,
    seed: int = 1,
) -> dict:
    """A run record (training/run/record.py's run_record) for tests of the readers: ``code`` names its code tree."""
    return {
        "schema": 1,
        "code": {"commit": f"{code}0000000"[:40], "code_tree": code},
        "machine": {"processor": "test"},
        "device": {"type": device, "name": "test"},
        "precision": precision,
        "budget": {
            "max_steps": max_steps,
            "num_train_epochs": None if max_steps else 40,
            "max_train_minutes": minutes,
            "tokens_per_step": tokens,
        },
        "seed": seed,
        "steps": max_steps,
    }


def tiny_preset(folder: Path, **changes) -> Path:
    """A preset YAML of a 31k-parameter model on a 60-pair corpus written under ``folder`` (the runners' tests)."""
    import yaml

    corpus = write_corpus(folder / "data", pairs=60)
    preset = folder / "tiny.yaml"
    settings = {
        "base": "demo",
        "dataset": "files",
        "train_files": corpus["train"],
        "validation_files": corpus["validation"],
        "d_model": 32,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "num_attention_heads": 2,
        "ffn_dim": 64,
        "vocab_size": 300,
        "max_tokens_per_batch": 256,
        "warmup_steps": 4,
        "disable_tqdm": True,
    }
    preset.write_text(yaml.safe_dump({**settings, **changes}))
    return preset


def pairs(n: int = 12) -> TokenizedPairs:
    """``n`` tokenized pairs of a few lengths on each side, with their length columns."""
    rows = [{"input_ids": [5 + i % 7] * (3 + i % 4), "labels": [6 + i % 5] * (2 + i % 3)} for i in range(n)]
    for row in rows:
        row["source_length"], row["target_length"] = len(row["input_ids"]), len(row["labels"])
    return TokenizedPairs(datasets.Dataset.from_list(rows))


def pad(features: list[dict]) -> dict[str, torch.Tensor]:
    """Right-pads ids with PAD (its mask 0) and labels with -100, as DataCollatorForSeq2Seq does."""
    batch = {}
    for key, value in (("input_ids", PAD), ("labels", -100)):
        width = max(len(f[key]) for f in features)
        batch[key] = torch.tensor([f[key] + [value] * (width - len(f[key])) for f in features])
    batch["attention_mask"] = batch["input_ids"].ne(PAD).long()
    return batch


def tiny_trainer(output_dir: Path, data_collator=pad, **overrides) -> PaperSeq2SeqTrainer:
    """A PaperSeq2SeqTrainer of a seeded tiny model on ``pairs()``, 3 steps on the CPU unless ``overrides`` (its
    Seq2SeqTrainingArguments) say otherwise, batches of at most 24 tokens."""
    settings = dict(
        max_steps=3,
        learning_rate=1.0,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    return PaperSeq2SeqTrainer(
        model=tiny_model().train(),
        args=Seq2SeqTrainingArguments(output_dir, **{**settings, **overrides}),
        training_set=pairs(),
        data_collator=data_collator,
        max_tokens_per_batch=24,
        decoding=RunDecoding(Decoding(), Decoding.paper()),
        lr_multiplier=NoamSchedule(4),
    )


def stop_at_step_2(flags: list[str], output_dir, summary_dir) -> None:
    """vanilla-train with ``flags`` into ``output_dir``, stopped by SIGTERM in its step 2 (checkpoint-2 written)."""
    command = [
        sys.executable,
        str(ROOT / "tests" / "signal_probe.py"),
        "SIGTERM",
        "step",
        "2",
        *flags,
        "--output_dir",
        str(output_dir),
        "--summary_dir",
        str(summary_dir),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    stopped = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert stopped.returncode == 143 and (output_dir / "checkpoint-2").is_dir(), stopped.stderr[-3000:]
