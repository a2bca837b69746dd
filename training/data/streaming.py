"""``--streaming``: train on a corpus as it is read, for corpora too large to copy into an Arrow cache (or to wait
for): training starts after the first window of pairs is tokenized, whatever the corpus size.

Pairs come from a ``datasets.IterableDataset`` (the same readers and drop rules as the Arrow path, or a Hub dataset
streamed), each rank keeping its own part (``split_dataset_by_node``). They are batched by token count as fairseq
and tensor2tensor bucket: a window of ``--streaming_window`` pairs (100,000: about a second of reading, five of
tokenizing on one core) is tokenized, sorted by length (ties in a seeded random
order), cut into batches of at most ``max_tokens_per_batch`` padded tokens per side, and the batches of the window
are yielded in a seeded random order. The stream has no end: after the last pair it starts the next pass (epoch), so
every rank has a batch for every step and none is left waiting at an epoch's end; ``--max_steps`` sets the length.

Resuming: the stream records where each window began (the source's ``state_dict``); a checkpoint stores, for each
rank, the window of the next batch and how many of its batches were used, and a resumed run reads on from there,
tokenizing nothing it skips. The batches are then exactly those an uninterrupted run would have had.
"""

import itertools
import json
import logging
from collections import Counter, deque
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
from datasets.distributed import split_dataset_by_node

from vanilla_tools.batch_shapes import UNPADDED, BatchShapes
from vanilla_tools.cli import UsageError

from .batching import TrainingSet, length_order, make_batches
from .corpus import FEATURES, Corpus, PairTokenizer, _row, data_files, file_stamp, parallel_rows, spans

logger = logging.getLogger(__name__)
STATE_FILE = "stream_state_rank{rank}.json"
# Windows whose start is remembered: the DataLoader prefetches, so the window of the batch being trained on may be
# a few behind the one being read; a checkpoint needs the start of that one.
REMEMBERED_WINDOWS = 4


@dataclass(frozen=True)
class Stream:
    """--streaming's training pairs (an IterableDataset of {source, target, status} rows) and what identifies them
    without reading them (``key``: the files' paths, sizes and modification times, or the Hub dataset's name and
    config), which keys the tokenizer learned from them; decided together, where the stream's source is."""

    pairs: datasets.IterableDataset
    key: tuple


def streaming_pairs(
    dataset: str, dataset_config: str | None, corpora: tuple[Corpus, ...], source_lang: str, target_lang: str
) -> Stream:
    """The training pairs of the run's ``corpora`` (``ResolvedRun.corpora``: one plain corpus, as
    ``build.check_streaming`` asks) with --dataset files, else of the Hub ``dataset`` (``dataset_config``) streamed;
    given these values, not the DataArguments, so that the run's corpora are decided once, in its resolution."""
    if dataset == "multi30k":
        raise UsageError("--streaming is for corpora too large to cache; the bundled Multi30k trains without it")
    if dataset == "files":
        train = [path for corpus in corpora for path in corpus.files]
        stamps = tuple(file_stamp(p) for p in train)
        pairs = datasets.IterableDataset.from_generator(
            parallel_rows,
            features=FEATURES,
            gen_kwargs={
                "paths": tuple(train),
                "spans": spans(data_files(train), 1),
                "source_lang": source_lang,
                "target_lang": target_lang,
                "stamps": stamps,
            },
        )
        return Stream(pairs, ("files", "train", stamps))
    stream = datasets.load_dataset(dataset, dataset_config or None, split="train", streaming=True)

    def rows(batch: dict) -> dict:
        pairs = [_row(pair[source_lang], pair[target_lang]) for pair in batch["translation"]]
        return {name: [pair[name] for pair in pairs] for name in FEATURES}

    pairs = stream.map(rows, batched=True, remove_columns=["translation"], features=FEATURES)
    return Stream(pairs, ("hub", dataset, dataset_config, "train"))


@dataclass
class WindowStart:
    """Where a window began: the pass, the window's number in it, the source's state, and the stream's running count
    of batches before it."""

    epoch: int
    window: int
    source_state: dict
    batches_before: int


