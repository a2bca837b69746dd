"""sacreBLEU and chrF on detokenized, cased text (§6: BLEU; the paper's tables report BLEU), through the `evaluate`
metric module kept in ``vanilla_tools/sacrebleu_scores/`` (``evaluate.load("sacrebleu")`` would fetch its script from
the Hub, which fails offline; the module wraps the same sacrebleu library, so scores and signatures are the same).
Also the BLEU the Multi30k literature reports: on lowercased, Moses-tokenized text (``tokenized_bleu``).
"""

import functools
from dataclasses import asdict, dataclass
from pathlib import Path

import evaluate
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
    moses = TextForm.moses_lowercase(language, language).target  # &quot; or ": one token either way: unescaped
    bleu = BLEU(tokenize="none", force=True)
    score = bleu.corpus_score([moses(h) for h in hypotheses], [[moses(r) for r in references]])
    return round(score.score, 2), f"{bleu.get_signature()}|pre:lc+moses-norm+moses-tok-{language}"
