"""`vanilla-translate --model DIR [FILE]`: translate a file (plain or .gz) or stdin, one sentence a line.

The input is read and translated in chunks, so memory stays flat however long the file is; the output has exactly
one line per input line, in order (an empty line stays empty). ``--references`` also prints sacreBLEU and chrF (of
the best translations). ``--nbest K`` writes the K best of the beam for each line, best first, in Moses' n-best format
``LINE ||| TRANSLATION ||| SCORE`` (LINE from 0; SCORE: log-probability / length^alpha, what the beam ranks by; an
empty input line gets one empty translation scored 0). ``--prefix``, ``--score`` and ``--sample``: inference/modes.py
(``--sample --num_samples N`` writes N lines for each input line). ``--model`` given more than once: the models
decode together, an ensemble on ``generate()`` (inference/ensemble.py; ``--ensemble_mode``, ``--ensemble_weights``).

A model trained on prepared text (``config.text_form``: vanilla-train's ``--moses_lowercase_tokenize``) gets each
line so prepared first, as in training (``--prepared``: the input already is), writes that text (``--detokenize``:
Moses-detokenized), and is scored on it as its run record is: the references prepared alike, and the lowercased,
tokenized BLEU printed too. Its prefixes and the translations it scores are prepared as its output is.
"""

import argparse
import gzip
import itertools
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from modeling_vanilla.convert_ctranslate2 import QUANTIZATIONS
from vanilla_tools.cli import UsageError, console_script, positive_int, whole_gzip
from vanilla_tools.decoding import Decoding
from vanilla_tools.device import add_device_arguments
from vanilla_tools.line_counts import check_counts
from vanilla_tools.metrics import score_in_form
from vanilla_tools.run_files import TrainingRecipe
from vanilla_tools.text_form import output_text

from . import ensemble, modes
from .engine import Engine, blank_output
from .engines import ENGINES, EngineOptions, LoadedModel, build_engine, load, load_members, refuse_modes

logger = logging.getLogger(__name__)
CHUNK_BATCHES = 32  # batches read ahead and sorted by length together: padding stays low, memory bounded


@dataclass
class LengthReport:
    """Lines whose input or output lengths make their translation suspect, by 1-based line number."""

    longer_than_trained: list[int] = field(default_factory=list)  # source tokens beyond the training limit
    cut_at_limit: list[int] = field(default_factory=list)  # output reached the length limit without </s>

    def log(self) -> None:
        for lines, what in (
            (
                self.longer_than_trained,
                "longer than the sentences the model was trained on; translations of such lines often stop early",
            ),
            (self.cut_at_limit, "cut at the output length limit (input length + 50 tokens) before it ended"),
        ):
            if lines:
                shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
                logger.warning("%d line(s) %s: line %s", len(lines), what, shown)


def read_lines(path: str) -> Iterator[str]:
    """Lines of a UTF-8 text file (gzip-compressed if it ends in .gz) or of stdin ("-"), without their newline."""
    if path == "-":
        if hasattr(sys.stdin, "reconfigure"):  # strict, whatever the locale: C.UTF-8 would pass on lone surrogates
            sys.stdin.reconfigure(encoding="utf-8", errors="strict")
        yield from utf8_lines(sys.stdin, "stdin")
        return
    if Path(path).is_dir():
        raise IsADirectoryError(f"input {path} is a folder, not a text file")
    if not Path(path).is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f, whole_gzip(path):
        yield from utf8_lines(f, path)


def utf8_lines(lines: Iterable[str], name: str) -> Iterator[str]:
    """The lines of a text stream decoding UTF-8, without their newline; a byte that is not UTF-8 names ``name``."""
    try:
        yield from (line.rstrip("\r\n") for line in lines)
    except UnicodeDecodeError as error:
        raise UsageError(f"{name} is not UTF-8 text ({error})") from error


NBest = list[tuple[str, float]]  # (translation, score), best first
Samples = list[str]  # --sample --num_samples N: N of them


