"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017; arXiv:1706.03762) as a transformers model.

In the paper's order: §3.1 the encoder and decoder stacks, §3.2.1 scaled dot-product attention, §3.2.2 multi-head
attention, §3.2.3 its three uses (the masks), §3.3 position-wise feed-forward networks, §3.4 embeddings and
softmax, §3.5 positional encoding; then the transformers classes that assemble them. Sub-layers are post-LN,
``LayerNorm(x + Dropout(Sublayer(x)))``, with no LayerNorm after the stacks. docs/paper.md maps every choice of the
paper to the code.

What runs beyond the paper to be fast is in ``speedups.py`` (each piece computes the same function), what the model
refuses is in ``checks.py``, the translation pipeline transformers 5 removed in ``pipeline_vanilla.py``. This file
and those travel to the Hub next to the weights (``trust_remote_code``): they import only torch, transformers and
each other.
"""

import copy
import math
import os
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation.utils import GenerateOutput
from transformers.masking_utils import (
    create_bidirectional_mask,
    create_causal_mask,
    create_sliding_window_causal_mask,
    sliding_window_bidirectional_overlay,
)
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple, logging
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .checks import (
    check_checkpoint_files,
    check_embeddings,
    check_loaded_weights,
    check_padding_mask,
    check_token_ids,
    local_model_dir,
    may_read_values,
    values_checked,
)
from .compat import CACHE_NAME, accepts_past_key_values, note_untested_release
from .configuration_vanilla import VanillaTransformerConfig
from .pipeline_vanilla import CUSTOM_PIPELINES
from .speedups import LinearCrossEntropy, math_attention_is_faster, relu, residual_dropout, sdpa_without_cudnn

logger = logging.get_logger(__name__)
note_untested_release()


# ----------------------------------------------------------------------------------------------------------------
# §3.1 Encoder and decoder stacks
# ----------------------------------------------------------------------------------------------------------------
class SublayerConnection(nn.Module):
    """ "We employ a residual connection around each of the two sub-layers, followed by layer normalization. That
    is, the output of each sub-layer is LayerNorm(x + Sublayer(x))", with §5.4's dropout applied "to the output of
    each sub-layer, before it is added to the sub-layer input"."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual_dropout(sublayer_output, self.dropout, self.training))  # (B, L, d_model)


class EncoderLayer(GradientCheckpointingLayer):
    """ "Each layer has two sub-layers. The first is a multi-head self-attention mechanism, and the second is a
    simple, position-wise fully connected feed-forward network.\""""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(
            config.d_model,
            config.num_attention_heads,
            dropout=config.attention_dropout,
            layer_idx=layer_idx,
            config=config,
            head_dim=config.head_dim,
        )
        self.self_attn_sublayer = SublayerConnection(config)
        self.ffn = PositionWiseFeedForward(config)
        self.ffn_sublayer = SublayerConnection(config)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, **kwargs: Unpack[TransformersKwargs]
    ) -> torch.Tensor:
        attended, _ = self.self_attn(hidden_states, attention_mask=attention_mask, **kwargs)
        hidden_states = self.self_attn_sublayer(hidden_states, attended)
        return self.ffn_sublayer(hidden_states, self.ffn(hidden_states))


class DecoderLayer(GradientCheckpointingLayer):
    """ "In addition to the two sub-layers in each encoder layer, the decoder inserts a third sub-layer, which
    performs multi-head attention over the output of the encoder stack", and its self-attention is masked so that
    "the predictions for position i can depend only on the known outputs at positions less than i"."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__()
        heads, dropout = config.num_attention_heads, config.attention_dropout
        self.self_attn = MultiHeadAttention(
            config.d_model,
            heads,
            dropout=dropout,
            is_causal=True,
            layer_idx=layer_idx,
            config=config,
            head_dim=config.head_dim,
        )
        self.self_attn_sublayer = SublayerConnection(config)
        self.cross_attn = MultiHeadAttention(
            config.d_model, heads, dropout=dropout, layer_idx=layer_idx, config=config, head_dim=config.head_dim
        )
        self.cross_attn_sublayer = SublayerConnection(config)
        self.ffn = PositionWiseFeedForward(config)
        self.ffn_sublayer = SublayerConnection(config)

    @accepts_past_key_values
    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        attended, _ = self.self_attn(hidden_states, attention_mask=attention_mask, cache=cache, **kwargs)
        hidden_states = self.self_attn_sublayer(hidden_states, attended)
        attended, _ = self.cross_attn(
            hidden_states, encoder_hidden_states, attention_mask=encoder_attention_mask, cache=cache, **kwargs
        )
        hidden_states = self.cross_attn_sublayer(hidden_states, attended)
        return self.ffn_sublayer(hidden_states, self.ffn(hidden_states))


# ----------------------------------------------------------------------------------------------------------------
# §3.2.1 Scaled dot-product attention
# ----------------------------------------------------------------------------------------------------------------
def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, per head.

    query (B, h, Lq, d_k), key/value (B, h, Lk, d_k); attention_mask is boolean (True = may attend) or additive,
    broadcastable to (B, h, Lq, Lk). Returns the output (B, Lq, h, d_k) and the weights (B, h, Lq, Lk).
    Masked scores get the dtype's lowest finite value rather than -inf, so a query with no visible key gets a
    uniform (finite) distribution instead of NaN.

    Adapted from transformers.models.bart.modeling_bart.eager_attention_forward (the causal mask without a mask
    given, and the boolean mask, are ours).
    """
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, h, Lq, Lk)
    query_length, key_length = scores.shape[-2:]
    if attention_mask is None and getattr(module, "is_causal", False) and query_length > 1:
        # a causal module given no mask masks the future itself, as SDPA's is_causal does (queries are the last Lq)
        attention_mask = torch.ones(query_length, key_length, dtype=torch.bool, device=scores.device).tril(
            key_length - query_length
        )
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask[..., :key_length]
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (B, h, Lq, d_k) -> (B, Lq, h, d_k)
    return output, weights


