"""sacreBLEU and chrF on detokenized, cased text (§6: BLEU; the paper's tables report BLEU), through the `evaluate`
metric module kept in ``vanilla_tools/sacrebleu_scores/`` (``evaluate.load("sacrebleu")`` would fetch its script from
the Hub, which fails offline; the module wraps the same sacrebleu library, so scores and signatures are the same).
Also the BLEU the Multi30k literature reports: on lowercased, Moses-tokenized text (``tokenized_bleu``).
"""

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import evaluate
import numpy as np
from sacrebleu.metrics import BLEU

from .cli import UsageError
from .text_form import TextForm

METRIC = Path(__file__).resolve().parent / "sacrebleu_scores"


@dataclass
class TranslationScores:
    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    length_ratio: float  # hypothesis length / reference length, as BLEU's brevity penalty sees it
    bleu_lc_tok: float | None = None  # tokenized_bleu, when the target language is known
    lc_tok_signature: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@functools.cache
def metric() -> evaluate.EvaluationModule:
    # in memory: evaluate's cache files would be shared by the data-parallel ranks, which all score
    return evaluate.load(str(METRIC), keep_in_memory=True)


def score_translations(hypotheses: list[str], references: list[str], language: str | None = None) -> TranslationScores:
    """Corpus BLEU (13a tokenization, cased) and chrF of detokenized hypotheses against one reference each; with the
    target ``language``, also ``tokenized_bleu``."""
    if len(hypotheses) != len(references):
        raise UsageError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    scores = TranslationScores(**metric().compute(predictions=hypotheses, references=references))
    if language:
        scores.bleu_lc_tok, scores.lc_tok_signature = tokenized_bleu(hypotheses, references, language)
    return scores


def score_in_form(hypotheses: list[str], references: list[str], form: TextForm) -> TranslationScores:
    """``score_translations`` as vanilla-train's final evaluation counts the scores of a model whose text is ``form``
    (``hypotheses`` are the model's own text, ``references`` in its form): for a model that reads prepared text, the
    lowercased, tokenized BLEU too."""
    return score_translations(hypotheses, references, None if form.raw else form.target_lang)


def tokenized_bleu(hypotheses: list[str], references: list[str], language: str) -> tuple[float, str]:
    """BLEU as the Multi30k shared tasks and the papers that follow them report it: both sides lowercased, then
    Moses' normalize-punctuation.perl and tokenizer.perl (``-l language``; their sacremoses ports), then BLEU on
    those tokens as multi-bleu.perl counts them (sacreBLEU with no tokenization of its own). Not comparable with
    sacreBLEU's cased score. Returns the score and its signature."""
    moses, bleu = _tokenized(language)
    score = bleu.corpus_score([moses(h) for h in hypotheses], [[moses(r) for r in references]])
    return round(score.score, 2), f"{bleu.get_signature()}|pre:lc+moses-norm+moses-tok-{language}"


def tokenized_bleu_statistics(hypotheses: list[str], references: list[str], language: str) -> np.ndarray:
    """Per sentence, ``tokenized_bleu``'s sufficient statistics: matches and totals of 1- to 4-grams, hypothesis and
    reference lengths (sentences x 10). Summed over any draw of the sentences, they give its corpus score
    (``statistics_bleu``): what a bootstrap over sentences needs."""
    moses, _ = _tokenized(language)
    # effective_order: the sentence's own score (unused) without sacreBLEU's warning per sentence; the counts are alike
    bleu = BLEU(tokenize="none", force=True, effective_order=True)
    rows = []
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        score = bleu.sentence_score(moses(hypothesis), [moses(reference)])
        rows.append([*score.counts, *score.totals, score.sys_len, score.ref_len])
    return np.asarray(rows, dtype=np.int64).reshape(-1, 10)


def statistics_bleu(statistics: np.ndarray) -> float:
    """Corpus BLEU of summed sentence statistics (``tokenized_bleu_statistics``; sacreBLEU's formula and smoothing)."""
    total = statistics.sum(axis=0)
    return BLEU.compute_bleu(total[:4], total[4:8], int(total[8]), int(total[9]), smooth_method="exp").score


def _tokenized(language: str) -> tuple[Callable[[str], str], BLEU]:
    """``tokenized_bleu``'s text (lowercased, Moses-normalized and -tokenized) and its BLEU (no tokenization of its
    own)."""
    # &quot; or ": one token either way: unescaped
    return TextForm.moses_lowercase(language, language).target, BLEU(tokenize="none", force=True)
