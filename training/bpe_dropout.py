"""BPE-dropout (Provilkov et al., 2020, arXiv:1910.13267) for the training batches.

Not in the paper, which segments every sentence once (§5.1). On a small corpus the model sees each sentence many
times in the same segmentation and overfits it; BPE-dropout segments the training text afresh each time a pair
is batched, skipping each BPE merge with probability ``p``, so the model also learns words from their smaller
pieces. Evaluation and translation keep the deterministic segmentation (``p = 0``).

The tokenizers library applies the dropout (``models.BPE.dropout``); its random choices come from a generator
that no seed reaches, so a run with BPE-dropout is not bit-for-bit repeatable.
"""

from collections.abc import Callable

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from .data import clip


class BPEDropoutCollator:
    """Re-segments each pair of a training batch with BPE-dropout, then hands the batch to ``collator``.

    The pairs arrive as token ids (the dataset's columns); they are decoded to text and encoded again by a copy
    of the tokenizer whose merges are dropped with probability ``p``. Lengths are clipped as in
    ``tokenize_splits``. The batch sampler planned the batches with the deterministic lengths, so a batch
    holds that many pairs but ~16% more tokens at ``p = 0.1``.
    """

    def __init__(
        self,
        collator: Callable[[list[dict]], dict],
        tokenizer: PreTrainedTokenizerFast,
        p: float,
        max_source_length: int,
        max_target_length: int,
    ):
        if not 0.0 < p <= 1.0:
            raise ValueError(f"BPE-dropout probability must be in (0, 1], got {p}")
        self.collator, self.limits = collator, (max_source_length, max_target_length)
        self.segmenter = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        if not hasattr(self.segmenter.model, "dropout"):
            raise ValueError(f"BPE-dropout needs a BPE tokenizer, got {type(self.segmenter.model).__name__}")
        self.segmenter.model.dropout = p

    def resegment(self, sequences: list[list[int]], limit: int) -> list[list[int]]:
        texts = self.segmenter.decode_batch(sequences, skip_special_tokens=True)
        return [clip(encoding.ids, limit) for encoding in self.segmenter.encode_batch(texts)]

    def __call__(self, features: list[dict]) -> dict:
        sources = self.resegment([f["input_ids"] for f in features], self.limits[0])
        targets = self.resegment([f["labels"] for f in features], self.limits[1])
        # only the two id columns: the padding collator makes the attention mask for the new lengths
        return self.collator([{"input_ids": s, "labels": t} for s, t in zip(sources, targets, strict=True)])
