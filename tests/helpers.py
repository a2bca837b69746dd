"""Tiny, seeded models and batches shared by the tests."""

import logging
import socket

import torch
import transformers

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq, compat

PAD, EOS, VOCAB = 0, 2, 61
# Prepended to a script run in a fresh process: the repository's packages cannot be imported there, as on a machine
# that has only transformers (a checkpoint's own code files must do)
BLOCK_PACKAGE = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("modeling_vanilla", "training", "hub_card", "benchmarks"):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Block())
"""


def release_notes(installed: str = transformers.__version__) -> list[str]:
    """What importing the model logs about the transformers release ``installed``: note_untested_release's one line
    where it lies outside the tested range, else nothing (a console script's stderr holds it above its own lines)."""
    notes = []
    handler = logging.Handler()
    handler.emit = lambda record: notes.append(record.getMessage())
    compat.logger.addHandler(handler)
    try:
        compat.note_untested_release(installed)
    finally:
        compat.logger.removeHandler(handler)
    return notes


def tiny_config(**overrides) -> VanillaTransformerConfig:
    values = dict(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        num_attention_heads=4,
        ffn_dim=48,
        dropout=0.0,
        max_position_embeddings=16,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=PAD,
    )
    return VanillaTransformerConfig(**{**values, **overrides})


def tiny_model(seed: int = 0, **overrides) -> VanillaTransformerForSeq2Seq:
    torch.manual_seed(seed)
    return VanillaTransformerForSeq2Seq(tiny_config(**overrides)).eval()


def padded_batch(seed: int = 0, batch: int = 3, length: int = 7, vocab: int = VOCAB):
    """Random source ids (no special tokens) with right padding of different lengths, and its mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (batch, length), generator=g)
    lengths = torch.tensor([length - 2 * i % length for i in range(batch)]).clamp(min=1)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, PAD), mask


def nbest(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, num_beams: int, **search):
    """generate()'s ``num_beams`` best hypotheses an input, with their scores (return_dict_in_generate)."""
    return model.generate(
        input_ids,
        attention_mask=attention_mask,
        num_beams=num_beams,
        num_return_sequences=num_beams,
        return_dict_in_generate=True,
        output_scores=True,
        **search,
    )


def batch_of(shape: tuple[int, int, int], seed: int = 0) -> dict[str, torch.Tensor]:
    """A padded (batch, source, target) training batch, as the collator makes it."""
    batch, source, target = shape
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (batch, source), generator=g)
    mask = torch.ones_like(ids)
    mask[0, source // 2 :] = 0
    labels = torch.randint(3, VOCAB, (batch, target), generator=g)
    labels[-1, target // 2 :] = -100
    return {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask, "labels": labels}


def copy_task_batch(generator: torch.Generator, batch: int = 32):
    """Sources of 3-8 random tokens; the target is the source followed by EOS (labels padded with -100)."""
    lengths = torch.randint(3, 9, (batch,), generator=generator)
    ids = torch.randint(3, VOCAB, (batch, 8), generator=generator)
    mask = (torch.arange(8)[None, :] < lengths[:, None]).long()
    src = ids.masked_fill(mask == 0, PAD)
    labels = torch.full((batch, 9), -100)
    labels[:, :8] = src.masked_fill(mask == 0, -100)
    labels[torch.arange(batch), lengths] = EOS
    return src, mask, labels


def train_copy_model(steps: int = 300) -> VanillaTransformerForSeq2Seq:
    """A tiny model trained for a few seconds to copy its input: its outputs end with EOS, as real ones do."""
    model = tiny_model(seed=0).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        src, mask, labels = copy_task_batch(generator)
        model(input_ids=src, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


def saved_model_with_tokenizer(folder, tokenizer, seed: int = 0, end_bias: float | None = None, **overrides):
    """A tiny random model over ``tokenizer``'s vocabulary, its embeddings scaled x4 so its logits are peaked (beams
    differ), saved with the tokenizer as vanilla-train saves a model: the folder. ``end_bias``: a logit bias on
    </s>, so that outputs end at different lengths instead of running to the length limit; ``overrides``: of its
    config."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    model = tiny_model(
        seed,
        vocab_size=len(tokenizer),
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        final_logits_bias=end_bias is not None,
        **overrides,
    )
    with torch.no_grad():
        model.model.shared.weight.mul_(4.0)
        if end_bias is not None:
            model.final_logits_bias[0, eos] = end_bias
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a process group's or a server's address)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
