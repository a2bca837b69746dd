"""`python -m experiments.subword_nmt`: a tokenizer that cuts words as a subword-nmt codes file does, so a run can
train on another pipeline's subwords (issue 101's preprocessing control: Wu et al.'s own BPE, their repository's
data/multi30k-en-de/code, in place of this package's).

    python -m experiments.subword_nmt PATH/code --out runs/their-bpe --check PATH/multi30k-en-de
    python -m experiments.reproduce --seeds 1 --tokenizer runs/their-bpe   # in runs/reproduction/seed-1-their-bpe

subword-nmt (version 0.2 codes) splits each whitespace-separated word into characters, marks the last with ``</w>``
and applies the merges in the order of the file, lowest rank first; the tokenizers library's BPE model with
``end_of_word_suffix="</w>"`` does the same, so the tokenizer is that model over the codes, wrapped as this package's
own (training/data/tokenizer.py: ``<pad>``, ``<unk>``, ``</s>`` as ids 0-2, ``</s>`` after every sequence). Their
text was escaped by tokenizer.perl (``&quot;`` for ``"``) before their codes were learned, where this package's
text keeps the characters (sacremoses' ``escape=False``, training/data/moses.py), so the tokenizer escapes before
the BPE and unescapes when it decodes: the pieces are theirs, the text the package's.

Its vocabulary is every symbol the BPE can produce on the training text: the characters (inside a word and
word-final) and each merge's result, in the codes' order. fairseq's dictionary holds only the pieces that occur in
the BPE'd training text, so this one is larger by the merges' intermediate symbols, which no text ends on."""

import argparse
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from training.api import SPECIAL_TOKENS, load_parallel_data, parse_args, text_form
from vanilla_tools.cli import UsageError, console_script

from .reproduce import CONFIG

END_OF_WORD = "</w>"
PAD, UNK, EOS = SPECIAL_TOKENS  # ids 0, 1, 2, as the package's own tokenizer has them
# tokenizer.perl's escaping (sacremoses' MosesTokenizer.escape_xml), "&" first so no entity is escaped twice
ESCAPES = (
    ("&", "&amp;"),
    ("|", "&#124;"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ("'", "&apos;"),
    ('"', "&quot;"),
    ("[", "&#91;"),
    ("]", "&#93;"),
)
SPLITS = {"train": "train", "validation": "valid", "test": "test.2016"}  # this package's splits, their file stems


def read_merges(codes: Path) -> list[tuple[str, str]]:
    """The merges of a subword-nmt codes file (``#version: 0.2`` first, then one ``left right`` pair a line)."""
    try:
        lines = codes.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{codes}: cannot read the BPE codes ({error})") from None
    if not lines or lines[0].strip() != "#version: 0.2":
        raise UsageError(f"{codes}: not subword-nmt codes of version 0.2 (its first line: {lines[:1]})")
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    if bad := next((n for n, pair in enumerate(merges, 2) if len(pair) != 2), None):
        raise UsageError(f"{codes}, line {bad}: a merge is two symbols separated by one space")
    return merges


def escape(text: str) -> str:
    """``text`` as tokenizer.perl escapes it."""
    for char, entity in ESCAPES:
        text = text.replace(char, entity)
    return text


def initial_symbols(words: Iterable[str]) -> set[str]:
    """The characters BPE starts from on ``words``: each inside a word, and each word's last with ``</w>``."""
    symbols = set()
    for word in words:
        symbols.update(word[:-1])
        symbols.add(word[-1] + END_OF_WORD)
    return symbols


def subword_nmt_tokenizer(merges: list[tuple[str, str]], texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """A fast tokenizer that cuts ``texts``' words into the pieces subword-nmt gives with ``merges``; its vocabulary
    covers the characters of ``texts`` (the training text, as the package preprocesses it)."""
    words = (word for text in texts for word in escape(text).split())
    symbols = initial_symbols(words) | {part for pair in merges for part in pair}
    vocab = {token: n for n, token in enumerate(SPECIAL_TOKENS)}
    for token in [*sorted(symbols - {a + b for a, b in merges}), *(a + b for a, b in merges)]:
        vocab.setdefault(token, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=UNK, end_of_word_suffix=END_OF_WORD))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Replace(c, e) for c, e in ESCAPES])
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # the pieces joined into one text, then unescaped ("&amp;" last): an entity may be cut into several pieces
    unescape = [decoders.Replace(entity, char) for char, entity in reversed(ESCAPES)]
    tokenizer.decoder = decoders.Sequence([decoders.BPEDecoder(suffix=END_OF_WORD), decoders.Fuse(), *unescape])
    tokenizer.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, vocab[EOS])])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, unk_token=UNK, eos_token=EOS)


def in_their_notation(pieces: list[str]) -> str:
    """Pieces as subword-nmt writes them: ``@@`` after each piece that a word goes on from."""
    return " ".join(p[: -len(END_OF_WORD)] if p.endswith(END_OF_WORD) else f"{p}@@" for p in pieces)


def same_pieces(tokenizer: PreTrainedTokenizerFast, texts: list[str], theirs: list[str]) -> int:
    """How many of ``texts`` the tokenizer cuts into the pieces of the BPE'd lines ``theirs`` (escaped, with
    subword-nmt's ``@@``; their spacing aside)."""
    if len(texts) != len(theirs):
        raise UsageError(f"{len(theirs)} BPE'd lines for {len(texts)} of the package's: not the same split")
    cut = tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
    return sum(in_their_notation(c.tokens) == " ".join(t.split()) for c, t in zip(cut, theirs, strict=True))


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.subword_nmt", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("codes", help="a subword-nmt codes file (version 0.2)")
    parser.add_argument("--out", required=True, help="the tokenizer's folder, for --tokenizer")
    parser.add_argument("--config", default=CONFIG, help="the preset whose text the codes cut (default: %(default)s)")
    parser.add_argument(
        "--check",
        help="a folder of the codes' BPE'd text (their train, valid, test.2016 .en/.de): count the lines cut alike",
    )
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    _, data_args, _ = parse_args(["--config", args.config, "--output_dir", args.out])
    data = load_parallel_data(data_args, text_form(data_args))
    train = data["train"]
    tokenizer = subword_nmt_tokenizer(read_merges(Path(args.codes)), [*train["source"], *train["target"]])
    tokenizer.save_pretrained(args.out)
    print(f"wrote {args.out}: {len(tokenizer):,} tokens from {args.codes}")
    if args.check:
        for split, stem in SPLITS.items():
            for column, lang in (("source", data_args.source_lang), ("target", data_args.target_lang)):
                path = Path(args.check) / f"{stem}.{lang}"
                try:
                    theirs = path.read_text(encoding="utf-8").splitlines()
                except (OSError, UnicodeDecodeError) as error:
                    raise UsageError(f"--check {args.check}: cannot read {path.name} ({error})") from None
                same = same_pieces(tokenizer, data[split][column], theirs)
                print(f"{path}: {same:,} of {len(theirs):,} lines cut into the same pieces")


main = console_script(run)

if __name__ == "__main__":
    main()
