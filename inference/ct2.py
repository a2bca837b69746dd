"""Serving with CTranslate2: `vanilla-export-ct2 MODEL_DIR OUT_DIR [--quantization int8]`, and the engine behind
`vanilla-translate --engine ctranslate2`.

The engine decodes as ``generate()`` does, so that float32 translations are the same tokens:

- the same batches, and each batch's maximum output length is its longest input + 50 (§6.1), as ``generate()``;
- beam search with patience 1 stops once ``num_beams`` hypotheses have finished, as ``early_stopping=True``;
- the length penalty: transformers divides a finished hypothesis' log-probability by its length to the power alpha,
  counting the end token; CTranslate2 divides by the length of the hypothesis it returns, which leaves the end token
  out unless ``return_end_token=True``. The engine asks for it (and drops it from the text), so both divide by the
  same length;
- the end token may come first (CTranslate2's minimum output length is 1 by default, generate()'s 0);
- inputs are not truncated (CTranslate2 cuts them at 1,024 tokens by default);
- a target prefix (``target_prefix``) is given to one batch of prefixes of one length (``by_prefix_length``), and
  the output may run as many tokens past it as it could without one;
- sampling draws from one worker, seeded once: CTranslate2's random generator is one per thread, so batches shared
  out over several workers would draw from whichever generator picked them up.
"""

import argparse
import os
from pathlib import Path

import torch

from modeling_vanilla.convert_ctranslate2 import QUANTIZATIONS, export_ctranslate2, import_ctranslate2
from modeling_vanilla.export_checks import check_export_folder
from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.decoding import Decoding
from vanilla_tools.exports import export_write_guard, record_source

from .engine import BatchTranslation, by_prefix_length

CPU = torch.device("cpu")


def device_refusal(device: torch.device) -> str | None:
    """Why CTranslate2 cannot run on ``device`` (None if it can): a CUDA device its build does not see."""
    if device.type != "cuda":
        return None
    count = import_ctranslate2().get_cuda_device_count()
    if (device.index or 0) < count:
        return None
    return f"CTranslate2 sees {count} CUDA device(s), not {device} (a build without CUDA, or another CUDA runtime)"


def compute_type(quantization: str, dtype: str | None) -> str:
    """The compute type CTranslate2 runs an export of ``quantization`` in at ``--dtype`` ``dtype``: the
    quantization's own where no dtype is given; else its int8 weights, if it has them, with ``dtype`` for the rest
    (int8 at bfloat16: int8_bfloat16), or ``dtype`` itself (CTranslate2 converts the weights as it loads them)."""
    if dtype is None:
        return quantization
    return f"int8_{dtype}" if quantization.startswith("int8") else dtype


def compute_type_refusal(computes: str, device: torch.device) -> str | None:
    """Why CTranslate2 cannot compute in ``computes`` on ``device`` (None if it can): what it runs there instead
    (``ctranslate2.get_supported_compute_types`` decides: float16 on a GPU only, bfloat16 on some CPUs)."""
    supported = import_ctranslate2().get_supported_compute_types(device.type, device.index or 0)
    return None if computes in supported else f"CTranslate2 runs {', '.join(sorted(supported))} there"


def check_compute_type(quantization: str, device: torch.device) -> None:
    """Refused in one line naming both: a --quantization that CTranslate2 does not run on ``device``."""
    refusal = compute_type_refusal(quantization, device)
    if refusal:
        raise UsageError(f"--quantization {quantization} does not run on {device}: {refusal}")


def export(model_dir: str | Path, output_dir: str | Path, quantization: str = "int8", force: bool = False) -> Path:
    """``export_ctranslate2``, recording which weights the export was made from (see
    ``vanilla_tools.exports.cached_ctranslate2``)."""
    return record_source(model_dir, export_ctranslate2(model_dir, output_dir, quantization, force=force), quantization)


