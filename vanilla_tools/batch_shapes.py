"""Bounded batch shapes: the one place that decides the length buckets and the padded shape of every batch, for
training's token batches, evaluation's batches and the translation batches of ``generate()``.

Token batches bring a new (batch, source length, target length) shape at almost every step; each new shape makes
cuDNN plan its attention again and a static compiled graph compile again. The anchors keep shapes few with three
settings, named here as fairseq names them (vanilla-train's flags spell them with underscores):

- ``required_batch_size_multiple``: a batch's size is a multiple of this (fairseq's default 8). As fairseq's
  ``batch_by_size`` does, a batch that reaches the token budget keeps the largest multiple of its pairs and carries
  the rest into the next batch; no row is added.
- ``required_seq_len_multiple``: each side is padded to a multiple of this (fairseq's; transformers'
  ``pad_to_multiple_of``).
- ``num_batch_buckets``: each side is padded to the next of this many length buckets. fairseq takes the training
  set's length percentiles as buckets; here they are geometric (tensor2tensor's buckets) from the smallest multiple
  to ``longest``, because then they depend on nothing but these settings: evaluation and vanilla-translate, which
  see other sentences than training, pad to the same lengths, and no bucket pads a pair by more than the ratio
  between two buckets. Lengths above ``longest`` round up to the multiple.

The token budget counts padded tokens, as fairseq's does: a batch is planned on its pairs' padded lengths.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import get_worker_info

DEFAULT_LONGEST = 128  # vanilla-train's default --max_source_length and --max_target_length
SMALLEST_BUCKET = 8  # tensor2tensor's min_length: below it a geometric series spends its buckets on tiny lengths
ON_CUDA = {"required_batch_size_multiple": 8, "required_seq_len_multiple": 8, "num_batch_buckets": 8}
SOURCE_KEYS, TARGET_KEYS = ("input_ids", "attention_mask"), ("labels", "decoder_input_ids", "decoder_attention_mask")


@dataclass(frozen=True)
class BatchShapes:
    """How batches are padded (the module's docstring); the defaults pad nothing."""

    required_batch_size_multiple: int = 1
    required_seq_len_multiple: int = 1
    num_batch_buckets: int = 0
    longest: int = DEFAULT_LONGEST  # the longest length the buckets reach (training's longest sentence)

    def __post_init__(self):
        for name in ("required_batch_size_multiple", "required_seq_len_multiple", "longest"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_batch_buckets < 0:
            raise ValueError(f"num_batch_buckets must be >= 0, got {self.num_batch_buckets}")

    @classmethod
    def for_device(
        cls,
        device_type: str,
        longest: int,
        required_batch_size_multiple: int | None = None,
        required_seq_len_multiple: int | None = None,
        num_batch_buckets: int | None = None,
    ) -> "BatchShapes":
        """The settings given, the others by device: on CUDA ``ON_CUDA`` (each new shape costs cuDNN's planning, or
        a compilation), elsewhere off (on a CPU a shape costs nothing, and the padding costs its work)."""
        given = {
            "required_batch_size_multiple": required_batch_size_multiple,
            "required_seq_len_multiple": required_seq_len_multiple,
            "num_batch_buckets": num_batch_buckets,
        }
        defaults = ON_CUDA if device_type == "cuda" else {}  # elsewhere the dataclass's: off
        return cls(
            **{**defaults, **{name: value for name, value in given.items() if value is not None}}, longest=longest
        )

    @cached_property
    def buckets(self) -> np.ndarray:
        """The bucket lengths, ascending (empty without buckets): ``num_batch_buckets`` geometric steps from the
        smallest multiple of ``required_seq_len_multiple`` >= 8 to ``longest``, rounded up to the multiple."""
        if not self.num_batch_buckets:
            return np.zeros(0, dtype=np.int64)
        smallest = min(self.round_up(SMALLEST_BUCKET), self.round_up(self.longest))
        steps = np.geomspace(smallest, self.longest, num=self.num_batch_buckets)
        return np.unique(self.round_up(np.ceil(steps).astype(np.int64)))

    def round_up(self, lengths):
        multiple = self.required_seq_len_multiple
        return -(-lengths // multiple) * multiple

    def padded_lengths(self, lengths) -> np.ndarray:
        """What each of ``lengths`` is padded to: its bucket, or (above the last, or without buckets) the next
        multiple of ``required_seq_len_multiple``."""
        lengths = np.asarray(lengths, dtype=np.int64)
        rounded = self.round_up(lengths)
        if not len(self.buckets):
            return rounded
        at = np.searchsorted(self.buckets, lengths)
        return np.where(at < len(self.buckets), self.buckets[np.minimum(at, len(self.buckets) - 1)], rounded)

    def padded_length(self, length: int) -> int:
        return int(self.padded_lengths([length])[0])

    def pads(self) -> bool:
        return (self.required_seq_len_multiple, self.num_batch_buckets) != (1, 0)

    def describe(self) -> str:
        """The settings in one line, for the run's log."""
        buckets = ", ".join(map(str, self.buckets.tolist())) or "none"
        return (
            f"batch sizes a multiple of {self.required_batch_size_multiple}, lengths a multiple of "
            f"{self.required_seq_len_multiple}, length buckets: {buckets}"
        )

    def pad_batch(self, batch: dict, pad_token_id: int) -> dict:
        """``batch`` (a collator's: ids, masks, labels of shape (batch, length)) with each side padded on the right
        to its padded length: ids with ``pad_token_id``, masks with 0, labels with -100 (no loss)."""
        values = {"input_ids": pad_token_id, "decoder_input_ids": pad_token_id, "labels": -100}
        for keys in (SOURCE_KEYS, TARGET_KEYS):
            present = [key for key in keys if isinstance(batch.get(key), torch.Tensor)]
            if not present:
                continue
            width = batch[present[0]].shape[1]
            extra = self.padded_length(width) - width
            for key in present:
                batch[key] = F.pad(batch[key], (0, extra), value=values.get(key, 0)) if extra else batch[key]
        return batch


UNPADDED = BatchShapes()  # pads nothing: the batches as their longest pairs make them


class PaddedBatches:
    """Wraps a collator: its batches padded as ``shapes`` says (nothing is done when it pads nothing). Training's
    batches of token ids are ``PairBatches``', which come out the same as this one's over transformers'
    DataCollatorForSeq2Seq (the reference they are tested and timed against)."""

    def __init__(self, collate, shapes: BatchShapes, pad_token_id: int):
        self.collate, self.shapes, self.pad_token_id = collate, shapes, pad_token_id

    def __call__(self, features) -> dict:
        return self.shapes.pad_batch(self.collate(features), self.pad_token_id)


class PairBatches:
    """The collator of token-id pairs (``input_ids`` and ``labels`` lists, as the training and evaluation sets hold
    them): each side filled into a tensor of its padded length (``shapes``) at once, ids padded with
    ``pad_token_id``, the source's mask with 0 and labels with -100 (no loss), and the decoder's inputs made from the
    labels by ``decoder_inputs`` (the model's ``prepare_decoder_input_ids_from_labels``). Its batches are those of
    ``PaddedBatches`` over DataCollatorForSeq2Seq, which pads every pair in Python lists (5x the time of this one on
    a 25k-token batch: docs/performance.md). In a DataLoader's worker process its tensors are views of one buffer
    (``packed``)."""

    def __init__(self, shapes: BatchShapes, pad_token_id: int, decoder_inputs: Callable | None = None):
        self.shapes, self.pad_token_id, self.decoder_inputs = shapes, pad_token_id, decoder_inputs

    def __call__(self, features: list[dict]) -> dict:
        input_ids, attention_mask = self.pad([feature["input_ids"] for feature in features], self.pad_token_id)
        batch = {"input_ids": input_ids, "attention_mask": attention_mask.long(), "labels": None}
        if features[0].get("labels") is not None:  # (DataCollatorForSeq2Seq's None where there are none)
            batch["labels"], mask = self.pad([feature["labels"] for feature in features], -100)
            if self.decoder_inputs is not None:
                batch["decoder_input_ids"] = self.decoder_inputs_of(batch["labels"], mask)
        return packed(batch) if get_worker_info() is not None else batch

    def decoder_inputs_of(self, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The decoder's inputs made from the labels up to the longest target, then padded as the other sides are:
        past the longest target it reads the pad, not the label the shift would bring in there (no loss reads that
        position either way; this keeps the batches those of ``PaddedBatches``)."""
        longest = int(mask.sum(dim=1).max())
        decoder_input_ids = torch.full_like(labels, self.pad_token_id)
        decoder_input_ids[:, :longest] = self.decoder_inputs(labels=labels[:, :longest])
        return decoder_input_ids

    def pad(self, rows: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``rows`` right-padded with ``value`` to their padded length, and the mask of their own tokens: one
        masked fill of the rows' ids read into one array (numpy's boolean fill: torch's took 3x as long)."""
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        width = self.shapes.padded_length(int(lengths.max()))
        mask = np.arange(width) < lengths[:, None]
        padded = np.full((len(rows), width), value, dtype=np.int64)
        padded[mask] = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
        return torch.from_numpy(padded), torch.from_numpy(mask)


def packed(batch: dict) -> dict:
    """``batch`` with its tensors (of one dtype) copied into one buffer, each a view of its part: a worker process
    hands a batch to the training process in one shared-memory segment, not one a tensor. The training process
    waits for each segment (torch's file-descriptor sharing connects to the worker for each), and one 25k-token
    batch of four tensors took 2.5 ms to arrive, one buffer 1.5 ms (issue 99: docs/performance.md)."""
    tensors = {key: value for key, value in batch.items() if isinstance(value, torch.Tensor)}
    buffer = torch.cat([tensor.flatten() for tensor in tensors.values()])
    parts = buffer.split([tensor.numel() for tensor in tensors.values()])
    return {**batch, **{key: part.view_as(tensor) for (key, tensor), part in zip(tensors.items(), parts, strict=True)}}
