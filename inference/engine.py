"""What a translation engine is: a callable from a batch of non-empty sentences to a ``BatchTranslation``.
``GenerateEngine`` is ``model.generate()``; ``ct2.CTranslate2Engine`` is CTranslate2; ``engines.create_engine``
chooses between them."""

from dataclasses import dataclass
from typing import Protocol

import torch

from vanilla_tools.decoding import Decoding


@dataclass
class BatchTranslation:
    """What an engine returns for a batch, in the batch's order."""

    texts: list[str]
    unfinished: list[bool]  # stopped at the length limit without </s>
    source_lengths: list[int]  # tokens, </s> included
    output_lengths: list[int]  # tokens generated, up to and including </s> (no padding)


class Engine(Protocol):
    decoding: Decoding

    def __call__(self, sentences: list[str]) -> BatchTranslation: ...


class GenerateEngine:
    """Translate batches of non-empty sentences with ``model.generate()`` (one call a batch), searching as
    ``decoding`` says (default: the model's generation config). Every batch is given its maximum length explicitly,
    so a model whose ``generate()`` lacks our §6.1 rule (``to_marian``'s MarianMTModel stops at 20 tokens) decodes
    as far as ours. ``generate_kwargs``: anything else ``generate()`` takes (e.g. ``cache_implementation``)."""

    def __init__(self, model, tokenizer, decoding: Decoding | None = None, **generate_kwargs):
        self.model, self.tokenizer, self.generate_kwargs = model.eval(), tokenizer, generate_kwargs
        self.decoding = decoding or Decoding.resolve(model.generation_config)

    def __call__(self, sentences: list[str]) -> BatchTranslation:
        batch = self.tokenizer(sentences, return_tensors="pt", padding=True).to(self.model.device)
        kwargs = {**self.decoding.generate_kwargs(batch["input_ids"].shape[1]), **self.generate_kwargs}
        with torch.no_grad():
            generated = self.model.generate(**batch, **kwargs)
        eos = torch.tensor(self.model.generation_config.eos_token_id, device=generated.device).reshape(-1)
        ended = torch.isin(generated[:, 1:], eos)  # (B, T): where an end token was generated
        first_end = torch.where(ended.any(dim=1), ended.int().argmax(dim=1) + 1, ended.shape[1])
        return BatchTranslation(
            texts=[text.strip() for text in self.tokenizer.batch_decode(generated, skip_special_tokens=True)],
            unfinished=(~ended.any(dim=1)).tolist(),
            source_lengths=batch["attention_mask"].sum(dim=1).tolist(),
            output_lengths=first_end.tolist(),
        )