def translate_stream(
    engine: Engine,
    lines: Iterable[str],
    batch_size: int = 64,
    report: LengthReport | None = None,
    max_source_tokens: int | None = None,
    prefixes: Iterable[str] | None = None,
) -> Iterator[str | NBest | Samples]:
    """Yield the translation of each line (its n-best list if ``engine.decoding.nbest`` asks for one, its samples if
    it samples), in order, reading ``CHUNK_BATCHES * batch_size`` lines at a time; with ``prefixes`` (one a line),
    each translation goes on from its line's.

    Within a chunk, lines are sorted by length so each batch has little padding. Empty (or blank) lines give empty
    translations without reaching the ``engine`` (``GenerateEngine``, or CTranslate2's). ``report`` collects suspect
    lengths (``max_source_tokens``: the longest source the model was trained on)."""
    report = report if report is not None else LengthReport()
    pairs = modes.paired(lines, prefixes, "--prefix") if prefixes is not None else ((line, None) for line in lines)
    first = 1
    while chunk := list(itertools.islice(pairs, CHUNK_BATCHES * batch_size)):
        outputs: list[str | NBest | Samples] = [blank_output(engine.decoding)] * len(chunk)
        filled = [i for i, (line, _) in enumerate(chunk) if line.strip()]
        filled.sort(key=lambda i: len(chunk[i][0]), reverse=True)
        long, cut = [], []
        for start in range(0, len(filled), batch_size):
            indices = filled[start : start + batch_size]
            sources = [chunk[i][0] for i in indices]
            done = engine(sources) if prefixes is None else engine(sources, [chunk[i][1] for i in indices])
            for j, (i, unfinished, length) in enumerate(
                zip(indices, done.unfinished, done.source_lengths, strict=True)
            ):
                outputs[i] = done.output(j)
                cut += [first + i] if unfinished else []
                long += [first + i] if max_source_tokens and length > max_source_tokens else []
        report.cut_at_limit += sorted(cut)
        report.longer_than_trained += sorted(long)
        first += len(chunk)
        yield from outputs


def translate(
    model,
    tokenizer,
    sentences: list[str],
    batch_size: int = 64,
    progress: bool = True,
    num_beams: int | None = None,
    length_penalty: float | None = None,
) -> list[str]:
    """Translations of ``sentences`` (prepared in the model's text form first), in order, with ``generate()`` as the
    model decodes (§6.1: beam search up to input length + 50), or with ``num_beams`` / ``length_penalty`` instead of
    its own."""
    decoding = Decoding.resolve(model.generation_config, num_beams, length_penalty)
    engine = build_engine(LoadedModel.of(model, tokenizer), decoding, EngineOptions(kind="generate"))
    stream = translate_stream(engine, sentences, batch_size)
    return list(tqdm(stream, total=len(sentences), disable=not progress, desc="translate", unit="line"))


def trained_source_limit(model_dir: str) -> int | None:
    """The source length limit the model was trained with (vanilla-train records it), if known."""
    recipe = TrainingRecipe.read(model_dir) if Path(model_dir).is_dir() else None
    return recipe.max_source_length if recipe else None


def recorded(
    lines: Iterable[str | NBest | Samples], record: list[str] | None, shown: Callable[[str], str] = str
) -> Iterator[str]:
    """Output lines: a translation each, an n-best list's ``LINE ||| TRANSLATION ||| SCORE`` lines, or samples, a
    line each, each translation as ``shown`` (--detokenize's); the (best, or first) translation of each appended to
    ``record`` if one is given, as the model wrote it."""
    for number, line in enumerate(lines):
        texts = [line] if isinstance(line, str) else line
        nbest = not isinstance(texts[0], str)
        if record is not None:
            record.append(texts[0][0] if nbest else texts[0])
        if nbest:
            yield from (f"{number} ||| {shown(text)} ||| {score:.4f}" for text, score in line)
        else:
            yield from map(shown, texts)


def write_lines(lines: Iterable[str], output: str) -> None:
    """To stdout, or to ``output`` through ``output.partial``, renamed only once every line is written (a run cut
    short leaves a file that says so)."""
    if output == "-":
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    if Path(output).is_dir():  # checked before the first line is translated (``lines`` is lazy)
        raise IsADirectoryError(f"--output {output} is a folder: name the file to write")
    partial = Path(f"{output}.partial")
    with open(partial, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(partial, output)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vanilla-translate", description=__doc__)
    parser.add_argument(
        "--model",
        required=True,
        action="append",
        help="model directory (or Hub id) with its tokenizer; given two or more times, the models decode together "
        "as an ensemble (inference/ensemble.py)",
    )
    parser.add_argument("input", nargs="?", default="-", help="text file (or .gz), one sentence a line; default stdin")
    parser.add_argument("--output", default="-", help="where to write translations (default: stdout)")
    parser.add_argument("--references", help="reference file (or .gz): also print sacreBLEU and chrF")
    parser.add_argument("--num_beams", type=positive_int, default=None, help="default: the model's (4)")
    parser.add_argument("--length_penalty", type=float, default=None)
    parser.add_argument(
        "--nbest",
        type=positive_int,
        default=None,
        metavar="K",
        help="write the K best translations of each line with their scores (K <= beams)",
    )
    parser.add_argument("--batch_size", type=positive_int, default=64)
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="generate: the model's generate(); ctranslate2: its CTranslate2 export (needs the ct2 "
        "extra), made in MODEL/ctranslate2-QUANTIZATION the first time; auto: ctranslate2 "
        "where it can run this model, else generate; onnx: ONNX Runtime (needs the ecosystem "
        "extra), exported to MODEL/onnx the first time",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=None,
        help="of the CTranslate2 export (default float32): float32 translates as generate() does, int8 is smaller "
        "and faster; float16, bfloat16 and int8_float16 run on a GPU. CTranslate2's only: refused beside --engine "
        "generate or onnx",
    )
    add_device_arguments(parser)
    parser.add_argument(
        "--prepared",
        action="store_true",
        help="the input (and --references) is already in the model's text form (config.text_form: e.g. lowercased "
        "and Moses-tokenized): fed as it is, not prepared again",
    )
    parser.add_argument(
        "--detokenize",
        action="store_true",
        help="write a model's Moses-tokenized output detokenized (sacremoses; scores count the model's own text)",
    )
    parser.add_argument("--trust_remote_code", action="store_true")
    modes.add_arguments(parser)
    ensemble.add_arguments(parser)
    return parser


