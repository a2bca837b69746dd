"""Convert between transformers' MarianMTModel (the same post-LN architecture, e.g. opus-mt checkpoints) and ours.

Marian lays the sinusoids out as [sines, cosines] ("concat"), shares one vocabulary between source and target,
and adds a fixed ``final_logits_bias`` to the logits; everything else maps one to one. ``to_marian`` also takes a
model with the paper's interleaved sinusoids: permuting the d_model coordinates of the whole residual stream turns
them into Marian's layout, and LayerNorm, attention and the tied output layer do not change under that
permutation, so the Marian model computes exactly the same function. This module is not part of the Hub checkpoint
code: a converted model is saved and loaded like any other.
"""

import copy

import torch
from transformers import MarianConfig, MarianMTModel

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


def the_one_value(marian_config, *names: str) -> int:
    """The value the Marian config gives all of ``names`` (ours has one field for what Marian sets per stack)."""
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
        num_attention_heads=the_one_value(marian_config, "encoder_attention_heads", "decoder_attention_heads"),
        ffn_dim=the_one_value(marian_config, "encoder_ffn_dim", "decoder_ffn_dim"),
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


def interleaved_to_concat(d_model: int) -> torch.Tensor:
    """The coordinate order that turns (sin_0, cos_0, sin_1, cos_1, ...) into (sin_0, sin_1, ..., cos_0, cos_1, ...)."""
    return torch.cat((torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)))


def _reads_residual(key: str) -> bool:
    """Weights whose input is the residual stream (their columns are d_model coordinates)."""
    return key.endswith((".in_proj.weight", ".fc1.weight"))


def _writes_residual(key: str) -> bool:
    """Weights and biases whose output is the residual stream, and LayerNorm parameters (their first axis is
    d_model). The shared embedding is the third kind: token vectors in its rows, d_model coordinates in its
    columns, as the weights that read the stream."""
    return key.endswith((".out_proj.weight", ".out_proj.bias", ".fc2.weight", ".fc2.bias")) or ".norm." in key


def to_marian(model: VanillaTransformerForSeq2Seq) -> MarianMTModel:
    """A MarianMTModel computing the same logits and generating the same tokens as ``model`` (for comparisons on the
    same weights: tests and vanilla-bench), given the same maximum length: Marian's ``generate()`` has no §6.1
    "input length + 50" rule and stops at 20 tokens unless told (``max_new_tokens=input_ids.shape[1] + 50``).
    Raises ValueError for what Marian does not have."""
    config = model.config
    if config.position_embedding_type != "sinusoidal":
        raise ValueError("MarianMTModel has sinusoidal positions only; this model has learned ones")
    if not config.share_encoder_decoder_embeddings or not config.tie_word_embeddings:
        raise ValueError(
            "to_marian needs one shared, tied embedding matrix (share_encoder_decoder_embeddings and "
            "tie_word_embeddings)"
        )
    if config.attention_window is not None:
        raise ValueError(f"`attention_window` {config.attention_window}: MarianMTModel has full self-attention only")
    if config.attention_head_dim() * config.num_attention_heads != config.d_model:
        raise ValueError(
            f"`head_dim` {config.head_dim}: MarianMTModel's heads are d_model / h = "
            f"{config.d_model / config.num_attention_heads:g} wide"
        )
    marian = MarianMTModel(
        MarianConfig(
            vocab_size=config.vocab_size,
            d_model=config.d_model,
            encoder_layers=config.encoder_layers,
            decoder_layers=config.decoder_layers,
            encoder_attention_heads=config.num_attention_heads,
            decoder_attention_heads=config.num_attention_heads,
            encoder_ffn_dim=config.ffn_dim,
            decoder_ffn_dim=config.ffn_dim,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation_dropout=config.activation_dropout,
            activation_function=config.activation_function,
            scale_embedding=config.scale_embedding,
            max_position_embeddings=config.max_position_embeddings,
            pad_token_id=config.pad_token_id,
            eos_token_id=config.eos_token_id,
            bos_token_id=config.bos_token_id,
            decoder_start_token_id=config.decoder_start_token_id,
            forced_eos_token_id=None,
            attn_implementation=config._attn_implementation,
        )
    ).to(dtype=model.dtype, device=model.device)
    permute = config.sinusoidal_layout == "interleaved"
    order = interleaved_to_concat(config.d_model).to(model.device)
    renames = {new: old for old, new in _LAYER_RENAMES.items()}
    state = {}
    for key, tensor in model.state_dict().items():
        if key == "final_logits_bias" or key.startswith(("lm_head.", "model.encoder.embed", "model.decoder.embed")):
            continue  # tied copies of model.shared, and the bias handled below
        if permute and (key == "model.shared.weight" or _reads_residual(key)):
            tensor = tensor[:, order]
        elif permute and _writes_residual(key):
            tensor = tensor[order]
        if ".in_proj." in key:
            prefix, kind = key.rsplit(".in_proj.", 1)
            prefix = prefix.replace("cross_attn", "encoder_attn")
            for name, part in zip("qkv", tensor.chunk(3), strict=True):
                state[f"{prefix}.{name}_proj.{kind}"] = part
            continue
        for ours, theirs in renames.items():
            key = key.replace(f".{ours}.", f".{theirs}.")
        state[key] = tensor
    if model.final_logits_bias is not None:
        state["final_logits_bias"] = model.final_logits_bias
    missing, unexpected = marian.load_state_dict(state, strict=False)
    expected_missing = {
        "lm_head.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
        "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight",
        "final_logits_bias",
    }
    if unexpected or set(missing) - expected_missing:
        raise ValueError(
            f"Marian conversion mismatch: missing {sorted(set(missing) - expected_missing)}, unexpected {unexpected}"
        )
    marian.tie_weights()
    marian.generation_config = copy.deepcopy(model.generation_config)
    return marian.eval() if not model.training else marian