class StreamingTokenBatches(torch.utils.data.IterableDataset, TrainingSet):
    """Endless token batches (lists of {input_ids, labels}) of this rank's pairs; see the module docstring."""

    def __init__(
        self,
        source: datasets.IterableDataset,
        encode: PairTokenizer,
        *,
        window: int,
        max_tokens: int,
        shapes: BatchShapes = UNPADDED,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
    ):
        """``source``: the pairs, of which this ``rank`` of ``world_size`` reads its share, tokenized by ``encode``
        (with the run's tokenizer and the tokens kept per sentence, as the Arrow tables are), ``window`` at a time
        (--streaming_window: the pairs tokenized and sorted together), into batches of ``max_tokens`` a side (the
        run's micro-batch) in the run's ``shapes``, in an order drawn from ``seed``."""
        self.source = split_dataset_by_node(source, rank=rank, world_size=world_size)
        self.encode = encode
        self.max_tokens, self.window = max_tokens, window
        self.seed, self.rank, self.shapes = seed, rank, shapes
        self.resume_from: dict | None = None  # set by resume(): where the next batch is
        self.starts: deque[WindowStart] = deque(maxlen=REMEMBERED_WINDOWS)
        self.dropped = Counter()

    def batches_of(self, rows: list[dict], epoch: int, window: int) -> list[list[dict]]:
        """One window's pairs, tokenized and cut into token batches in a seeded random order."""
        encoded = self.encode({"source": [r["source"] for r in rows], "target": [r["target"] for r in rows]})
        # planned on the lengths the collator pads to (BatchShapes)
        source, target = (self.shapes.padded_lengths(encoded[key]) for key in ("source_length", "target_length"))
        generator = np.random.default_rng([self.seed, self.rank, epoch, window])
        order = length_order(source, target, generator.permutation(len(rows)))
        batches = make_batches(
            source, target, self.max_tokens, order, multiple=self.shapes.required_batch_size_multiple
        )
        return [
            [{"input_ids": encoded["input_ids"][i], "labels": encoded["labels"][i]} for i in batches[b]]
            for b in generator.permutation(len(batches))
        ]

    def __iter__(self):
        epoch, window, skip, count = 0, 0, 0, 0
        if self.resume_from:
            epoch, window, skip = self.resume_from["epoch"], self.resume_from["window"], self.resume_from["skip"]
            self.source.load_state_dict(self.resume_from["source_state"])
            count = self.resume_from["batches_before"]
        while True:
            self.source.set_epoch(epoch)
            rows = iter(self.source)
            while True:
                state = self.source.state_dict()
                chunk = [r for r in itertools.islice(rows, self.window)]
                if not chunk:
                    break
                kept = [r for r in chunk if not r["status"]]
                self.dropped.update(r["status"] for r in chunk if r["status"])
                self.starts.append(WindowStart(epoch, window, state, count))
                batches = self.batches_of(kept, epoch, window) if kept else []
                yield from batches[skip:]
                count += len(batches)
                skip, window = 0, window + 1
            if count == 0:
                raise UsageError("--streaming: no usable sentence pair in the training data")
            logger.info(
                "rank %d: pass %d over the training data done; dropped: %s",
                self.rank,
                epoch,
                dict(self.dropped) or "none",
            )
            epoch, window = epoch + 1, 0

    def position(self, batches_used: int) -> dict:
        """Where the batch after the first ``batches_used`` is: the window it belongs to and how many of that
        window's batches come before it (what ``resume`` takes)."""
        for start in reversed(self.starts):
            if start.batches_before <= batches_used:
                return {**asdict(start), "skip": batches_used - start.batches_before}
        raise RuntimeError(f"batch {batches_used} is older than the windows the stream remembers")

    def dataloader(self, collate_fn, pin_memory: bool) -> torch.utils.data.DataLoader:
        # The stream yields whole token batches of this rank's own pairs; accelerate would shard or dispatch them
        # again, so Trainer's DataLoader is not used.
        return torch.utils.data.DataLoader(self, batch_size=None, collate_fn=collate_fn, pin_memory=pin_memory)

    def save(self, folder: Path, batches_used: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)  # a rank of another machine may not have the folder yet
        (folder / STATE_FILE.format(rank=self.rank)).write_text(json.dumps(self.position(batches_used)))

    def resume(self, folder: Path) -> None:
        path = folder / STATE_FILE.format(rank=self.rank)
        if not path.is_file():
            raise UsageError(f"cannot resume the stream from {folder}: {path.name} is missing")
        self.resume_from = json.loads(path.read_text())
