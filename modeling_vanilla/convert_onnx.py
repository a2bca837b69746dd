"""ONNX export: the encoder and one decoder step with its cache, as two graphs that ONNX Runtime runs.

optimum's ONNX exporter does not support transformers 5 (optimum-onnx 0.1 requires transformers < 4.58), so the
graphs are exported with ``torch.onnx.export`` (the dynamo exporter) from the model's own modules:

- ``encoder.onnx``: ``input_ids``, ``attention_mask`` (B, S) -> ``encoder_hidden_states`` (B, S, d_model) and
  each decoder layer's encoder-decoder attention keys and values, projected once: ``cross_key.{i}``,
  ``cross_value.{i}`` (B, h, S, d_k);
- ``decoder.onnx``: ``decoder_input_ids`` (B, 1), ``encoder_attention_mask`` (B, S), ``encoder_hidden_states``, the
  self-attention cache ``past_key.{i}`` / ``past_value.{i}`` (B, h, t, d_k; t = 0 at the first step) and the cross
  keys/values -> ``log_probs`` (B, vocab) of the next token and ``present_key.{i}`` / ``present_value.{i}``
  (B, h, t + 1, d_k).

Batch, source length and cache length are dynamic; positions are not: the model grows its sinusoid table on demand
in Python, which a graph cannot, so the export holds a table of ``position_limit(config)`` positions (learned
positions have their fixed maximum anyway). The search itself (greedy, beam) runs outside the graphs:
``inference.onnx_runtime``.
"""

import copy
from pathlib import Path

import torch
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from .compat import CACHE_NAME
from .modeling_vanilla import SinusoidalPositionalEncoding, VanillaTransformerForSeq2Seq, sinusoid_table

ENCODER, DECODER = "encoder.onnx", "decoder.onnx"
OPSET = 18
SINUSOID_POSITIONS = 2048  # sources up to this long, and outputs (their length + 50 by §6.1)


def position_limit(config) -> int:
    """How many positions (source tokens, or output tokens with the start token) the exported graphs hold."""
    if config.position_embedding_type == "learned":
        return config.max_position_embeddings
    return max(SINUSOID_POSITIONS, config.max_position_embeddings)


def cross_names(layers: int) -> list[str]:
    return [f"cross_{kind}.{i}" for i in range(layers) for kind in ("key", "value")]


def cache_names(prefix: str, layers: int) -> list[str]:
    return [f"{prefix}_{kind}.{i}" for i in range(layers) for kind in ("key", "value")]


class EncoderGraph(nn.Module):
    """The encoder, then every decoder layer's encoder-decoder attention K = V-source projections (§3.2.3: "the
    memory keys and values come from the output of the encoder"), which stay fixed for the whole search."""

    def __init__(self, model: VanillaTransformerForSeq2Seq):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        memory = self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        outputs = [memory]  # (B, S, d_model)
        for layer in self.model.model.decoder.layers:
            attention = layer.cross_attn
            keys, values = attention._project_key_value(memory, memory)  # 2 x (B, S, h d_k)
            outputs += [attention._split_heads(keys), attention._split_heads(values)]  # 2 x (B, h, S, d_k)
        return tuple(outputs)


class DecoderStepGraph(nn.Module):
    """One decoder step through the model's own forward, its caches rebuilt from the graph's inputs: transformers'
    ``EncoderDecoderCache`` with the encoder-decoder keys/values marked as projected already."""

    def __init__(self, model: VanillaTransformerForSeq2Seq):
        super().__init__()
        self.model = model
        self.layers = model.config.decoder_layers

    def forward(self, decoder_input_ids, encoder_attention_mask, encoder_hidden_states, *caches):
        n = self.layers
        self_cache, cross_cache = DynamicCache(), DynamicCache()
        for i in range(n):
            self_cache.update(caches[2 * i], caches[2 * i + 1], i)
            cross_cache.update(caches[2 * n + 2 * i], caches[2 * n + 2 * i + 1], i)
        cache = EncoderDecoderCache(self_cache, cross_cache)
        for i in range(n):
            cache.is_updated[i] = True
        out = self.model(
            encoder_outputs=(encoder_hidden_states,),
            attention_mask=encoder_attention_mask,
            decoder_input_ids=decoder_input_ids,
            cache=cache,
            use_cache=True,
        )
        present = getattr(out, CACHE_NAME).self_attention_cache.layers
        log_probs = out.logits[:, -1].float().log_softmax(dim=-1)  # (B, vocab), as generate() scores the next token
        return (log_probs, *[t for layer in present for t in (layer.keys, layer.values)])


def check_exportable(model: VanillaTransformerForSeq2Seq) -> None:
    if model.config.attention_window is not None:
        raise ValueError(
            "ONNX export needs full self-attention: attention_window (restricted self-attention) keeps a sliding "
            "cache the exported decoder step does not"
        )


def export_onnx(model: VanillaTransformerForSeq2Seq, output_dir: str | Path) -> Path:
    """Write ``encoder.onnx`` and ``decoder.onnx`` for ``model`` (fp32, eval mode) into ``output_dir``."""
    check_exportable(model)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model = copy.deepcopy(model).float().eval()  # the caller's model keeps its dtype, mode and table
    config = model.config
    for module in model.modules():
        if isinstance(module, SinusoidalPositionalEncoding):  # a graph cannot grow the table: give it all it holds
            module.table = sinusoid_table(position_limit(config), module.dim, module.layout).to(module.table.device)
    layers, heads = config.decoder_layers, config.num_attention_heads
    batch, source, past = torch.export.Dim("batch"), torch.export.Dim("source"), torch.export.Dim("past")

    ids = torch.full((2, 5), config.eos_token_id)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        encoded = EncoderGraph(model)(ids, mask)
    torch.onnx.export(
        EncoderGraph(model).eval(),
        (ids, mask),
        output_dir / ENCODER,
        dynamo=True,
        opset_version=OPSET,
        input_names=["input_ids", "attention_mask"],
        output_names=["encoder_hidden_states", *cross_names(layers)],
        dynamic_shapes={"input_ids": {0: batch, 1: source}, "attention_mask": {0: batch, 1: source}},
        verbose=False,
    )

    head_dim = encoded[1].shape[-1]
    caches = [torch.zeros(2, heads, 3, head_dim) for _ in range(2 * layers)]
    step = torch.full((2, 1), config.decoder_start_token_id)
    cache_shapes = [{0: batch, 2: past}] * (2 * layers) + [{0: batch, 2: source}] * (2 * layers)
    dynamic = {
        "decoder_input_ids": {0: batch},
        "encoder_attention_mask": {0: batch, 1: source},
        "encoder_hidden_states": {0: batch, 1: source},
        "caches": tuple(cache_shapes),
    }
    torch.onnx.export(
        DecoderStepGraph(model).eval(),
        (step, mask, encoded[0], *caches, *encoded[1:]),
        output_dir / DECODER,
        dynamo=True,
        opset_version=OPSET,
        input_names=[
            "decoder_input_ids",
            "encoder_attention_mask",
            "encoder_hidden_states",
            *cache_names("past", layers),
            *cross_names(layers),
        ],
        output_names=["log_probs", *cache_names("present", layers)],
        dynamic_shapes=dynamic,
        verbose=False,
    )
    return output_dir
