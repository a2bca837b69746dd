"""Parallel data: the bundled Multi30k (default), local files (two plain-text files, TSV or JSONL), or a Hub dataset.

Every source becomes a ``datasets.DatasetDict`` of on-disk, memory-mapped Arrow tables with ``source`` and ``target``
columns (train, validation, test), so the cost is linear in the corpus and memory stays bounded whatever its size:

- local files are read line by line by a generator whose rows a datasets builder (``ParallelText``) writes to Arrow
  in its cache, keyed by the files' paths, sizes and modification times (a second run reads the cache);
- a bad line never shifts the alignment: a pair is kept or dropped as a whole, and each dropped pair is counted by
  reason (invalid UTF-8, empty) from a ``status`` column, then filtered out;
- tokenization is ``datasets.map(batched=True, num_proc=...)``, cached by datasets' own fingerprints; it adds
  ``source_length`` and ``target_length`` columns, which token batching reads as numpy arrays.
"""

import argparse
import gzip
import itertools
import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets.builder import Key
from datasets.fingerprint import Hasher
from datasets.packaged_modules.generator.generator import GeneratorConfig
from transformers import PreTrainedTokenizerBase

from vanilla_tools.cli import UsageError, whole_gzip
from vanilla_tools.corpora import BUNDLED_SPLITS, bundled_files
from vanilla_tools.line_counts import check_counts, zip_lines
from vanilla_tools.text_form import TextForm

from .moses import TextFormMap

logger = logging.getLogger(__name__)

BYTES_PER_LINE = 100  # a sentence pair's line, roughly: how many lines a file holds, without counting them
PARALLEL_MIN_ROWS = 50_000  # below this, starting worker processes costs more than they save
INVALID, EMPTY = "invalid UTF-8", "empty"  # why a pair is dropped ("" = kept)
FEATURES = datasets.Features(
    {"source": datasets.Value("string"), "target": datasets.Value("string"), "status": datasets.Value("string")}
)


