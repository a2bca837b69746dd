"""Ensemble decoding: several trained models translate together, each step's next-token distributions combined,
with ``generate()`` driving the search unchanged (greedy, beam, n-best lists, sampling, target prefixes) and
forced decoding scoring with the combined distribution (``vanilla-translate --model A --model B``, docs/ecosystem.md).

``VanillaTransformerEnsemble`` is a transformers model whose members are ``VanillaTransformerForSeq2Seq`` models over
one vocabulary. Its encoder runs every member's encoder (their outputs side by side along the feature axis, so
``generate()`` expands them for beams as one tensor), its cache holds every member's cache (``EnsembleCache``; beam
search reorders each), and its ``forward`` returns as logits the combined log-probabilities (``combine``):

- ``linear`` (the default): the weighted mean of the members' probabilities, log(sum_i w_i p_i), fairseq's
  ``EnsembleModel`` and Sockeye's ``linear``;
- ``log_linear``: the weighted mean of their log-probabilities, renormalised, log_softmax(sum_i w_i log p_i) (a
  product of experts), what Marian, OpenNMT-py and Sockeye's ``log_linear`` sum. They leave it unnormalised; here it
  is a distribution, so that ``--score`` writes log-probabilities and the length penalty weighs them as it weighs
  one model's (each step's best token is the same either way).

The weights are normalised to sum to 1 (equal by default): 1 2 and 2 4 are one ensemble, and log-linear's scale
(a temperature) stays the models' own. Linear is the default as fairseq's: a choice to be confirmed on validation
once the distillation experiment trains its teachers. An ensemble of one model is that model: its logits pass
through unchanged, so it translates and scores bit for bit as the model alone does.

Memory: the ensemble holds its members and nothing else (no copy of a weight), so N models take N times one
model's weights; decoding holds N encoder outputs and N caches, each as large as one model's.
"""

import argparse
import copy
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq
from modeling_vanilla.checks import values_checked
from modeling_vanilla.compat import CACHE_NAME, accepts_past_key_values
from vanilla_tools.cli import UsageError, load_model, load_tokenizer
from vanilla_tools.decoding import Decoding
from vanilla_tools.device import place
from vanilla_tools.text_form import TextForm

from .engine import GenerateEngine

logger = logging.getLogger(__name__)

MODES = ("linear", "log_linear")
DEFAULT_MODE = "linear"  # fairseq's probability averaging; to be confirmed on validation (the module's docstring)


def normalised_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    """``weights`` (equal if None) for ``count`` models, scaled to sum to 1; refused unless one a model, each > 0."""
    weights = [1.0] * count if weights is None else [float(weight) for weight in weights]
    if len(weights) != count:
        raise UsageError(f"{len(weights)} ensemble weights for {count} models: give one weight a model")
    if not all(weight > 0 and math.isfinite(weight) for weight in weights):
        raise UsageError(f"ensemble weights must be positive numbers, got {weights}")
    return [weight / sum(weights) for weight in weights]


def combine(logits: Sequence[torch.Tensor], weights: Sequence[float], mode: str = DEFAULT_MODE) -> torch.Tensor:
    """The members' (..., V) ``logits`` as the ensemble's log-probabilities (float32): ``linear``
    log(sum_i w_i softmax(z_i)), ``log_linear`` log_softmax(sum_i w_i log_softmax(z_i)); ``weights`` sum to 1."""
    if mode not in MODES:
        raise ValueError(f"ensemble mode {mode!r} is not one of {MODES}")
    log_probs = torch.stack([z.float().log_softmax(dim=-1) for z in logits])  # (N, ..., V)
    w = torch.tensor(weights, dtype=log_probs.dtype, device=log_probs.device).view(-1, *[1] * (log_probs.dim() - 1))
    if mode == "linear":
        return torch.logsumexp(log_probs + w.log(), dim=0)
    return (log_probs * w).sum(dim=0).log_softmax(dim=-1)


