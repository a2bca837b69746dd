"""Configuration of the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

This file travels to the Hub next to the weights (``trust_remote_code``): it imports only transformers and
``compat.py``.
"""

from transformers import PreTrainedConfig
from transformers.activations import ACT2FN

from .compat import CACHE_NAME

POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned")
SINUSOIDAL_LAYOUTS = ("interleaved", "concat")
RAW_TEXT = "raw"  # text_form: the text is given to the tokenizer as it is
# text_form of a prepared text: each step applied or not, in this order (sacremoses' ports of Moses' Perl scripts),
# with each side's language (the Moses steps' -l); moses_escape: tokenizer.perl's ' " & | < > [ ] as entities
TEXT_FORM_STEPS = {
    "lowercase": "lowercased",
    "moses_normalize_punctuation": "Moses punctuation-normalized",
    "moses_tokenize": "Moses-tokenized",
}
TEXT_FORM_FIELDS = {
    **dict.fromkeys(TEXT_FORM_STEPS, bool),
    "moses_escape": bool,
    "source_lang": str,
    "target_lang": str,
}


class VanillaTransformerConfig(PreTrainedConfig):
    r"""
    Hyper-parameters of the encoder-decoder Transformer. Defaults are the paper's base model (Table 3), except the
    vocabulary, which depends on the tokenizer.

    Args:
        vocab_size: size of the vocabulary shared by source and target (§3.4, §5.1).
        d_model: width of every sub-layer output and of the embeddings (§3.1).
        encoder_layers, decoder_layers: N, the number of identical layers in each stack (§3.1).
        num_attention_heads: h, parallel attention heads (§3.2.2).
        head_dim: d_k = d_v, the width of each head; None (the paper's choice): d_model / h (§3.2.2). Table 3's row
            (B) varies d_k with h fixed, so W^Q, W^K, W^V map d_model to h * d_k and W^O maps it back.
        attention_window: r of restricted self-attention (Table 1, "self-attention (restricted)"): an encoder position
            i attends to the positions j with |i - j| <= r, a decoder position to j in [i - r, i]; encoder-decoder
            attention stays full. None (the paper's models): full self-attention.
        ffn_dim: d_ff, inner width of the position-wise feed-forward network (§3.3).
        dropout: P_drop on each sub-layer output and on embeddings + positions (§5.4).
        attention_dropout: dropout on the attention probabilities (not in the paper; tensor2tensor has it).
        activation_dropout: dropout inside the feed-forward network (not in the paper; tensor2tensor has it).
        activation_function: the FFN non-linearity; "relu" is the paper's max(0, x). Any name of ``ACT2FN``.
        layer_norm_eps: epsilon of every LayerNorm.
        scale_embedding: multiply embeddings by sqrt(d_model) (§3.4).
        share_encoder_decoder_embeddings: one embedding matrix for the encoder and the decoder input (§3.4).
        tie_word_embeddings: the pre-softmax linear layer reuses the decoder's embedding matrix (§3.4).
        position_embedding_type: "sinusoidal" (§3.5) or "learned" (Table 3, row E).
        sinusoidal_layout: "interleaved" (sin, cos, sin, cos, ... as the paper's equations) or "concat"
            ([all sines, all cosines], as fairseq, tensor2tensor and Marian lay out the same frequencies).
        max_position_embeddings: initial size of the sinusoid table (it grows on demand); the hard limit of the
            learned table.
        label_smoothing: epsilon_ls of the training loss (the paper trains with 0.1, §5.4; 0.0 keeps the model's
            loss a plain cross-entropy, training sets it).
        init_std: standard deviation of learned position embeddings; the shared token embedding uses
            d_model^-0.5 as tensor2tensor does.
        final_logits_bias: a fixed bias added to the logits; off in the paper, on for converted Marian checkpoints.
        text_form: the text the model reads and writes, before its tokenizer: "raw" (as given), or how it was
            prepared, ``TEXT_FORM_FIELDS`` (vanilla-train's ``--moses_lowercase_tokenize``: lowercased, then Moses'
            punctuation normalization and tokenization for each side's language). None where it is unknown: a
            config.json saved before this field existed loads so. The package's entry points prepare their input
            so; ``generate()`` cannot (transformers has no Moses) and says so once.
    """

    model_type = "vanilla_transformer"
    keys_to_ignore_at_inference = [CACHE_NAME]  # Trainer's evaluation drops the cache from the outputs it gathers
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "decoder_layers",
        "encoder_attention_heads": "num_attention_heads",
        "decoder_attention_heads": "num_attention_heads",
    }

    vocab_size: int = 37000
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    num_attention_heads: int = 8
    head_dim: int | None = None
    attention_window: int | None = None
    ffn_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation_function: str = "relu"
    layer_norm_eps: float = 1e-5
    scale_embedding: bool = True
    share_encoder_decoder_embeddings: bool = True
    tie_word_embeddings: bool = True
    position_embedding_type: str = "sinusoidal"
    sinusoidal_layout: str = "interleaved"
    max_position_embeddings: int = 1024
    label_smoothing: float = 0.0
    init_std: float = 0.02
    final_logits_bias: bool = False
    text_form: str | dict | None = RAW_TEXT
    use_cache: bool = True
    is_encoder_decoder: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = 2
    decoder_start_token_id: int | None = 0

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self._check_values()

    def validate(self) -> None:
        """transformers' own checks, then ours. Runs at save time, in ``from_dict`` (so ``from_pretrained(...,
        dropout=1.0)`` is refused too) and when a model is built from the config."""
        super().validate()
        self._check_values()

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        # the keyword overrides are set on the config after __init__ (and __post_init__) ran: check them as well
        if "text_form" not in config_dict:  # saved before the field existed: what text it reads is not known
            config_dict = {**config_dict, "text_form": None}
        result = super().from_dict(config_dict, **kwargs)
        (result[0] if isinstance(result, tuple) else result).validate()
        return result

    def special_token_ids(self) -> dict[str, int]:
        """Every special token id the config names (the ids of a list of end tokens each), by field."""
        ids = {}
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            for i, token in enumerate(value if isinstance(value, list) else [value]):
                if token is not None:
                    ids[f"{name}[{i}]" if isinstance(value, list) else name] = token
        return ids

    def _check_values(self) -> None:
        """Raise ValueError naming the first invalid field; the model would otherwise fail deep inside torch."""
        for name in (
            "vocab_size",
            "d_model",
            "encoder_layers",
            "decoder_layers",
            "num_attention_heads",
            "ffn_dim",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}")
        if self.head_dim is not None and (
            not isinstance(self.head_dim, int) or isinstance(self.head_dim, bool) or self.head_dim <= 0
        ):
            raise ValueError(f"`head_dim` must be a positive integer or None (d_model / h), got {self.head_dim!r}")
        if self.attention_window is not None and (
            not isinstance(self.attention_window, int)
            or isinstance(self.attention_window, bool)
            or self.attention_window < 0
        ):
            raise ValueError(
                f"`attention_window` must be an integer >= 0 or None (full attention), got {self.attention_window!r}"
            )
        if self.head_dim is None and self.d_model % self.num_attention_heads:
            raise ValueError(
                f"`d_model` ({self.d_model}) must be divisible by `num_attention_heads` ({self.num_attention_heads}), "
                "or set `head_dim`"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout", "label_smoothing"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1), got {value!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"`layer_norm_eps` must be > 0, got {self.layer_norm_eps!r}")
        if self.activation_function not in ACT2FN:
            raise ValueError(
                f"`activation_function` {self.activation_function!r} is unknown; use one of {sorted(ACT2FN)}"
            )
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"`position_embedding_type` must be one of {POSITION_EMBEDDING_TYPES}, "
                f"got {self.position_embedding_type!r}"
            )
        if self.sinusoidal_layout not in SINUSOIDAL_LAYOUTS:
            raise ValueError(f"`sinusoidal_layout` must be one of {SINUSOIDAL_LAYOUTS}, got {self.sinusoidal_layout!r}")
        if self.position_embedding_type == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"`d_model` must be even for sinusoidal positions (sin/cos pairs), got {self.d_model}")
        for name, value in self.special_token_ids().items():
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < self.vocab_size:
                raise ValueError(f"`{name}` ({value!r}) must be an integer in [0, vocab_size={self.vocab_size})")
        form = self.text_form
        if form not in (None, RAW_TEXT) and not (
            isinstance(form, dict)
            and form.keys() == TEXT_FORM_FIELDS.keys()
            and all(isinstance(form[key], kind) for key, kind in TEXT_FORM_FIELDS.items())
        ):
            fields = ", ".join(f"{key} ({kind.__name__})" for key, kind in TEXT_FORM_FIELDS.items())
            raise ValueError(f"`text_form` must be {RAW_TEXT!r}, None (unknown) or a dict of {fields}, got {form!r}")

    def text_form_note(self) -> str | None:
        """What a user of ``generate()`` or the pipeline must know when the model reads prepared text (None for raw
        or unknown text): one line, naming what to do."""
        form = self.text_form
        steps = [name for step, name in TEXT_FORM_STEPS.items() if isinstance(form, dict) and form[step]]
        if not steps:
            return None
        return (
            f"this model reads and writes {', '.join(steps)} text ({form['source_lang']} -> {form['target_lang']}, "
            f"escape={form['moses_escape']}: config.text_form), which transformers cannot prepare: give generate() "
            "and the pipeline text so prepared (sacremoses, in that order), or translate with the vanilla-transformer "
            "package (vanilla-translate), which prepares it"
        )

    @property
    def sliding_window(self) -> int | None:
        """transformers' name for the decoder's window: its r + 1 visible positions, j in [i - r, i]. Its
        sliding-window cache layers then keep the last r keys and values, and its masks are built for them."""
        return None if self.attention_window is None else self.attention_window + 1

    @sliding_window.setter
    def sliding_window(self, window: int | None) -> None:
        # transformers' tools (its common tests among them) set a window of W positions: r = W - 1
        self.attention_window = None if window is None else window - 1

    def attention_head_dim(self) -> int:
        """d_k = d_v: ``head_dim``, or d_model / h when it is None."""
        return self.head_dim or self.d_model // self.num_attention_heads

    @classmethod
    def base(cls, **overrides) -> "VanillaTransformerConfig":
        """Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (about 65M parameters with 37k tokens)."""
        return cls(**overrides)

    @classmethod
    def big(cls, **overrides) -> "VanillaTransformerConfig":
        """Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (about 213M parameters with 37k tokens)."""
        return cls(**{"d_model": 1024, "ffn_dim": 4096, "num_attention_heads": 16, "dropout": 0.3, **overrides})


__all__ = ["VanillaTransformerConfig"]
