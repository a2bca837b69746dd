"""§5.1 batching: "sentence pairs were batched together by approximate sequence length. Each training batch
contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target tokens."

transformers batches by sentence count (``per_device_train_batch_size``, ``group_by_length``); the paper batches by
token count, which keeps every step's work equal and padding low. This sampler is written for that reason. It plans
from numpy arrays of lengths (millions of pairs in seconds) and holds an epoch's batches as views into one array of
pair indices (8 bytes a pair, where Python lists of ints take ~36).
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
from transformers.trainer_pt_utils import BatchRebalanceSampler

from vanilla_tools.batch_shapes import UNPADDED, BatchShapes
from vanilla_tools.cli import UsageError

from .corpus import DataArguments, lengths


def cut_points(longest: Sequence[int], max_tokens: int, min_size: int = 1, multiple: int = 1) -> list[int]:
    """The ends (exclusive) of greedy batches over pairs in the given order, ``longest`` being each pair's longer
    (padded) side: a batch's padded size ``len(batch) * max(longest in batch)`` stays within ``max_tokens``, with at
    least ``min_size`` pairs (one per data-parallel rank) even past the budget. A short tail joins the last batch
    rather than leave a rank without pairs. With ``multiple``, a batch that reaches the budget keeps the largest
    multiple of it and carries the rest into the next, as fairseq's ``batch_by_size`` does."""
    ends, start, batch_longest = [], 0, 0
    for i, length in enumerate(longest):
        grown = max(batch_longest, length)
        while (size := i - start) >= min_size and (size + 1) * grown > max_tokens:
            start += size - size % multiple if size >= multiple else size
            ends.append(start)
            grown = max(longest[start : i + 1])
        batch_longest = grown
    if ends and len(longest) - start < min_size:
        ends.pop()
    return ends + [len(longest)] if len(longest) else []


def length_order(
    source_lengths: np.ndarray, target_lengths: np.ndarray, tie_break: np.ndarray | None = None
) -> np.ndarray:
    """Pair indices sorted by (source length, target length, tie_break or index): one argsort of the three packed
    into an int64 (6x faster than np.lexsort for millions of pairs), lexsort where they do not fit."""
    n = len(source_lengths)
    tie_break = np.arange(n) if tie_break is None else tie_break
    width = int(target_lengths.max()) + 1
    if (int(source_lengths.max()) + 1) * width * n < 2**63:
        return np.argsort((source_lengths * width + target_lengths) * n + tie_break)
    return np.lexsort((tie_break, target_lengths, source_lengths))


def split_at(order: np.ndarray, ends: list[int]) -> list[np.ndarray]:
    """``order`` cut before each of ``ends`` but the last: the batches as views of one index array."""
    return np.split(order, ends[:-1])


def make_batches(
    source_lengths: Sequence[int],
    target_lengths: Sequence[int],
    max_tokens: int,
    order: Sequence[int],
    min_size: int = 1,
    multiple: int = 1,
) -> list[np.ndarray]:
    """Greedy batches (arrays of pair indices) over ``order`` (pair indices sorted by length) whose padded size
    stays within ``max_tokens`` on each side (see ``cut_points``; the lengths given are the padded ones)."""
    order = np.asarray(order, dtype=np.int64)
    longest = np.maximum(np.asarray(source_lengths)[order], np.asarray(target_lengths)[order])
    return split_at(order, cut_points(longest.tolist(), max_tokens, min_size, multiple))


def make_exact_batches(
    source_lengths: Sequence[int],
    target_lengths: Sequence[int],
    count: int,
    order: Sequence[int],
    min_size: int = 1,
) -> list[np.ndarray]:
    """Exactly ``count`` batches over ``order``, for epochs whose lengths change but whose step count Trainer fixed
    at the start (BPE-dropout): ``make_batches`` with the smallest token budget that needs at most ``count``
    batches, then the largest batches halved until there are ``count``."""
    longest = np.maximum(np.asarray(source_lengths), np.asarray(target_lengths))
    low = int(longest[order].max())  # no budget below the longest pair
    high = low * len(order)  # one batch of all always fits
    while low < high:
        budget = (low + high) // 2
        if len(make_batches(source_lengths, target_lengths, budget, order, min_size)) <= count:
            high = budget
        else:
            low = budget + 1
    batches = make_batches(source_lengths, target_lengths, low, order, min_size)
    while len(batches) < count:
        splittable = [at for at, b in enumerate(batches) if len(b) >= 2 * min_size]
        if not splittable:
            raise UsageError(f"{len(order)} pairs cannot fill {count} batches of at least {min_size}")
        at = max(splittable, key=lambda at: len(batches[at]) * int(longest[batches[at]].max()))  # the most padded
        half = len(batches[at]) // 2
        batches[at : at + 1] = [batches[at][:half], batches[at][half:]]
    return batches


