"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a transformers model.

The classes follow the paper's sections: 3.2.1 scaled dot-product attention, 3.2.2 multi-head attention,
3.3 position-wise feed-forward networks, 3.4 embeddings and softmax, 3.5 positional encoding, and 3.1 for the
encoder and decoder stacks built from them. Sub-layers are post-LN, ``LayerNorm(x + Dropout(Sublayer(x)))``,
with no LayerNorm after the stacks.

This file travels to the Hub next to the weights (``trust_remote_code``): it imports only torch, transformers and
``configuration_vanilla``.
"""

import json
import math
import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation.utils import GenerateOutput
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple, is_torchdynamo_compiling
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .configuration_vanilla import VanillaTransformerConfig

# ----------------------------------------------------------------------------------------------------------------
# Input checks: a wrong id, mask or embedding fails here with a message that names it, not deep inside torch.
# Shapes and dtypes are checked on every call (host only). Checks of values (an id out of range, a NaN) read the
# tensor back to the host, so ``generate()`` makes them once for the whole call instead of at every decoding step.
# ----------------------------------------------------------------------------------------------------------------
_VALUES_CHECKED = ContextVar("vanilla_transformer_values_checked", default=False)


def value_checks_due() -> bool:
    """False inside ``generate()`` (its inputs were checked once) and while compiling (no data-dependent branch)."""
    return not is_torchdynamo_compiling() and not _VALUES_CHECKED.get()


def check_token_ids(ids: torch.Tensor | None, vocab_size: int, name: str, ignore_index: int | None = None) -> None:
    """Raise ValueError unless ``ids`` is a non-empty (batch, length) integer tensor of ids in [0, vocab_size)
    (``ignore_index`` allowed too: -100 in labels)."""
    if ids is None:
        return
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"`{name}` must be a non-empty (batch, length) tensor, got shape {tuple(ids.shape)}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer token ids, got dtype {ids.dtype}")
    if not value_checks_due():
        return
    bad = (ids < 0) | (ids >= vocab_size)
    if ignore_index is not None:
        bad &= ids != ignore_index
    if bad.any():
        allowed = f" or {ignore_index}" if ignore_index is not None else ""
        raise ValueError(f"`{name}` holds token id {int(ids[bad][0])}, outside [0, vocab_size={vocab_size}){allowed}")


def check_padding_mask(mask: torch.Tensor | None, shape: tuple[int, int], name: str, of: str) -> None:
    """A 2-D mask is (batch, keys) of 1 (token) and 0 (padding), as transformers' tokenizers return it. An additive
    mask (0 / -inf) would be read as its inverse, so values other than 0 and 1 are refused."""
    if mask is None or mask.dim() == 4:  # 4-D: a ready-made attention mask, used as given
        return
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"`{name}` has shape {tuple(mask.shape)} but must be {tuple(shape)}, the shape of {of}")
    if value_checks_due() and mask.dtype != torch.bool and ((mask != 0) & (mask != 1)).any():
        value = mask[(mask != 0) & (mask != 1)][0].item()
        raise ValueError(
            f"`{name}` must hold 1 (attend) and 0 (padding), found {value}: an additive mask (0 / -inf) is not "
            "accepted; pass `mask == 0` instead"
        )


def check_embeddings(embeds: torch.Tensor | None, width: int, name: str) -> None:
    """``inputs_embeds`` must be a non-empty float (batch, length, d_model) tensor of finite values."""
    if embeds is None:
        return
    if embeds.dim() != 3 or embeds.shape[0] == 0 or embeds.shape[1] == 0 or embeds.shape[2] != width:
        raise ValueError(f"`{name}` must be (batch, length, d_model={width}), got shape {tuple(embeds.shape)}")
    if not embeds.dtype.is_floating_point:
        raise ValueError(f"`{name}` must be a floating-point tensor, got dtype {embeds.dtype}")
    if value_checks_due() and not torch.isfinite(embeds).all():
        raise ValueError(f"`{name}` holds NaN or infinite values")


def check_safetensors_file(path: Path) -> None:
    """Raise OSError naming ``path`` unless its header is whole and its tensors fill the rest of the file exactly
    (safetensors' own error for a file cut short names no file)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little") if size >= 8 else size
        try:
            header = json.loads(f.read(header_size)) if 8 + header_size <= size else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            header = None
    if not isinstance(header, dict):
        raise OSError(f"{path} is not a safetensors file, or its header is damaged ({size} bytes)")
    data_size = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    if 8 + header_size + data_size != size:
        raise OSError(f"{path} holds {size} bytes but its header describes {8 + header_size + data_size}: the file "
                      "was cut short or damaged")  # fmt: skip


# A Hub model id: "name" or "namespace/name" (anything else that is no directory is a missing local path).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def local_model_dir(name: str | os.PathLike) -> Path | None:
    """The directory ``name`` is; None if it is no directory but can be a Hub id; else FileNotFoundError (rather
    than the Hub's error about a malformed repo id, or an offline error, for a local path that does not exist)."""
    if Path(name).is_dir():
        return Path(name)
    if HUB_ID.match(str(name)):
        return None
    raise FileNotFoundError(f"no such model directory: {name}")


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing: the decoder reads ``<start> y_1 ... y_{n-1}`` to predict ``y_1 ... y_n``."""
    shifted = labels.new_full(labels.shape, decoder_start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill_(shifted == -100, pad_token_id)


# ----------------------------------------------------------------------------------------------------------------
# §3.2.3 masks. For "sdpa" and "eager" they are built here, small and broadcastable: a key-padding mask
# (B, 1, 1, Lk), None when nothing is padded, and no causal mask at all for one-token decoding steps or where SDPA's
# is_causal does the job. Other implementations (flash, flex) get transformers' mask builders, in their formats.
# ----------------------------------------------------------------------------------------------------------------
SIMPLE_MASK_IMPLEMENTATIONS = ("sdpa", "eager")


def key_padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, Lk) of 1 (token) / 0 (padding) -> boolean (B, 1, 1, Lk), True where a key may be attended; None if none
    is padded."""
    if attention_mask is None or (not is_torchdynamo_compiling() and bool(attention_mask.all())):
        return None
    return attention_mask.bool()[:, None, None, :]


def causal_self_attention_mask(
    query_length: int,
    past_length: int | torch.Tensor,
    padding: torch.Tensor | None,
    device: torch.device,
    static_length: int | None = None,
) -> torch.Tensor | None:
    """Decoder self-attention: query i (at position past_length + i) attends to keys 0..past_length+i, not to padding.

    None where the attention function can do without: a single new query sees every cached key, and with no past
    and no padding the causal attention module masks the future itself (SDPA's ``is_causal``, and the same in
    ``eager_attention_forward``). A static cache (``static_length``: its preallocated length) returns all its slots,
    written or not, so there the mask always spans them and hides the unwritten ones. ``past_length`` may be a
    tensor (a static cache's counter), so the mask is built from tensors and compiles without recompiling per step.
    """
    if padding is None and static_length is None and (query_length == 1 or past_length == 0):
        return None
    key_length = static_length if static_length is not None else past_length + query_length
    query_positions = torch.arange(query_length, device=device)[:, None] + past_length  # (Lq, 1)
    causal = (torch.arange(key_length, device=device) <= query_positions)[None, None]  # (1, 1, Lq, Lk)
    if padding is None:
        return causal
    if padding.shape[-1] < key_length:  # a static cache's slots beyond the given mask: hidden by `causal` anyway
        padding = F.pad(padding, (0, key_length - padding.shape[-1]), value=True)
    return causal & padding  # (B, 1, Lq, Lk)


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
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)
    else:
        table = torch.cat((angles.sin(), angles.cos()), dim=-1)
    return table.float()  # (P, d)