# ----------------------------------------------------------------------------------------------------------------
# §3.2.2 Multi-head attention
# ----------------------------------------------------------------------------------------------------------------
def bias_rows(tensor: torch.Tensor | None, start: int, stop: int) -> torch.Tensor | None:
    """Rows [start, stop) of a bias that may be absent (``bias=False``): those of one of W^Q, W^K, W^V."""
    return None if tensor is None else tensor[start:stop]


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    When keys and values have the model's width, W^Q, W^K, W^V of all heads are stacked in one ``in_proj``
    (3 h d_k x d_model, as ``nn.MultiheadAttention``), so self-attention projects with one matrix product and
    encoder-decoder attention projects keys and values with one. Keys/values of other widths (``kdim``, ``vdim``)
    get their own ``q_proj``, ``k_proj``, ``v_proj``. d_k = d_v = d_model / h unless ``head_dim`` sets it (Table 3,
    row B); W^O then maps h d_v back to d_model.

    The core attention is dispatched through transformers' attention interface: ``config._attn_implementation``
    picks "sdpa" (default), "eager" (the only one that returns weights), "flash_attention_2" or "flex_attention".
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        kdim: int | None = None,
        vdim: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        is_causal: bool = False,
        layer_idx: int | None = None,
        config: VanillaTransformerConfig | None = None,
        head_dim: int | None = None,
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or (head_dim is None and embed_dim % num_heads):
            raise ValueError(f"embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})")
        if head_dim is not None and head_dim <= 0:
            raise ValueError(f"head_dim must be positive, got {head_dim}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.head_dim = head_dim or embed_dim // num_heads  # d_k = d_v (= d_model / h in the paper)
        self.inner_dim = num_heads * self.head_dim  # h * d_v: the width of Concat(head_1, ..., head_h)
        self.scaling = self.head_dim**-0.5  # 1 / sqrt(d_k)
        self.dropout = dropout
        self.is_causal = is_causal  # read by the sdpa/flash interfaces
        self.layer_idx = layer_idx
        self.config = config
        inner = self.inner_dim
        if self.kdim == embed_dim and self.vdim == embed_dim:
            self.in_proj = nn.Linear(embed_dim, 3 * inner, bias=bias)  # [W^Q; W^K; W^V]
        else:
            self.in_proj = None
            self.q_proj = nn.Linear(embed_dim, inner, bias=bias)
            self.k_proj = nn.Linear(self.kdim, inner, bias=bias)
            self.v_proj = nn.Linear(self.vdim, inner, bias=bias)
        self.out_proj = nn.Linear(inner, embed_dim, bias=bias)  # W^O

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)  # (B, L, h*d_k) -> (B, h, L, d_k)

    def _in_proj_rows(self, x: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """x [W^Q; W^K; W^V][start:stop]^T + b[start:stop]: (B, L, d_model) -> (B, L, stop - start).

        Only a plain ``nn.Linear`` is sliced to its rows. A module wrapping ``in_proj`` (a PEFT adapter, a quantized
        layer) adds its own terms in its forward, which slicing its base weight would skip (LoRA's delta was lost in
        encoder-decoder attention that way), so it is called whole and its output sliced."""
        if type(self.in_proj) is nn.Linear:
            return F.linear(x, self.in_proj.weight[start:stop], bias_rows(self.in_proj.bias, start, stop))
        return self.in_proj(x)[..., start:stop]

    def _project_query(self, query: torch.Tensor) -> torch.Tensor:
        if self.in_proj is None:
            return self.q_proj(query)
        return self._in_proj_rows(query, 0, self.inner_dim)

    def _project_key_value(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.in_proj is None:
            return self.k_proj(key), self.v_proj(value)
        d = self.inner_dim
        if value is key:  # encoder-decoder attention: K and V from one product, (B, Lk, 2 h d_k) -> 2 x (B, Lk, h d_k)
            return self._in_proj_rows(key, d, 3 * d).chunk(2, dim=-1)
        return self._in_proj_rows(key, d, 2 * d), self._in_proj_rows(value, 2 * d, 3 * d)

    @accepts_past_key_values
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, Lq, d_model); key (B, Lk, kdim) and value (B, Lk, vdim) default to query (self-attention).

        With an ``EncoderDecoderCache``, self-attention appends this step's keys/values to the self-attention
        cache; encoder-decoder attention (``key`` given) projects the encoder output once and reuses it after.
        Returns (B, Lq, d_model) and the attention weights (eager only, else None).
        """
        is_cross = key is not None
        key = query if key is None else key
        value = key if value is None else value
        for name, tensor, width in (
            ("query", query, self.embed_dim),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            if tensor.shape[-1] != width:
                raise ValueError(f"`{name}` has width {tensor.shape[-1]}, but this attention expects {width}")
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"`key` {tuple(key.shape)} and `value` {tuple(value.shape)} must have the same positions")

        # Adapted from transformers.models.bart.modeling_bart.BartAttention.forward: which cache a layer updates, and
        # the encoder-decoder keys/values projected once (is_updated) and read back after.
        layer_cache, cached_cross = (None if is_cross else cache), False  # a plain Cache holds self-attention
        if isinstance(cache, EncoderDecoderCache):
            if is_cross:
                cached_cross = bool(cache.is_updated.get(self.layer_idx))  # a Python bool
                layer_cache = cache.cross_attention_cache
            else:
                layer_cache = cache.self_attention_cache

        if not is_cross and self.in_proj is not None:  # self-attention: Q, K, V from one product
            q, k, v = (self._split_heads(t) for t in self.in_proj(query).chunk(3, dim=-1))  # 3 x (B, h, Lq, d_k)
        else:
            q = self._split_heads(self._project_query(query))  # (B, h, Lq, d_k)
            if cached_cross:
                k, v = layer_cache.layers[self.layer_idx].keys, layer_cache.layers[self.layer_idx].values
            else:
                k, v = (self._split_heads(t) for t in self._project_key_value(key, value))  # 2 x (B, h, Lk, d_k)
        if layer_cache is not None and not cached_cross:
            k, v = layer_cache.update(k, v, self.layer_idx)
            if is_cross and isinstance(cache, EncoderDecoderCache):
                cache.is_updated[self.layer_idx] = True

        implementation = self.config._attn_implementation if self.config is not None else "sdpa"
        if implementation == "sdpa" and math_attention_is_faster(q, k):
            implementation = "eager"
            if not torch.compiler.is_compiling():
                logger.warning_once(
                    f"attn_implementation='sdpa' runs as 'eager' (the same attention, as matmul and softmax) while "
                    f"training in {q.dtype} on the CPU over short sequences, where it is faster (speedups.py)"
                )
        attention: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        with sdpa_without_cudnn(q):
            output, weights = attention(
                self,
                q,
                k,
                v,
                attention_mask,
                dropout=self.dropout if self.training else 0.0,
                scaling=self.scaling,
                **kwargs,
            )  # (B, Lq, h, d_k)
        concat = output.reshape(*query.shape[:-1], self.inner_dim)  # Concat(head_1..head_h): (B, Lq, h * d_v)
        return self.out_proj(concat), weights  # Concat(...) W^O


# ----------------------------------------------------------------------------------------------------------------
# §3.2.3 Applications of attention in our model: the masks. transformers' masking_utils builds them in the format
# of each attention implementation. It may drop a mask where SDPA needs none (nothing padded, a causal mask SDPA's
# is_causal makes), but finding that out reads the mask's values back to the host; neither a decoding step of
# generate() nor a training step on an accelerator does that (``may_read_values``), and there the masks are always
# built. On the CPU a read costs no synchronisation, and running without the masks is faster (``vanilla-bench
# --translate``, batch 1).
# ----------------------------------------------------------------------------------------------------------------
def encoder_self_attention_mask(
    config, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor | None, training: bool = False
):
    """ "Each position in the encoder can attend to all positions in the previous layer of the encoder", padding
    excepted. Restricted (``attention_window`` r, Table 1): to the positions j with |i - j| <= r."""
    window = config.attention_window
    return create_bidirectional_mask(
        config=config,
        inputs_embeds=inputs_embeds,
        attention_mask=attention_mask,
        and_mask_function=None if window is None else sliding_window_bidirectional_overlay(window),
        allow_is_bidirectional_skip=may_read_values(inputs_embeds, training),
    )


def decoder_self_attention_mask(
    config,
    inputs_embeds: torch.Tensor,
    attention_mask: torch.Tensor | None,
    cache: Cache | None,
    training: bool = False,
):
    """ "We need to prevent leftward information flow in the decoder ... by masking out (setting to -inf) all values
    in the input of the softmax which correspond to illegal connections": each position sees itself and the ones
    before it (cached ones included), padding excepted. Restricted (``attention_window`` r): to j in [i - r, i],
    transformers' sliding window of r + 1 (``config.sliding_window``), whose cache layers keep the last r."""
    create = create_causal_mask if config.attention_window is None else create_sliding_window_causal_mask
    # the cache goes fourth, by position: its parameter is `past_key_values` before transformers 5.24, `cache` since
    skip = may_read_values(inputs_embeds, training)
    return create(config, inputs_embeds, attention_mask, cache, allow_is_causal_skip=skip)


def full_attention_config(config: VanillaTransformerConfig) -> VanillaTransformerConfig:
    """``config`` without a self-attention window: what the encoder-decoder attention's cache is made from (it holds
    the whole source however self-attention is restricted)."""
    if config.attention_window is None:
        return config
    full = copy.copy(config)
    full.attention_window = None
    return full


def encoder_decoder_attention_mask(
    config,
    inputs_embeds: torch.Tensor,
    encoder_attention_mask: torch.Tensor | None,
    encoder_hidden_states,
    training: bool = False,
):
    """ "This allows every position in the decoder to attend over all positions in the input sequence", padding
    excepted."""
    return create_bidirectional_mask(
        config=config,
        inputs_embeds=inputs_embeds,
        attention_mask=encoder_attention_mask,
        encoder_hidden_states=encoder_hidden_states,
        allow_is_bidirectional_skip=may_read_values(inputs_embeds, training),
    )


# ----------------------------------------------------------------------------------------------------------------
# §3.3 Position-wise feed-forward networks
# ----------------------------------------------------------------------------------------------------------------
class PositionWiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same two linear maps at every position (d_model -> d_ff -> d_model).
    ``config.activation_function`` may swap ReLU for another activation (Marian checkpoints use swish)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.ffn_dim)  # W_1, b_1
        self.fc2 = nn.Linear(config.ffn_dim, config.d_model)  # W_2, b_2
        self.activation = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(x)  # (B, L, d_ff)
        hidden = relu(hidden) if isinstance(self.activation, nn.ReLU) else self.activation(hidden)
        hidden = F.dropout(hidden, p=self.activation_dropout, training=self.training)
        return self.fc2(hidden)  # (B, L, d_model)


