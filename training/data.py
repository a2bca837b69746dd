"""Parallel data: the bundled Multi30k (default), local files (two plain-text files, TSV or JSONL), or a Hub dataset.

Every source is read into a ``datasets.DatasetDict`` with ``source`` and ``target`` columns, split into train,
validation and test. Bad lines never shift the alignment: a pair is kept or dropped as a whole, and every drop is
counted and logged.
"""

import gzip
import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

BUNDLED_DIR = Path(__file__).resolve().parent.parent / "data" / "multi30k"
BUNDLED_SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


@dataclass
class DataArguments:
    """Where the parallel text comes from and how it is cut into tokens."""

    dataset: str = field(
        default="multi30k",
        metadata={"help": "'multi30k' (bundled, offline), 'files' (see --train_files), or a Hub dataset name"},
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset config, e.g. 'de-en' (wmt14)"})
    source_lang: str = field(default="en", metadata={"help": "source language code"})
    target_lang: str = field(default="de", metadata={"help": "target language code"})
    train_files: list[str] | None = field(
        default=None, metadata={"help": "SRC TGT plain-text files, or one .tsv / .jsonl file (with --dataset files)"}
    )
    validation_files: list[str] | None = field(default=None, metadata={"help": "as --train_files, for validation"})
    test_files: list[str] | None = field(default=None, metadata={"help": "as --train_files, for the final test"})
    vocab_size: int = field(default=8000, metadata={"help": "size of the shared BPE vocabulary (§5.1)"})
    bpe_dropout: float = field(
        default=0.0,
        metadata={"help": "BPE-dropout: re-segment training pairs each epoch, skipping merges with this probability"},
    )
    max_source_length: int = field(default=128, metadata={"help": "source tokens kept per sentence (truncated)"})
    max_target_length: int = field(default=128, metadata={"help": "target tokens kept per sentence (truncated)"})
    max_tokens_per_batch: int = field(
        default=4096, metadata={"help": "padded tokens per side per device batch (§5.1: ~25,000 per step)"}
    )
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "validation pairs evaluated during training, spread over all lengths (the final evaluation: all)"
        },
    )
    cache_dir: str | None = field(default=None, metadata={"help": "where tokenized data is cached (datasets.map)"})


@dataclass
class ReadReport:
    """What reading one split kept and dropped."""

    kept: int = 0
    dropped: Counter = field(default_factory=Counter)

    def log(self, split: str, source: object) -> None:
        """Log the counts; raise ValueError if nothing usable is left of ``source`` (its files, or a dataset)."""
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items())) or "none"
        logger.info("%s: kept %d pairs; dropped: %s", split, self.kept, reasons)
        if not self.kept:
            raise ValueError(f"{split}: no usable sentence pair in {source} (dropped: {reasons})")


