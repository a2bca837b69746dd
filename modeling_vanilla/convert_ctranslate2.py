"""Convert a VanillaTransformerForSeq2Seq (and its tokenizer) into a CTranslate2 model, through CTranslate2's own
``TransformerSpec`` and ``Converter`` (no hand-written binary format).

CTranslate2's ``TransformerSpec`` describes this architecture: post-LN layers without a final LayerNorm, scaled
shared embeddings, ReLU (or GELU, swish) feed-forward networks. What has to be carried over explicitly:

- the positions: CTranslate2's built-in sinusoids use tensor2tensor's frequencies (log(10000) / (d/2 - 1)) and
  start at position 1, so the model's own table (§3.5, in its layout, from position 0) is exported, with
  ``max_positions`` rows (sinusoids have no limit of their own; CTranslate2 refuses positions past the table);
- the decoder starts from the embedding of ``decoder_start_token_id`` (<pad> here), not a zero vector as Marian;
- a converted Marian model's ``final_logits_bias`` becomes the output projection's bias;
- the text the model reads (``config.text_form``) is written into the export's config.json, for its users.

``ctranslate2`` is an optional dependency (``pip install -e ".[ct2]"``). This module does not travel to the Hub.
"""

from pathlib import Path

import numpy as np
import torch

from .export_checks import check_convertible, check_export_folder
from .modeling_vanilla import LearnedPositionalEmbedding, VanillaTransformerForSeq2Seq, sinusoid_table

ACTIVATIONS = {  # config.activation_function -> the name of CTranslate2's Activation
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_python": "GELU",
    "gelu_new": "GELUTanh",
    "gelu_fast": "GELUTanh",
    "gelu_pytorch_tanh": "GELUTanh",
    "quick_gelu": "GELUSigmoid",
    "silu": "SWISH",
    "swish": "SWISH",
}
# CTranslate2's compute types: the first four run on a CPU, the last three on a GPU only (which a device runs,
# ctranslate2.get_supported_compute_types(device) says; a CPU may lack int16, a GPU before compute capability 8.0
# bfloat16)
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")
DEFAULT_MAX_POSITIONS = 1024


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError as error:
        raise ImportError(
            'CTranslate2 is not installed: pip install -e ".[ct2]" (or pip install ctranslate2)'
        ) from error
    return ctranslate2


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to(device="cpu", dtype=torch.float32).numpy()


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _attention(spec, attention, self_attention: bool) -> None:
    """Our stacked [W^Q; W^K; W^V] is CTranslate2's fused self-attention projection; for encoder-decoder attention
    CTranslate2 keeps W^Q apart from the stacked [W^K; W^V]."""
    if attention.in_proj is None:
        raise ValueError("CTranslate2 export needs attention whose keys and values have the model's width (in_proj)")
    weight, bias, d = attention.in_proj.weight, attention.in_proj.bias, attention.inner_dim  # h d_k rows each
    if self_attention:
        _linear(spec.linear[0], weight, bias)
    else:
        _linear(spec.linear[0], weight[:d], None if bias is None else bias[:d])
        _linear(spec.linear[1], weight[d:], None if bias is None else bias[d:])
    _linear(spec.linear[-1], attention.out_proj.weight, attention.out_proj.bias)


def _layer_norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _stack(spec, stack, embeddings_spec, max_positions: int) -> None:
    config = stack.config
    spec.scale_embeddings = float(stack.embed_scale)
    embeddings_spec.weight = _array(stack.embed_tokens.weight)
    positions = stack.embed_positions
    if isinstance(positions, LearnedPositionalEmbedding):
        spec.position_encodings.encodings = _array(positions.weight)
    else:
        table = sinusoid_table(max_positions, config.d_model, config.sinusoidal_layout)
        spec.position_encodings.encodings = table.numpy()
    for layer_spec, layer in zip(spec.layer, stack.layers, strict=True):
        _attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_sublayer.norm)
        if hasattr(layer, "cross_attn"):
            _attention(layer_spec.attention, layer.cross_attn, self_attention=False)
            _layer_norm(layer_spec.attention.layer_norm, layer.cross_attn_sublayer.norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.fc1.weight, layer.ffn.fc1.bias)
        _linear(layer_spec.ffn.linear_1, layer.ffn.fc2.weight, layer.ffn.fc2.bias)
        _layer_norm(layer_spec.ffn.layer_norm, layer.ffn_sublayer.norm)


