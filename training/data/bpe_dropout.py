"""BPE-dropout (Provilkov et al., 2020, arXiv:1910.13267) for the training pairs.

Not in the paper, which segments every sentence once (§5.1). On a small corpus the model sees each sentence many
times in the same segmentation and overfits it; BPE-dropout segments the training text afresh every epoch,
skipping each BPE merge with probability ``p``, so the model also learns words from their smaller pieces.
Evaluation and translation keep the deterministic segmentation (``p = 0``).

The batches of an epoch are planned on that epoch's segmentation. Planning them on the deterministic lengths and
re-segmenting inside the batch would leave every pair's length jittering within its batch: at ``p = 0.1`` on
Multi30k that is 56% more padded tokens for 15% more real ones, and as much slower steps.

The tokenizers library applies the dropout (``models.BPE.dropout``); its random choices come from a generator
that no seed reaches, so a run with BPE-dropout is not bit-for-bit repeatable. Under data parallelism rank 0's
segmentation is sent to every rank, which must all plan the same global batches.

Re-segmenting runs in the training process between epochs and holds every pair's ids in Python lists: right for a
corpus like Multi30k (29,000 pairs, 0.6 s an epoch), not for WMT's millions, which are refused above
``MAX_PAIRS`` (BPE-dropout is a regularizer for small corpora).
"""

from dataclasses import asdict

import datasets
import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.cli import UsageError

from .batching import Placement, TokenBatchSampler, TrainingSet, make_exact_batches
from .corpus import clip

MAX_PAIRS = 1_000_000


class BPEDropoutPairs(torch.utils.data.Dataset, TrainingSet):
    """The training pairs (``source``/``target`` text of ``dataset``) as token ids, segmented with BPE-dropout;
    ``resegment`` draws a new segmentation. Lengths are clipped as in ``tokenize_splits``."""

    def __init__(
        self,
        dataset: datasets.Dataset,
        tokenizer: PreTrainedTokenizerFast,
        p: float,
        max_source_length: int,
        max_target_length: int,
    ):
        if not 0.0 < p <= 1.0:
            raise UsageError(f"BPE-dropout probability must be in (0, 1], got {p}")
        if len(dataset) > MAX_PAIRS:
            raise UsageError(
                f"--bpe_dropout re-segments every training pair in one process between epochs: {len(dataset):,} pairs "
                f"are more than the {MAX_PAIRS:,} it is made for; train without it (--bpe_dropout 0)"
            )
        self.segmenter = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        # a copy keeps the padding and truncation a call such as tokenizer(texts, padding=True) left switched on in
        # the backend (transformers does not switch them off after it): pairs are neither padded nor cut here
        self.segmenter.no_padding()
        self.segmenter.no_truncation()
        if not hasattr(self.segmenter.model, "dropout"):
            raise UsageError(f"BPE-dropout needs a BPE tokenizer, got {type(self.segmenter.model).__name__}")
        self.segmenter.model.dropout = p
        self.texts = (list(dataset["source"]), list(dataset["target"]))
        self.limits = (max_source_length, max_target_length)
        self.resegment()

    def resegment(self) -> None:
        segmentation = [
            [clip(encoding.ids, limit) for encoding in self.segmenter.encode_batch(texts)]
            for texts, limit in zip(self.texts, self.limits, strict=True)
        ]
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.broadcast_object_list(segmentation, src=0)
        self.input_ids, self.labels = segmentation

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}

    def batch_sampler(
        self, max_tokens_per_device: int, placement: Placement, shapes: BatchShapes
    ) -> "BPEDropoutBatchSampler":
        return BPEDropoutBatchSampler(self, max_tokens_per_device, **asdict(placement), shapes=shapes)


class BPEDropoutBatchSampler(TokenBatchSampler):
    """``TokenBatchSampler`` over ``BPEDropoutPairs``: each new epoch re-segments the pairs and plans its batches on
    the new lengths. Trainer fixes the steps per epoch at the start, so every epoch has the first epoch's number of
    batches, under a token budget that moves with the epoch's length total (by ~0.1% at ``p = 0.1``)."""

    def __init__(self, pairs: BPEDropoutPairs, max_tokens_per_device: int, **kwargs):
        self.pairs = pairs
        super().__init__(*self.lengths(), max_tokens_per_device, **kwargs)  # num_batches: within the budget, once
        self.segmented_epoch = self.epoch  # the pairs arrive segmented for the first epoch

    def lengths(self) -> tuple[list[int], list[int]]:
        return [len(ids) for ids in self.pairs.input_ids], [len(ids) for ids in self.pairs.labels]

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        if epoch != self.segmented_epoch:
            self.pairs.resegment()
            self.set_lengths(*self.lengths())
            self.segmented_epoch = epoch

    def plan(self, order: np.ndarray) -> list[np.ndarray]:
        # (exactly as many batches as the first epoch's: their sizes follow the count, not the batch-size multiple)
        return make_exact_batches(self.padded_source, self.padded_target, self.num_batches, order, self.num_replicas)

    def __len__(self) -> int:
        return self.num_batches
