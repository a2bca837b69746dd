"""Convert transformers' MarianMTModel (the same post-LN architecture, e.g. opus-mt checkpoints) into ours.

Marian lays the sinusoids out as [sines, cosines] ("concat"), shares one vocabulary between source and target,
and adds a fixed ``final_logits_bias`` to the logits; everything else maps one to one. This module is not part of
the Hub checkpoint code: a converted model is saved and loaded like any other.
"""

import copy

import torch
from transformers import MarianMTModel

from .configuration_vanilla import VanillaTransformerConfig
from .modeling_vanilla import VanillaTransformerForSeq2Seq

_LAYER_RENAMES = {  # Marian name -> ours, inside encoder/decoder layers
    "self_attn.out_proj": "self_attn.out_proj",
    "encoder_attn.out_proj": "cross_attn.out_proj",
    "self_attn_layer_norm": "self_attn_sublayer.norm",
    "encoder_attn_layer_norm": "cross_attn_sublayer.norm",
    "fc1": "ffn.fc1",
    "fc2": "ffn.fc2",
    "final_layer_norm": "ffn_sublayer.norm",
}


def _same(marian_config, *names: str) -> int:
    values = {getattr(marian_config, name) for name in names}
    if len(values) != 1:
        raise ValueError(f"Marian config has different {' / '.join(names)} ({values}); this model uses one value")
    return values.pop()


def config_from_marian(marian_config) -> VanillaTransformerConfig:
    """Our config for a MarianConfig; raises ValueError for Marian settings this architecture does not have."""
    shared = marian_config.share_encoder_decoder_embeddings
    if not shared or marian_config.decoder_vocab_size != marian_config.vocab_size:
        raise ValueError(
            "Marian model with separate source and target vocabularies (share_encoder_decoder_embeddings=False or "
            "decoder_vocab_size != vocab_size) is not supported: the paper shares one vocabulary (§3.4)"
        )
    if marian_config.encoder_layerdrop or marian_config.decoder_layerdrop:
        raise ValueError("Marian LayerDrop (encoder_layerdrop/decoder_layerdrop > 0) is not part of this architecture")
    return VanillaTransformerConfig(
        vocab_size=marian_config.vocab_size,
        d_model=marian_config.d_model,
        encoder_layers=marian_config.encoder_layers,
        decoder_layers=marian_config.decoder_layers,
        num_attention_heads=_same(marian_config, "encoder_attention_heads", "decoder_attention_heads"),
        ffn_dim=_same(marian_config, "encoder_ffn_dim", "decoder_ffn_dim"),
        dropout=float(marian_config.dropout),
        attention_dropout=float(marian_config.attention_dropout),
        activation_dropout=float(marian_config.activation_dropout),
        activation_function=marian_config.activation_function,
        layer_norm_eps=1e-5,  # Marian's nn.LayerNorm default
        scale_embedding=marian_config.scale_embedding,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=marian_config.tie_word_embeddings,
        position_embedding_type="sinusoidal",
        sinusoidal_layout="concat",
        max_position_embeddings=marian_config.max_position_embeddings,
        final_logits_bias=True,
        pad_token_id=marian_config.pad_token_id,
        bos_token_id=marian_config.bos_token_id,
        eos_token_id=marian_config.eos_token_id,
        decoder_start_token_id=marian_config.decoder_start_token_id,
    )


def _convert_key(key: str) -> str | None:
    """Our parameter name for a Marian one; None for what we do not store (sinusoids, tied copies)."""
    if "embed_positions" in key or key.startswith(("model.encoder.embed_tokens", "model.decoder.embed_tokens")):
        return None
    for old, new in _LAYER_RENAMES.items():
        if f".{old}." in key:
            return key.replace(f".{old}.", f".{new}.")
    return key


def _stack_in_proj(marian_state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Marian's separate q/k/v projections of one attention block -> our stacked in_proj [W^Q; W^K; W^V]."""
    return {
        f"{prefix}.in_proj.{kind}": torch.cat([marian_state[f"{prefix}.{p}_proj.{kind}"] for p in "qkv"])
        for kind in ("weight", "bias")
    }


def from_marian(marian: MarianMTModel) -> VanillaTransformerForSeq2Seq:
    """Convert a MarianMTModel (config, weights, final_logits_bias, generation config) into ours.

    The result computes the same logits (to float rounding) and generates the same tokens.
    """
    if not isinstance(marian, MarianMTModel):
        raise TypeError(f"from_marian expects a MarianMTModel, got {type(marian).__name__}")
    config = config_from_marian(marian.config)
    config._attn_implementation = marian.config._attn_implementation
    model = VanillaTransformerForSeq2Seq(config).to(dtype=marian.dtype, device=marian.device)

    marian_state = marian.state_dict()
    state: dict[str, torch.Tensor] = {}
    for key, tensor in marian_state.items():
        if key.endswith(".q_proj.weight"):  # one attention block: stack its q, k, v into in_proj
            attention_prefix = key.removesuffix(".q_proj.weight")  # e.g. model.decoder.layers.0.encoder_attn
            ours = attention_prefix.replace("encoder_attn", "cross_attn")
            stacked = _stack_in_proj(marian_state, attention_prefix)
            state.update({k.replace(attention_prefix, ours): v for k, v in stacked.items()})
        elif not any(f".{p}_proj." in key for p in "qkv") and (new_key := _convert_key(key)) is not None:
            state[new_key] = tensor
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if unexpected or set(missing) - tied:
        raise ValueError(f"Marian conversion mismatch: missing {sorted(set(missing) - tied)}, unexpected {unexpected}")
    model.tie_weights()
    model.generation_config = copy.deepcopy(marian.generation_config)
    return model.eval() if not marian.training else model
