"""The final evaluation of vanilla-train (§6.1): the validation and test sets decoded whole with the model's beam
search, its length penalty chosen on validation, scored with sacreBLEU; and the evaluation sets' order."""

import logging

import datasets
import numpy as np
from transformers import PreTrainedTokenizerBase

from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding
from vanilla_tools.metrics import score_translations

from ..data.corpus import lengths
from .trainer import PaperSeq2SeqTrainer

logger = logging.getLogger(__name__)


class BleuMetric:
    """compute_metrics for Seq2SeqTrainer: detokenized, cased sacreBLEU and chrF against the raw references (and,
    given the target ``language``, the lowercased, tokenized BLEU of the Multi30k literature)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, references: list[str], language: str | None = None):
        self.tokenizer, self.references, self.language = tokenizer, references, language

    def __call__(self, eval_preds) -> dict:
        if isinstance(eval_preds.predictions, tuple):
            raise UsageError("BLEU needs generated translations: run with --predict_with_generate true")
        predictions = np.where(eval_preds.predictions < 0, self.tokenizer.pad_token_id, eval_preds.predictions)
        hypotheses = [h.strip() for h in self.tokenizer.batch_decode(predictions, skip_special_tokens=True)]
        scores = score_translations(hypotheses, self.references, self.language).as_dict()
        return {key: value for key, value in scores.items() if value is not None}


def shortest_first(dataset):
    """An evaluation set sorted by source length, shortest first, so generation batches carry little padding.
    Shortest first because data-parallel evaluation fills the ranks' uneven last batches with pairs from the start:
    short ones never lengthen that batch's padding, so every pair is translated as one process would."""
    order = np.argsort(lengths(dataset)[0], kind="stable")
    return dataset.select(order.tolist())


def spread_sample(dataset, count: int):
    """``count`` rows spread evenly over ``dataset`` (sorted by length: short, middle and long sentences alike), so the
    evaluations during training see the validation set's mix of lengths, not only its longest sentences."""
    if count >= len(dataset):
        return dataset
    return dataset.select(np.linspace(0, len(dataset) - 1, num=count).round().astype(int).tolist())


def final_evaluation(
    trainer: PaperSeq2SeqTrainer,
    data: datasets.DatasetDict,
    decoding: Decoding,
    candidates: list[float],
    translate_examples: int = 5,
    splits: tuple[str, ...] = ("validation", "test"),
    language: str | None = None,
) -> tuple[dict, Decoding]:
    """§6.1 on the whole validation and test sets, searching as ``decoding`` says (the run's final decoding): with
    length penalty ``candidates`` and a beam, alpha is chosen on validation first, and test decoded with it. Scored
    with sacreBLEU. Returns each split's metrics (and the alpha search), and the decoding chosen, the one to save the
    model with. ``splits``: those evaluated (of validation and test); ``language``: the target's, for the
    lowercased, tokenized BLEU."""
    unknown = set(splits) - {"validation", "test"}
    if unknown:
        raise UsageError(f"--final_splits {' '.join(splits)}: {sorted(unknown)} not among validation and test")
    results, tokenizer = {}, trainer.processing_class
    for split in ("validation", "test"):
        if split not in data or split not in splits:
            continue
        dataset = shortest_first(data[split])
        trainer.compute_metrics = BleuMetric(tokenizer, list(dataset["target"]), language)
        if split == "validation" and candidates and decoding.num_beams > 1:
            decoding, prediction, results["length_penalty_search"] = choose_length_penalty(
                trainer, dataset, decoding, candidates
            )
        else:
            prediction = trainer.predict(dataset, metric_key_prefix=split, decoding=decoding)
        trainer.log_metrics(split, prediction.metrics)
        trainer.save_metrics(split, prediction.metrics)
        results[split] = prediction.metrics
        if split == "test" and trainer.is_world_process_zero():
            report_test(prediction.metrics, dataset, prediction.predictions, tokenizer, translate_examples)
    return results, decoding


def choose_length_penalty(trainer: PaperSeq2SeqTrainer, validation, decoding: Decoding, candidates: list[float]):
    """§6.1 chose alpha "after experimentation on the development set": beam-search ``validation`` with each
    candidate and keep the best BLEU (the first tried on a tie); a best on the grid's edge widens the grid
    (``wider_length_penalty``). Returns the decoding with the chosen alpha, its prediction, and ``{alpha: validation
    BLEU}`` of every alpha tried, for the record."""
    tried, queue = {}, list(dict.fromkeys(candidates))
    while queue:
        alpha = queue.pop(0)
        tried[alpha] = trainer.predict(
            validation, metric_key_prefix="validation", decoding=decoding.with_length_penalty(alpha)
        )
        logger.info("length penalty %.2f: validation BLEU %.2f", alpha, tried[alpha].metrics["validation_bleu"])
        bleu = {alpha: prediction.metrics["validation_bleu"] for alpha, prediction in tried.items()}
        if not queue and (wider := wider_length_penalty(bleu, candidates)) is not None:
            logger.info(
                "the best length penalty so far, %.2f, is the edge of those tried: trying %.2f",
                max(bleu, key=bleu.get),
                wider,
            )
            queue.append(wider)
    best = max(bleu, key=bleu.get)
    return decoding.with_length_penalty(best), tried[best], {str(alpha): score for alpha, score in bleu.items()}


def wider_length_penalty(bleu: dict[float, float], candidates: list[float]) -> float | None:
    """The next alpha to try when the best of ``bleu`` (``{alpha: validation BLEU}`` in the order tried; the first
    on a tie) is the largest or the smallest alpha tried: one step of the grid's edge beyond it (the step between
    the two largest ``candidates`` upwards, between the two smallest downwards). None once the best is inside, where
    the grid has a single value, where the step down would pass 0 (a negative alpha favours shorter outputs than the
    log-probability alone does), or once the alphas tried are twice the grid's (the search then costs at most twice
    the grid's decodes; the record shows the best still on the edge)."""
    grid = sorted(set(candidates))
    if len(grid) < 2 or len(bleu) >= 2 * len(grid):
        return None
    best = max(bleu, key=bleu.get)
    if best == max(bleu):
        return round(best + grid[-1] - grid[-2], 6)
    if best == min(bleu) and best - (grid[1] - grid[0]) >= 0:
        return round(best - (grid[1] - grid[0]), 6)
    return None


def report_test(metrics: dict, dataset, predictions, tokenizer, examples: int) -> None:
    print(f"\ntest BLEU = {metrics['test_bleu']:.2f}  chrF = {metrics['test_chrf']:.2f}  ({metrics['test_signature']})")
    predictions = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
    for i in np.linspace(0, len(dataset) - 1, num=min(examples, len(dataset)), dtype=int).tolist():
        print(f"  source:      {dataset[i]['source']}")
        print(f"  reference:   {dataset[i]['target']}")
        print(f"  translation: {tokenizer.decode(predictions[i], skip_special_tokens=True).strip()}\n")
