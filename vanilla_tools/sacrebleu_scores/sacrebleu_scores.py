"""An `evaluate` metric module: sacreBLEU and chrF of detokenized, cased translations, with their signatures.

``evaluate.load("sacrebleu")`` fetches its script from the Hub, which fails offline; this module is kept in the
repository and loaded from its path (``vanilla_tools/metrics.py``), so users of the evaluate ecosystem get the same
scores and signatures offline:

    import evaluate
    scores = evaluate.load("vanilla_tools/sacrebleu_scores").compute(predictions=[...], references=[...])
"""

import datasets
import evaluate
from sacrebleu.metrics import BLEU, CHRF

_CITATION = """@inproceedings{post-2018-call,
  title = "A Call for Clarity in Reporting {BLEU} Scores",
  author = "Post, Matt",
  booktitle = "Proceedings of the Third Conference on Machine Translation: Research Papers",
  year = "2018",
  pages = "186--191",
}"""


class SacrebleuScores(evaluate.Metric):
    """Corpus BLEU (13a tokenization, cased) and chrF against one reference per translation; the length ratio is
    the hypotheses' length over the references' (what BLEU's brevity penalty sees)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description="predictions: translations (str); references: one reference each (str)",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            codebase_urls=["https://github.com/mjpost/sacrebleu"],
        )

    def _compute(self, predictions: list[str], references: list[str]) -> dict:
        bleu, chrf = BLEU(), CHRF()
        bleu_score = bleu.corpus_score(predictions, [references])
        chrf_score = chrf.corpus_score(predictions, [references])
        return {
            "bleu": round(bleu_score.score, 2),
            "chrf": round(chrf_score.score, 2),
            "signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
            "length_ratio": round(bleu_score.sys_len / max(bleu_score.ref_len, 1), 4),
        }
