"""Batches prepared ahead in worker processes (on by default on CUDA), exactly those of the training process, and
the time the loop waits for them (issue 99, item 3)."""

import time

import pytest
import torch
from training_helpers import built, pad, tiny_trainer, train_argv, write_corpus
from transformers import Seq2SeqTrainer

from training import arguments
from training.arguments import parse_args
from vanilla_tools.cli import UsageError


def loader_settings(argv: list[str]) -> tuple:
    training_args = parse_args(["--output_dir", "x", "--use_cpu", "true", *argv])[2]
    return (
        training_args.dataloader_num_workers,
        training_args.dataloader_prefetch_factor,
        training_args.dataloader_persistent_workers,
    )


def test_on_a_gpu_batches_are_prepared_ahead_unless_a_flag_or_the_training_set_says_otherwise(monkeypatch):
    assert loader_settings([]) == (0, None, False)  # elsewhere Trainer's defaults
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(arguments, "bf16_supported", lambda: False)
    assert loader_settings([]) == (2, 4, True)
    assert loader_settings(["--dataloader_num_workers", "6", "--dataloader_prefetch_factor", "2"]) == (6, 2, True)
    assert loader_settings(["--dataloader_num_workers", "0"]) == (0, None, False)  # nothing to prefetch or keep
    assert loader_settings(["--streaming", "true"]) == (0, None, False)  # the stream batches itself
    assert loader_settings(["--bpe_dropout", "0.1"]) == (2, 4, False)  # workers made anew for each epoch


def epochs(argv: list[str], count: int = 2) -> list[list[dict]]:
    """The batches of the first ``count`` epochs of the training loader ``argv`` makes."""
    loader = built(argv)[0].get_train_dataloader()
    batches = []
    for epoch in range(count):
        loader.set_epoch(epoch)
        batches.append(list(loader))
    return batches


def assert_same_batches(ours: list[dict], theirs: list[dict]) -> None:
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs, strict=True):
        assert mine.keys() == other.keys()
        for key in mine:
            assert torch.equal(mine[key], other[key]), key


@pytest.fixture
def torchs_sharing():
    """torch's default way of sharing tensors between processes, here and after the test (it is process-wide)."""
    default = torch.multiprocessing.get_sharing_strategy()
    yield default
    torch.multiprocessing.set_sharing_strategy(default)


def test_two_workers_give_each_epoch_exactly_the_batches_of_the_training_process(tmp_path, torchs_sharing):
    """Batches that 2 workers hand over by name (file-system sharing, set only where workers read) are those the
    training process makes."""
    argv = train_argv(write_corpus(tmp_path / "data", pairs=60), tmp_path / "run", "--max_tokens_per_batch", "200")
    alone = epochs(argv)
    assert torch.multiprocessing.get_sharing_strategy() == torchs_sharing != "file_system"
    with_workers = epochs([*argv, "--dataloader_num_workers", "2", "--dataloader_persistent_workers", "true"])
    assert torch.multiprocessing.get_sharing_strategy() == "file_system"
    assert len(alone[0]) > 4
    assert any(
        a["input_ids"].shape != b["input_ids"].shape or not torch.equal(a["input_ids"], b["input_ids"])
        for a, b in zip(*alone, strict=False)  # (an epoch may have another count)
    )  # the epochs' batches differ
    for ours, theirs in zip(with_workers, alone, strict=True):
        assert_same_batches(ours, theirs)


def bpe_dropout_argv(tmp_path, *workers: str) -> list[str]:
    """vanilla-train's arguments for 40 Multi30k pairs with BPE-dropout at 0.5, and ``workers``' flags."""
    corpus = write_corpus(tmp_path / "data", pairs=40)
    return train_argv(corpus, tmp_path / "run", "--bpe_dropout", "0.5", "--max_tokens_per_batch", "400", *workers)


def test_bpe_dropout_workers_read_each_epochs_own_segmentation(tmp_path):
    argv = bpe_dropout_argv(tmp_path, "--dataloader_num_workers", "2")
    trainer = built(argv)[0]
    loader = trainer.get_train_dataloader()
    first = trainer.training_set.input_ids
    for epoch in range(2):
        loader.set_epoch(epoch)
        batches = list(loader)
        # the epoch's plan collated in the training process, from its segmentation
        here = [trainer.data_collator([trainer.training_set[i] for i in plan]) for plan in loader.batch_sampler]
        assert_same_batches(batches, here)
    assert trainer.training_set.input_ids != first  # the second epoch was re-segmented


def test_bpe_dropout_refuses_workers_kept_across_epochs(tmp_path):
    argv = bpe_dropout_argv(tmp_path, "--dataloader_num_workers", "2", "--dataloader_persistent_workers", "true")
    with pytest.raises(UsageError, match="--dataloader_persistent_workers false"):
        built(argv)


def slow(collate, seconds: float):
    def collate_slowly(features):
        time.sleep(seconds)
        return collate(features)

    return collate_slowly


def train_logs(tmp_path, collate) -> list[dict]:
    trainer = tiny_trainer(tmp_path, data_collator=collate, max_steps=4, logging_steps=1)
    trainer.train()
    return trainer.state.log_history


def test_the_wait_for_each_steps_batches_is_logged_and_grows_with_a_slow_loader(tmp_path):
    fast, slowed = train_logs(tmp_path, pad), train_logs(tmp_path, slow(pad, 0.05))
    for logs in (fast, slowed):
        steps = [log for log in logs if "loss" in log]
        assert len(steps) == 4 and all(log["loader_wait_ms"] >= 0 for log in steps)
        assert logs[-1]["train_loader_wait_ms"] >= 0
    # accelerate's loader reads one batch ahead, so a step may wait for the next one's: the waits add up, per step
    assert sum(log["loader_wait_ms"] for log in slowed if "loss" in log) >= 4 * 50
    assert slowed[-1]["train_loader_wait_ms"] >= 50 > fast[-1]["train_loader_wait_ms"]


def test_the_flops_estimate_is_trainers_with_the_parameters_counted_once(tmp_path, monkeypatch):
    argv = train_argv(write_corpus(tmp_path / "data", pairs=60), tmp_path / "run", "--max_tokens_per_batch", "200")
    trainer = built(argv)[0]
    batch = next(iter(trainer.get_train_dataloader()))
    theirs = Seq2SeqTrainer.floating_point_ops(trainer, batch)
    assert theirs == 6 * batch["input_ids"].numel() * trainer.model.num_parameters(exclude_embeddings=True) > 0
    counted = []
    monkeypatch.setattr(type(trainer.model), "num_parameters", lambda model, **kwargs: counted.append(kwargs) or 7)
    trainer = built(argv)[0]
    assert [trainer.floating_point_ops(batch) for _ in range(3)] == [6 * batch["input_ids"].numel() * 7] * 3
    assert counted == [{"exclude_embeddings": True}]
    assert trainer.floating_point_ops({"labels": batch["labels"]}) == 0  # no inputs, no estimate, as Trainer's