class EnsembleCache:
    """Each member's cache (an ``EncoderDecoderCache`` made as ``generate()`` makes it for that member alone), in
    member order. ``generate()`` only asks a cache its length and whether it compiles or crops (neither)."""

    is_compileable = False
    is_croppable = False

    def __init__(self, members: Sequence):
        self.members = list(members)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.members[0].get_seq_length(layer_idx)

    def nbytes(self) -> int:
        """The bytes of every member's cached keys and values (self- and encoder-decoder attention)."""
        layers = [
            layer
            for part in self.members
            for cache in (part.self_attention_cache, part.cross_attention_cache)
            for layer in cache.layers
        ]
        return sum(
            t.numel() * t.element_size() for layer in layers for t in (layer.keys, layer.values) if t is not None
        )


class EnsembleEncoder(nn.Module):
    """The members' encoders run on one source: their (B, S, d_model_i) outputs side by side, (B, S, sum d_model_i),
    the form ``generate()`` keeps and expands for beams; ``VanillaTransformerEnsemble.split`` parts them again."""

    def __init__(self, encoders: Sequence[nn.Module]):
        super().__init__()
        self.encoders = nn.ModuleList(encoders)

    def forward(self, input_ids=None, attention_mask=None, **kwargs) -> BaseModelOutput:
        kwargs.pop("return_dict", None)
        states = [encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs) for encoder in self.encoders]
        return BaseModelOutput(last_hidden_state=torch.cat([state.last_hidden_state for state in states], dim=-1))


def member_name(model: nn.Module, index: int) -> str:
    return getattr(model, "name_or_path", "") or f"model {index + 1}"


def first_difference(a: dict, b: dict) -> str | None:
    """The first key (sorted) whose value differs between two dicts, as ``key a vs b``; None if they are equal."""
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"{key} {a.get(key)!r} vs {b.get(key)!r}"
    return None


def generation_settings(config: GenerationConfig) -> dict:
    """What a generation config decides, without what only records where it came from."""
    settings = config.to_dict()
    for key in ("transformers_version", "_from_model_config"):
        settings.pop(key, None)
    return settings


def text_form_fields(config: VanillaTransformerConfig) -> dict:
    """``config.text_form`` field by field (raw text: every step off), so that a difference names its step."""
    form = TextForm.of(config)
    return {"text_form": "unknown"} if form is None else asdict(form)


def shared_terms(model: VanillaTransformerForSeq2Seq) -> dict[str, dict]:
    """What the members of an ensemble must share to decode together, by what it is."""
    return {
        "vocabularies": {"vocab_size": model.config.vocab_size},
        "special tokens": model.config.special_token_ids(),
        "text forms": text_form_fields(model.config),
        "generation configs": generation_settings(model.generation_config),
        "placements": {"device": str(model.device), "dtype": str(model.dtype)},
    }


def members_difference(members: Sequence[nn.Module]) -> str | None:
    """Why ``members`` cannot decode together, in one clause naming the difference; None if they can: each is a
    ``VanillaTransformerForSeq2Seq`` with the first one's ``shared_terms``."""
    for index, member in enumerate(members):
        if not isinstance(member, VanillaTransformerForSeq2Seq):
            kind = getattr(getattr(member, "config", None), "model_type", type(member).__name__)
            return f"{member_name(member, index)} is a {kind} model, not a vanilla_transformer one"
    first = shared_terms(members[0])
    for index, member in enumerate(members[1:], start=1):
        for what, theirs in shared_terms(member).items():
            if difference := first_difference(theirs, first[what]):
                names = f"{member_name(member, index)} and {member_name(members[0], 0)}"
                return f"{names} differ in their {what}: {difference}"
    return None


