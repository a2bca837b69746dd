"""sacreBLEU and chrF on detokenized, cased text (§6: BLEU; the paper's tables report BLEU), through the `evaluate`
metric module kept in ``vanilla_tools/sacrebleu_scores/`` (``evaluate.load("sacrebleu")`` would fetch its script from
the Hub, which fails offline; the module wraps the same sacrebleu library, so scores and signatures are the same).
"""

import functools
from dataclasses import asdict, dataclass
from pathlib import Path

import evaluate

from .cli import UsageError

METRIC = Path(__file__).resolve().parent / "sacrebleu_scores"


@dataclass
class TranslationScores:
    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    length_ratio: float  # hypothesis length / reference length, as BLEU's brevity penalty sees it

    def as_dict(self) -> dict:
        return asdict(self)


@functools.cache
def metric() -> evaluate.EvaluationModule:
    # in memory: evaluate's cache files would be shared by the data-parallel ranks, which all score
    return evaluate.load(str(METRIC), keep_in_memory=True)


def score_translations(hypotheses: list[str], references: list[str]) -> TranslationScores:
    """Corpus BLEU (13a tokenization, cased) and chrF of detokenized hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise UsageError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    return TranslationScores(**metric().compute(predictions=hypotheses, references=references))