# ----------------------------------------------------------------------------------------------------------------
# §3.4 Embeddings and softmax: "we share the same weight matrix between the two embedding layers and the
# pre-softmax linear transformation ... In the embedding layers, we multiply those weights by sqrt(d_model)". The
# matrix is VanillaTransformerModel.shared (tied by _tied_weights_keys), the scale is applied in _Stack.embed, and
# the pre-softmax layer is VanillaTransformerForSeq2Seq.lm_head.
# ----------------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------------
# §3.5 Positional encoding
# ----------------------------------------------------------------------------------------------------------------
def sinusoid_table(num_positions: int, dim: int, layout: str) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    ``layout="interleaved"`` places the pair (sin, cos) of frequency i at columns (2i, 2i+1) as the equations read;
    ``"concat"`` places all sines first, then all cosines (fairseq, tensor2tensor, Marian). Computed in float64 so
    that the float32 table is exact to rounding at any position.
    """
    pos = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    inv_freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (d/2,)
    angles = pos * inv_freq  # (P, d/2)
    if layout == "interleaved":
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (P, d/2, 2) -> (P, d)
    else:
        table = torch.cat((angles.sin(), angles.cos()), dim=-1)  # (P, d)
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """§3.5: fixed sinusoids added to the embeddings, which "may allow the model to extrapolate to sequence lengths
    longer than the ones encountered during training": the table is a non-persistent buffer (never saved) that
    grows when a longer sequence arrives."""

    def __init__(self, num_positions: int, dim: int, layout: str):
        super().__init__()
        self.dim, self.layout = dim, layout
        self.register_buffer("table", sinusoid_table(num_positions, dim, layout), persistent=False)

    def forward(self, position_ids: torch.Tensor, positions_needed: int) -> torch.Tensor:
        """position_ids (L,) -> (L, d_model); ``positions_needed`` (a host integer: no value is read back from the
        device) is one more than the largest of them."""
        if positions_needed > self.table.shape[0]:
            if torch.compiler.is_compiling():  # a buffer cannot grow inside a compiled graph: it computes what it needs
                return sinusoid_table(positions_needed, self.dim, self.layout).to(self.table)[position_ids]
            size = max(positions_needed, 2 * self.table.shape[0])
            self.table = sinusoid_table(size, self.dim, self.layout).to(self.table.device)
        return self.table[position_ids]


class LearnedPositionalEmbedding(nn.Embedding):
    """Table 3, row (E): learned positional embeddings instead of sinusoids (a fixed maximum length)."""

    def forward(self, position_ids: torch.Tensor, positions_needed: int) -> torch.Tensor:
        if positions_needed > self.num_embeddings:
            raise ValueError(
                f"position {positions_needed - 1} is beyond max_position_embeddings={self.num_embeddings} of the "
                "learned position embeddings; use position_embedding_type='sinusoidal' for unbounded lengths"
            )
        return super().forward(position_ids)  # (L, d_model)


def build_position_encoding(config: VanillaTransformerConfig) -> nn.Module:
    if config.position_embedding_type == "learned":
        return LearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)
    return SinusoidalPositionalEncoding(config.max_position_embeddings, config.d_model, config.sinusoidal_layout)


# ----------------------------------------------------------------------------------------------------------------
# The transformers classes
# ----------------------------------------------------------------------------------------------------------------
def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing: the decoder reads ``<start> y_1 ... y_{n-1}`` to predict ``y_1 ... y_n``.

    Adapted from transformers.models.marian.modeling_marian.shift_tokens_right.

    Args:
        labels: (B, T) target ids, -100 where ignored.
    Returns:
        (B, T) decoder input ids: the start token, then ``labels[:, :-1]`` with -100 replaced by the pad id.
    """
    shifted = labels.new_full(labels.shape, decoder_start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill_(shifted == -100, pad_token_id)


class VanillaTransformerPreTrainedModel(PreTrainedModel):
    config: VanillaTransformerConfig
    config_class = VanillaTransformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True

    def __init__(self, config: VanillaTransformerConfig, *inputs, **kwargs):
        config.validate()  # a config changed after it was made (config.dropout = 1.0) is refused here
        super().__init__(config, *inputs, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *args, **kwargs):
        """``PreTrainedModel.from_pretrained``, with the faults of a local checkpoint named: a directory that does
        not exist (instead of a Hub error), no config.json, a weights file cut short, weights that are NaN or
        infinite (a damaged file: it would load and translate into garbage)."""
        name = str(pretrained_model_name_or_path)
        folder = local_model_dir(name)
        if folder is not None:
            check_checkpoint_files(folder / (kwargs.get("subfolder") or ""), kwargs.get("config") is not None)
            loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        else:
            try:
                loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
            except OSError as error:
                raise OSError(f"{name} is no local directory, and loading it from the Hub failed: {error}") from error
        check_loaded_weights(loaded[0] if isinstance(loaded, tuple) else loaded, name)  # (model, info) on request
        return loaded

    def save_pretrained(self, save_directory, *args, **kwargs):
        # A remote-code checkpoint names both classes, so AutoModel and AutoModelForSeq2SeqLM can each load it, and
        # the translation pipeline transformers 5 removed (pipeline_vanilla.py, written beside the model's code).
        module = __name__.rsplit(".", 1)[-1]
        auto_map = {
            "AutoModel": f"{module}.VanillaTransformerModel",
            "AutoModelForSeq2SeqLM": f"{module}.VanillaTransformerForSeq2Seq",
        }
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **auto_map}
        self.config.custom_pipelines = {**(getattr(self.config, "custom_pipelines", None) or {}), **CUSTOM_PIPELINES}
        # FSDP 2's fully_shard swaps the model's class for FSDP<Class>, which torch defines: transformers would copy
        # torch's modules as the model's code and name that class in auto_map. The model is saved as what it was built.
        built_as = next(cls for cls in type(self).__mro__ if not cls.__module__.startswith("torch."))
        sharded_as, self.__class__ = self.__class__, built_as
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.__class__ = sharded_as

    def mark_tied_weights_as_initialized(self, loading_info) -> None:
        """For remote-code models transformers drops from ``missing_keys`` every weight flagged as initialised, and it
        flags a tie's source together with its targets (they are one Parameter). A checkpoint without the shared
        embedding then loaded "with no missing keys" and left it on the meta device. Sources the checkpoint did not
        hold stay missing here, so they are initialised (or tied to a target that was loaded) and reported."""
        not_loaded = set(loading_info.missing_keys)
        super().mark_tied_weights_as_initialized(loading_info)
        loading_info.missing_keys |= not_loaded & set(self.all_tied_weights_keys.values())

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """tensor2tensor's initialisation: Xavier-uniform linear weights with zero biases; the shared token embedding
        ~ N(0, d_model^-0.5), so that after the sqrt(d_model) scale (§3.4) embeddings have unit variance; LayerNorm
        at identity; learned positions ~ N(0, init_std); sinusoids recomputed (they are never saved)."""
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, LearnedPositionalEmbedding):
            init.normal_(module.weight, mean=0.0, std=self.config.init_std)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, SinusoidalPositionalEncoding):
            init.copy_(module.table, sinusoid_table(module.table.shape[0], module.dim, module.layout))
        elif isinstance(module, VanillaTransformerForSeq2Seq) and module.final_logits_bias is not None:
            init.zeros_(module.final_logits_bias)