class VanillaTransformerEnsemble(PreTrainedModel, GenerationMixin):
    """Several ``VanillaTransformerForSeq2Seq`` models decoding as one (the module's docstring): ``generate()`` and
    ``forward`` as a single model's, over the combined log-probabilities. The members' own generation config (§6.1:
    beam 4, alpha 0.6, output up to input length + 50) is the ensemble's; members that differ in it, their
    vocabulary, special tokens, text form or placement are refused, naming the difference.

    ``weights``: one a member (equal if None), normalised; ``mode``: ``linear`` (probability averaging, the default)
    or ``log_linear``."""

    config_class = VanillaTransformerConfig
    main_input_name = "input_ids"
    # the ensemble's config is its first member's, attention implementation included: what the members run
    _supports_sdpa = _supports_flash_attn = _supports_flex_attn = _supports_attention_backend = True

    def __init__(
        self,
        members: Sequence[VanillaTransformerForSeq2Seq],
        weights: Sequence[float] | None = None,
        mode: str = DEFAULT_MODE,
    ):
        if not members:
            raise ValueError("an ensemble needs at least one model")
        if difference := members_difference(members):
            raise ValueError(f"these models cannot decode as an ensemble: {difference}")
        if mode not in MODES:
            raise ValueError(f"ensemble mode {mode!r} is not one of {MODES}")
        super().__init__(copy.deepcopy(members[0].config))
        self.members = nn.ModuleList(members)
        self.weights, self.mode = normalised_weights(weights, len(members)), mode
        self.post_init()
        self.generation_config = copy.deepcopy(members[0].generation_config)

    @classmethod
    def from_pretrained(
        cls, models: Sequence[str | Path], weights: Sequence[float] | None = None, mode: str = DEFAULT_MODE, **kwargs
    ) -> "VanillaTransformerEnsemble":
        """The ensemble of the models saved at ``models`` (directories or Hub ids), each loaded with
        ``VanillaTransformerForSeq2Seq.from_pretrained(model, **kwargs)``, in eval mode."""
        if isinstance(models, (str, Path)):
            raise TypeError("VanillaTransformerEnsemble.from_pretrained takes a list of models, one a member")
        members = [VanillaTransformerForSeq2Seq.from_pretrained(model, **kwargs).eval() for model in models]
        return cls(members, weights, mode)

    def save_pretrained(self, *args, **kwargs):
        raise NotImplementedError("an ensemble is saved as its members: save each of ensemble.members")

    def init_weights(self) -> None:
        """Nothing: the members arrive trained and tied; the ensemble adds no weight of its own."""

    @property
    def text_form_applied(self) -> bool:
        return all(member.text_form_applied for member in self.members)

    @text_form_applied.setter
    def text_form_applied(self, applied: bool) -> None:  # the entry points mark the model they serve (text_form.py)
        for member in self.members:
            member.text_form_applied = applied

    def get_encoder(self) -> EnsembleEncoder:
        return EnsembleEncoder([member.get_encoder() for member in self.members])

    def split(self, encoder_outputs: BaseModelOutput | tuple | None) -> list[BaseModelOutput | None]:
        """``EnsembleEncoder``'s side-by-side output as each member's encoder output (None for none)."""
        if encoder_outputs is None:
            return [None] * len(self.members)
        states = encoder_outputs[0] if isinstance(encoder_outputs, tuple) else encoder_outputs.last_hidden_state
        widths = [member.config.d_model for member in self.members]
        return [BaseModelOutput(last_hidden_state=part) for part in states.split(widths, dim=-1)]

    @torch.no_grad()
    def generate(self, inputs: torch.Tensor | None = None, generation_config: GenerationConfig | None = None, **kwargs):
        """``GenerationMixin.generate`` as each member's own ``generate`` would run it: its inputs checked once for
        the whole call, and §6.1's output limit (input length + 50) where no length is set."""
        if kwargs.get("inputs_embeds") is not None:
            raise ValueError("an ensemble reads input_ids: each member embeds them its own way")
        config = generation_config if generation_config is not None else self.generation_config
        for member in self.members:
            kwargs = member.checked_generate_kwargs(inputs, config, kwargs)
        with values_checked():
            return super().generate(inputs, generation_config, **kwargs)

    def _prepare_cache_for_generation(self, generation_config: GenerationConfig, model_kwargs: dict, *args, **kwargs):
        """Each member's cache made as ``generate()`` makes it for that member alone, held in one ``EnsembleCache``;
        a cache given to ``generate()`` must be one."""
        given = model_kwargs.get(CACHE_NAME)
        if given is not None:
            if not isinstance(given, EnsembleCache):
                raise ValueError(f"an ensemble decodes with an EnsembleCache, not a {type(given).__name__}")
            return
        caches = []
        for member in self.members:
            member_kwargs = {**model_kwargs}
            member._prepare_cache_for_generation(generation_config, member_kwargs, *args, **kwargs)
            caches.append(member_kwargs.get(CACHE_NAME))
        if all(cache is not None for cache in caches):
            model_kwargs[CACHE_NAME] = EnsembleCache(caches)

    def _reorder_cache(self, cache: EnsembleCache, beam_idx: torch.LongTensor) -> EnsembleCache:
        """Beam search's reordering, done on every member's cache as that member does it."""
        cache.members = [
            member._reorder_cache(part, beam_idx) for member, part in zip(self.members, cache.members, strict=True)
        ]
        return cache

    @accepts_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: EnsembleCache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        skip_logits: bool | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """Every member's forward on the same inputs (its own part of ``encoder_outputs`` and of ``cache``); the
        ``logits`` (B, T, V) are the combined log-probabilities (a single member's logits as they are), and with
        ``labels`` the ``loss`` is their mean negative log-likelihood (no label smoothing: it measures the
        ensemble)."""
        if skip_logits:
            raise ValueError("an ensemble's loss comes from its combined logits: skip_logits=True cannot skip them")
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None:
                decoder_input_ids = self.members[0].prepare_decoder_input_ids_from_labels(labels)
        caches = cache.members if cache is not None else [None] * len(self.members)
        outputs = [
            member(
                input_ids=input_ids,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
                decoder_attention_mask=decoder_attention_mask,
                encoder_outputs=encoded,
                cache=part,
                use_cache=use_cache,
                skip_logits=False,
                **kwargs,
            )
            for member, encoded, part in zip(self.members, self.split(encoder_outputs), caches, strict=True)
        ]
        members_logits = [output.logits for output in outputs]
        logits = members_logits[0] if len(self.members) == 1 else combine(members_logits, self.weights, self.mode)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.to(logits.device).flatten(), ignore_index=-100)
        returned = [getattr(output, CACHE_NAME) for output in outputs]
        if cache is not None:
            cache.members = returned
        elif all(part is not None for part in returned):
            cache = EnsembleCache(returned)
        return Seq2SeqLMOutput(loss=loss, logits=logits, **{CACHE_NAME: cache})


