"""Several training corpora (--train_files once per corpus), each with an optional tag token before its sources and
an upsampling weight: the training set they make, the tokenizer that keeps a tag whole, the record's list."""

import json
from pathlib import Path

import numpy as np
import pytest
from training_helpers import tiny_preset, train_argv, write_corpus

from training import train as train_cli
from training.arguments import parse_args
from training.build import build_data, check_streaming, check_tags, resolve_run
from training.data.corpus import Corpus, DataArguments, given_corpora, load_parallel_data, text_form, weighted_rows
from training.data.tokenizer import train_tokenizer
from vanilla_tools.cli import UsageError

TAG = "<BT>"


def two_corpora(tmp_path: Path) -> tuple[dict, dict]:
    """A real corpus of 40 pairs (with validation and test), and a second one of 10 pairs to be tagged."""
    real, synthetic = write_corpus(tmp_path / "real", pairs=40), write_corpus(tmp_path / "bt", pairs=10)
    return real, synthetic


def test_a_group_parses_its_files_tag_and_weight():
    assert Corpus.parse(["a.en", "a.de"]) == Corpus(("a.en", "a.de"))
    assert Corpus.parse(["a.en", "a.de", "tag=<BT>", "weight=2.5"]) == Corpus(("a.en", "a.de"), "<BT>", 2.5)
    argv = ["--dataset", "files", "--train_files", "a.en", "a.de", "--train_files", "b.tsv", "weight=0"]
    assert given_corpora(parse_args([*argv, "--output_dir", "x"])[1]) == [
        Corpus(("a.en", "a.de")),
        Corpus(("b.tsv",), weight=0.0),
    ]


def test_weights_repeat_whole_corpora_then_spread_a_fraction_evenly():
    assert weighted_rows(4, 2).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert weighted_rows(4, 1.5).tolist() == [0, 1, 2, 3, 0, 2]
    assert weighted_rows(10, 0.3).tolist() == [0, 3, 6]
    assert weighted_rows(5, 0).tolist() == []


def test_two_corpora_make_the_training_set_tagged_and_weighted(tmp_path):
    real, synthetic = two_corpora(tmp_path)
    argv = train_argv(real, tmp_path / "out")
    argv[argv.index("--train_files") + 3 : argv.index("--train_files") + 3] = [
        "--train_files",
        *synthetic["train"],
        f"tag={TAG}",
        "weight=2",
    ]
    model_args, data_args, training_args = parse_args(argv)
    run = resolve_run(model_args, data_args, training_args)
    data = build_data(model_args, data_args, training_args, run)
    sources = [Path(p).read_text(encoding="utf-8").splitlines() for p in (real["train"][0], synthetic["train"][0])]
    raw = load_parallel_data(data_args, run.text_form)["train"]
    assert len(raw) == len(data.train) == 40 + 2 * 10
    assert raw["source"] == sources[0] + [f"{TAG} {s}" for s in sources[1]] * 2
    tag_id = data.tokenizer.convert_tokens_to_ids(TAG)
    assert tag_id == 3  # after <pad>, <unk>, </s>
    firsts = np.array([ids[0] for ids in data.train["input_ids"]])
    assert (firsts[40:] == tag_id).all() and (firsts[:40] != tag_id).all()


def test_the_tokenizer_keeps_a_tag_whole(tmp_path):
    texts = ["<BT> A dog runs.", "Ein Hund rennt.", "<BT> Two men talk.", "Zwei Männer reden."] * 5
    tokenizer = train_tokenizer(texts, 200, min_frequency=1, tags=(TAG,))
    tokenizer.save_pretrained(tmp_path)
    for loaded in (tokenizer, type(tokenizer).from_pretrained(tmp_path)):
        ids = loaded("<BT> A cat.")["input_ids"]
        assert ids[0] == loaded.convert_tokens_to_ids(TAG) == 3
        assert loaded.convert_ids_to_tokens(ids[1]) != TAG and TAG not in loaded.convert_ids_to_tokens(ids[1:])
        assert loaded.tokenize("<BT>") == [TAG]


