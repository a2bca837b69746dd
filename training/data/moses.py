"""The text of the Multi30k literature (``--moses_lowercase_tokenize``): each side lowercased, then Moses'
normalize-punctuation.perl and tokenizer.perl for its language, through their sacremoses ports, before the BPE.

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

import sacremoses
from datasets import Dataset
from datasets.fingerprint import Hasher
from sacremoses import MosesPunctNormalizer, MosesTokenizer


class MosesLowercaseTokenizer:
    """datasets.map's function: the ``source`` and ``target`` columns lowercased, punctuation-normalized and
    tokenized as Moses does for ``source_lang`` and ``target_lang``."""

    def __init__(self, source_lang: str, target_lang: str):
        self.languages = {"source": source_lang, "target": target_lang}
        self.steps = {
            side: (MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)) for side, lang in self.languages.items()
        }

    def fingerprint(self, data: Dataset) -> str:
        """The cache key of ``data`` so preprocessed: its fingerprint, the languages, sacremoses' release and this
        code."""
        code = Hasher.hash(MosesLowercaseTokenizer.line)
        return Hasher.hash((data._fingerprint, self.languages, sacremoses.__version__, code))

    def line(self, side: str, text: str) -> str:
        normalizer, tokenizer = self.steps[side]
        return tokenizer.tokenize(normalizer.normalize(text.lower()), return_str=True, escape=False)

    def __call__(self, batch: dict) -> dict:
        return {side: [self.line(side, text) for text in batch[side]] for side in self.languages}
