"""A tiny real corpus (the first pairs of the bundled Multi30k) and a tiny training command line."""

import gzip
from pathlib import Path

import torch
from safetensors.torch import load_file

from vanilla_tools.corpora import BUNDLED_DIR

GERMAN = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch."]
ENGLISH = ["A dog runs across the meadow.", "Two men play football.", "A woman reads a book."]

TINY_MODEL = [
    "--d_model", "32", "--encoder_layers", "1", "--decoder_layers", "1", "--num_attention_heads", "2",
    "--ffn_dim", "64", "--vocab_size", "300", "--max_tokens_per_batch", "256", "--dropout", "0.0",
]  # fmt: skip


def write_corpus(folder: Path, pairs: int = 120) -> dict[str, list[str]]:
    """train / validation / test files of real Multi30k sentences; returns the --*_files arguments."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for lang in ("en", "de"):
        with gzip.open(BUNDLED_DIR / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = [next(f) for _ in range(pairs + 40)]
        for split, part in (("train", lines[:pairs]), ("validation", lines[pairs : pairs + 20]),
                            ("test", lines[pairs + 20 :])):  # fmt: skip
            path = folder / f"{split}.{lang}"
            path.write_text("".join(part), encoding="utf-8")
            files.setdefault(split, []).append(str(path))
    return files


def train_argv(corpus: dict[str, list[str]], output_dir: Path, *extra: str) -> list[str]:
    """vanilla-train's arguments for ``corpus`` (the splits it has) and a tiny model."""
    files = [arg for split in ("train", "validation", "test") if corpus.get(split)
             for arg in (f"--{split}_files", *corpus[split])]  # fmt: skip
    return [
        "--dataset", "files",
        *files,
        "--output_dir", str(output_dir),
        "--report_to", "none",
        "--warmup_steps", "4",
        "--lr_scale", "2.0",
        "--label_smoothing_factor", "0.1",
        "--seed", "7",
        "--disable_tqdm", "true",
        *TINY_MODEL,
        *extra,
    ]  # fmt: skip


def assert_same_weights(expected: dict, folder: Path) -> None:
    """The final model in ``folder`` has exactly the tensors ``expected`` (a run's ``model.safetensors``)."""
    got = load_file(folder / "model.safetensors")
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name
