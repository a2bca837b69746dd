"""§5.1 batching: "sentence pairs were batched together by approximate sequence length. Each training batch
contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target tokens."

transformers batches by sentence count (``per_device_train_batch_size``, ``group_by_length``); the paper batches by
token count, which keeps every step's work equal and padding low. This sampler is written for that reason.
"""

import torch
from transformers.trainer_pt_utils import BatchRebalanceSampler


def make_batches(
    source_lengths: list[int], target_lengths: list[int], max_tokens: int, order: list[int], min_size: int = 1
) -> list[list[int]]:
    """Greedy batches over ``order`` (indices sorted by length) whose padded size stays within ``max_tokens`` on each
    side: ``len(batch) * max(length in batch) <= max_tokens`` for sources and for targets alike. A batch holds at
    least ``min_size`` pairs (one per data-parallel rank), even past the budget."""
    batches, batch, longest_source, longest_target = [], [], 0, 0
    for index in order:
        source, target = max(longest_source, source_lengths[index]), max(longest_target, target_lengths[index])
        if len(batch) >= min_size and (len(batch) + 1) * max(source, target) > max_tokens:
            batches.append(batch)
            batch, source, target = [], source_lengths[index], target_lengths[index]
        batch.append(index)
        longest_source, longest_target = source, target
    if len(batch) < min_size and batches:
        batches[-1].extend(batch)  # a short tail joins the last batch rather than leave a rank without pairs
    elif batch:
        batches.append(batch)
    return batches


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
        source_lengths: list[int],
        target_lengths: list[int],
        max_tokens_per_device: int,
        num_replicas: int = 1,
        rank: int = 0,
        seed: int = 0,
        shuffle: bool = True,
    ):
        longest = max(max(source_lengths), max(target_lengths))
        if max_tokens_per_device < longest:
            raise ValueError(
                f"max_tokens_per_batch={max_tokens_per_device} is smaller than the longest sequence ({longest} tokens)"
            )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside [0, {num_replicas})")
        self.source_lengths, self.target_lengths = list(source_lengths), list(target_lengths)
        self.max_tokens = max_tokens_per_device * num_replicas
        self.num_replicas, self.rank, self.seed, self.shuffle = num_replicas, rank, seed, shuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def global_batches(self) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        n = len(self.source_lengths)
        tie_break = torch.randperm(n, generator=generator).tolist() if self.shuffle else list(range(n))
        order = sorted(range(n), key=lambda i: (self.source_lengths[i], self.target_lengths[i], tie_break[i]))
        batches = self.plan(order)
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        return batches

    def plan(self, order: list[int]) -> list[list[int]]:
        """The batches over ``order``, pair indices sorted by length."""
        return make_batches(self.source_lengths, self.target_lengths, self.max_tokens, order, self.num_replicas)

    def __iter__(self):
        for batch in self.global_batches():
            yield batch[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        # independent of the epoch: ties are shuffled, but the sequence of lengths, hence the cuts, is fixed
        return len(self.plan(self.length_order()))

    def length_order(self) -> list[int]:
        return sorted(range(len(self.source_lengths)), key=lambda i: (self.source_lengths[i], self.target_lengths[i]))

    def padding(self) -> float:
        """Padding share of this epoch's batches, over source and target tokens together."""
        batches = self.global_batches()
        padded = real = 0
        for lengths in (self.source_lengths, self.target_lengths):
            padded += sum(len(b) * max(lengths[i] for i in b) for b in batches)
            real += sum(lengths[i] for b in batches for i in b)
        return 1.0 - real / padded