def _decode(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return None


def _open_bytes(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _read_lines(path: Path) -> list[bytes]:
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    with _open_bytes(path) as f:
        return f.read().splitlines()


def _keep(pairs, report: ReadReport) -> dict[str, list[str]]:
    """Keep pairs whose both sides are valid UTF-8 and non-empty; count the rest by reason."""
    columns: dict[str, list[str]] = {"source": [], "target": []}
    for source, target in pairs:
        if source is None or target is None:
            report.dropped["invalid UTF-8"] += 1
        elif not source.strip() or not target.strip():
            report.dropped["empty"] += 1
        else:
            columns["source"].append(source.strip())
            columns["target"].append(target.strip())
    report.kept = len(columns["source"])
    return columns


def read_parallel_files(paths: list[str], source_lang: str, target_lang: str) -> tuple[dict, ReadReport]:
    """Two plain-text files (optionally .gz), one TSV (source<TAB>target) or one JSONL file of pairs.

    JSONL lines are ``{"<src>": ..., "<tgt>": ...}`` or ``{"translation": {"<src>": ..., "<tgt>": ...}}``.
    Plain files with different line counts stop here, before any training, since they cannot be aligned.
    """
    report = ReadReport()
    files = [Path(p) for p in paths]
    if len(files) == 2:
        source_lines, target_lines = (_read_lines(p) for p in files)
        if len(source_lines) != len(target_lines):
            raise ValueError(
                f"{files[0]} has {len(source_lines)} lines but {files[1]} has {len(target_lines)}: "
                "parallel files must have one line per sentence pair"
            )
        pairs = ((_decode(s), _decode(t)) for s, t in zip(source_lines, target_lines, strict=True))
        return _keep(pairs, report), report
    if len(files) != 1:
        raise ValueError(f"give two parallel files or one .tsv/.jsonl file, got {len(files)}: {paths}")
    path = files[0]
    suffixes = "".join(path.suffixes)
    lines = [_decode(raw) for raw in _read_lines(path)]
    if ".tsv" in suffixes:
        pairs = []
        for number, line in enumerate(lines, 1):
            cells = None if line is None else line.split("\t")
            if cells is not None and len(cells) != 2:
                raise ValueError(f"{path}:{number}: expected 2 tab-separated columns, found {len(cells)}")
            pairs.append((None, None) if cells is None else tuple(cells))
        return _keep(pairs, report), report
    if ".jsonl" in suffixes or ".json" in suffixes:
        return _keep(
            (_json_pair(line, source_lang, target_lang, path, n) for n, line in enumerate(lines, 1)), report
        ), report
    raise ValueError(f"{path}: a single data file must be .tsv or .jsonl (optionally .gz)")


def _json_pair(line: str | None, source_lang: str, target_lang: str, path: Path, number: int):
    if line is None:
        return None, None
    if not line.strip():
        return "", ""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from error
    record = record.get("translation", record)
    if source_lang not in record or target_lang not in record:
        raise ValueError(f"{path}:{number}: needs keys {source_lang!r} and {target_lang!r}, has {sorted(record)}")
    return record[source_lang], record[target_lang]


def _hub_dataset(args: DataArguments) -> datasets.DatasetDict:
    try:
        raw = datasets.load_dataset(args.dataset, args.dataset_config)
    except (ConnectionError, OSError) as error:
        raise RuntimeError(
            f"could not load Hub dataset {args.dataset!r} ({args.dataset_config}): {error}. Offline, use the bundled "
            "data (--dataset multi30k) or local files (--dataset files --train_files SRC TGT)"
        ) from error
    splits = {}
    for split, data in raw.items():
        pairs = ((row[args.source_lang], row[args.target_lang]) for row in data["translation"])
        report = ReadReport()
        splits[split] = datasets.Dataset.from_dict(_keep(pairs, report))
        report.log(split, f"{args.dataset} ({args.dataset_config})")
    return datasets.DatasetDict(splits)


def load_parallel_data(args: DataArguments) -> datasets.DatasetDict:
    """train / validation / test splits with ``source`` and ``target`` text columns."""
    if args.dataset == "multi30k":
        files = {
            split: [str(BUNDLED_DIR / f"{stem}.{lang}.gz") for lang in (args.source_lang, args.target_lang)]
            for split, stem in BUNDLED_SPLITS.items()
        }
    elif args.dataset == "files":
        if not args.train_files:
            raise ValueError("--dataset files needs --train_files (and --validation_files, --test_files)")
        files = {"train": args.train_files, "validation": args.validation_files, "test": args.test_files}
    else:
        return _hub_dataset(args)
    splits = {}
    for split, paths in files.items():
        if paths:
            columns, report = read_parallel_files(paths, args.source_lang, args.target_lang)
            report.log(split, " and ".join(paths))
            splits[split] = datasets.Dataset.from_dict(columns)
    return datasets.DatasetDict(splits)


def _fingerprint(*parts: object, texts: datasets.Dataset) -> str:
    """Content hash of the settings and every text pair: the cache key of the tokenized split."""
    digest = hashlib.sha256(repr(parts).encode())
    for row in texts.iter(batch_size=10_000):
        digest.update("\x00".join(row["source"] + row["target"]).encode())
    return digest.hexdigest()[:16]


def clip(ids: list[int], limit: int) -> list[int]:
    """Truncate to ``limit`` tokens, keeping the final </s>."""
    return ids if len(ids) <= limit else ids[: limit - 1] + ids[-1:]


def tokenize_splits(
    raw: datasets.DatasetDict, tokenizer: PreTrainedTokenizerBase, args: DataArguments
) -> datasets.DatasetDict:
    """Tokenize with ``datasets.map`` (batched, cached by content) into ``input_ids`` and ``labels``.

    Sentences longer than the limits are truncated (keeping the final </s>) and counted.
    """
    cache = Path(args.cache_dir) if args.cache_dir else None
    tokenizer_state = tokenizer.backend_tokenizer.to_str()

    def encode(batch: dict) -> dict:
        sources = tokenizer(batch["source"])["input_ids"]
        targets = tokenizer(text_target=batch["target"])["input_ids"]
        return {
            "input_ids": [clip(ids, args.max_source_length) for ids in sources],
            "labels": [clip(ids, args.max_target_length) for ids in targets],
            "truncated": [
                len(s) > args.max_source_length or len(t) > args.max_target_length
                for s, t in zip(sources, targets, strict=True)
            ],
        }

    tokenized = {}
    for split, data in raw.items():
        key = _fingerprint(tokenizer_state, args.max_source_length, args.max_target_length, texts=data)
        cache_file = str(cache / f"{split}-{key}.arrow") if cache else None
        if cache:
            cache.mkdir(parents=True, exist_ok=True)
        tokenized[split] = data.map(encode, batched=True, cache_file_name=cache_file, desc=f"tokenize {split}")
        logger.info(
            "%s: %d pairs tokenized, %d truncated to the length limits",
            split,
            len(data),
            sum(tokenized[split]["truncated"]),
        )
    return datasets.DatasetDict(tokenized)
