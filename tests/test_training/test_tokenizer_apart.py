"""A large sample's vocabulary is learned in a spawned process: the same tokenizer as learned in this one, its
errors raised here, a killed process named in one line, nothing half-written left in the cache."""

import os
import signal
from functools import partial
from pathlib import Path

import pytest
from training_helpers import write_corpus

from training.data import tokenizer as tokenizer_module
from training.data.corpus import Corpus, DataArguments, load_parallel_data
from training.data.streaming import streaming_pairs
from training.data.tokenizer import learned_tokenizer, sample_sentences, streamed_sentences
from vanilla_tools.text_form import TextForm


def sentences_from(pid_file: Path, sentences) -> object:
    """``sentences()``, after writing the id of the process that reads them into ``pid_file``."""
    pid_file.write_text(str(os.getpid()))
    return sentences()


def killed_while_reading() -> object:
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture
def apart(monkeypatch):
    monkeypatch.setattr(tokenizer_module, "LEARN_APART_ABOVE", 10)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), pairs=200)


def test_a_large_sample_is_learned_apart_into_the_same_tokenizer(corpus, tmp_path, apart):
    train = load_parallel_data(DataArguments(dataset="files", train_files=corpus["train"]), TextForm())["train"]
    sample = partial(sample_sentences, train, 300, 5)
    here = learned_tokenizer(sample, "key", 300, str(tmp_path / "here"), sentence_count=10)
    pid_file = tmp_path / "pid"
    elsewhere = learned_tokenizer(partial(sentences_from, pid_file, sample), "key", 300, str(tmp_path / "apart"), 11)
    assert int(pid_file.read_text()) != os.getpid()
    assert elsewhere.backend_tokenizer.to_str() == here.backend_tokenizer.to_str()
    assert len(here) == 300
    (cached,) = (tmp_path / "apart" / "vanilla-tokenizers").iterdir()  # only the finished tokenizer, no staging
    assert (cached / "tokenizer.json").is_file()


def test_a_streamed_sample_is_learned_apart(corpus, tmp_path, apart):
    stream = streaming_pairs("files", None, (Corpus(tuple(corpus["train"])),), "en", "de").pairs
    pid_file = tmp_path / "pid"
    sentences = partial(sentences_from, pid_file, partial(streamed_sentences, stream, 300))
    tokenizer = learned_tokenizer(sentences, "stream", 300, str(tmp_path), sentence_count=300)
    assert int(pid_file.read_text()) != os.getpid()
    text = "A dog runs across the meadow."
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text


def test_the_learning_process_errors_are_raised_here(tmp_path, apart):
    with pytest.raises(ValueError, match="vocab_size must exceed the 3 special tokens, got 3"):
        learned_tokenizer(partial(iter, ["A dog."] * 20), "key", 3, str(tmp_path), sentence_count=20)
    assert not list((tmp_path / "vanilla-tokenizers").iterdir())


def test_a_killed_learning_process_is_named_and_leaves_nothing(tmp_path, apart):
    with pytest.raises(ChildProcessError, match="learning the tokenizer failed: its process ended abruptly"):
        learned_tokenizer(killed_while_reading, "key", 300, str(tmp_path), sentence_count=20)
    assert not list((tmp_path / "vanilla-tokenizers").iterdir())
