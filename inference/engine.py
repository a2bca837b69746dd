"""What a translation engine is: a callable from a batch of non-empty sentences (and, optionally, the target prefix
each translation goes on from) to a ``BatchTranslation``, which can also score given translations (forced decoding).
``GenerateEngine`` is ``model.generate()``; ``ct2.CTranslate2Engine`` is CTranslate2; ``engines.create_engine``
chooses between them."""

from collections.abc import Callable
from dataclasses import dataclass, field, fields
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
    samples: list[list[str]] = field(default_factory=list)  # with Decoding.sampling: N each, the first in texts

    def output(self, index: int) -> "str | list[tuple[str, float]] | list[str]":
        """What is written for input ``index``: its n-best list, its samples, or its translation."""
        return self.nbest[index] if self.nbest else self.samples[index] if self.samples else self.texts[index]


def blank_output(decoding: Decoding) -> "str | list[tuple[str, float]] | list[str]":
    """``BatchTranslation.output`` of an empty input line, which reaches no engine: empty, as many times as asked."""
    if decoding.nbest:
        return [("", 0.0)]
    return [""] * decoding.sampling.num_samples if decoding.sampling else ""


def forced_log_probs(model: torch.nn.Module, batch, labels: torch.Tensor) -> torch.Tensor:
    """(B, T) the model's log-probability of each token of ``labels`` given ``batch``'s sources and the tokens before
    it (forced decoding: teacher-forced, unsmoothed, in fp32), 0 where a label is -100 (padding): what
    ``model(labels=...).loss`` averages at label smoothing 0. What an engine's ``score`` and a validation perplexity
    are computed from."""
    with torch.no_grad():
        logits = model(**batch, labels=labels, skip_logits=False).logits  # (B, T, V)
    log_probs = logits.float().log_softmax(dim=-1).gather(-1, labels.clamp(min=0)[:, :, None])[:, :, 0]
    return log_probs.masked_fill(labels == -100, 0.0)


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
    decoding: Decoding,
    scores: torch.Tensor | None,
) -> BatchTranslation:
    """A ``BatchTranslation`` of (B * K, 1 + T) outputs, the K of each input (``decoding.outputs_per_input``: an
    n-best list's, best first, or the samples), and their (B * K,) ``scores`` for an n-best list."""
    k, nbest = decoding.outputs_per_input, decoding.nbest
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
    if decoding.sampling:
        translation.samples = [texts[i : i + k] for i in range(0, len(texts), k)]
    return translation


def by_prefix_length(
    translate: Callable[[list[str], list[list] | None], BatchTranslation], sentences: list[str], prefixes: list[list]
) -> BatchTranslation:
    """``translate(sentences, prefixes)`` called once for each length of prefix (tokens or their ids; None for no
    prefix), the parts put back in order. A prefix is given, not predicted: the search goes on from its last token
    and scores only what it adds. CTranslate2 does so only for the prefix tokens that every input of a batch has
    (the rest of a longer prefix is forced and scored), so in a batch of mixed lengths a line would translate
    differently from the same line alone; one length a call keeps each line independent of its batch."""
    groups: dict[int, list[int]] = {}
    for index, ids in enumerate(prefixes):
        groups.setdefault(len(ids), []).append(index)
    parts = {
        length: translate([sentences[i] for i in indices], [prefixes[i] for i in indices] if length else None)
        for length, indices in groups.items()
    }
    place = {index: (length, j) for length, indices in groups.items() for j, index in enumerate(indices)}
    order = [place[index] for index in range(len(sentences))]
    merged = {}
    for name in (f.name for f in fields(BatchTranslation)):
        columns = {length: getattr(part, name) for length, part in parts.items()}
        merged[name] = [columns[length][j] for length, j in order] if all(columns.values()) else []
    return BatchTranslation(**merged)


class Engine(Protocol):
    decoding: Decoding

    def __call__(self, sentences: list[str], prefixes: list[str] | None = None) -> BatchTranslation: ...


class Scorer(Protocol):
    """An engine that scores given translations (forced decoding): ``GenerateEngine``, CTranslate2's."""

    def score(self, sentences: list[str], translations: list[str]) -> list[list[float]]:
        """The log-probability of each token of each translation of ``sentences``, its end token included."""