class SinusoidalPositionalEncoding(nn.Module):
    """§3.5: fixed sinusoids added to the embeddings. Not learned, so it extends to lengths never seen in training:
    the table is a non-persistent buffer (never saved) that grows when a longer sequence arrives."""

    def __init__(self, num_positions: int, dim: int, layout: str):
        super().__init__()
        self.dim, self.layout = dim, layout
        self.register_buffer("table", sinusoid_table(num_positions, dim, layout), persistent=False)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        # position_ids: (L,) or (B, L) -> (..., d_model)
        if not is_torchdynamo_compiling():
            needed = int(position_ids.max()) + 1
            if needed > self.table.shape[0]:
                self.table = sinusoid_table(max(needed, 2 * self.table.shape[0]), self.dim, self.layout).to(
                    self.table.device
                )
        return self.table[position_ids]


class LearnedPositionalEmbedding(nn.Embedding):
    """Table 3, row (E): learned positional embeddings instead of sinusoids (a fixed maximum length)."""

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        if not is_torchdynamo_compiling() and int(position_ids.max()) >= self.num_embeddings:
            raise ValueError(
                f"position {int(position_ids.max())} is beyond max_position_embeddings={self.num_embeddings} of the "
                "learned position embeddings; use position_embedding_type='sinusoidal' for unbounded lengths"
            )
        return super().forward(position_ids)


