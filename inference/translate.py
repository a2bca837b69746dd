"""`vanilla-translate --model DIR [FILE]`: translate a file (plain or .gz) or stdin, one sentence a line.

The input is read and translated in chunks, so memory stays flat however long the file is; the output has exactly
one line per input line, in order (an empty line stays empty). ``--references`` also prints sacreBLEU and chrF.
"""

import argparse
import gzip
import importlib.util
import itertools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForSeq2SeqLM

from modeling_vanilla.convert_ctranslate2 import QUANTIZATIONS
from training.cli import console_script, load_tokenizer, positive_int
from training.metrics import score_translations

logger = logging.getLogger(__name__)
CHUNK_BATCHES = 32  # batches read ahead and sorted by length together: padding stays low, memory bounded
ENGINES = ("auto", "generate", "ctranslate2")


@dataclass
class LengthReport:
    """Lines whose input or output lengths make their translation suspect, by 1-based line number."""

    longer_than_trained: list[int] = field(default_factory=list)  # source tokens beyond the training limit
    cut_at_limit: list[int] = field(default_factory=list)  # output reached the length limit without </s>

    def log(self) -> None:
        for lines, what in (
            (self.longer_than_trained, "longer than the sentences the model was trained on; translations of such "
                                       "lines often stop early"),
            (self.cut_at_limit, "cut at the output length limit (input length + 50 tokens) before it ended"),
        ):  # fmt: skip
            if lines:
                shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
                logger.warning("%d line(s) %s: line %s", len(lines), what, shown)


def read_lines(path: str) -> Iterator[str]:
    """Lines of a UTF-8 text file (gzip-compressed if it ends in .gz) or of stdin ("-"), without their newline."""
    if path == "-":
        yield from (line.rstrip("\r\n") for line in sys.stdin)
        return
    if not Path(path).is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        try:
            yield from (line.rstrip("\r\n") for line in f)
        except UnicodeDecodeError as error:
            raise ValueError(f"{path} is not UTF-8 text ({error})") from error


@dataclass
class BatchTranslation:
    texts: list[str]
    unfinished: list[bool]  # stopped at the length limit without </s>
    source_lengths: list[int]  # tokens, </s> included
    output_lengths: list[int]  # tokens generated, up to and including </s> (no padding)


class GenerateEngine:
    """Translate batches of non-empty sentences with ``model.generate()`` (one call a batch).

    ``extra_tokens``: each batch decodes at most its longest input + ``extra_tokens`` new tokens, for models whose
    ``generate()`` lacks our §6.1 rule (``to_marian``'s MarianMTModel otherwise stops at 20 tokens)."""

    def __init__(self, model, tokenizer, extra_tokens: int | None = None, **generate_kwargs):
        self.model, self.tokenizer, self.generate_kwargs = model.eval(), tokenizer, generate_kwargs
        self.extra_tokens = extra_tokens

    def __call__(self, sentences: list[str]) -> BatchTranslation:
        batch = self.tokenizer(sentences, return_tensors="pt", padding=True).to(self.model.device)
        kwargs = self.generate_kwargs
        if self.extra_tokens is not None:
            kwargs = {**kwargs, "max_new_tokens": batch["input_ids"].shape[1] + self.extra_tokens}
        with torch.no_grad():
            generated = self.model.generate(**batch, **kwargs)
        eos = torch.tensor(self.model.generation_config.eos_token_id, device=generated.device).reshape(-1)
        ended = torch.isin(generated[:, 1:], eos)  # (B, T): where an end token was generated
        first_end = torch.where(ended.any(dim=1), ended.int().argmax(dim=1) + 1, ended.shape[1])
        return BatchTranslation(
            texts=[text.strip() for text in self.tokenizer.batch_decode(generated, skip_special_tokens=True)],
            unfinished=(~ended.any(dim=1)).tolist(),
            source_lengths=batch["attention_mask"].sum(dim=1).tolist(),
            output_lengths=first_end.tolist(),
        )


def translate_stream(
    engine: Callable[[list[str]], BatchTranslation],
    lines: Iterable[str],
    batch_size: int = 64,
    report: LengthReport | None = None,
    max_source_tokens: int | None = None,
) -> Iterator[str]:
    """Yield the translation of each line, in order, reading ``CHUNK_BATCHES * batch_size`` lines at a time.

    Within a chunk, lines are sorted by length so each batch has little padding. Empty (or blank) lines give empty
    translations without reaching the ``engine`` (``GenerateEngine``, or CTranslate2's). ``report`` collects suspect
    lengths (``max_source_tokens``: the longest source the model was trained on)."""
    report = report if report is not None else LengthReport()
    lines = iter(lines)
    first = 1
    while chunk := list(itertools.islice(lines, CHUNK_BATCHES * batch_size)):
        outputs = [""] * len(chunk)
        filled = [i for i, line in enumerate(chunk) if line.strip()]
        filled.sort(key=lambda i: len(chunk[i]), reverse=True)
        long, cut = [], []
        for start in range(0, len(filled), batch_size):
            indices = filled[start : start + batch_size]
            done = engine([chunk[i] for i in indices])
            for i, text, unfinished, length in zip(
                indices, done.texts, done.unfinished, done.source_lengths, strict=True
            ):
                outputs[i] = text
                cut += [first + i] if unfinished else []
                long += [first + i] if max_source_tokens and length > max_source_tokens else []
        report.cut_at_limit += sorted(cut)
        report.longer_than_trained += sorted(long)
        first += len(chunk)
        yield from outputs


