"""A tokenizer that cuts text as a subword-nmt codes file does (experiments.subword_nmt): subword-nmt's own
learn_bpe and apply_bpe are the reference; the text is escaped as tokenizer.perl escapes it before the BPE and
given back when decoded; the command writes the tokenizer and counts the lines it cuts as another pipeline's files."""

import gzip
import io
import json
import time

import pytest
from sacremoses import MosesTokenizer
from subword_nmt.apply_bpe import BPE
from subword_nmt.learn_bpe import learn_bpe
from training_helpers import tiny_preset

from experiments import reproduce, results_index, subword_nmt
from vanilla_tools.cli import UsageError, load_tokenizer
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.text_form import TextForm

QUOTED = ['ein mann sagt " hallo " & winkt .', "das ist marys hund , sie sagt ' hallo ' ."]


def learned_codes(lines: list[str], path, merges: int):
    """subword-nmt's codes of ``lines`` as their pipeline learns them: on tokenizer.perl's escaped text."""
    escape = MosesTokenizer().escape_xml
    with path.open("w", encoding="utf-8") as codes:
        learn_bpe(io.StringIO("\n".join(escape(line) for line in lines) + "\n"), codes, merges)
    return path


def their_cut(codes, lines: list[str]) -> list[str]:
    """``lines`` escaped and cut by subword-nmt's apply_bpe with ``codes``, as their BPE'd files hold them."""
    escape = MosesTokenizer().escape_xml
    with codes.open(encoding="utf-8") as file:
        bpe = BPE(file)
    return [bpe.process_line(escape(line)).strip() for line in lines]


def multi30k(split: str, lang: str, count: int) -> list[str]:
    moses = TextForm.moses_lowercase("en", "de")
    with gzip.open(BUNDLED_DIR / f"{split}.{lang}.gz", "rt", encoding="utf-8") as file:
        return [moses.prepare(next(file), lang) for _ in range(count)]


def without_unknowns(tokenizer, lines: list[str]) -> int:
    """How many of ``lines`` the tokenizer cuts without <unk>: only there may its pieces be apply_bpe's, which
    passes a character through where the tokenizer (and fairseq's dictionary, made of the BPE'd training text's
    pieces) has none."""
    return sum(tokenizer.unk_token_id not in ids for ids in tokenizer(lines).input_ids)


def test_it_cuts_every_line_as_subword_nmt_does_and_decodes_it_back(tmp_path):
    """500 merges learned by subword-nmt on 2,000 pairs of Multi30k's lowercased, tokenized training text (and two
    lines with the characters tokenizer.perl escapes): on 300 validation pairs the tokenizer gives apply_bpe's pieces
    on every line it cuts without <unk> (all but one, whose "120" has a "2" that no training word has inside it), and
    decoding them gives the text back."""
    train = [*multi30k("train", "en", 2000), *multi30k("train", "de", 2000), *QUOTED]
    codes = learned_codes(train, tmp_path / "code", 500)
    tokenizer = subword_nmt.subword_nmt_tokenizer(subword_nmt.read_merges(codes), train)
    held_out = [*multi30k("val", "en", 300), *multi30k("val", "de", 300), *QUOTED]
    assert subword_nmt.same_pieces(tokenizer, held_out, their_cut(codes, held_out)) == 601 == len(held_out) - 1
    assert without_unknowns(tokenizer, held_out) == 601
    held_out = [line for line in held_out if "120 cm" not in line]
    ids = tokenizer(held_out).input_ids
    assert tokenizer.batch_decode(ids, skip_special_tokens=True) == held_out
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    assert all(row[-1] == 2 for row in ids) and len(tokenizer) == len(tokenizer.get_vocab())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b\n", r"code: not subword-nmt codes of version 0.2 \(its first line: \['a b'\]\)"),
        ("#version: 0.2\na b\nab c d\n", r"code, line 3: a merge is two symbols separated by one space"),
    ],
)
def test_codes_it_cannot_read_are_named(tmp_path, text, message):
    (tmp_path / "code").write_text(text)
    with pytest.raises(UsageError, match=message):
        subword_nmt.read_merges(tmp_path / "code")


def their_files(tmp_path, preset_text: dict[str, list[str]], codes) -> None:
    """The preset's text cut by subword-nmt, in their files' names (train, valid, test.2016)."""
    for split, stem in subword_nmt.SPLITS.items():
        for lang, lines in preset_text[split].items():
            (tmp_path / "theirs" / f"{stem}.{lang}").write_text("\n".join(their_cut(codes, lines)) + "\n")