def count_lines(path: str) -> int:
    return sum(1 for _ in read_lines(path))


def check_side_files(input_path: str, side_files: dict[str, str | None], references: list[str] | None) -> None:
    """Refused before translating (scoring would fail after it): a file of ``side_files`` (flag -> path) that has
    not one line per line of the input file, which is counted once (``references``: that file, already read)."""
    given = {flag: path for flag, path in side_files.items() if path is not None}
    lines = count_lines(input_path) if given else 0
    for flag, path in given.items():
        count = len(references) if flag == "--references" else count_lines(path)
        check_counts((input_path, f"{flag} {path}"), (lines, count), modes.one_per_line(flag))


def check_length_penalty(length_penalty: float | None, decoding: Decoding) -> None:
    """Refused in one line: a --length_penalty given where the search has one beam (--num_beams 1, or --sample),
    so no finished hypotheses to rank by it (``Decoding`` would leave it unused)."""
    if length_penalty is not None and decoding.num_beams == 1:
        searching = "--sample draws" if decoding.sampling else "greedy search (--num_beams 1) keeps"
        raise UsageError(f"--length_penalty ranks a beam search's hypotheses: {searching} one; drop --length_penalty")


def check_output(output: str, inputs: dict[str, str | None]) -> None:
    """Refused before translating: an --output that is one of the files read (``inputs``: flag -> path); it would be
    replaced by the translations."""
    if output == "-" or not Path(output).exists():
        return
    for flag, path in inputs.items():
        if path not in (None, "-") and Path(path).exists() and os.path.samefile(output, path):
            raise UsageError(f"--output {output} is the {flag} file: the translations would replace it")


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    side_files = {"--references": args.references, "--prefix": args.prefix, "--score": args.score}
    check_output(args.output, {"input": args.input, **side_files})
    modes.check_modes(args)
    refuse_modes(args.engine, modes.chosen_modes(args))
    ensemble.check_arguments(args)
    sampling = modes.sampling(args)

    references = list(read_lines(args.references)) if args.references else None
    if args.input != "-":  # (stdin is counted as it is translated)
        check_side_files(args.input, side_files, references)
    options = EngineOptions(args.engine, args.device, args.dtype, args.quantization, args.trust_remote_code)
    if len(args.model) > 1:
        loaded = load_members(args.model, options, args.ensemble_weights, args.ensemble_mode)
    else:
        loaded = load(args.model[0], options)
    shown = output_text(loaded.form, args.detokenize)
    decoding = Decoding.resolve(
        loaded.model.generation_config, args.num_beams, args.length_penalty, args.nbest, sampling
    )
    check_length_penalty(args.length_penalty, decoding)
    engine = build_engine(loaded, decoding, options, args.prepared)
    if args.score:
        pairs = modes.paired(read_lines(args.input), read_lines(args.score), "--score")
        write_lines(
            tqdm(modes.score_lines(engine, pairs, args.batch_size), desc="score", unit="line", file=sys.stderr),
            args.output,
        )
        return
    report = LengthReport()
    limit = min(filter(None, map(trained_source_limit, args.model)), default=None)  # an ensemble's: its members' least
    prefixes = read_lines(args.prefix) if args.prefix else None
    stream = translate_stream(engine, read_lines(args.input), args.batch_size, report, limit, prefixes)
    translations: list[str] | None = [] if references is not None else None
    lines = recorded(stream, translations, shown)
    write_lines(tqdm(lines, desc="translate", unit="line", file=sys.stderr), args.output)
    report.log()
    if references is not None:
        given = loaded.input_form(args.prepared)
        scores = score_in_form(translations, [given.target(line) for line in references], loaded.form)
        print(
            f"BLEU = {scores.bleu:.2f}  chrF = {scores.chrf:.2f}  length ratio = {scores.length_ratio:.3f}  "
            f"({scores.signature})",
            file=sys.stderr,
        )
        if scores.bleu_lc_tok is not None:
            print(
                f"lowercased, tokenized BLEU = {scores.bleu_lc_tok:.2f}  ({scores.lc_tok_signature})",
                file=sys.stderr,
            )


main = console_script(run)

if __name__ == "__main__":
    main()
