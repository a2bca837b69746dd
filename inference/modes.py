"""vanilla-translate's modes beside translation: ``--prefix FILE`` (each translation goes on from the words given on
its line), ``--score FILE`` (the log-probability of given translations, forced decoding: for rescoring and filtering
data) and ``--sample`` (tokens drawn instead of searched for, the usual way to back-translate). Which engines run
which: ``engines.refuse_modes``."""

import argparse
import itertools
from collections.abc import Iterable, Iterator

from vanilla_tools.cli import UsageError, positive_int
from vanilla_tools.decoding import Sampling
from vanilla_tools.line_counts import zip_lines

from .engine import Scorer

SAMPLING_OPTIONS = ("top_k", "top_p", "temperature", "num_samples", "seed")  # Sampling's fields, flags by name
ONE_PER_LINE = {"--references": "reference", "--prefix": "prefix", "--score": "translation"}  # a file's lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    modes = parser.add_argument_group("modes beside translation")
    modes.add_argument(
        "--prefix",
        metavar="FILE",
        help="a target prefix a line (or an empty line: none): each translation goes on from its line's",
    )
    modes.add_argument(
        "--score",
        metavar="FILE",
        help="score these translations of the input, one a line, instead of translating: writes the sum of their "
        "tokens' log-probabilities and its mean per token (the end token counted), tab-separated",
    )
    modes.add_argument(
        "--sample",
        action="store_true",
        help="draw each token from the model's distribution instead of searching (one beam)",
    )
    modes.add_argument("--num_samples", type=positive_int, help="with --sample: N samples a line, N lines each")
    modes.add_argument("--top_k", type=int, help="with --sample: draw from the K most probable tokens (default 0: all)")
    modes.add_argument(
        "--top_p", type=float, help="with --sample: from the fewest tokens whose probability reaches P (default 1.0)"
    )
    modes.add_argument("--temperature", type=float, help="with --sample: divides the logits (default 1.0)")
    modes.add_argument("--seed", type=int, help="with --sample: the same seed, input and batches draw the same samples")


def chosen_modes(args: argparse.Namespace) -> list[str]:
    """The modes ``args`` ask for, as flags (``engines.MODES``)."""
    return [
        flag for flag, given in (("--prefix", args.prefix), ("--score", args.score), ("--sample", args.sample)) if given
    ]


def check_modes(args: argparse.Namespace) -> None:
    """One line for flags that do not go together: --score with what makes or judges translations, a sampling
    option without --sample."""
    if args.score:
        clashing = [
            flag
            for flag, given in (
                ("--sample", args.sample),
                ("--prefix", args.prefix),
                ("--nbest", args.nbest),
                ("--references", args.references),
                ("--num_beams", args.num_beams),  # forced decoding searches for nothing
                ("--length_penalty", args.length_penalty is not None),
                ("--detokenize", args.detokenize),  # it writes scores, no text
            )
            if given
        ]
        if clashing:
            raise UsageError(
                f"--score scores the given translations instead of translating: drop {', '.join(clashing)}"
            )
    unused = [f"--{name}" for name in SAMPLING_OPTIONS if getattr(args, name) is not None]
    if unused and not args.sample:
        raise UsageError(f"{', '.join(unused)}: sampling options, which need --sample")


def sampling(args: argparse.Namespace) -> Sampling | None:
    """The sampling ``args`` ask for (Sampling's defaults where a flag is not given), or None."""
    if not args.sample:
        return None
    return Sampling(**{name: getattr(args, name) for name in SAMPLING_OPTIONS if getattr(args, name) is not None})


def one_per_line(flag: str) -> str:
    """What ``flag``'s file (one of ``ONE_PER_LINE``) holds, a line for each input line."""
    return f"one {ONE_PER_LINE[flag]} per input line"


def paired(lines: Iterable[str], others: Iterable[str], flag: str) -> Iterator[tuple[str, str]]:
    """Each input line with the line of ``flag``'s file beside it; both counted and refused in one line where either
    runs out first (stdin is only counted as it is read)."""
    return zip_lines(lines, others, ("the input", flag), one_per_line(flag))


def score_lines(engine: Scorer, pairs: Iterable[tuple[str, str]], batch_size: int) -> Iterator[str]:
    """``SUM<TAB>MEAN`` for each (source, translation) pair, in order: the translation's log-probability, summed over
    its tokens and its end token, and divided by their count."""
    pairs = iter(pairs)
    while batch := list(itertools.islice(pairs, batch_size)):
        sources, translations = (list(side) for side in zip(*batch, strict=True))
        for log_probs in engine.score(sources, translations):
            total = sum(log_probs)
            yield f"{total:.6f}\t{total / len(log_probs):.6f}"