class EachCorpus(argparse.Action):
    """--train_files given once per corpus: a list of groups (argparse's "append"), of which the command line's
    replace a preset's (argparse would append them to it)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, [*([] if given is self.default else given), list(values)])


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
    train_files: list[str] | None = field(  # parsed: one list per corpus (action "append")
        default=None,
        metadata={
            "help": "SRC TGT plain-text files, or one .tsv / .jsonl file (with --dataset files); given once per "
            "corpus, each optionally followed by tag=TOKEN (prepended to its sources) and weight=W (its lines "
            "W times over)",
            "action": EachCorpus,
        },
    )
    validation_files: list[str] | None = field(default=None, metadata={"help": "as --train_files, for validation"})
    test_files: list[str] | None = field(default=None, metadata={"help": "as --train_files, for the final test"})
    vocab_size: int = field(default=8000, metadata={"help": "size of the shared BPE vocabulary (§5.1)"})
    tokenizer: str | None = field(
        default=None, metadata={"help": "use this tokenizer (a directory or tokenizer.json) instead of learning one"}
    )
    tokenizer_sample: int = field(
        default=2_000_000,
        metadata={
            "help": "sentences (source and target) the BPE vocabulary is learned from, a seeded sample of the "
            "training pairs; all of them if the corpus is smaller"
        },
    )
    bpe_dropout: float = field(
        default=0.0,
        metadata={"help": "BPE-dropout: re-segment training pairs each epoch, skipping merges with this probability"},
    )
    max_source_length: int = field(default=128, metadata={"help": "source tokens kept per sentence (truncated)"})
    max_target_length: int = field(default=128, metadata={"help": "target tokens kept per sentence (truncated)"})
    max_tokens_per_batch: int = field(
        default=4096,
        metadata={
            "help": "padded tokens per side per device batch (§5.1: ~25,000 per step); 0: as many as the device's "
            "memory holds, up to --tokens_per_step / processes (training/step/micro_batch.py)"
        },
    )
    tokens_per_step: int | None = field(
        default=None,
        metadata={
            "help": "padded tokens per side per optimizer step across all devices (§5.1: 25,000); sets "
            "--gradient_accumulation_steps from --max_tokens_per_batch and the number of devices"
        },
    )
    required_batch_size_multiple: int | None = field(
        default=None,
        metadata={
            "help": "batch sizes a multiple of this per device, as fairseq's --required-batch-size-multiple "
            "(default: 8 on CUDA, else 1; vanilla_tools/batch_shapes.py)"
        },
    )
    required_seq_len_multiple: int | None = field(
        default=None,
        metadata={
            "help": "each side of a batch padded to a multiple of this, as fairseq's "
            "--required-seq-len-multiple (default: 8 on CUDA, else 1)"
        },
    )
    num_batch_buckets: int | None = field(
        default=None,
        metadata={
            "help": "each side of a batch padded to the next of this many geometric length buckets, so batch "
            "shapes are few (fairseq's --num-batch-buckets; default: 8 on CUDA, else 0: none)"
        },
    )
    max_eval_samples: int | None = field(
        default=None,
        metadata={
            "help": "validation pairs evaluated during training, spread over all lengths (the final evaluation: all)"
        },
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "train while reading the training pairs (no Arrow cache; needs --max_steps): for corpora "
            "too large to copy, or to start at once"
        },
    )
    streaming_window: int = field(
        default=100_000, metadata={"help": "--streaming: pairs tokenized and sorted by length together"}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "processes that tokenize (datasets.map num_proc); default: one per core"}
    )
    cache_dir: str | None = field(
        default=None, metadata={"help": "where datasets caches the Arrow tables and learned tokenizers"}
    )
    moses_lowercase_tokenize: bool = field(
        default=False,
        metadata={
            "help": "lowercase every split, then Moses' normalize-punctuation and tokenizer for each side's language "
            "(sacremoses), before the BPE, as the Multi30k literature's text (training/data/moses.py): the model then "
            "reads and writes lowercased, tokenized text, and is scored on it"
        },
    )


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
            raise UsageError(f"{split}: no usable sentence pair in {source} (dropped: {reasons})")


def _decode(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return None


def _open_bytes(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _is_empty(path: Path) -> bool:
    with _open_bytes(path) as f, whole_gzip(path):
        return not f.read(1)


def _row(source: str | None, target: str | None) -> dict[str, str]:
    """A pair, stripped, with the reason it is dropped ("" if kept)."""
    if source is None or target is None:
        return {"source": "", "target": "", "status": INVALID}
    source, target = source.strip(), target.strip()
    return {"source": source, "target": target, "status": "" if source and target else EMPTY}


def line_starts(path: Path, every: int) -> tuple[list[int], int]:
    """Byte offsets of lines 0, every, 2 * every, ... of a plain file, and its number of lines (a last line without
    a newline counts), in one pass over 16 MiB blocks."""
    starts, line, position, last = [0], 0, 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            newlines = block.count(b"\n")
            if (line + newlines) // every == line // every:
                line += newlines
            else:  # a span starts inside this block: find where
                index = -1
                for _ in range(newlines):
                    index = block.find(b"\n", index + 1)
                    line += 1
                    if line % every == 0:
                        starts.append(position + index + 1)
            position, last = position + len(block), block[-1:]
    return starts, line + (last != b"\n")


PARALLEL = "parallel files must have one line per sentence pair"


def spans(files: list[Path], pieces: int) -> list[tuple[int, int | None, tuple[int, ...]]]:
    """The input cut into ``pieces`` runs of lines, (first line, line count or None for all, byte offset in each
    file), to be read by as many processes. Parallel plain files are counted here, and must have equal line counts.
    A gzip file cannot be entered midway: it is one run."""
    if pieces == 1 or any(f.suffix == ".gz" for f in files):
        return [(0, None, (0,) * len(files))]
    counts = [line_starts(f, 1 << 62)[1] for f in files]
    if len(files) == 2:
        check_counts((str(files[0]), str(files[1])), (counts[0], counts[1]), PARALLEL)
    every = max(1, -(-counts[0] // pieces))
    starts = [line_starts(f, every)[0] for f in files]
    return [
        (i * every, min(every, counts[0] - i * every), tuple(s[i] for s in starts))
        for i in range(len(starts[0]))
        if i * every < counts[0]
    ]


def _lines(path: Path, offset: int, count: int | None) -> Iterator[bytes]:
    with _open_bytes(path) as f, whole_gzip(path):
        if offset:
            f.seek(offset)
        yield from itertools.islice(f, count)


def _two_files(source_path: Path, target_path: Path, span: tuple) -> Iterator[dict]:
    _, count, (source_offset, target_offset) = span
    sources, targets = _lines(source_path, source_offset, count), _lines(target_path, target_offset, count)
    # a gzip pair is not counted beforehand: counted as it is read
    for source, target in zip_lines(sources, targets, (str(source_path), str(target_path)), PARALLEL):
        yield _row(_decode(source), _decode(target))


def _tsv(path: Path, span: tuple) -> Iterator[dict]:
    first, count, (offset,) = span
    for number, raw in enumerate(_lines(path, offset, count), first + 1):
        line = _decode(raw)
        cells = None if line is None else line.split("\t")
        if cells is not None and len(cells) != 2:
            raise UsageError(f"{path}:{number}: expected 2 tab-separated columns, found {len(cells)}")
        yield _row(*(cells or (None, None)))


def _jsonl(path: Path, span: tuple, source_lang: str, target_lang: str) -> Iterator[dict]:
    first, count, (offset,) = span
    for number, raw in enumerate(_lines(path, offset, count), first + 1):
        line = _decode(raw)
        if line is None or not line.strip():
            yield _row(line, line)
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}:{number}: not valid JSON ({error.msg})") from error
        record = record.get("translation", record)
        if source_lang not in record or target_lang not in record:
            keys = f"{source_lang!r} and {target_lang!r}"
            raise UsageError(f"{path}:{number}: needs keys {keys}, has {sorted(record)}")
        yield _row(record[source_lang], record[target_lang])


def parallel_rows(
    paths: tuple[str, ...], spans: list[tuple], source_lang: str, target_lang: str, stamps: tuple = ()
) -> Iterator[dict]:
    """Every line (pair) of ``spans`` of two plain-text files (optionally .gz), one TSV (source<TAB>target) or one
    JSONL file (``{"<src>": ..., "<tgt>": ...}`` or ``{"translation": {...}}``), as {source, target, status}.
    (``stamps``, the files' sizes and modification times, only key the cache.)"""
    files = [Path(p) for p in paths]
    for span in spans:
        if len(files) == 2:
            yield from _two_files(*files, span)
        elif ".tsv" in "".join(files[0].suffixes):
            yield from _tsv(files[0], span)
        else:
            yield from _jsonl(files[0], span, source_lang, target_lang)


def file_stamp(path: str) -> tuple[str, int, int] | None:
    stat = Path(path).stat() if Path(path).is_file() else None
    return (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns) if stat else None


def data_files(paths: list[str]) -> list[Path]:
    """``paths`` as the parallel data ``parallel_rows`` reads (two plain files, or one .tsv or .jsonl file), or an
    error naming what is wrong with them."""
    files = [Path(p) for p in paths]
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"data file not found: {path}")
    if len(files) not in (1, 2):
        raise UsageError(f"give two parallel files or one .tsv/.jsonl file, got {len(files)}: {paths}")
    suffixes = "".join(files[0].suffixes)
    if len(files) == 1 and not (".tsv" in suffixes or ".json" in suffixes):
        raise UsageError(f"{files[0]}: a single data file must be .tsv or .jsonl (optionally .gz)")
    return files


