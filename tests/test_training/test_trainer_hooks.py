"""PaperSeq2SeqTrainer and transformers' Trainer: the private methods it still overrides exist as it expects them
(a release that renames one fails here, by name, rather than silently skipping our override), and the public hooks
it moved to do their work."""

import inspect

import datasets
import pytest
import torch
from helpers import PAD, tiny_model
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback

from training.batching import TokenBatchSampler, TokenizedPairs
from training.schedules import NoamSchedule
from training.trainer import PRIVATE_TRAINER_HOOKS, PaperSeq2SeqTrainer


@pytest.mark.parametrize("hook", PRIVATE_TRAINER_HOOKS)
def test_each_private_hook_we_override_is_still_trainers(hook):
    ours = inspect.signature(getattr(PaperSeq2SeqTrainer, hook)).parameters
    theirs = getattr(Seq2SeqTrainer, hook, None)
    assert theirs is not None, (
        f"transformers' Trainer has no {hook} any more: PaperSeq2SeqTrainer.{hook} is never called"
    )
    assert list(inspect.signature(theirs).parameters) == list(ours), f"Trainer.{hook} changed its parameters"


def pairs(n: int = 12) -> TokenizedPairs:
    rows = [{"input_ids": [5 + i % 7] * (3 + i % 4), "labels": [6 + i % 5] * (2 + i % 3)} for i in range(n)]
    for row in rows:
        row["source_length"], row["target_length"] = len(row["input_ids"]), len(row["labels"])
    return TokenizedPairs(datasets.Dataset.from_list(rows))


def pad(features: list[dict]) -> dict[str, torch.Tensor]:
    """Right-pads ids with PAD (its mask 0) and labels with -100, as DataCollatorForSeq2Seq does."""
    batch = {}
    for key, value in (("input_ids", PAD), ("labels", -100)):
        width = max(len(f[key]) for f in features)
        batch[key] = torch.tensor([f[key] + [value] * (width - len(f[key])) for f in features])
    batch["attention_mask"] = batch["input_ids"].ne(PAD).long()
    return batch


def trainer(tmp_path, **overrides) -> PaperSeq2SeqTrainer:
    arguments = Seq2SeqTrainingArguments(tmp_path, max_steps=3, learning_rate=1.0, report_to=[], save_strategy="no",
                                         use_cpu=True, disable_tqdm=True, **overrides)  # fmt: skip
    return PaperSeq2SeqTrainer(model=tiny_model().train(), args=arguments, training_set=pairs(), data_collator=pad,
                               max_tokens_per_batch=24, lr_multiplier=NoamSchedule(4))  # fmt: skip


def test_training_draws_its_batches_from_the_token_sampler(tmp_path):
    loader = trainer(tmp_path).get_train_dataloader()
    assert isinstance(loader.batch_sampler, TokenBatchSampler) or isinstance(
        getattr(loader.batch_sampler, "batch_sampler", None), TokenBatchSampler
    )
    for batch in loader:  # every batch within the token budget of the sampler
        assert batch["input_ids"].numel() <= 24 and batch["labels"].numel() <= 24


def test_each_train_call_runs_the_papers_schedule_from_its_first_step(tmp_path):
    """§5.3's schedule is made by the public create_scheduler for each train(), over that call's optimizer: a second
    call starts again at step 1 of the warmup (Trainer remakes its own schedulers the same way)."""
    run = trainer(tmp_path)
    rates = []
    for _ in range(2):
        run.train()
        rates.append(run.lr_scheduler.get_last_lr()[0])
        assert run.lr_scheduler.optimizer is run.optimizer
    assert rates[0] == rates[1] == NoamSchedule(4)(3)  # after 3 steps: the rate of step 4, the warmup's peak


class GradientNorms(TrainerCallback):
    """The norm of the whole gradient the optimizer steps with, each step (after Trainer's clipping)."""

    def __init__(self):
        self.norms = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        grads = [p.grad.norm() for p in model.parameters() if p.grad is not None]
        self.norms.append(torch.linalg.vector_norm(torch.stack(grads)).item())


def test_max_grad_norm_clips_the_gradient_the_optimizer_steps_with(tmp_path):
    """--max_grad_norm (fairseq's --clip-norm: 25 in the multi30k-tiny preset, off in the others) reaches the optimizer
    step: with it, every step's gradient has exactly that norm where it had more."""
    free, clipped = GradientNorms(), GradientNorms()
    run = trainer(tmp_path / "free", max_grad_norm=0.0)
    run.add_callback(free)
    run.train()
    limit = min(free.norms) / 10
    run = trainer(tmp_path / "clipped", max_grad_norm=limit)
    run.add_callback(clipped)
    run.train()
    assert len(clipped.norms) == 3 and min(free.norms) > 0
    assert clipped.norms == pytest.approx([limit] * 3, rel=1e-5)