def batch_shapes(args: DataArguments, device_type: str) -> BatchShapes:
    """The run's batch shapes: the flags given, the others by device (``BatchShapes.for_device``), the buckets
    reaching the longest sentence kept."""
    return BatchShapes.for_device(
        device_type,
        max(args.max_source_length, args.max_target_length),
        args.required_batch_size_multiple,
        args.required_seq_len_multiple,
        args.num_batch_buckets,
    )


class TokenBatchSampler(BatchRebalanceSampler):
    """Batches of about ``max_tokens_per_device * num_replicas`` tokens per side, built from length-sorted pairs.

    Every epoch: pairs of the same (source, target) length are shuffled among themselves, batches are formed
    greedily in length order, and the batch order is shuffled, all from ``seed + epoch`` (so a resumed run sees the
    same batches). The number of batches is the same every epoch, as Trainer's step counting needs.

    ``shapes`` bounds the batches' shapes (``BatchShapes``): the pairs are ordered, and the budget counted, on their
    padded lengths (ties, shuffled, are then all the pairs of a bucket), and batch sizes are multiples of its
    ``required_batch_size_multiple`` per rank. The collator pads each batch to those lengths (``PairBatches``).

    Data parallel: each global batch is dealt out pair by pair (``batch[rank::num_replicas]``), so all ranks
    together see exactly the batch a single process would, which makes 1- and N-process runs comparable.
    It derives from ``BatchRebalanceSampler`` only because Trainer hands such rank-aware samplers to the DataLoader
    as ``batch_sampler`` without sharding them again.
    """

    def __init__(
        self,
        source_lengths: Sequence[int],
        target_lengths: Sequence[int],
        max_tokens_per_device: int,
        num_replicas: int = 1,
        rank: int = 0,
        seed: int = 0,
        shuffle: bool = True,
        shapes: BatchShapes = UNPADDED,
    ):
        self.shapes = shapes
        self.set_lengths(source_lengths, target_lengths)
        longest = int(self.longest.max())
        if max_tokens_per_device < longest:
            raise UsageError(
                f"max_tokens_per_batch={max_tokens_per_device} is smaller than the longest sequence ({longest} tokens)"
            )
        if not 0 <= rank < num_replicas:
            raise UsageError(f"rank {rank} is outside [0, {num_replicas})")
        self.max_tokens = max_tokens_per_device * num_replicas
        self.num_replicas, self.rank, self.seed, self.shuffle = num_replicas, rank, seed, shuffle
        self.epoch = 0
        # Planned once: ties are shuffled every epoch, but the sequence of lengths, hence the cuts, stays the same.
        # a multiple per rank: the global batch is dealt out pair by pair
        multiple = shapes.required_batch_size_multiple
        self.ends = cut_points(
            self.longest[self.length_order()].tolist(),
            self.max_tokens,
            num_replicas,
            multiple * num_replicas if multiple > 1 else 1,
        )
        self.num_batches = len(self.ends)

    def set_lengths(self, source_lengths: Sequence[int], target_lengths: Sequence[int]) -> None:
        self.source_lengths = np.asarray(source_lengths, dtype=np.int64)
        self.target_lengths = np.asarray(target_lengths, dtype=np.int64)
        # what the batches are planned on: the lengths each side is padded to
        self.padded_source = self.shapes.padded_lengths(self.source_lengths)
        self.padded_target = self.shapes.padded_lengths(self.target_lengths)
        self.longest = np.maximum(self.padded_source, self.padded_target)
        self.batches: list[np.ndarray] | None = None  # this epoch's, once planned

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.batches = epoch, None

    def length_order(self, tie_break: np.ndarray | None = None) -> np.ndarray:
        return length_order(self.padded_source, self.padded_target, tie_break)

    def global_batches(self) -> list[np.ndarray]:
        """This epoch's batches (the same for every rank), planned once an epoch."""
        if self.batches is None:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            n = len(self.source_lengths)
            tie_break = torch.randperm(n, generator=generator).numpy() if self.shuffle else np.arange(n)
            batches = self.plan(self.length_order(tie_break))
            if self.shuffle:
                batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
            self.batches = batches
        return self.batches

    def plan(self, order: np.ndarray) -> list[np.ndarray]:
        """The batches over ``order``, pair indices sorted by length."""
        return split_at(order, self.ends)

    def __iter__(self):
        for batch in self.global_batches():
            yield batch[self.rank :: self.num_replicas].tolist()

    def __len__(self) -> int:
        return self.num_batches

    def batch_shapes(self) -> list[tuple[int, int, int]]:
        """The (pairs, source length, target length) of each of this epoch's batches, as the collator pads them."""
        return [
            (len(b), int(self.padded_source[b].max()), int(self.padded_target[b].max())) for b in self.global_batches()
        ]

    def padding(self) -> float:
        """Padding share of this epoch's batches as the collator pads them, over source and target tokens
        together."""
        batches = self.global_batches()
        order, sizes = np.concatenate(batches), np.array([len(b) for b in batches])
        starts = np.cumsum(sizes) - sizes
        padded = sum(
            int((np.maximum.reduceat(lengths[order], starts) * sizes).sum())
            for lengths in (self.padded_source, self.padded_target)
        )
        return 1.0 - int(self.source_lengths.sum() + self.target_lengths.sum()) / padded