def translate(
    model, tokenizer, sentences: list[str], batch_size: int = 64, progress: bool = True, **generate_kwargs
) -> list[str]:
    """Translations of ``sentences``, in order (§6.1: beam search up to input length + 50 unless overridden)."""
    stream = translate_stream(GenerateEngine(model, tokenizer, **generate_kwargs), sentences, batch_size)
    return list(tqdm(stream, total=len(sentences), disable=not progress, desc="translate", unit="line"))


def trained_source_limit(model_dir: str) -> int | None:
    """The source length limit the model was trained with (vanilla-train records it), if known."""
    recipe = Path(model_dir) / "training_recipe.json"
    return json.loads(recipe.read_text()).get("max_source_length") if recipe.is_file() else None


def recorded(lines: Iterable[str], record: list[str] | None) -> Iterator[str]:
    """Pass ``lines`` through, appending each to ``record`` if one is given."""
    for line in lines:
        if record is not None:
            record.append(line)
        yield line


def write_lines(lines: Iterable[str], output: str) -> None:
    """To stdout, or to ``output`` through ``output.partial``, renamed only once every line is written (a run cut
    short leaves a file that says so)."""
    if output == "-":
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    partial = Path(f"{output}.partial")
    with open(partial, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(partial, output)


def pick_engine(args: argparse.Namespace, model, overrides: dict) -> str:
    """``--engine auto``: CTranslate2, which decodes faster than ``generate()`` at batch 1 and 64 on a CPU
    (docs/performance.md), wherever it can run this model; else ``generate()``. The choice is logged."""
    if args.engine != "auto":
        return args.engine
    from .ct2 import export_dir

    export = export_dir(args.model, args.quantization)
    reason = ctranslate2_unavailable(export, model, overrides.get("num_beams"))
    logger.info("engine: %s", f"generate ({reason})" if reason else f"ctranslate2 ({export})")
    return "generate" if reason else "ctranslate2"


def ctranslate2_unavailable(export: Path, model, num_beams: int | None) -> str | None:
    """Why CTranslate2 cannot translate with this model, kept or to be exported in ``export`` (None if it can)."""
    folder, config = export.parent, model.generation_config
    if importlib.util.find_spec("ctranslate2") is None:
        return "the ctranslate2 package is not installed"
    if model.config.model_type != "vanilla_transformer":
        return f"a {model.config.model_type} model"
    if not folder.is_dir():
        return "the model is not a local directory"
    if not export.is_dir() and not os.access(folder, os.W_OK):
        return f"{folder} is read-only"
    if (num_beams or config.num_beams or 1) > 1 and config.early_stopping is not True:
        return "the generation config's early_stopping is not True, and CTranslate2's beam search stops as if it were"
    return None


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vanilla-translate", description=__doc__)
    parser.add_argument("--model", required=True, help="model directory (or Hub id) with its tokenizer")
    parser.add_argument("input", nargs="?", default="-", help="text file (or .gz), one sentence a line; default stdin")
    parser.add_argument("--output", default="-", help="where to write translations (default: stdout)")
    parser.add_argument("--references", help="reference file (or .gz): also print sacreBLEU and chrF")
    parser.add_argument("--num_beams", type=positive_int, default=None, help="default: the model's (4)")
    parser.add_argument("--length_penalty", type=float, default=None)
    parser.add_argument("--batch_size", type=positive_int, default=64)
    parser.add_argument("--engine", choices=ENGINES, default="auto",
                        help="generate: the model's generate(); ctranslate2: its CTranslate2 export (needs the ct2 "
                             "extra), made in MODEL/ctranslate2-QUANTIZATION the first time; auto: ctranslate2 "
                             "where it can run this model, else generate")  # fmt: skip
    parser.add_argument("--quantization", choices=QUANTIZATIONS, default="float32",
                        help="of the CTranslate2 export: float32 translates as generate() does, int8 is smaller "
                             "and faster")  # fmt: skip
    parser.add_argument("--trust_remote_code", action="store_true")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)

    references = list(read_lines(args.references)) if args.references else None
    tokenizer = load_tokenizer(args.model, args.trust_remote_code)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)
    overrides = {
        key: value
        for key, value in (("num_beams", args.num_beams), ("length_penalty", args.length_penalty))
        if value is not None  # a length penalty of 0 is a choice, not "unset"
    }
    engine = None
    if pick_engine(args, model, overrides) == "ctranslate2":
        from .ct2 import CTranslate2Engine, cached_export

        try:
            export = cached_export(args.model, args.quantization)
        except ValueError as error:  # a setting CTranslate2 does not have, named
            if args.engine != "auto":
                raise
            logger.info("engine: generate (CTranslate2 cannot run this model: %s)", error)
        else:
            engine = CTranslate2Engine(export, tokenizer, model.generation_config, **overrides)
    engine = engine or GenerateEngine(model, tokenizer, **overrides)
    report = LengthReport()
    limit = trained_source_limit(args.model)
    stream = translate_stream(engine, read_lines(args.input), args.batch_size, report, limit)
    translations: list[str] | None = [] if references is not None else None
    write_lines(tqdm(recorded(stream, translations), desc="translate", unit="line", file=sys.stderr), args.output)
    report.log()
    if references is not None:
        scores = score_translations(translations, references)
        print(
            f"BLEU = {scores.bleu:.2f}  chrF = {scores.chrf:.2f}  length ratio = {scores.length_ratio:.3f}  "
            f"({scores.signature})",
            file=sys.stderr,
        )


main = console_script(run)

if __name__ == "__main__":
    main()