def tokenizer_difference(a: PreTrainedTokenizerBase, b: PreTrainedTokenizerBase) -> str | None:
    """What differs between two tokenizers, in one clause (None if nothing does): their vocabularies, a token's id,
    their special tokens, or a step of their pipeline (normalizer, pre-tokenizer, model, post-processor, decoder)."""
    vocab_a, vocab_b = a.get_vocab(), b.get_vocab()
    if len(vocab_a) != len(vocab_b):
        return f"vocabularies of {len(vocab_a)} vs {len(vocab_b)} tokens"
    if vocab_a != vocab_b:
        token = min(set(vocab_a) ^ set(vocab_b) or {t for t in vocab_a if vocab_a[t] != vocab_b[t]})
        return f"token {token!r}: id {vocab_a.get(token)} vs {vocab_b.get(token)}"
    if difference := first_difference(a.special_tokens_map, b.special_tokens_map):
        return f"special token {difference}"
    backends = [getattr(tokenizer, "backend_tokenizer", None) for tokenizer in (a, b)]
    if None in backends:
        return None if type(a) is type(b) else f"tokenizer class {type(a).__name__} vs {type(b).__name__}"
    steps_a, steps_b = (json.loads(backend.to_str()) for backend in backends)
    for step in ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder"):
        if steps_a.get(step) != steps_b.get(step):
            return f"their {step.replace('_', '-')}s"
    return None