class _Stack(VanillaTransformerPreTrainedModel):
    """What both stacks share: §3.4 scaled embeddings plus §3.5 positions, with §5.4's dropout on the sum."""

    input_prefix = ""  # the names of its inputs in the full model's forward: "" or "decoder_"

    def __init__(self, config: VanillaTransformerConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config)
        # The full model passes its shared embedding (§3.4); a stack built on its own (from_pretrained) has its own.
        self.embed_tokens = (
            embed_tokens if embed_tokens is not None else nn.Embedding(config.vocab_size, config.d_model)
        )
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = build_position_encoding(config)
        self.dropout = config.dropout

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    def embed(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        past_length: int | torch.Tensor = 0,
        positions_needed: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (token embeddings * sqrt(d_model), Dropout(that + PE)), both (B, L, d_model). The new tokens sit
        at positions ``past_length`` (cached tokens before them) onwards; ``positions_needed``, for a static cache
        whose length is a tensor, is its size (a host integer)."""
        ids_name, embeds_name = f"{self.input_prefix}input_ids", f"{self.input_prefix}inputs_embeds"
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError(f"Give exactly one of `{ids_name}` and `{embeds_name}`")
        check_token_ids(input_ids, self.config.vocab_size, ids_name, training=self.training)
        check_embeddings(inputs_embeds, self.config.d_model, embeds_name, training=self.training)
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)  # (B, L, d_model)
        inputs_embeds = inputs_embeds * self.embed_scale
        length = inputs_embeds.shape[1]
        positions = torch.arange(length, device=inputs_embeds.device) + past_length  # (L,)
        needed = positions_needed if positions_needed is not None else past_length + length
        hidden = inputs_embeds + self.embed_positions(positions, needed).to(inputs_embeds.dtype)
        return inputs_embeds, residual_dropout(hidden, self.dropout, self.training)


class VanillaTransformerEncoder(_Stack):
    """§3.1 Encoder: "a stack of N = 6 identical layers" of self-attention and feed-forward over the embedded
    source."""

    input_prefix = ""
    _can_record_outputs = {"hidden_states": EncoderLayer, "attentions": MultiHeadAttention}

    def __init__(self, config: VanillaTransformerConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.encoder_layers))
        self.post_init()

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        """
        Args:
            input_ids: (B, S) source token ids (or ``inputs_embeds``, (B, S, d_model)).
            attention_mask: (B, S), 1 for a token and 0 for padding.
        Returns:
            ``BaseModelOutput``: ``last_hidden_state`` (B, S, d_model); with ``output_hidden_states`` /
            ``output_attentions``, each layer's (B, S, d_model) and (B, h, S, S).
        """
        inputs_embeds, hidden_states = self.embed(input_ids, inputs_embeds)
        check_padding_mask(attention_mask, inputs_embeds.shape[:2], "attention_mask", "the `input_ids`", self.training)
        mask = encoder_self_attention_mask(self.config, inputs_embeds, attention_mask, self.training)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, **kwargs)
        return BaseModelOutput(last_hidden_state=hidden_states)


class VanillaTransformerDecoder(_Stack):
    """§3.1 Decoder: "also composed of a stack of N = 6 identical layers" of masked self-attention,
    encoder-decoder attention and feed-forward."""

    input_prefix = "decoder_"
    _can_record_outputs = {
        "hidden_states": DecoderLayer,
        "attentions": OutputRecorder(MultiHeadAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(MultiHeadAttention, index=1, layer_name="cross_attn"),
    }

    def __init__(self, config: VanillaTransformerConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.decoder_layers))
        self.post_init()

    @accepts_past_key_values
    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """
        Args:
            input_ids: (B, T) target ids read so far (or ``inputs_embeds``, (B, T, d_model)); with a cache, only
                the new ones.
            attention_mask: (B, T), or (B, cached + T) with a cache; 1 for a token and 0 for padding.
            encoder_hidden_states: (B, S, d_model), the encoder output; ``encoder_attention_mask`` (B, S).
            cache: an ``EncoderDecoderCache`` (made here when ``use_cache`` and none is given); also accepted as
                ``past_key_values``, its name before transformers 5.24.
        Returns:
            ``BaseModelOutputWithPastAndCrossAttentions``: ``last_hidden_state`` (B, T, d_model), the cache, and
            with ``output_attentions`` each layer's self (B, h, T, cached + T) and cross (B, h, T, S) weights.
        """
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs `encoder_hidden_states` (the encoder output)")
        if use_cache and cache is None:
            cache = EncoderDecoderCache(
                DynamicCache(config=self.config), DynamicCache(config=full_attention_config(self.config))
            )
        self_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else None
        # cached tokens: a host integer for a dynamic cache; a tensor for a static one, whose size bounds positions
        past_length = cache.get_seq_length() if cache is not None else 0
        static_size = self_cache.get_max_length() if self_cache is not None and self_cache.is_compileable else None
        inputs_embeds, hidden_states = self.embed(input_ids, inputs_embeds, past_length, static_size)
        # transformers' convention: a 2-D decoder mask covers the cached tokens and the new ones
        batch, length = inputs_embeds.shape[:2]
        training = self.training
        if not isinstance(past_length, torch.Tensor):
            check_padding_mask(
                attention_mask,
                (batch, past_length + length),
                "decoder_attention_mask",
                lambda: f"the {past_length} cached and {length} new decoder tokens",
                training,
            )
        source_shape = encoder_hidden_states.shape[:2]
        check_padding_mask(encoder_attention_mask, source_shape, "attention_mask", "the source", training)
        self_mask = decoder_self_attention_mask(self.config, inputs_embeds, attention_mask, self_cache, training)
        cross_mask = encoder_decoder_attention_mask(
            self.config, inputs_embeds, encoder_attention_mask, encoder_hidden_states, training
        )
        for layer in self.layers:
            hidden_states = layer(
                hidden_states,
                self_mask,
                encoder_hidden_states,
                encoder_attention_mask=cross_mask,
                cache=cache,
                **kwargs,
            )
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states, **{CACHE_NAME: cache if use_cache else None}
        )


class VanillaTransformerModel(VanillaTransformerPreTrainedModel):
    """The encoder-decoder without the output layer; returns the decoder's last hidden states."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        # §3.4: one embedding matrix for the source and target tokens (with a shared vocabulary).
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        if config.share_encoder_decoder_embeddings:
            decoder_embeddings = self.shared
            self._tied_weights_keys = {
                "encoder.embed_tokens.weight": "shared.weight",
                "decoder.embed_tokens.weight": "shared.weight",
            }
        else:
            decoder_embeddings = nn.Embedding(config.vocab_size, config.d_model)
            self._tied_weights_keys = {"encoder.embed_tokens.weight": "shared.weight"}
        self.encoder = VanillaTransformerEncoder(config, self.shared)
        self.decoder = VanillaTransformerDecoder(config, decoder_embeddings)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.shared = value
        self.encoder.embed_tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.embed_tokens = value

    @accepts_past_key_values
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        """
        Args:
            input_ids: (B, S) source ids, ``attention_mask`` (B, S); or ``encoder_outputs`` already computed.
            decoder_input_ids: (B, T) target ids read so far (shifted right), ``decoder_attention_mask`` (B, T).
            cache: an ``EncoderDecoderCache`` from an earlier step (``use_cache``); or as ``past_key_values``.
        Returns:
            ``Seq2SeqModelOutput``: ``last_hidden_state`` (B, T, d_model), ``encoder_last_hidden_state``
            (B, S, d_model), the cache, and the hidden states and attentions asked for.
        """
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError("Give `decoder_input_ids` (or `labels` to the ForSeq2Seq model, which shifts them)")
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **{CACHE_NAME: getattr(decoder_outputs, CACHE_NAME)},
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


# §6.1: "We set the maximum output length during inference to input length + 50".
EXTRA_OUTPUT_TOKENS = 50
# §6.1: "We used beam search with a beam size of 4 and length penalty α = 0.6", stopping once 4 hypotheses have
# finished. transformers' penalty divides by len^α, not GNMT's ((5 + len) / 6)^α (docs/model.md#length-penalty in the
# repository). The model's own decoding, and every default of the package's tools (vanilla_tools.decoding).
PAPER_DECODING = {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True}


class VanillaTransformerForSeq2Seq(VanillaTransformerPreTrainedModel, GenerationMixin):
    """The full model of the paper: encoder-decoder plus the pre-softmax linear layer (§3.4), tied to the shared
    embedding. ``labels`` give the (label-smoothed, §5.4) cross-entropy loss."""

    # True where the caller gives generate() its text prepared as config.text_form says (the package's engines and
    # vanilla-train do): generate() then does not warn that it cannot prepare it
    text_form_applied = False

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.model = VanillaTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
        if config.share_encoder_decoder_embeddings:
            self._tied_weights_keys = {
                "lm_head.weight": "model.shared.weight",
                "model.encoder.embed_tokens.weight": "model.shared.weight",
                "model.decoder.embed_tokens.weight": "model.shared.weight",
            }
        # A constant added to the logits; only converted Marian checkpoints carry one (it is not in the paper).
        self.final_logits_bias = nn.Buffer(torch.zeros(1, config.vocab_size)) if config.final_logits_bias else None
        self.post_init()
        # §6.1's decoding; the maximum output length (input length + 50) is set per call by generate().
        self.generation_config.update(**PAPER_DECODING)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    @torch.no_grad()
    def generate(
        self, inputs: torch.Tensor | None = None, generation_config: GenerationConfig | None = None, **kwargs
    ) -> torch.LongTensor | GenerateOutput:
        """``GenerationMixin.generate`` with §6.1's "maximum output length during inference to input length + 50"
        wherever neither the call nor the generation config sets a length, and with the inputs checked once for the
        whole call rather than at every decoding step (a check of values reads the tensor back to the host). A model
        that reads prepared text (``config.text_form``) says once that its input must be so prepared."""
        kwargs = self.checked_generate_kwargs(inputs, generation_config, kwargs)
        with values_checked():
            return super().generate(inputs, generation_config, **kwargs)

    def checked_generate_kwargs(
        self, inputs: torch.Tensor | None, generation_config: GenerationConfig | None, kwargs: dict
    ) -> dict:
        """``generate()``'s keyword arguments once its inputs are checked (a bad one raises, named), with §6.1's
        output limit added where no length is set: what ``generate`` runs with, and an ensemble of such models
        (inference/ensemble.py) for each member."""
        kwargs = dict(kwargs)
        if not self.text_form_applied and (note := self.config.text_form_note()):
            logger.warning_once(note)
        source = inputs if inputs is not None else kwargs.get("input_ids")
        check_token_ids(source, self.config.vocab_size, "input_ids")
        check_embeddings(kwargs.get("inputs_embeds"), self.config.d_model, "inputs_embeds")
        source = source if source is not None else kwargs.get("inputs_embeds")
        if source is not None:
            check_padding_mask(kwargs.get("attention_mask"), source.shape[:2], "attention_mask", "the `input_ids`")
        target = kwargs.get("decoder_input_ids")
        check_token_ids(target, self.config.vocab_size, "decoder_input_ids")
        if target is not None:
            check_padding_mask(
                kwargs.get("decoder_attention_mask"), target.shape, "decoder_attention_mask", "the `decoder_input_ids`"
            )
        config = generation_config if generation_config is not None else self.generation_config
        lengths = (kwargs.get("max_length"), kwargs.get("max_new_tokens"), config.max_length, config.max_new_tokens)
        if source is not None and all(length is None for length in lengths):
            kwargs["max_new_tokens"] = source.shape[1] + EXTRA_OUTPUT_TOKENS
        cache_implementation = kwargs.get("cache_implementation", config.cache_implementation)
        if self.config.attention_window is not None and cache_implementation not in (None, "dynamic"):
            raise ValueError(
                f"cache_implementation={cache_implementation!r} with `attention_window` "
                f"{self.config.attention_window}: restricted self-attention decodes with the dynamic cache (its "
                "sliding-window layers keep the last r keys); leave cache_implementation unset"
            )
        return kwargs

    def _prepare_cache_for_generation(self, generation_config: GenerationConfig, model_kwargs: dict, *args, **kwargs):
        """transformers' caches for generate(): the self-attention one has sliding-window layers when
        ``attention_window`` is set (``config.sliding_window``), and so would the encoder-decoder one, made from the
        same config; that one is remade full, since encoder-decoder attention sees the whole source."""
        prepared = super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        cache = model_kwargs.get(CACHE_NAME)
        if self.config.attention_window is not None and isinstance(cache, EncoderDecoderCache):
            cache.cross_attention_cache = DynamicCache(config=full_attention_config(self.config))
        return prepared

    def resize_token_embeddings(self, new_num_tokens: int | None = None, *args, **kwargs) -> nn.Embedding:
        for name, token in self.config.special_token_ids().items():
            if new_num_tokens is not None and new_num_tokens <= token:
                raise ValueError(
                    f"resize_token_embeddings({new_num_tokens}) would drop `{name}` ({token}): the vocabulary must "
                    "keep every special token"
                )
        embeddings = super().resize_token_embeddings(new_num_tokens, *args, **kwargs)
        if self.final_logits_bias is not None:
            old = self.final_logits_bias
            new = old.new_zeros(1, embeddings.num_embeddings)
            new[:, : min(old.shape[1], new.shape[1])] = old[:, : new.shape[1]]
            self.final_logits_bias = nn.Buffer(new)
        return embeddings

    @accepts_past_key_values
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        skip_logits: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        r"""
        Args:
            input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, cache: as
                ``VanillaTransformerModel.forward``: (B, S) source, (B, T) target.
            labels: (B, T) target ids, -100 where ignored; without ``decoder_input_ids`` they are shifted right
                into them (``shift_tokens_right``).
            skip_logits: compute the loss with the fused ``LinearCrossEntropy`` and return no logits (as Trainer
                asks of Liger-kernel models). Defaults to True in training mode with ``labels``: a training step
                needs only the loss. Pass False to get the logits too.
        Returns:
            ``Seq2SeqLMOutput``: ``loss`` (a scalar, label-smoothed cross-entropy per target token, §5.4) with
            ``labels``; ``logits`` (B, T, vocab_size) unless skipped; the cache and the model's other outputs.
        """
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        if skip_logits is None:
            skip_logits = self.training and labels is not None
        if skip_logits and labels is None:
            raise ValueError("skip_logits=True returns only the loss, which needs labels; pass labels or drop it")
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        check_token_ids(labels, self.config.vocab_size, "labels", ignore_index=-100, training=self.training)
        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        logits = loss = None
        if skip_logits:
            loss = self.fused_loss(outputs.last_hidden_state, labels, num_items_in_batch)
        else:
            logits = self.lm_head(outputs.last_hidden_state)  # (B, L, vocab); softmax lives in the loss / generate()
            if self.final_logits_bias is not None:
                logits = logits + self.final_logits_bias
            if labels is not None:
                loss = self.loss(logits, labels, num_items_in_batch)
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **{CACHE_NAME: getattr(outputs, CACHE_NAME)},
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )

    def loss(
        self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """Cross-entropy with label smoothing epsilon_ls = ``config.label_smoothing`` (§5.4); -100 labels ignored.

        Averaged over the batch's target tokens, or summed and divided by ``num_items_in_batch`` when Trainer passes
        the token count of the whole (accumulated, all-device) step, so the gradient does not depend on how the
        step is split into micro-batches or devices."""
        labels = labels.to(logits.device).view(-1)
        logits = logits.float().view(-1, logits.shape[-1])
        smoothing = self.config.label_smoothing
        if num_items_in_batch is None:
            return F.cross_entropy(logits, labels, ignore_index=-100, label_smoothing=smoothing)
        total = F.cross_entropy(logits, labels, ignore_index=-100, label_smoothing=smoothing, reduction="sum")
        return total / num_items_in_batch

    def fused_loss(
        self, hidden: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        """``loss`` computed from the decoder output (B, L, d_model) by ``LinearCrossEntropy``, never forming the
        logits."""
        labels = labels.to(hidden.device).reshape(-1)
        denominator = (labels != -100).sum() if num_items_in_batch is None else num_items_in_batch
        bias = None if self.final_logits_bias is None else self.final_logits_bias[0]
        hidden = hidden.reshape(-1, hidden.shape[-1])
        smoothing = self.config.label_smoothing
        return LinearCrossEntropy.apply(hidden, self.lm_head.weight, bias, labels, smoothing, denominator)

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @staticmethod
    def _reorder_cache(cache: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search keeps the best beams after every step (``generate()`` calls this hook when a model has it).
        Only the self-attention cache needs reordering: ``beam_idx`` picks among the beams of the same sentence,
        whose encoder-decoder keys and values are identical, so reordering those (what the default does) would copy
        every layer's (B * beams, h, source length, d_k) keys and values each step for nothing."""
        if isinstance(cache, EncoderDecoderCache):
            cache.self_attention_cache.reorder_cache(beam_idx)
        else:
            cache.reorder_cache(beam_idx)
        return cache


__all__ = [
    "MultiHeadAttention",
    "VanillaTransformerForSeq2Seq",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
]