@pytest.mark.slow
def test_a_run_records_its_corpora(tmp_path):
    real, synthetic = two_corpora(tmp_path)
    extra = ["--train_files", *synthetic["train"], f"tag={TAG}", "weight=1.5"]
    summary = tmp_path / "summary"
    train_cli.run(train_argv(real, tmp_path / "out", *extra, "--max_steps", "2", "--summary_dir", str(summary)))
    record = json.loads((summary / "summary.json").read_text())
    assert record["corpora"] == [
        {"files": real["train"], "lines": 40, "tag": None, "weight": 1.0},
        {"files": synthetic["train"], "lines": 10, "tag": TAG, "weight": 1.5},
    ]


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (["tag=<B T>"], r"--train_files tag='<B T>': a tag must be one token, without whitespace"),
        (["tag="], r"--train_files tag='': a tag must be one token"),
        (["weight=-1"], r"--train_files weight=-1: must be a finite number >= 0"),
        (["weight=two"], r"--train_files weight=two: not a number"),
    ],
)
def test_bad_groups_are_refused_in_one_line(group, message):
    with pytest.raises(UsageError, match=message):
        Corpus.parse(["a.en", "a.de", *group])


def test_the_command_lines_corpora_replace_a_presets(tmp_path):
    preset = tiny_preset(tmp_path)
    from_preset = given_corpora(parse_args(["--config", str(preset), "--output_dir", "x"])[1])
    assert [corpus.files for corpus in from_preset] == [
        tuple(str(tmp_path / "data" / f"train.{lang}") for lang in ("en", "de"))
    ]
    argv = ["--config", str(preset), "--train_files", "a.en", "a.de", "--train_files", "b.en", "b.de", "tag=<BT>"]
    assert given_corpora(parse_args([*argv, "--output_dir", "x"])[1]) == [
        Corpus(("a.en", "a.de")),
        Corpus(("b.en", "b.de"), TAG),
    ]


def test_a_given_tokenizer_must_hold_each_tag_whole():
    tokenizer = train_tokenizer(["A dog runs.", "Ein Hund rennt."] * 5, 100, min_frequency=1)
    with pytest.raises(UsageError, match=r"the tokenizer of tok has no token '<BT>': a corpus tag must be one token"):
        check_tags(tokenizer, (TAG,), "tok")
    check_tags(train_tokenizer(["A dog runs."] * 5, 100, min_frequency=1, tags=(TAG,)), (TAG,), "tok")


def test_streaming_refuses_several_corpora_tags_and_weights():
    argv = ["--dataset", "files", "--train_files", "a.en", "a.de", "weight=2", "--streaming", "true"]
    model_args, data_args, training_args = parse_args([*argv, "--max_steps", "5", "--output_dir", "x"])
    with pytest.raises(UsageError, match=r"--streaming reads one --train_files corpus as it is"):
        check_streaming(data_args, training_args, tuple(given_corpora(data_args)))


def test_moses_preprocessing_keeps_a_tag_whole(tmp_path):
    """The text form prepares each corpus before its tag goes on: lowercasing and Moses' tokenizer would make "<BT>"
    into "< bt >" (they ran after the tag, and the two were refused together, until issue 113's round needed both)."""
    real, synthetic = two_corpora(tmp_path)
    (tmp_path / "odd.en").write_text("A dog's ball.\n", encoding="utf-8")
    (tmp_path / "odd.de").write_text("Ein Ball.\n", encoding="utf-8")
    groups = [real["train"], [str(tmp_path / "odd.en"), str(tmp_path / "odd.de"), f"tag={TAG}", "weight=2"]]
    args = DataArguments(dataset="files", train_files=groups, moses_lowercase_tokenize=True)
    train = load_parallel_data(args, text_form(args))["train"]
    assert len(train) == 40 + 2
    assert train["source"][-2:] == [f"{TAG} a dog 's ball ."] * 2
    assert train["target"][-1] == "ein ball ."