def build_position_encoding(config: VanillaTransformerConfig) -> nn.Module:
    if config.position_embedding_type == "learned":
        return LearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)
    return SinusoidalPositionalEncoding(config.max_position_embeddings, config.d_model, config.sinusoidal_layout)


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
            scores = scores + attention_mask[..., : key.shape[-2]]
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (B, Lq, h, d_k)
    return output, weights


# ----------------------------------------------------------------------------------------------------------------
# §3.2.2 Multi-head attention
# ----------------------------------------------------------------------------------------------------------------
def _rows(tensor: torch.Tensor | None, start: int, stop: int) -> torch.Tensor | None:
    return None if tensor is None else tensor[start:stop]


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    When keys and values have the model's width, W^Q, W^K, W^V of all heads are stacked in one ``in_proj``
    (3 d_model x d_model, as ``nn.MultiheadAttention``), so self-attention projects with one matrix product and
    encoder-decoder attention projects keys and values with one. Keys/values of other widths (``kdim``, ``vdim``)
    get their own ``q_proj``, ``k_proj``, ``v_proj``.

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
    ):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.head_dim = embed_dim // num_heads  # d_k = d_v = d_model / h
        self.scaling = self.head_dim**-0.5  # 1 / sqrt(d_k)
        self.dropout = dropout
        self.is_causal = is_causal  # read by the sdpa/flash interfaces
        self.layer_idx = layer_idx
        self.config = config
        if self.kdim == embed_dim and self.vdim == embed_dim:
            self.in_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)  # [W^Q; W^K; W^V]
        else:
            self.in_proj = None
            self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
            self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
            self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W^O

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)  # (B, L, d) -> (B, h, L, d_k)

    def _project_query(self, query: torch.Tensor) -> torch.Tensor:
        if self.in_proj is None:
            return self.q_proj(query)
        d = self.embed_dim
        return F.linear(query, self.in_proj.weight[:d], _rows(self.in_proj.bias, 0, d))

    def _project_key_value(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.in_proj is None:
            return self.k_proj(key), self.v_proj(value)
        d, w, b = self.embed_dim, self.in_proj.weight, self.in_proj.bias
        if value is key:  # encoder-decoder attention: K and V from one product
            return F.linear(key, w[d:], _rows(b, d, 3 * d)).chunk(2, dim=-1)
        return F.linear(key, w[d : 2 * d], _rows(b, d, 2 * d)), F.linear(value, w[2 * d :], _rows(b, 2 * d, 3 * d))

    @staticmethod
    def _math_is_faster(q: torch.Tensor, k: torch.Tensor) -> bool:
        """Training in bf16 on a CPU, plain matmul + softmax beats SDPA on short sequences: PyTorch's CPU
        flash-attention backward gains nothing from bf16 there (d_model 256, 16 tokens: 10.7k vs 5.0k tokens/s per
        training step). Same math, agreeing to 1e-5. In fp32 the two run at the same speed, and SDPA, which keeps
        no attention matrix for the backward pass, is kept."""
        return (
            q.device.type == "cpu"
            and q.dtype in (torch.bfloat16, torch.float16)
            and torch.is_grad_enabled()
            and q.requires_grad
            and k.shape[-2] <= 256
        )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
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

        cache, cached_cross = (None if is_cross else past_key_values), False  # a plain Cache holds self-attention
        if isinstance(past_key_values, EncoderDecoderCache):
            if is_cross:
                cached_cross = bool(past_key_values.is_updated.get(self.layer_idx))
                cache = past_key_values.cross_attention_cache
            else:
                cache = past_key_values.self_attention_cache

        if not is_cross and self.in_proj is not None:  # self-attention: Q, K, V from one product
            q, k, v = (self._split_heads(t) for t in self.in_proj(query).chunk(3, dim=-1))
        else:
            q = self._split_heads(self._project_query(query))
            if cached_cross:
                k, v = cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
            else:
                k, v = (self._split_heads(t) for t in self._project_key_value(key, value))
        if cache is not None and not cached_cross:
            k, v = cache.update(k, v, self.layer_idx)
            if is_cross and isinstance(past_key_values, EncoderDecoderCache):
                past_key_values.is_updated[self.layer_idx] = True

        implementation = self.config._attn_implementation if self.config is not None else "sdpa"
        if implementation == "sdpa" and self._math_is_faster(q, k):
            implementation = "eager"
        attention: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
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
        return self.out_proj(output.reshape(*query.shape[:-1], self.embed_dim)), weights  # Concat(heads) W^O


# ----------------------------------------------------------------------------------------------------------------
# §5.4 Residual dropout
# ----------------------------------------------------------------------------------------------------------------
def residual_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout(x) = x * m / (1 - P_drop), m_i ~ Bernoulli(1 - P_drop), applied to every sub-layer output and to the
    embedding sums (§5.4).

    Written here rather than ``F.dropout`` for the CPU only: there, ``F.dropout`` draws one 32-bit Mersenne-Twister
    number per element, about a fifth of a bf16 training step of this model. One draw serves two elements here (two
    15-bit uniforms from its two halves), so P_drop is resolved to 1/32768; same RNG, so ``torch.manual_seed``
    still fixes the masks. Other devices use ``F.dropout``."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p=p, training=True)
    bits = torch.empty((x.numel() + 1) // 2, dtype=torch.int32).random_()  # uniform on [0, 2^31)
    keep = (bits.view(torch.int16)[: x.numel()] & 0x7FFF) >= round(p * 32768)
    return x * keep.view(x.shape) * (1.0 / (1.0 - p))


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
        hidden = self.activation(self.fc1(x))  # (B, L, d_ff)
        hidden = F.dropout(hidden, p=self.activation_dropout, training=self.training)
        return self.fc2(hidden)


# ----------------------------------------------------------------------------------------------------------------
# §3.1 Encoder and decoder stacks
# ----------------------------------------------------------------------------------------------------------------
class SublayerConnection(nn.Module):
    """§3.1 / §5.4: the output of each sub-layer is LayerNorm(x + Dropout(Sublayer(x))) (post-LN)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual_dropout(sublayer_output, self.dropout, self.training))


class EncoderLayer(GradientCheckpointingLayer):
    """Encoder layer: self-attention over the source, then the feed-forward network, each post-LN."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(
            config.d_model,
            config.num_attention_heads,
            dropout=config.attention_dropout,
            layer_idx=layer_idx,
            config=config,
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
    """Decoder layer: masked self-attention, encoder-decoder attention (queries from the decoder, keys and values
    from the encoder output, §3.2.3), then the feed-forward network, each post-LN."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__()
        heads, dropout = config.num_attention_heads, config.attention_dropout
        self.self_attn = MultiHeadAttention(
            config.d_model, heads, dropout=dropout, is_causal=True, layer_idx=layer_idx, config=config
        )
        self.self_attn_sublayer = SublayerConnection(config)
        self.cross_attn = MultiHeadAttention(config.d_model, heads, dropout=dropout, layer_idx=layer_idx, config=config)
        self.cross_attn_sublayer = SublayerConnection(config)
        self.ffn = PositionWiseFeedForward(config)
        self.ffn_sublayer = SublayerConnection(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        attended, _ = self.self_attn(
            hidden_states, attention_mask=attention_mask, past_key_values=past_key_values, **kwargs
        )
        hidden_states = self.self_attn_sublayer(hidden_states, attended)
        attended, _ = self.cross_attn(
            hidden_states,
            encoder_hidden_states,
            attention_mask=encoder_attention_mask,
            past_key_values=past_key_values,
            **kwargs,
        )
        hidden_states = self.cross_attn_sublayer(hidden_states, attended)
        return self.ffn_sublayer(hidden_states, self.ffn(hidden_states))


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
            folder = folder / (kwargs.get("subfolder") or "")
            if not (folder / "config.json").is_file() and kwargs.get("config") is None:
                raise FileNotFoundError(f"{folder} has no config.json: it is not a saved model directory")
            for weights in sorted(folder.glob("*.safetensors")):
                check_safetensors_file(weights)
            loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        else:
            try:
                loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
            except OSError as error:
                raise OSError(f"{name} is no local directory, and loading it from the Hub failed: {error}") from error
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # (model, loading info) on request
        for weight, tensor in model.named_parameters():
            if tensor.device.type != "meta" and not torch.isfinite(tensor).all():
                raise ValueError(f"{name}: weight `{weight}` holds NaN or infinite values; the checkpoint is damaged")
        return loaded

    def save_pretrained(self, *args, **kwargs):
        # A remote-code checkpoint names both classes, so AutoModel and AutoModelForSeq2SeqLM can each load it.
        module = __name__.rsplit(".", 1)[-1]
        auto_map = {
            "AutoModel": f"{module}.VanillaTransformerModel",
            "AutoModelForSeq2SeqLM": f"{module}.VanillaTransformerForSeq2Seq",
        }
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **auto_map}
        return super().save_pretrained(*args, **kwargs)

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
    """What both stacks share: §3.4 scaled embeddings plus §3.5 positions, with dropout on the sum (§5.4)."""

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
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, past_length: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (token embeddings * sqrt(d_model), Dropout(that + PE)), both (B, L, d_model)."""
        ids_name, embeds_name = f"{self.input_prefix}input_ids", f"{self.input_prefix}inputs_embeds"
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError(f"Give exactly one of `{ids_name}` and `{embeds_name}`")
        check_token_ids(input_ids, self.config.vocab_size, ids_name)
        check_embeddings(inputs_embeds, self.config.d_model, embeds_name)
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        inputs_embeds = inputs_embeds * self.embed_scale
        positions = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device) + past_length  # (L,)
        hidden = inputs_embeds + self.embed_positions(positions).to(inputs_embeds.dtype)
        return inputs_embeds, residual_dropout(hidden, self.dropout, self.training)


class VanillaTransformerEncoder(_Stack):
    """§3.1 Encoder: N identical layers of self-attention and feed-forward over the embedded source."""

    input_prefix = ""  # its inputs are the model's input_ids / inputs_embeds

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
        inputs_embeds, hidden_states = self.embed(input_ids, inputs_embeds)
        check_padding_mask(attention_mask, inputs_embeds.shape[:2], "attention_mask", "the `input_ids`")
        # Padding keys are masked (§3.2.3); the mask's form depends on the attention implementation.
        if self.config._attn_implementation in SIMPLE_MASK_IMPLEMENTATIONS:
            mask = key_padding_mask(attention_mask)
        else:
            mask = create_bidirectional_mask(
                config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask
            )
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, **kwargs)
        return BaseModelOutput(last_hidden_state=hidden_states)


