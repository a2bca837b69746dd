"""What a translation engine is: a callable from a batch of non-empty sentences to a ``BatchTranslation``.
``GenerateEngine`` is ``model.generate()``; ``ct2.CTranslate2Engine`` is CTranslate2; ``engines.create_engine``
chooses between them."""

from dataclasses import dataclass, field
from typing import Protocol

import torch

from vanilla_tools.batch_shapes import DEFAULT_LONGEST, BatchShapes
from vanilla_tools.decoding import Decoding
from vanilla_tools.text_form import TextForm


@dataclass
class BatchTranslation:
    """What an engine returns for a batch, in the batch's order."""

    texts: list[str]
    unfinished: list[bool]  # stopped at the length limit without </s>
    source_lengths: list[int]  # tokens, </s> included
    output_lengths: list[int]  # tokens generated, up to and including </s> (no padding)
    nbest: list[list[tuple[str, float]]] = field(default_factory=list)  # with Decoding.nbest: K (text, score) each


def output_lengths(sequences: torch.Tensor, eos: int | list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 1 + T) outputs, the decoder start token first -> whether each generated an end token (N,), and how many
    tokens it generated, up to and including the first end token (N,)."""
    eos = torch.tensor(eos, device=sequences.device).reshape(-1)
    ended = torch.isin(sequences[:, 1:], eos)  # (N, T)
    return ended.any(dim=1), torch.where(ended.any(dim=1), ended.int().argmax(dim=1) + 1, ended.shape[1])


def batch_translation(
    tokenizer,
    sequences: torch.Tensor,
    ended: torch.Tensor,
    lengths: torch.Tensor,
    source_lengths: list[int],
    nbest: int | None,
    scores: torch.Tensor | None,
) -> BatchTranslation:
    """A ``BatchTranslation`` of (B * K, 1 + T) outputs, the K of each input best first (K = ``nbest`` or 1), and
    their (B * K,) ``scores`` for an n-best list."""
    k = nbest or 1
    texts = [text.strip() for text in tokenizer.batch_decode(sequences, skip_special_tokens=True)]
    translation = BatchTranslation(
        texts=texts[::k],
        unfinished=(~ended).tolist()[::k],
        source_lengths=source_lengths,
        output_lengths=lengths.tolist()[::k],
    )
    if nbest:
        pairs = list(zip(texts, scores.tolist(), strict=True))
        translation.nbest = [pairs[i : i + k] for i in range(0, len(pairs), k)]
    return translation


class Engine(Protocol):
    decoding: Decoding

    def __call__(self, sentences: list[str]) -> BatchTranslation: ...


class PreparedEngine:
    """``engine`` given each sentence in the model's text form (``TextForm.source``), as the model was trained: the
    same tokens whether a sentence comes raw or already prepared."""

    def __init__(self, engine: Engine, form: TextForm):
        self.engine, self.form, self.decoding = engine, form, engine.decoding

    def __call__(self, sentences: list[str]) -> BatchTranslation:
        return self.engine([self.form.source(sentence) for sentence in sentences])


def prepared(engine: Engine, form: TextForm) -> Engine:
    """``engine`` fed text in ``form``: itself for raw text."""
    return engine if form.raw else PreparedEngine(engine, form)


class GenerateEngine:
    """Translate batches of non-empty sentences with ``model.generate()`` (one call a batch), searching as
    ``decoding`` says (default: the model's generation config). Every batch is given its maximum length explicitly,
    so a model whose ``generate()`` lacks our §6.1 rule (``to_marian``'s MarianMTModel stops at 20 tokens) decodes
    as far as ours. The sources are padded to their length bucket as training's are (``shapes``: by default the
    model's device's, ``BatchShapes.for_device``), the output length counted from the longest source.
    ``generate_kwargs``: anything else ``generate()`` takes (e.g. ``cache_implementation``)."""

    def __init__(
        self, model, tokenizer, decoding: Decoding | None = None, shapes: BatchShapes | None = None, **generate_kwargs
    ):
        self.model, self.tokenizer, self.generate_kwargs = model.eval(), tokenizer, generate_kwargs
        self.decoding = decoding or Decoding.resolve(model.generation_config)
        self.shapes = shapes or BatchShapes.for_device(model.device.type, DEFAULT_LONGEST)

    def __call__(self, sentences: list[str]) -> BatchTranslation:
        batch = self.tokenizer(sentences, return_tensors="pt", padding=True)
        kwargs = {**self.decoding.generate_kwargs(batch["input_ids"].shape[1]), **self.generate_kwargs}
        batch = self.shapes.pad_batch(batch, self.tokenizer.pad_token_id).to(self.model.device)
        with torch.no_grad():
            generated = self.model.generate(**batch, **kwargs)
        sequences = generated.sequences if self.decoding.nbest else generated  # (B * K, 1 + T), best first
        ended, lengths = output_lengths(sequences, self.model.generation_config.eos_token_id)
        scores = self._scores(generated, lengths) if self.decoding.nbest else None
        source_lengths = batch["attention_mask"].sum(dim=1).tolist()
        return batch_translation(self.tokenizer, sequences, ended, lengths, source_lengths, self.decoding.nbest, scores)

    def _scores(self, generated, lengths: torch.Tensor) -> torch.Tensor:
        """(B * K,) each output's log-probability / length^alpha (its tokens up to ``lengths``, the end token
        included): beam search's own ranking score; greedy search (alpha 1: the mean per token) keeps none, so it is
        summed from the transition scores. CTranslate2 scores both searches the same way."""
        if getattr(generated, "sequences_scores", None) is not None:  # beam search's output type only
            return generated.sequences_scores
        steps = self.model.compute_transition_scores(generated.sequences, generated.scores, normalize_logits=True)
        counted = torch.arange(steps.shape[1], device=steps.device)[None, :] < lengths[:, None]  # (B, T - 1)
        return steps.masked_fill(~counted, 0.0).sum(dim=1) / lengths.to(steps.dtype) ** self.decoding.length_penalty
