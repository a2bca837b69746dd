"""§5.1 batching: "sentence pairs were batched together by approximate sequence length. Each training batch
contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target tokens."

transformers batches by sentence count (``per_device_train_batch_size``, ``group_by_length``); the paper batches by
token count, which keeps every step's work equal and padding low. This sampler is written for that reason. It plans
from numpy arrays of lengths (millions of pairs in seconds) and holds an epoch's batches as cut points into one
array of pair indices.
"""

from collections.abc import Sequence

import numpy as np
import torch
from transformers.trainer_pt_utils import BatchRebalanceSampler


def cut_points(longest: Sequence[int], max_tokens: int, min_size: int = 1) -> list[int]:
    """The ends (exclusive) of greedy batches over pairs in the given order, ``longest`` being each pair's longer
    side: a batch's padded size ``len(batch) * max(longest in batch)`` stays within ``max_tokens``, with at least
    ``min_size`` pairs (one per data-parallel rank) even past the budget. A short tail joins the last batch rather
    than leave a rank without pairs."""
    ends, size, batch_longest = [], 0, 0
    for i, length in enumerate(longest):
        grown = max(batch_longest, length)
        if size >= min_size and (size + 1) * grown > max_tokens:
            ends.append(i)
            size, grown = 0, length
        size, batch_longest = size + 1, grown
    if ends and size < min_size:
        ends.pop()
    return ends + [len(longest)] if len(longest) else []


def make_batches(
    source_lengths: Sequence[int], target_lengths: Sequence[int], max_tokens: int, order: Sequence[int],
    min_size: int = 1,
) -> list[list[int]]:  # fmt: skip
    """Greedy batches over ``order`` (pair indices sorted by length) whose padded size stays within ``max_tokens``
    on each side (see ``cut_points``)."""
    order = np.asarray(order, dtype=np.int64)
    longest = np.maximum(np.asarray(source_lengths)[order], np.asarray(target_lengths)[order])
    ends = cut_points(longest.tolist(), max_tokens, min_size)
    return [order[start:end].tolist() for start, end in zip([0, *ends[:-1]], ends, strict=True)]


def make_exact_batches(
    source_lengths: list[int], target_lengths: list[int], count: int, order: list[int], min_size: int = 1
) -> list[list[int]]:
    """Exactly ``count`` batches over ``order``, for epochs whose lengths change but whose step count Trainer fixed
    at the start (BPE-dropout): ``make_batches`` with the smallest token budget that needs at most ``count``
    batches, then the largest batches halved until there are ``count``."""
    longest = max(max(source_lengths[i], target_lengths[i]) for i in order)
    low, high = longest, longest * len(order)  # no budget below the longest pair; one batch of all always fits
    while low < high:
        budget = (low + high) // 2
        if len(make_batches(source_lengths, target_lengths, budget, order, min_size)) <= count:
            high = budget
        else:
            low = budget + 1
    batches = make_batches(source_lengths, target_lengths, low, order, min_size)

    def padded(b: list[int]) -> int:
        return len(b) * max(max(source_lengths[i], target_lengths[i]) for i in b)

    while len(batches) < count:
        splittable = [b for b in batches if len(b) >= 2 * min_size]
        if not splittable:
            raise ValueError(f"{len(order)} pairs cannot fill {count} batches of at least {min_size}")
        largest = max(splittable, key=padded)
        at = batches.index(largest)
        batches[at : at + 1] = [largest[: len(largest) // 2], largest[len(largest) // 2 :]]
    return batches


class TokenBatchSampler(BatchRebalanceSampler):
    """Batches of about ``max_tokens_per_device * num_replicas`` tokens per side, built from length-sorted pairs.

    Every epoch: pairs of the same (source, target) length are shuffled among themselves, batches are formed
    greedily in length order, and the batch order is shuffled, all from ``seed + epoch`` (so a resumed run sees the
    same batches). The number of batches is the same every epoch, as Trainer's step counting needs.

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
    ):
        self.set_lengths(source_lengths, target_lengths)
        longest = int(self.longest.max())
        if max_tokens_per_device < longest:
            raise ValueError(
                f"max_tokens_per_batch={max_tokens_per_device} is smaller than the longest sequence ({longest} tokens)"
            )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside [0, {num_replicas})")
        self.max_tokens = max_tokens_per_device * num_replicas
        self.num_replicas, self.rank, self.seed, self.shuffle = num_replicas, rank, seed, shuffle
        self.epoch = 0
        # independent of the epoch: ties are shuffled, but the sequence of lengths, hence the cuts, is fixed
        self.num_batches = len(TokenBatchSampler.plan(self, self.length_order()))

    def set_lengths(self, source_lengths: Sequence[int], target_lengths: Sequence[int]) -> None:
        self.source_lengths = np.asarray(source_lengths, dtype=np.int64)
        self.target_lengths = np.asarray(target_lengths, dtype=np.int64)
        self.longest = np.maximum(self.source_lengths, self.target_lengths)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def length_order(self, tie_break: np.ndarray | None = None) -> np.ndarray:
        """Pair indices sorted by (source length, target length[, tie_break])."""
        keys = (self.target_lengths, self.source_lengths) if tie_break is None else (
            tie_break, self.target_lengths, self.source_lengths)  # fmt: skip
        return np.lexsort(keys)

    def global_batches(self) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        n = len(self.source_lengths)
        tie_break = torch.randperm(n, generator=generator).numpy() if self.shuffle else np.arange(n)
        batches = self.plan(self.length_order(tie_break))
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        return batches

    def plan(self, order: np.ndarray) -> list[list[int]]:
        """The batches over ``order``, pair indices sorted by length."""
        return make_batches(self.source_lengths, self.target_lengths, self.max_tokens, order, self.num_replicas)

    def __iter__(self):
        for batch in self.global_batches():
            yield batch[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        return self.num_batches

    def padding(self) -> float:
        """Padding share of this epoch's batches, over source and target tokens together."""
        padded = real = 0
        for batch in self.global_batches():
            for lengths in (self.source_lengths, self.target_lengths):
                sizes = lengths[batch]
                padded += len(batch) * int(sizes.max())
                real += int(sizes.sum())
        return 1.0 - real / padded