class VanillaTransformerDecoder(_Stack):
    """§3.1 Decoder: N identical layers of masked self-attention, encoder-decoder attention and feed-forward."""

    input_prefix = "decoder_"  # its inputs are the model's decoder_input_ids / decoder_inputs_embeds

    _can_record_outputs = {
        "hidden_states": DecoderLayer,
        "attentions": OutputRecorder(MultiHeadAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(MultiHeadAttention, index=1, layer_name="cross_attn"),
    }

    def __init__(self, config: VanillaTransformerConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.decoder_layers))
        self.post_init()

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs `encoder_hidden_states` (the encoder output)")
        if use_cache and past_key_values is None:
            past_key_values = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        inputs_embeds, hidden_states = self.embed(input_ids, inputs_embeds, past_length)
        # transformers' convention: a 2-D decoder mask covers the cached tokens and the new ones
        batch, length = inputs_embeds.shape[:2]
        check_padding_mask(
            attention_mask, (batch, past_length + length), "decoder_attention_mask",
            f"the {past_length} cached and {length} new decoder tokens",
        )  # fmt: skip
        check_padding_mask(encoder_attention_mask, encoder_hidden_states.shape[:2], "attention_mask", "the source")

        # Future positions are masked (§3.2.3), plus padding if a decoder mask is given.
        self_cache = past_key_values.self_attention_cache if isinstance(past_key_values, EncoderDecoderCache) else None
        simple = self.config._attn_implementation in SIMPLE_MASK_IMPLEMENTATIONS
        if simple and not (attention_mask is not None and attention_mask.dim() == 4):
            static = self_cache is not None and self_cache.is_compileable  # StaticCache: fixed-size buffers
            causal_mask = causal_self_attention_mask(
                inputs_embeds.shape[1],
                past_length,
                key_padding_mask(attention_mask),
                inputs_embeds.device,
                static_length=self_cache.get_mask_sizes(inputs_embeds.shape[1], 0)[0] if static else None,
            )
        else:  # also passes through a ready 4-D mask (generate() builds one for a static cache)
            causal_mask = create_causal_mask(
                config=self.config,
                inputs_embeds=inputs_embeds,
                attention_mask=attention_mask,
                past_key_values=self_cache,
            )
        if simple:
            encoder_mask = key_padding_mask(encoder_attention_mask)
        else:
            encoder_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=inputs_embeds,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
            )
        for layer in self.layers:
            hidden_states = layer(
                hidden_states,
                causal_mask,
                encoder_hidden_states,
                encoder_attention_mask=encoder_mask,
                past_key_values=past_key_values,
                **kwargs,
            )
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states, past_key_values=past_key_values if use_cache else None
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

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
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
            past_key_values=past_key_values,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            past_key_values=decoder_outputs.past_key_values,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