class CTranslate2Engine:
    """Translate batches of sentences with a CTranslate2 model, searching as ``decoding`` says (the same
    ``Decoding`` that ``GenerateEngine`` takes: the model's generation config with a command's overrides)."""

    def __init__(
        self,
        ct2_dir: str | Path,
        tokenizer,
        decoding: Decoding,
        threads: int | None = None,
        device: torch.device = CPU,
        compute_type: str = "default",
    ):
        refusal = decoding.ctranslate2_refusal()
        if refusal:
            raise UsageError(f"{refusal}; use --engine generate")
        ctranslate2 = import_ctranslate2()
        cores = threads or os.cpu_count() or 1
        # On a CPU, one worker per core, each decoding its part of a batch on one thread: threads sharing one batch
        # wait on each other at every layer of every step, which costs more than they bring at these sizes (several
        # times over at batch 1; `vanilla-bench --translate` measures both, docs/performance.md). On a GPU one
        # worker takes the batch whole. Sampling: one worker, whose generator the seed sets.
        self.workers = 1 if device.type == "cuda" or decoding.sampling else cores
        if decoding.sampling:
            ctranslate2.set_random_seed(decoding.sampling.seed)  # before the worker's generator is made
        self.translator = ctranslate2.Translator(
            str(ct2_dir),
            device=device.type,
            device_index=device.index or 0,
            compute_type=compute_type,
            inter_threads=self.workers,
            intra_threads=max(1, cores // self.workers) if device.type == "cpu" else 1,
        )
        self.tokenizer, self.decoding = tokenizer, decoding

    def __call__(self, sentences: list[str], prefixes: list[str] | None = None) -> BatchTranslation:
        """The translations of ``sentences``, each going on from its target prefix if ``prefixes`` are given (an
        empty one: none), as ``GenerateEngine``'s."""
        if prefixes is None:
            return self._translate(sentences, None)
        return by_prefix_length(self._translate, sentences, [self.tokenizer.tokenize(prefix) for prefix in prefixes])

    def _translate(self, sentences: list[str], prefixes: list[list[str]] | None) -> BatchTranslation:
        """One ``translate_batch`` call; ``prefixes``: all of one length. CTranslate2 returns one sample an input, so
        N samples are drawn from N copies of it, one after another."""
        ids = self.tokenizer(sentences)["input_ids"]
        copies = self.decoding.sampling.num_samples if self.decoding.sampling else 1
        tokens = [self.tokenizer.convert_ids_to_tokens(sentence) for sentence in ids for _ in range(copies)]
        longest = max(map(len, ids))
        results = self.translator.translate_batch(
            tokens,
            target_prefix=[prefix for prefix in prefixes for _ in range(copies)] if prefixes else None,
            beam_size=self.decoding.num_beams,
            length_penalty=self.decoding.length_penalty,
            patience=1,
            max_decoding_length=self.decoding.max_new_tokens_for(longest) + len(prefixes[0] if prefixes else []),
            min_decoding_length=0,
            max_input_length=0,
            return_end_token=True,
            max_batch_size=-(-len(tokens) // self.workers),  # the batch split evenly over the workers
            num_hypotheses=self.decoding.nbest or 1,
            return_scores=self.decoding.nbest is not None,
            **self._sampling_kwargs(),
        )
        eos = self.tokenizer.eos_token
        hypotheses = [result.hypotheses[0] for result in results[::copies]]
        translation = BatchTranslation(
            texts=[self._text(h) for h in hypotheses],
            unfinished=[not h or h[-1] != eos for h in hypotheses],
            source_lengths=[len(sentence) for sentence in ids],
            output_lengths=[len(h) for h in hypotheses],
        )
        if self.decoding.nbest:
            translation.nbest = [
                [(self._text(h), score) for h, score in zip(r.hypotheses, r.scores, strict=True)] for r in results
            ]
        if self.decoding.sampling:
            texts = [self._text(result.hypotheses[0]) for result in results]
            translation.samples = [texts[i : i + copies] for i in range(0, len(texts), copies)]
        return translation

    def _sampling_kwargs(self) -> dict:
        """``translate_batch``'s sampling arguments (its top-k 0 is the whole vocabulary, as generate()'s)."""
        sampling = self.decoding.sampling
        if sampling is None:
            return {}
        return {
            "sampling_topk": sampling.top_k,
            "sampling_topp": sampling.top_p,
            "sampling_temperature": sampling.temperature,
        }

    def score(self, sentences: list[str], translations: list[str]) -> list[list[float]]:
        """CTranslate2's ``score_batch``: the log-probability of each token of each translation, the end token (which
        it appends) included."""
        sources = [self.tokenizer.convert_ids_to_tokens(ids) for ids in self.tokenizer(sentences)["input_ids"]]
        targets = [self.tokenizer.tokenize(translation) for translation in translations]
        results = self.translator.score_batch(
            sources, targets, max_batch_size=-(-len(sources) // self.workers), max_input_length=0
        )
        return [result.log_probs for result in results]

    def _text(self, tokens: list[str]) -> str:
        return self.tokenizer.decode(self.tokenizer.convert_tokens_to_ids(tokens), skip_special_tokens=True).strip()


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vanilla-export-ct2", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model_dir", help="a saved model directory with its tokenizer")
    parser.add_argument("output_dir", help="where to write the CTranslate2 model")
    parser.add_argument("--quantization", choices=QUANTIZATIONS, default="int8")
    parser.add_argument("--force", action="store_true", help="replace output_dir if it exists")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    # before the guard, which removes output_dir whole if a write fails
    check_export_folder(args.model_dir, args.output_dir, args.force)
    with export_write_guard(Path(args.output_dir), f"ctranslate2-{args.quantization}"):
        output = export(args.model_dir, args.output_dir, args.quantization, args.force)
    print(f"exported {args.model_dir} ({args.quantization}) to {output}")


main = console_script(run)

if __name__ == "__main__":
    main()