def share_batches_by_name(workers: int) -> None:
    """Where worker processes read the batches (``workers`` > 0), torch's file-system sharing for what they hand over
    (process-wide, as torch sets it): the training process opens a batch's shared memory by its name, where the
    default file-descriptor sharing connects to the worker's resource sharer for it. A 25,000-token batch reached
    the training process in 0.64 ms, not 1.23 (issue 99: docs/performance.md). torch_shm_manager frees the memory
    of a run that was killed before it could."""
    if workers:
        torch.multiprocessing.set_sharing_strategy("file_system")


@dataclass(frozen=True)
class Placement:
    """Where this process stands in data-parallel training, and the seed its batches are planned from."""

    num_replicas: int = 1
    rank: int = 0
    seed: int = 0


class TrainingSet:
    """What the trainer asks of its training data; each kind (tokenized pairs in an Arrow table, ``BPEDropoutPairs``
    re-segmented every epoch, the ``--streaming`` stream) answers for itself:

    - ``dataset``: what Trainer holds as its ``train_dataset``;
    - ``batch_sampler``: the token batches of a map-style set (None: the set yields whole batches itself);
    - ``dataloader``: the DataLoader of a set that batches itself (None: Trainer builds one on ``batch_sampler``);
    - ``save`` / ``resume``: the set's position, kept in each rank's part of a checkpoint (nothing to keep for a set
      whose batches follow from the seed and the epoch)."""

    @property
    def dataset(self):
        return self

    def batch_sampler(
        self, max_tokens_per_device: int, placement: Placement, shapes: BatchShapes
    ) -> TokenBatchSampler | None:
        return None

    def dataloader(self, collate_fn, pin_memory: bool) -> torch.utils.data.DataLoader | None:
        return None

    def save(self, checkpoint: Path, batches_used: int) -> None:
        """Keep the position after ``batches_used`` batches of this rank in ``checkpoint``."""

    def resume(self, checkpoint: Path) -> None:
        """Go on from the position kept in ``checkpoint``."""


class TokenizedPairs(TrainingSet):
    """A tokenized split (``input_ids``, ``labels`` and their length columns), batched by ``TokenBatchSampler``."""

    def __init__(self, dataset: datasets.Dataset):
        self._dataset = dataset

    @property
    def dataset(self) -> datasets.Dataset:
        return self._dataset

    def batch_sampler(self, max_tokens_per_device: int, placement: Placement, shapes: BatchShapes) -> TokenBatchSampler:
        return TokenBatchSampler(*lengths(self._dataset), max_tokens_per_device, **asdict(placement), shapes=shapes)