def vocabulary(model: VanillaTransformerForSeq2Seq, tokenizer) -> list[str]:
    """The token of every id of the model's vocabulary, in id order (ids the tokenizer lacks get a placeholder)."""
    size = model.config.vocab_size
    tokens = tokenizer.convert_ids_to_tokens(list(range(min(size, len(tokenizer)))))
    return tokens + [f"<extra_id_{i}>" for i in range(len(tokens), size)]


def ctranslate2_spec(model: VanillaTransformerForSeq2Seq, tokenizer, max_positions: int | None = None):
    """CTranslate2's ``TransformerSpec`` for ``model``: its weights, vocabulary, special tokens and positions."""
    specs = import_ctranslate2().specs
    config = model.config
    if config.activation_function not in ACTIVATIONS:
        raise ValueError(
            f"`activation_function` {config.activation_function!r} has no CTranslate2 counterpart; "
            f"supported: {sorted(ACTIVATIONS)}"
        )
    if config.attention_window is not None:
        raise ValueError(
            f"`attention_window` {config.attention_window}: CTranslate2's encoder-decoder Transformer has no "
            "restricted self-attention; use --engine generate"
        )
    if config.attention_head_dim() * config.num_attention_heads != config.d_model:
        # CTranslate2 takes a head's width to be d_model / h: an export scored other heads' tokens wrongly (log-probs
        # off by up to 0.05 on a random model with d_k 24, h 4, d_model 32)
        raise ValueError(
            f"`head_dim` {config.head_dim}: CTranslate2's heads are d_model / h = "
            f"{config.d_model / config.num_attention_heads:g} wide; use --engine generate"
        )
    if config.position_embedding_type == "learned":
        max_positions = config.max_position_embeddings
    max_positions = max_positions or max(config.max_position_embeddings, DEFAULT_MAX_POSITIONS)
    spec = specs.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers),
        config.num_attention_heads,
        pre_norm=False,  # §3.1: LayerNorm(x + Sublayer(x)), no LayerNorm after the stacks
        activation=getattr(specs.common_spec.Activation, ACTIVATIONS[config.activation_function]),
    )
    _stack(spec.encoder, model.model.encoder, spec.encoder.embeddings[0], max_positions)
    _stack(spec.decoder, model.model.decoder, spec.decoder.embeddings, max_positions)
    bias = model.final_logits_bias[0] if model.final_logits_bias is not None else None
    _linear(spec.decoder.projection, model.lm_head.weight, bias)
    tokens = vocabulary(model, tokenizer)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    eos = tokens[_single_eos(config)]
    spec.config.add_attribute("layer_norm_epsilon", config.layer_norm_eps)
    # the text it reads, for a user of the export alone (CTranslate2 ignores the key; the package's engines read the
    # model's own config beside the export)
    spec.config.add_attribute("text_form", config.text_form)
    spec.config.unk_token = tokenizer.unk_token
    spec.config.eos_token = eos
    spec.config.bos_token = tokens[config.bos_token_id] if config.bos_token_id is not None else eos
    spec.config.decoder_start_token = tokens[config.decoder_start_token_id]
    return spec


def _single_eos(config) -> int:
    eos = config.eos_token_id
    if isinstance(eos, list):
        if len(eos) != 1:
            raise ValueError(f"`eos_token_id` {eos}: CTranslate2 export supports one end token")
        eos = eos[0]
    return eos


def export_ctranslate2(
    model_dir: str | Path,
    output_dir: str | Path,
    quantization: str = "float32",
    max_positions: int | None = None,
    force: bool = False,
) -> Path:
    """Convert the model and tokenizer saved in ``model_dir`` into a CTranslate2 model directory."""
    ctranslate2 = import_ctranslate2()
    from transformers import AutoConfig, AutoTokenizer

    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization {quantization!r} is not one of {QUANTIZATIONS}")
    check_export_folder(model_dir, output_dir, force)  # CTranslate2's force empties the folder before writing
    check_convertible(AutoConfig.from_pretrained(model_dir), model_dir)
    model = VanillaTransformerForSeq2Seq.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)

    class Converter(ctranslate2.converters.Converter):
        def _load(self):
            return ctranslate2_spec(model, tokenizer, max_positions)

    return Path(Converter().convert(str(output_dir), quantization=quantization, force=force))
