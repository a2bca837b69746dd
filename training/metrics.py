"""sacreBLEU and chrF on detokenized, cased text (§6: BLEU; the paper's tables report BLEU).

We call the sacrebleu package directly instead of ``evaluate.load("sacrebleu")``: that loader fetches its metric
script from the Hub, which fails offline. sacrebleu is the very library that script wraps, so scores and
signatures are identical.
"""

from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class TranslationScores:
    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    length_ratio: float  # hypothesis length / reference length, as BLEU's brevity penalty sees it

    def as_dict(self) -> dict:
        return asdict(self)


def score_translations(hypotheses: list[str], references: list[str]) -> TranslationScores:
    """Corpus BLEU (13a tokenization, cased) and chrF of detokenized hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return TranslationScores(
        bleu=round(bleu_score.score, 2),
        chrf=round(chrf_score.score, 2),
        signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        length_ratio=round(bleu_score.sys_len / max(bleu_score.ref_len, 1), 4),
    )