class ParallelText(datasets.ArrowBasedBuilder):
    """datasets' ``Generator`` builder (a function's rows, cached under a hash of the function and its arguments,
    built by ``num_proc`` processes over its list argument) writing the rows as Arrow tables of ``ROWS_PER_TABLE``:
    ``Generator`` encodes and writes them one by one, ten times slower than reading them (30 s of a WMT14-size cold
    start)."""

    BUILDER_CONFIG_CLASS = GeneratorConfig
    ROWS_PER_TABLE = 10_000

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(features=self.config.features)

    def _split_generators(self, dl_manager) -> list[datasets.SplitGenerator]:
        return [datasets.SplitGenerator(name=datasets.Split.TRAIN, gen_kwargs=self.config.gen_kwargs)]

    def _generate_tables(self, spans: list, **kwargs) -> Iterator[tuple[Key, pa.Table]]:
        schema = self.config.features.arrow_schema
        for shard, span in enumerate(spans):
            rows, index = self.config.generator(spans=[span], **kwargs), 0
            while batch := list(itertools.islice(rows, self.ROWS_PER_TABLE)):
                yield (
                    Key(shard, index),
                    pa.table({name: [row[name] for row in batch] for name in schema.names}, schema=schema),
                )
                index += 1


def read_parallel_files(paths: list[str], args: DataArguments) -> tuple[datasets.Dataset, ReadReport]:
    """The kept pairs of ``paths`` as an Arrow dataset (datasets' cache), and what was dropped. Plain files are read
    by ``workers`` processes, each its own runs of lines; the rows keep the files' order."""
    files = data_files(paths)
    if all(_is_empty(path) for path in files):  # datasets cannot make a table of no rows
        return datasets.Dataset.from_dict({"source": [], "target": []}), ReadReport()
    runs = spans(files, workers(args, min(path.stat().st_size for path in files) // BYTES_PER_LINE) or 1)
    builder = ParallelText(
        cache_dir=args.cache_dir,
        dataset_name="parallel_text",
        hash=Hasher.hash(ParallelText._generate_tables),  # a change to the builder's code is a new cache
        features=FEATURES,
        generator=parallel_rows,
        # tuples: datasets splits list arguments (the runs) over the processes, and would split these too
        gen_kwargs={
            "paths": tuple(paths),
            "spans": runs,
            "source_lang": args.source_lang,
            "target_lang": args.target_lang,
            "stamps": tuple(file_stamp(p) for p in paths),
        },
    )
    try:
        builder.download_and_prepare(num_proc=len(runs) if len(runs) > 1 else None)
    except datasets.exceptions.DatasetGenerationError as error:  # our ValueError, wrapped by datasets
        if isinstance(error.__cause__, (ValueError, OSError)):
            raise error.__cause__ from None
        raise
    return kept_pairs(builder.as_dataset(split=datasets.Split.TRAIN))


def kept_pairs(rows: datasets.Dataset) -> tuple[datasets.Dataset, ReadReport]:
    """``rows`` without its dropped pairs (and its ``status`` column), and their counts by reason."""
    statuses = pc.value_counts(rows.data.column("status")).to_pylist()
    counts = Counter({entry["values"]: entry["counts"] for entry in statuses})
    report = ReadReport(kept=counts.pop("", 0), dropped=counts)
    if report.dropped:
        rows = rows.filter(lambda status: [s == "" for s in status], input_columns="status", batched=True)
    return rows.remove_columns("status"), report


@contextmanager
def reaching_hub(args: DataArguments) -> Iterator[None]:
    """Around a call that reads the Hub dataset ``args.dataset``: its failure to reach it, named in one line."""
    try:
        yield
    except (ConnectionError, OSError) as error:
        raise RuntimeError(
            f"could not load Hub dataset {args.dataset!r} ({args.dataset_config}): {error}. Offline, use the bundled "
            "data (--dataset multi30k) or local files (--dataset files --train_files SRC TGT)"
        ) from error


def _hub_dataset(args: DataArguments) -> datasets.DatasetDict:
    with reaching_hub(args):
        raw = datasets.load_dataset(args.dataset, args.dataset_config or None, cache_dir=args.cache_dir)

    def columns(batch: dict) -> dict:
        rows = [_row(pair[args.source_lang], pair[args.target_lang]) for pair in batch["translation"]]
        return {name: [row[name] for row in rows] for name in FEATURES}

    splits = {}
    for split, data in raw.items():
        rows = data.map(
            columns,
            batched=True,
            remove_columns=data.column_names,
            features=FEATURES,
            num_proc=workers(args, len(data)),
            desc=f"read {split}",
        )
        splits[split], report = kept_pairs(rows)
        report.log(split, f"{args.dataset} ({args.dataset_config})")
    return datasets.DatasetDict(splits)


@dataclass(frozen=True)
class Corpus:
    """One training corpus of --train_files: its ``files``, the ``tag`` token prepended to its sources (Caswell et
    al. 2019's tagged back-translation) and its upsampling ``weight``."""

    files: tuple[str, ...]
    tag: str | None = None
    weight: float = 1.0

    @classmethod
    def parse(cls, items: list[str]) -> "Corpus":
        """One --train_files group: its files, then optionally ``tag=TOKEN`` and ``weight=W``; refuses a tag that
        would not be one token and a negative or unreadable weight, in one line."""
        options = dict(item.split("=", 1) for item in items if item.startswith(("tag=", "weight=")))
        files = tuple(item for item in items if not item.startswith(("tag=", "weight=")))
        tag = options.get("tag")
        if tag is not None and (not tag or any(c.isspace() for c in tag)):
            raise UsageError(f"--train_files tag={tag!r}: a tag must be one token, without whitespace")
        try:
            weight = float(options.get("weight", 1))
        except ValueError:
            raise UsageError(f"--train_files weight={options['weight']}: not a number") from None
        if not weight >= 0 or weight == float("inf"):
            raise UsageError(f"--train_files weight={options['weight']}: must be a finite number >= 0")
        return cls(files, tag, weight)

    @property
    def plain(self) -> bool:
        """Read as it is: no tag, weight 1."""
        return self.tag is None and self.weight == 1

    def record(self, lines: int) -> dict:
        """The run record's entry for this corpus, with its ``lines`` (pairs kept)."""
        return {"files": list(self.files), "lines": lines, "tag": self.tag, "weight": self.weight}


def given_corpora(args: DataArguments) -> list[Corpus]:
    """The corpora of --train_files: one per time it is given (a flat list, as Python callers pass it, is one)."""
    groups = args.train_files or []
    if groups and isinstance(groups[0], str):
        groups = [groups]
    return [Corpus.parse(list(group)) for group in groups]


def corpus_tags(corpora: Iterable[Corpus]) -> tuple[str, ...]:
    """The tags of the training ``corpora`` (a run's: ``ResolvedRun.corpora``), each once, in order: the tokenizer
    keeps each whole."""
    return tuple(dict.fromkeys(c.tag for c in corpora if c.tag is not None))


def weighted_rows(rows: int, weight: float) -> np.ndarray:
    """The rows a corpus of ``rows`` lines contributes at ``weight``: every row ``int(weight)`` times, then
    ``round(frac * rows)`` rows spread evenly over it (row ``i * rows // k`` for i < k: deterministic, no seed)."""
    whole, extra = int(weight), round((weight - int(weight)) * rows)
    return np.concatenate([np.tile(np.arange(rows), whole), np.arange(extra) * rows // max(extra, 1)])


def _tagged(batch: dict, tag: str) -> dict:
    return {"source": [f"{tag} {source}" for source in batch["source"]]}


def read_corpora(corpora: Iterable[Corpus], args: DataArguments) -> list[tuple[Corpus, datasets.Dataset]]:
    """Each training corpus and its kept pairs (read, logged and cached as ``read_parallel_files``)."""
    read = []
    for corpus in corpora:
        pairs, report = read_parallel_files(list(corpus.files), args)
        report.log("train", " and ".join(corpus.files))
        read.append((corpus, pairs))
    return read


def corpora_record(corpora: Iterable[Corpus], args: DataArguments) -> list[dict]:
    """The run record's training ``corpora``: each one's files, lines (pairs kept), tag and weight. The pairs are
    counted from datasets' cache, filled when the run read them."""
    return [corpus.record(len(pairs)) for corpus, pairs in read_corpora(corpora, args)]


def training_pairs(args: DataArguments, form: TextForm) -> datasets.Dataset:
    """The training split of several corpora: each one's pairs in the text ``form``, then its tag before each source
    (so --moses_lowercase_tokenize leaves the tag whole), ``weighted_rows`` of them, concatenated in the order given."""
    parts = []
    for corpus, pairs in read_corpora(given_corpora(args), args):
        pairs = prepared_split(pairs, form, args, "train")
        if corpus.tag is not None:
            pairs = pairs.map(_tagged, batched=True, fn_kwargs={"tag": corpus.tag}, desc=f"tag {corpus.tag}")
        parts.append(pairs if corpus.weight == 1 else pairs.select(weighted_rows(len(pairs), corpus.weight)))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def split_files(args: DataArguments) -> dict[str, list[str] | None] | None:
    """Where each split's pairs come from, for the Arrow reader (``load_parallel_data``): the files of each split (the
    bundled Multi30k's, or --train_files and the others with --dataset files), or None for a Hub dataset
    (``args.dataset``, ``args.dataset_config``). (--streaming reads the run's resolved corpora instead:
    ``streaming.streaming_pairs``.)"""
    if args.dataset == "multi30k":
        return {split: bundled_files(split, args.source_lang, args.target_lang) for split in BUNDLED_SPLITS}
    if args.dataset == "files":
        if not args.train_files:
            raise UsageError("--dataset files needs --train_files (and --validation_files, --test_files)")
        train = [path for corpus in given_corpora(args) for path in corpus.files]
        return {"train": train, "validation": args.validation_files, "test": args.test_files}
    return None


def has_validation(args: DataArguments) -> bool:
    """Whether the data has a validation split (what ``load_parallel_data`` will read), known before any of it is
    read: the bundled Multi30k's, --validation_files with --dataset files, or a Hub dataset's own (from its builder's
    metadata: its split infos, else the data files of each split)."""
    files = split_files(args)
    if files is not None:
        return bool(files.get("validation"))
    with reaching_hub(args):
        builder = datasets.load_dataset_builder(args.dataset, args.dataset_config or None, cache_dir=args.cache_dir)
    return "validation" in {str(split) for split in builder.info.splits or builder.config.data_files or ()}


def known_before_reading(args: DataArguments) -> tuple[tuple[Corpus, ...], bool]:
    """What a run knows of its data before it reads any (``build.resolve_run`` asks once): its training corpora
    (``given_corpora``) and whether it has a validation split (``has_validation``)."""
    return tuple(given_corpora(args)), has_validation(args)


def load_parallel_data(args: DataArguments, form: TextForm, include_train: bool = True) -> datasets.DatasetDict:
    """train / validation / test splits with ``source`` and ``target`` text columns (no train with
    ``include_train=False``: --streaming reads it as it trains), in the text ``form``: the run's
    (``ResolvedRun.text_form``), or for a tool reading a run's data without one (experiments/, benchmarks/), the one
    its arguments give (``text_form``). It is passed, not derived here, so that a run decides it once."""
    if not form.raw and args.streaming:
        raise UsageError(
            "--moses_lowercase_tokenize preprocesses the Arrow tables, not --streaming's pairs: preprocess the files "
            "beforehand, or train without --streaming"
        )
    files = split_files(args)
    if files is None:
        raw = _hub_dataset(args)
        return raw if form.raw else map_splits(raw, TextFormMap(form), args, "lowercase and tokenize")
    splits = {}
    if include_train and args.dataset == "files":
        splits["train"] = training_pairs(args, form)
    for split, paths in files.items():
        if paths and split not in splits and (include_train or split != "train"):
            pairs, report = read_parallel_files(paths, args)
            report.log(split, " and ".join(paths))
            splits[split] = prepared_split(pairs, form, args, split)
    return datasets.DatasetDict(splits)


def text_form(args: DataArguments) -> TextForm:
    """The text the model reads and writes, as the arguments ask: the rule by which ``build.resolve_run`` decides a
    run's once (``ResolvedRun.text_form``: the data is prepared so, and the model's config says so,
    ``config.text_form``, which every entry point applies), and by which a tool without a run reads its data."""
    if args.moses_lowercase_tokenize:
        return TextForm.moses_lowercase(args.source_lang, args.target_lang)
    return TextForm()


def prepared_split(pairs: datasets.Dataset, form: TextForm, args: DataArguments, split: str) -> datasets.Dataset:
    """One split's pairs in the text ``form`` (as they are for raw text)."""
    if form.raw:
        return pairs
    return map_splits(datasets.DatasetDict({split: pairs}), TextFormMap(form), args, "lowercase and tokenize")[split]


def map_splits(raw: datasets.DatasetDict, function, args: DataArguments, what: str) -> datasets.DatasetDict:
    """Every split of ``raw`` through ``function`` with ``datasets.map`` (batched, in ``workers`` processes, cached
    under ``function.fingerprint(split)``: the data's fingerprint and the function's state)."""
    return datasets.DatasetDict(
        {
            split: data.map(
                function,
                batched=True,
                batch_size=2000,
                num_proc=workers(args, len(data)),
                new_fingerprint=function.fingerprint(data),
                desc=f"{what} {split}",
            )
            for split, data in raw.items()
        }
    )


def workers(args: DataArguments, rows: int) -> int | None:
    """datasets.map's num_proc: one process per core, none for small splits (starting processes costs more)."""
    wanted = args.preprocessing_num_workers or os.cpu_count() or 1
    return wanted if wanted > 1 and rows >= PARALLEL_MIN_ROWS else None


def clip(ids: list[int], limit: int) -> list[int]:
    """Truncate to ``limit`` tokens, keeping the final </s>."""
    return ids if len(ids) <= limit else ids[: limit - 1] + ids[-1:]


class PairTokenizer:
    """datasets.map's function: ``input_ids`` and ``labels`` (clipped, keeping </s>), their lengths, and whether the
    pair was truncated."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_source_length: int, max_target_length: int):
        self.tokenizer, self.limits = tokenizer, (max_source_length, max_target_length)

    def fingerprint(self, data: datasets.Dataset) -> str:
        """The cache key of ``data`` tokenized: the data's fingerprint, the tokenizer's serialized state, the limits
        and this code. (datasets would hash the tokenizer object, and a tokenizer just learned hashes differently
        from the same one loaded from disk, so the second run would tokenize everything again.)"""
        state = self.tokenizer.backend_tokenizer.to_str()
        return Hasher.hash((data._fingerprint, state, self.limits, Hasher.hash(PairTokenizer.__call__)))

    def __call__(self, batch: dict) -> dict:
        encode = self.tokenizer.backend_tokenizer.encode_batch_fast
        sources, targets = ([e.ids for e in encode(batch[side])] for side in ("source", "target"))
        source_limit, target_limit = self.limits
        inputs, labels = [clip(ids, source_limit) for ids in sources], [clip(ids, target_limit) for ids in targets]
        cut = [len(s) > source_limit or len(t) > target_limit for s, t in zip(sources, targets, strict=True)]
        return {
            "input_ids": inputs,
            "labels": labels,
            "source_length": [len(ids) for ids in inputs],
            "target_length": [len(ids) for ids in labels],
            "truncated": cut,
        }


def tokenize_splits(
    raw: datasets.DatasetDict, tokenizer: PreTrainedTokenizerBase, args: DataArguments
) -> datasets.DatasetDict:
    """Tokenize every split with ``datasets.map`` (batched, in ``workers`` processes, cached by datasets'
    fingerprint of the data and of the tokenizer). Sentences longer than the limits are truncated (keeping the final
    </s>) and counted."""
    tokenized = map_splits(
        raw, PairTokenizer(tokenizer, args.max_source_length, args.max_target_length), args, "tokenize"
    )
    for split, data in tokenized.items():
        truncated = pc.sum(data.data.column("truncated")).as_py() or 0
        logger.info("%s: %d pairs tokenized, %d truncated to the length limits", split, len(data), truncated)
    return tokenized


def lengths(dataset: datasets.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The ``source_length`` and ``target_length`` columns of a tokenized split, as numpy arrays (through Arrow:
    datasets' numpy format builds the column row by row, minutes for millions of pairs)."""
    table = dataset.select_columns(["source_length", "target_length"]).with_format("arrow")[:]
    return table.column("source_length").to_numpy(), table.column("target_length").to_numpy()