# ----------------------------------------------------------------------------------------------------------------
# §3.4 pre-softmax linear + §5.4 label-smoothed cross-entropy, fused for training
# ----------------------------------------------------------------------------------------------------------------
# Rows per chunk. Every chunk adds its (V, d) product into dL/dW, so a chunk needs enough rows for its matrix
# products to outweigh that pass over W: on the CPU, d_model 512 with a 37k vocabulary took 3.0 s with 113-row
# chunks against 1.4 s with 1,813 (1.85 s unfused); d_model 256 with 8k, 0.33 s with 524 rows and 0.35 s with 2,097.
LOSS_CHUNK_ROWS = 1024


class LinearCrossEntropy(torch.autograd.Function):
    """loss = sum_i [ lse(z_i) - (1 - eps) z_{i, y_i} - eps / V sum_c z_{i, c} ] / denominator,   z = h W^T + b

    The same value as ``F.cross_entropy(z, y, label_smoothing=eps, reduction="sum") / denominator``, without ever
    holding the (tokens, vocab) logits or their gradient. Rows go through in chunks; each chunk's gradient
    dL/dz = (softmax(z) - (1 - eps) onehot(y) - eps / V) / denominator is formed in place over its logits and
    multiplied straight into dL/dh and dL/dW, so ``backward`` only scales them. torch has no such fused op; with a
    small model the vocabulary side is a large share of a training step (d_model 256, 8k vocabulary, bf16: the
    whole step 734 -> 592 ms; the README's Performance section). Under autocast the products run in the
    autocast dtype and the softmax in fp32, as they do unfused."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, smoothing: float, denominator):
        # hidden (N, d), labels (N,) with -100 for rows that do not count, weight (V, d), bias (V,) or None (a buffer)
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
        h, w = hidden.to(dtype), weight.to(dtype)
        vocab = w.shape[0]
        grad_h = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_w = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if ctx.needs_input_grad[1] else None
        )
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        rows = LOSS_CHUNK_ROWS
        with torch.autocast(device, enabled=False):
            for start in range(0, h.shape[0], rows):
                h_c, y_c = h[start : start + rows], labels[start : start + rows, None]
                counts = y_c != -100  # (rows, 1); masked, not dropped, so shapes stay static for torch.compile
                y_c = y_c.masked_fill(~counts, 0)
                z = (h_c @ w.T).float()  # (rows, V)
                if bias is not None:
                    z += bias
                lse = torch.logsumexp(z, dim=-1, keepdim=True)
                row_loss = lse - (1 - smoothing) * z.gather(1, y_c) - smoothing / vocab * z.sum(-1, keepdim=True)
                total += torch.where(counts, row_loss, 0.0).sum()
                if grad_h is None and grad_w is None:
                    continue
                grad_z = z.sub_(lse).exp_().sub_(smoothing / vocab)  # softmax - eps / V, in place of z
                grad_z.scatter_add_(1, y_c, grad_z.new_full(y_c.shape, smoothing - 1))
                grad_z = grad_z.mul_(counts / denominator).to(dtype)
                if grad_h is not None:
                    grad_h[start : start + rows] = grad_z @ w
                if grad_w is not None:
                    grad_w += grad_z.T @ h_c
        ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return total / denominator

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w = ctx.saved_tensors
        grad_h = None if grad_h is None else grad_h * grad_loss
        grad_w = None if grad_w is None else (grad_w * grad_loss).to(ctx.weight_dtype)
        return grad_h, grad_w, None, None, None, None


class VanillaTransformerForSeq2Seq(VanillaTransformerPreTrainedModel, GenerationMixin):
    """The full model of the paper: encoder-decoder plus the pre-softmax linear layer (§3.4), tied to the shared
    embedding. ``labels`` give the (label-smoothed, §5.4) cross-entropy loss."""

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
        # §6.1 decoding: beam 4, length penalty 0.6 (transformers divides by len^alpha; see the README); the
        # maximum output length (input length + 50) is set per call by generate().
        self.generation_config.update(num_beams=4, length_penalty=0.6, early_stopping=True)

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
        whole call rather than at every decoding step (a check of values reads the tensor back to the host)."""
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
            kwargs["max_new_tokens"] = source.shape[1] + 50
        checked = _VALUES_CHECKED.set(True)
        try:
            return super().generate(inputs, generation_config, **kwargs)
        finally:
            _VALUES_CHECKED.reset(checked)

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

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        skip_logits: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        r"""
        skip_logits (`bool`, *optional*):
            Compute the loss with the fused ``LinearCrossEntropy`` and return no logits (as Trainer asks of
            Liger-kernel models). Defaults to True in training mode with ``labels``: a training step needs only the
            loss. Pass False to get the logits too.
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
        check_token_ids(labels, self.config.vocab_size, "labels", ignore_index=-100)
        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            past_key_values=past_key_values,
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
            past_key_values=outputs.past_key_values,
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
    def _reorder_cache(past_key_values: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search keeps the best beams after every step (``generate()`` calls this hook when a model has it).
        Only the self-attention cache needs reordering: ``beam_idx`` picks among the beams of the same sentence,
        whose encoder-decoder keys and values are identical, so reordering those (what the default does) would copy
        every layer's (B * beams, h, source length, d_k) keys and values each step for nothing."""
        if isinstance(past_key_values, EncoderDecoderCache):
            past_key_values.self_attention_cache.reorder_cache(beam_idx)
        else:
            past_key_values.reorder_cache(beam_idx)
        return past_key_values


__all__ = [
    "LinearCrossEntropy",
    "MultiHeadAttention",
    "VanillaTransformerForSeq2Seq",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
]
