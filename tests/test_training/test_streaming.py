"""--streaming: token batches built in bounded windows, each rank its own pairs, no end (so no rank waits at an
epoch's end), and resuming on exactly the batches an uninterrupted run would have had."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import built, train_argv, write_corpus

from training.data.corpus import Corpus, PairTokenizer, file_stamp
from training.data.streaming import Stream, StreamingTokenBatches, streaming_pairs

TESTS = Path(__file__).resolve().parents[1]  # where the probes and helpers are
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """121 training pairs (an odd number: two ranks get 61 and 60), one of them empty."""
    files = write_corpus(tmp_path_factory.mktemp("data"), pairs=121)
    for path in files["train"]:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        lines[7] = ""
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


def files_stream(files: list[str]) -> Stream:
    """The stream of one corpus of ``files`` (English to German), as a --dataset files run's."""
    return streaming_pairs("files", None, (Corpus(tuple(files)),), "en", "de")


def stream(corpus, tokenizer, rank=0, world_size=1, seed=3) -> StreamingTokenBatches:
    """Windows of 50 pairs in batches of 120 tokens, sentences kept up to 128 tokens."""
    return StreamingTokenBatches(
        files_stream(corpus["train"]).pairs,
        PairTokenizer(tokenizer, 128, 128),
        window=50,
        max_tokens=120,
        rank=rank,
        world_size=world_size,
        seed=seed,
    )


def first_pass(batches: StreamingTokenBatches) -> list[list[dict]]:
    """The batches of the first pass over the data (the stream goes on into the next)."""
    out = []
    for batch in batches:
        out.append(batch)
        if batches.starts[-1].epoch == 1:
            return out[:-1]
    raise AssertionError("the stream ended")


def pairs(batches) -> list[tuple]:
    return [(tuple(p["input_ids"]), tuple(p["labels"])) for batch in batches for p in batch]


def test_a_pass_holds_every_pair_once_in_batches_within_the_budget(corpus, tokenizer):
    batches = first_pass(stream(corpus, tokenizer))
    assert len(pairs(batches)) == 120 and len(set(pairs(batches))) == 120  # the empty pair is dropped
    for batch in batches:
        longest = max(max(len(p["input_ids"]), len(p["labels"])) for p in batch)
        assert len(batch) * longest <= 120 or len(batch) == 1
    assert len({len(batch) for batch in batches}) > 1  # sized by tokens, not by a pair count


def test_two_ranks_read_apart_and_together_read_everything(corpus, tokenizer):
    ranks = [pairs(first_pass(stream(corpus, tokenizer, rank, 2))) for rank in (0, 1)]
    assert [len(ranks[0]), len(ranks[1])] == [61, 59]  # lines 0, 2, ... 120 and 1, 3, ... 119 but the empty 7
    assert not set(ranks[0]) & set(ranks[1])
    assert set(ranks[0]) | set(ranks[1]) == set(pairs(first_pass(stream(corpus, tokenizer))))


def test_the_order_is_seeded_and_each_pass_differs(corpus, tokenizer):
    one, same = iter(stream(corpus, tokenizer)), iter(stream(corpus, tokenizer))
    first = [next(one) for _ in range(30)]
    assert first == [next(same) for _ in range(30)]
    other = iter(stream(corpus, tokenizer, seed=4))
    assert first != [next(other) for _ in range(30)]


@pytest.mark.parametrize("used", [0, 3, 11, 25])
def test_resuming_gives_the_batches_that_came_next(corpus, tokenizer, tmp_path, used):
    """The position saved after ``used`` batches (across windows and passes) gives back batch ``used`` onwards."""
    original = stream(corpus, tokenizer)
    batches = iter(original)
    expected = [next(batches) for _ in range(used + 8)]  # the stream has read ahead, as a DataLoader does
    original.save(tmp_path, used)
    resumed = stream(corpus, tokenizer)
    resumed.resume(tmp_path)
    again = iter(resumed)
    assert [next(again) for _ in range(8)] == expected[used:]


def run(command: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=TESTS.parent)


def streaming_argv(corpus, output: Path, *extra: str) -> list[str]:
    return train_argv(
        {"train": corpus["train"], "validation": corpus["validation"]},
        output,
        "--streaming",
        "true",
        "--streaming_window",
        "40",
        "--max_steps",
        "9",
        "--save_steps",
        "3",
        "--eval_strategy",
        "no",
        *extra,
    )


@pytest.mark.slow
def test_two_processes_stream_to_the_last_step(corpus, tmp_path):
    """Ranks with different numbers of pairs (61 and 60) and batches: the stream has no end, so both reach
    --max_steps and no rank waits for another at an epoch's end; each saves where its stream goes on."""
    port = ["--master_port", str(29700 + os.getpid() % 200)]
    result = run(
        [
            str(BIN / "torchrun"),
            "--nproc_per_node",
            "2",
            *port,
            "-m",
            "training.train",
            *streaming_argv(corpus, tmp_path, "--max_steps", "30"),
        ]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "model.safetensors").is_file()
    for rank in (0, 1):
        assert (tmp_path / "checkpoint-30" / f"stream_state_rank{rank}.json").is_file()
    assert "pass 0 over the training data done" in result.stderr  # 30 steps go past the end of the data


@pytest.mark.slow
def test_a_killed_streaming_run_resumes_to_the_weights_of_an_uninterrupted_one(corpus, tmp_path):
    uninterrupted = run([str(BIN / "vanilla-train"), *streaming_argv(corpus, tmp_path / "a")])
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    argv = streaming_argv(corpus, tmp_path / "b")
    killed = run([sys.executable, str(TESTS / "kill_probe.py"), "step", "8", *argv])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {tmp_path / 'b' / 'checkpoint-6'}" in resumed.stderr
    expected, got = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_streaming_refuses_what_it_cannot_do(corpus, tmp_path):

    for extra, message in (
        (["--max_steps", "-1", "--num_train_epochs", "1"], "--streaming needs --max_steps"),
        (["--bpe_dropout", "0.1"], "--streaming does not re-segment pairs"),
        (["--dataloader_num_workers", "2"], "--streaming needs --dataloader_num_workers 0"),
    ):
        with pytest.raises(ValueError, match=message):
            built(streaming_argv(corpus, tmp_path, *extra))


def test_streaming_checks_its_files_as_the_arrow_path_does(corpus, tmp_path):
    """The stream reads its files with the Arrow path's reader, and is given the same checks before it starts."""
    text = tmp_path / "train.txt"
    text.write_text("A dog.\n", encoding="utf-8")
    for files, error, message in (
        ([str(text)], ValueError, r"a single data file must be \.tsv or \.jsonl"),
        ([*corpus["train"], str(text)], ValueError, "give two parallel files or one .tsv/.jsonl file, got 3"),
        ([str(tmp_path / "missing.en"), corpus["train"][1]], FileNotFoundError, "data file not found: .*missing.en"),
    ):
        with pytest.raises(error, match=message):
            files_stream(files)


def test_the_streams_key_names_its_files_as_they_are(corpus, tmp_path):
    """The key of the tokenizer learned from a stream: its files' paths, sizes and modification times, so that a
    changed file is a new key (the cached tokenizer of the old one is not taken)."""
    files = [str(tmp_path / Path(path).name) for path in corpus["train"]]
    for path, copied in zip(corpus["train"], files, strict=True):
        Path(copied).write_bytes(Path(path).read_bytes())
    key = files_stream(files).key
    assert key == ("files", "train", tuple(file_stamp(path) for path in files))
    Path(files[0]).write_bytes(Path(files[0]).read_bytes() + b"A dog.\n")
    assert files_stream(files).key != key