class PreparedEngine:
    """``engine`` given each sentence in the model's text form (``TextForm.source``), as the model was trained: the
    same tokens whether a sentence comes raw or already prepared. Target prefixes and the translations it scores are
    target text, prepared as the model's output is (``TextForm.target``)."""

    def __init__(self, engine: Engine, form: TextForm):
        self.engine, self.form, self.decoding = engine, form, engine.decoding

    def __call__(self, sentences: list[str], prefixes: list[str] | None = None) -> BatchTranslation:
        sources = [self.form.source(sentence) for sentence in sentences]
        if prefixes is None:  # (an engine without prefixes takes the sentences alone: ONNX Runtime's)
            return self.engine(sources)
        return self.engine(sources, [self.form.target(prefix) for prefix in prefixes])

    def score(self, sentences: list[str], translations: list[str]) -> list[list[float]]:
        sources = [self.form.source(sentence) for sentence in sentences]
        return self.engine.score(sources, [self.form.target(translation) for translation in translations])


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
        self._unseeded = self.decoding.sampling is not None

    def __call__(self, sentences: list[str], prefixes: list[str] | None = None) -> BatchTranslation:
        """The translations of ``sentences``, each going on from its target prefix if ``prefixes`` are given (an
        empty one: none)."""
        if prefixes is None:
            return self._translate(sentences, None)
        prefix_ids = self.tokenizer(prefixes, add_special_tokens=False)["input_ids"]
        return by_prefix_length(self._translate, sentences, prefix_ids)

    def _translate(self, sentences: list[str], prefixes: list[list[int]] | None) -> BatchTranslation:
        """One ``generate()`` call; ``prefixes`` (all of one length) are the decoder's prompt, after its start token
        (the continuation may be as long as a translation without one)."""
        batch = self.tokenizer(sentences, return_tensors="pt", padding=True)
        kwargs = {**self.decoding.generate_kwargs(batch["input_ids"].shape[1]), **self.generate_kwargs}
        if prefixes is not None:
            start = self.model.config.decoder_start_token_id
            kwargs["decoder_input_ids"] = torch.tensor([[start, *ids] for ids in prefixes], device=self.model.device)
        if self._unseeded:  # seeded once, before the first batch: the batches then draw in turn
            torch.manual_seed(self.decoding.sampling.seed)
            self._unseeded = False
        batch = self.shapes.pad_batch(batch, self.tokenizer.pad_token_id).to(self.model.device)
        with torch.no_grad():
            generated = self.model.generate(**batch, **kwargs)
        sequences = generated.sequences if self.decoding.nbest else generated  # (B * K, 1 + T), best first
        ended, lengths = output_lengths(sequences, self.model.generation_config.eos_token_id)
        scores = self._scores(generated, lengths) if self.decoding.nbest else None
        source_lengths = batch["attention_mask"].sum(dim=1).tolist()
        return batch_translation(self.tokenizer, sequences, ended, lengths, source_lengths, self.decoding, scores)

    def score(self, sentences: list[str], translations: list[str]) -> list[list[float]]:
        """The model's log-probability of each token of each translation (tokenized as training tokenizes targets:
        its end token included), unsmoothed: what ``model(labels=...).loss`` averages at label smoothing 0."""
        batch = self.tokenizer(sentences, return_tensors="pt", padding=True).to(self.model.device)
        targets = self.tokenizer(translations)["input_ids"]
        width = max(map(len, targets))
        labels = torch.tensor([ids + [-100] * (width - len(ids)) for ids in targets], device=self.model.device)
        log_probs = forced_log_probs(self.model, batch, labels)
        return [row[: len(ids)].tolist() for row, ids in zip(log_probs, targets, strict=True)]

    def _scores(self, generated, lengths: torch.Tensor) -> torch.Tensor:
        """(B * K,) each output's log-probability / length^alpha (its tokens up to ``lengths``, the end token
        included): beam search's own ranking score; greedy search (alpha 1: the mean per token) keeps none, so it is
        summed from the transition scores. CTranslate2 scores both searches the same way."""
        if getattr(generated, "sequences_scores", None) is not None:  # beam search's output type only
            return generated.sequences_scores
        steps = self.model.compute_transition_scores(generated.sequences, generated.scores, normalize_logits=True)
        counted = torch.arange(steps.shape[1], device=steps.device)[None, :] < lengths[:, None]  # (B, T - 1)
        return steps.masked_fill(~counted, 0.0).sum(dim=1) / lengths.to(steps.dtype) ** self.decoding.length_penalty