def test_the_command_writes_the_tokenizer_and_counts_the_lines_cut_as_their_files(tmp_path, capsys):
    data = tmp_path / "data"
    preset = tiny_preset(
        tmp_path, moses_lowercase_tokenize=True, test_files=[str(data / "test.en"), str(data / "test.de")]
    )
    moses = TextForm.moses_lowercase("en", "de")
    text = {
        split: {
            lang: [moses.prepare(line, lang) for line in (data / f"{split}.{lang}").open(encoding="utf-8")]
            for side, lang in (("source", "en"), ("target", "de"))
        }
        for split in ("train", "validation", "test")
    }
    codes = learned_codes([*text["train"]["en"], *text["train"]["de"]], tmp_path / "code", 200)
    (tmp_path / "theirs").mkdir()
    their_files(tmp_path, text, codes)
    (tmp_path / "theirs" / "valid.de").write_text(
        "x@@ y\n" + "".join((tmp_path / "theirs" / "valid.de").open().readlines()[1:])
    )

    out = tmp_path / "tokenizer"
    subword_nmt.run([str(codes), "--out", str(out), "--config", str(preset), "--check", str(tmp_path / "theirs")])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"wrote {out}: {len(load_tokenizer(str(out))):,} tokens from {codes}"
    tokenizer = load_tokenizer(str(out))
    expected = [
        (f"{stem}.{lang}", without_unknowns(tokenizer, text[split][lang]) - (stem == "valid" and lang == "de"))
        for split, stem in subword_nmt.SPLITS.items()
        for lang in ("en", "de")
    ]
    assert printed[1:] == [
        f"{tmp_path / 'theirs' / name}: {same} of {20 if 'train' not in name else 60} lines cut into the same pieces"
        for name, same in expected
    ]
    assert [same for _, same in expected] == [60, 60, 19, 19, 19, 20]  # <unk> in a line of valid.en and of test.en


@pytest.mark.slow
def test_a_control_with_their_tokenizer_is_filed_apart_from_the_seeds(tmp_path, monkeypatch, capfd):
    """The command path of issue 101's control: experiments.subword_nmt writes the tokenizer, experiments.reproduce
    --tokenizer trains seed 1 with it and files it with role control (its own folder and section, out of the seeds'
    mean), and the run's recipe names the tokenizer it used."""
    monkeypatch.setattr(results_index, "ROOT", tmp_path)
    data = tmp_path / "data"
    preset = tiny_preset(
        tmp_path,
        max_steps=3,
        moses_lowercase_tokenize=True,
        test_files=[str(data / "test.en"), str(data / "test.de")],
    )
    moses = TextForm.moses_lowercase("en", "de")
    train = [
        moses.prepare(line, lang)
        for side, lang in (("source", "en"), ("target", "de"))
        for line in (data / f"train.{lang}").open()
    ]
    codes = learned_codes(train, tmp_path / "code", 200)
    tokenizer = tmp_path / "their-bpe"
    subword_nmt.run([str(codes), "--out", str(tokenizer), "--config", str(preset)])

    runs, results = tmp_path / "runs", tmp_path / "results"
    argv = ["--config", str(preset), "--seeds", "1", "--runs", str(runs), "--results", str(results)]
    reproduce.run([*argv, "--page", str(tmp_path / "results.md"), "--tokenizer", str(tokenizer)])
    folder = results / f"{time.strftime('%Y-%m-%d')}-tiny-seed1-their-bpe"
    record = json.loads((folder / "summary.json").read_text())
    assert record["role"] == "control"
    assert record["settings"] == ["--config", str(preset), "--seed", "1", "--tokenizer", str(tokenizer)]
    assert f"(`--config {preset}`, with the tokenizer of {tokenizer} (a control)) at " in record["note"]
    recipe = json.loads((runs / "seed-1-their-bpe" / "training_recipe.json").read_text())
    size = len(json.loads((tokenizer / "tokenizer.json").read_text())["model"]["vocab"])
    assert recipe["recipe"]["vocabulary"] == f"shared BPE, {size} tokens (the tokenizer of {tokenizer})"
    page = (tmp_path / "results.md").read_text()
    assert "## Controls of the reproduction" in page and "## Wu et al.'s Transformer-Tiny recipe" not in page

    with pytest.raises(UsageError, match=r"--tokenizer .*missing: no tokenizer.json there"):
        reproduce.run([*argv, "--tokenizer", str(tmp_path / "missing")])
