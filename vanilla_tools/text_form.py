"""The text a model reads and writes before its tokenizer (``config.text_form``), applied here for training, the
entry points and the lowercased, tokenized BLEU alike: raw text as given, or vanilla-train's
``--moses_lowercase_tokenize`` (``TextForm.moses_lowercase``), the text of the Multi30k literature: each side
lowercased, then Moses' normalize-punctuation.perl and tokenizer.perl for its language, through their sacremoses ports.

This is the multi30k/dataset repository's ``scripts/task1-tokenize.sh`` (``lowercase.perl | normalize-punctuation.perl
-l LANG | tokenizer.perl -l LANG``), whose ``lc.norm.tok`` files fairseq recipes train on; Wu et al. (2021) among
them (LividWo/Revisit-MMT ships such text, its BPE applied, without the script). On the bundled Multi30k it gives
the tokens of those files on 62,020 of the 62,028 lines of training, validation and test2016, both sides: all but 7
German training lines and 1 German validation line, each ending in ``."``, which the Perl script turns into ``".``
(it sees the line's newline after the quote; sacremoses, given the line without it, does not).

One difference in form, none in words: tokenizer.perl writes ``'`` and ``"`` as ``&apos;`` and ``&quot;`` (and
``& | < > [ ]`` so), which renames tokens one for one and leaves BLEU over tokens as it is. They are kept as
characters here (sacremoses' ``escape=False``, tokenizer.perl's ``-no-escape``): the lowercased, tokenized BLEU
(``vanilla_tools.metrics.tokenized_bleu``) runs the same Moses steps again on text it scores, which leave such text
unchanged (every German line of Multi30k's training, validation and test2016 sets), so it counts the tokens
fairseq's scorer counts; an escaped ``&apos;`` it would split into ``& apos ;``.
"""

import functools
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass

from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

from modeling_vanilla.configuration_vanilla import RAW_TEXT

from .cli import UsageError

logger = logging.getLogger(__name__)


@functools.cache
def moses(language: str) -> tuple[MosesPunctNormalizer, MosesTokenizer, MosesDetokenizer]:
    """sacremoses' steps for ``language``, made once (a tokenizer compiles its patterns)."""
    return MosesPunctNormalizer(lang=language), MosesTokenizer(lang=language), MosesDetokenizer(lang=language)


@dataclass(frozen=True)
class TextForm:
    """``config.text_form`` as steps applied in this order (its fields are the config's keys); all off: raw text."""

    lowercase: bool = False
    moses_normalize_punctuation: bool = False
    moses_tokenize: bool = False
    moses_escape: bool = False
    source_lang: str = ""
    target_lang: str = ""

    @classmethod
    def moses_lowercase(cls, source_lang: str, target_lang: str) -> "TextForm":
        """``--moses_lowercase_tokenize``'s text: lowercased, Moses-normalized and Moses-tokenized, not escaped."""
        return cls(True, True, True, False, source_lang, target_lang)

    @classmethod
    def of(cls, config) -> "TextForm | None":
        """The text form a model's config states; None where it is unknown (a vanilla_transformer config saved before
        the field existed). A model of another type reads raw text: its tokenizer does all it needs."""
        form = getattr(config, "text_form", RAW_TEXT)
        if form is None:
            return None
        return cls() if form == RAW_TEXT else cls(**form)

    @property
    def raw(self) -> bool:
        return not (self.lowercase or self.moses_normalize_punctuation or self.moses_tokenize)

    def as_config(self) -> str | dict:
        """The value of ``config.text_form``."""
        return RAW_TEXT if self.raw else asdict(self)

    def prepare(self, text: str, language: str) -> str:
        """``text`` of ``language`` in this form."""
        normalizer, tokenizer, _ = moses(language)
        if self.lowercase:
            text = text.lower()
        if self.moses_normalize_punctuation:
            text = normalizer.normalize(text)
        if self.moses_tokenize:
            text = tokenizer.tokenize(text, return_str=True, escape=self.moses_escape)
        return text

    def source(self, text: str) -> str:
        return self.prepare(text, self.source_lang)

    def target(self, text: str) -> str:
        return self.prepare(text, self.target_lang)

    def detokenize(self, text: str) -> str:
        """The model's output as text to read: Moses' detokenizer for the target language (the case stays lower)."""
        if not self.moses_tokenize:
            return text
        return moses(self.target_lang)[2].detokenize(text.split(), return_str=True, unescape=self.moses_escape)


def served_text_form(model) -> TextForm:
    """The text form an entry point prepares ``model``'s input in, marking the model so that its ``generate()`` does
    not warn as a Hub user's would. Unknown (a model saved before it was recorded): said in one line, and the text
    is given as it is."""
    form = TextForm.of(model.config)
    model.text_form_applied = True
    if form is None:
        logger.warning(
            "%s: the text it was trained on is unknown (saved before config.json recorded it): the input goes to the "
            "tokenizer as it is; if it was trained with --moses_lowercase_tokenize, set its config.json's text_form "
            "(docs/multi30k.md#translating-with-such-a-model)",
            model.name_or_path or "the model",
        )
        return TextForm()
    return form


def output_text(form: TextForm, detokenize: bool) -> Callable[[str], str]:
    """What an entry point writes of a model's translation: the text as the model wrote it, or with ``detokenize``
    (--detokenize) Moses-detokenized, which a model that writes no Moses tokens refuses."""
    if not detokenize:
        return str
    if not form.moses_tokenize:
        raise UsageError(
            "--detokenize undoes Moses' tokenization, and this model's text is not Moses-tokenized "
            f"(config.text_form: {form.as_config()!r})"
        )
    return form.detokenize
