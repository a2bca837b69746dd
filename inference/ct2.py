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
- inputs are not truncated (CTranslate2 cuts them at 1,024 tokens by default).
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

from .engine import BatchTranslation

CPU = torch.device("cpu")


def device_refusal(device: torch.device) -> str | None:
    """Why CTranslate2 cannot run on ``device`` (None if it can): a CUDA device its build does not see."""
    if device.type != "cuda":
        return None
    count = import_ctranslate2().get_cuda_device_count()
    if (device.index or 0) < count:
        return None
    return f"CTranslate2 sees {count} CUDA device(s), not {device} (a build without CUDA, or another CUDA runtime)"


def check_compute_type(quantization: str, device: torch.device) -> None:
    """Refused in one line naming both: a compute type that CTranslate2 does not run on ``device``."""
    supported = import_ctranslate2().get_supported_compute_types(device.type, device.index or 0)
    if quantization not in supported:
        runs = ", ".join(sorted(supported))
        raise UsageError(f"--quantization {quantization} does not run on {device}: CTranslate2 runs {runs} there")


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
        # On a CPU, one worker per core, each decoding its part of a batch on one thread: threads sharing one batch
        # wait on each other at every layer of every step, which costs more than they bring at these sizes (several
        # times over at batch 1; `vanilla-bench --translate` measures both, docs/performance.md). On a GPU one
        # worker takes the batch whole.
        self.workers = 1 if device.type == "cuda" else threads or os.cpu_count() or 1
        self.translator = ctranslate2.Translator(
            str(ct2_dir),
            device=device.type,
            device_index=device.index or 0,
            compute_type=compute_type,
            inter_threads=self.workers,
            intra_threads=1,
        )
        self.tokenizer, self.decoding = tokenizer, decoding

    def __call__(self, sentences: list[str]) -> BatchTranslation:
        ids = self.tokenizer(sentences)["input_ids"]
        tokens = [self.tokenizer.convert_ids_to_tokens(sentence) for sentence in ids]
        longest = max(map(len, ids))
        results = self.translator.translate_batch(
            tokens,
            beam_size=self.decoding.num_beams,
            length_penalty=self.decoding.length_penalty,
            patience=1,
            max_decoding_length=self.decoding.max_new_tokens_for(longest),
            min_decoding_length=0,
            max_input_length=0,
            return_end_token=True,
            max_batch_size=-(-len(tokens) // self.workers),  # the batch split evenly over the workers
            num_hypotheses=self.decoding.nbest or 1,
            return_scores=self.decoding.nbest is not None,
        )
        eos = self.tokenizer.eos_token
        hypotheses = [result.hypotheses[0] for result in results]
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
        return translation

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