def check_tokenizers(names: Sequence[str], tokenizers: Sequence[PreTrainedTokenizerBase]) -> None:
    """Refused, in one line naming the difference, unless every tokenizer reads text as the first one does."""
    for name, tokenizer in zip(names[1:], tokenizers[1:], strict=True):
        if difference := tokenizer_difference(tokenizer, tokenizers[0]):
            raise UsageError(
                f"{name} and {names[0]} cannot decode as an ensemble: their tokenizers differ in {difference}"
            )


def load_ensemble(
    models: Sequence[str],
    weights: Sequence[float] | None = None,
    mode: str = DEFAULT_MODE,
    trust_remote_code: bool = False,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[VanillaTransformerEnsemble, PreTrainedTokenizerBase]:
    """The ensemble of the models saved at ``models`` (each with its tokenizer, as vanilla-train saves it) on
    ``device`` (in ``dtype``), and the tokenizer they share; refused in one line when their tokenizers or what
    they decode with differ."""
    tokenizers = [load_tokenizer(model, trust_remote_code) for model in models]
    check_tokenizers(models, tokenizers)
    members = [place(load_model(model, trust_remote_code), torch.device(device), dtype) for model in models]
    for model, member in zip(models, members, strict=True):
        member.name_or_path = model  # named as given on the command line
    try:
        return VanillaTransformerEnsemble(members, weights, mode), tokenizers[0]
    except ValueError as error:
        raise UsageError(str(error)) from error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """vanilla-translate's flags for an ensemble (two or more --model)."""
    group = parser.add_argument_group("ensembles (--model given two or more times)")
    group.add_argument(
        "--ensemble_mode",
        choices=MODES,
        default=None,
        help=f"how the models' next-token distributions combine: linear averages their probabilities (fairseq's; "
        f"the default, {DEFAULT_MODE}), log_linear their log-probabilities, renormalised",
    )
    group.add_argument(
        "--ensemble_weights",
        type=float,
        nargs="+",
        metavar="W",
        help="one weight a --model, in their order (normalised to sum to 1; default: equal)",
    )


# The engines that decode one model only, and why (an ensemble runs on generate())
SINGLE_MODEL_ENGINES = {
    "ctranslate2": "CTranslate2 has no ensembles, by design (its issue #273)",
    "onnx": "the ONNX export is one model's graph",
}


def check_arguments(args: argparse.Namespace) -> None:
    """Refused before loading, in one line: an ensemble on an engine that decodes one model (named) or with its
    --quantization, ensemble options for one model, weights that are not one positive number a model."""
    count = len(args.model)
    if count == 1:
        given = [flag for flag in ("--ensemble_mode", "--ensemble_weights") if getattr(args, flag[2:]) is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: options of an ensemble, which needs --model two or more times")
        return
    if args.engine in SINGLE_MODEL_ENGINES:
        raise UsageError(
            f"--engine {args.engine} decodes one model, and {count} --model were given: "
            f"{SINGLE_MODEL_ENGINES[args.engine]}; use --engine generate"
        )
    if args.quantization is not None:
        raise UsageError(
            f"--quantization {args.quantization} is CTranslate2's, which decodes one model: an ensemble decodes on "
            "generate() (its precision: --dtype)"
        )
    normalised_weights(args.ensemble_weights, count)


def ensemble_engine(kind: str, model: VanillaTransformerEnsemble, tokenizer, decoding: Decoding) -> GenerateEngine:
    """The engine of an ensemble: ``generate()``, which ``auto`` chooses saying why (``check_arguments`` has
    refused the others)."""
    reasons = "; ".join(f"{engine}: {why}" for engine, why in SINGLE_MODEL_ENGINES.items())
    if kind == "auto":
        logger.info(
            "engine: generate (an ensemble of %d models decodes on generate() only; %s)", len(model.members), reasons
        )
    else:
        logger.info("engine: generate (an ensemble of %d models)", len(model.members))
    return GenerateEngine(model, tokenizer, decoding)
