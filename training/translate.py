"""`vanilla-translate --model DIR [FILE]`: translate a file (or stdin) with beam search; score with --references."""

import argparse
import sys
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from .metrics import score_translations


def output_length(input_ids: torch.Tensor) -> dict:
    """§6.1: "maximum output length during inference to input length + 50", as generate() kwargs. max_length=None:
    the saved max_length (256) would otherwise compete with max_new_tokens, and generate() warns on every call."""
    return {"max_new_tokens": input_ids.shape[1] + 50, "max_length": None}


def translate(
    model, tokenizer, sentences: list[str], batch_size: int = 64, progress: bool = True, **generate_kwargs
) -> list[str]:
    """Translate in batches of similar length (sorted, then restored to input order); §6.1 output length
    = input length + 50 unless ``max_new_tokens`` is given."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]), reverse=True)
    outputs: list[str] = [""] * len(sentences)
    model.eval()
    for start in tqdm(range(0, len(order), batch_size), disable=not progress, desc="translate", unit="batch"):
        indices = order[start : start + batch_size]
        batch = tokenizer([sentences[i] for i in indices], return_tensors="pt", padding=True).to(model.device)
        with torch.no_grad():
            generated = model.generate(**batch, **{**output_length(batch["input_ids"]), **generate_kwargs})
        for i, text in zip(indices, tokenizer.batch_decode(generated, skip_special_tokens=True), strict=True):
            outputs[i] = text.strip()
    return outputs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="model directory (or Hub id) with its tokenizer")
    parser.add_argument("input", nargs="?", default="-", help="text file, one sentence a line (default: stdin)")
    parser.add_argument("--output", default="-", help="where to write translations (default: stdout)")
    parser.add_argument("--references", help="reference file: also print sacreBLEU and chrF")
    parser.add_argument("--num_beams", type=int, default=None, help="default: the model's generation_config (4)")
    parser.add_argument("--length_penalty", type=float, default=None)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--trust_remote_code", action="store_true")
    args = parser.parse_args(argv)

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    with source:
        sentences = [line.rstrip("\n") for line in source]
    overrides = {
        key: value
        for key, value in (("num_beams", args.num_beams), ("length_penalty", args.length_penalty))
        if value is not None  # a length penalty of 0 is a choice, not "unset"
    }
    translations = translate(model, tokenizer, sentences, args.batch_size, **overrides)
    text = "".join(t + "\n" for t in translations)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    if args.references:
        with open(args.references, encoding="utf-8") as f:
            references = [line.rstrip("\n") for line in f]
        scores = score_translations(translations, references)
        print(
            f"BLEU = {scores.bleu:.2f}  chrF = {scores.chrf:.2f}  length ratio = {scores.length_ratio:.3f}  "
            f"({scores.signature})",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
