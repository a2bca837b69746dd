"""The micro-batch sized to the device (training/step/micro_batch.py, issue 99), on a mocked device memory: the wmt14
preset's step keeps its 25,000 tokens a side, and each device takes as many of them at once as it holds.

The mocked memory is derived from the one measured step: the wmt14 preset's compiled bf16 step on an H200 peaked at
2.538 GiB with micro-batches of 3,125 tokens a side (results/benchmarks/gpu/h200-2026-11-28-calls-5-7.json,
call_5.step_compiled.peak_memory_gib). Of that, the model's state does not grow with the micro-batch: 16 bytes a
parameter (fp32 weight, gradient, Adam's two moments), 0.94 GiB for the preset's 63,082,496 parameters; the rest,
0.524 MiB a token, is taken to grow with the tokens. A device of C bytes then holds (C - state) / 0.524 MiB tokens
a side: 270,025 on 139 GiB, 45,102 on 24 GiB, 13,808 on 8 GiB, 5,984 on 4 GiB."""

import json
from types import SimpleNamespace

import pytest
import torch
from helpers import tiny_model
from training_helpers import pad, pairs
from transformers import Seq2SeqTrainingArguments

from training.arguments import parse_args
from training.build import build_model, resolve_run
from training.resolved import RunDecoding, accumulation_steps
from training.run.checkpoints import BATCH_PLAN, COMPLETE_MARKER
from training.run.record import check_run_record, run_record
from training.step import micro_batch
from training.step.micro_batch import ProbeStep, Vocabulary, largest_that_fits, size_micro_batch
from training.step.trainer import PaperSeq2SeqTrainer
from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding

GIB = 2**30
H200_PEAK = 2.5377655029296875 * GIB  # the record's peak_memory_gib
H200_TOKENS = 3125  # tokens a side per micro-batch in that step
STATE_BYTES = 16  # a parameter's fp32 weight and gradient, and Adam's two moments
CUDA_SHAPES = BatchShapes.for_device("cuda", 128)  # the buckets on CUDA: the largest is 128


def wmt14(tmp_path, *flags: str):
    model_args, data_args, _ = parse_args(["--config", "wmt14", "--output_dir", str(tmp_path), *flags])
    return model_args, data_args


def preset_model(model_args, data_args):
    """The preset's model as the probe would build it, without its weights (their count is what the mocked memory
    needs)."""

    def build() -> torch.nn.Module:
        with torch.device("meta"):
            return build_model(model_args, Vocabulary(data_args.vocab_size))

    return build


def device_args(tmp_path, device: str = "cuda", processes: int = 1) -> SimpleNamespace:
    """What sizing reads of Seq2SeqTrainingArguments, on a device this machine need not have."""
    return SimpleNamespace(
        device=torch.device(device),
        world_size=processes,
        resume_from_checkpoint=None,
        output_dir=str(tmp_path),
        gradient_accumulation_steps=1,
    )


def sized(data_args, args, overwrite: bool = False, model=None) -> tuple[int, str, int]:
    """The micro-batch sized for ``args``'s device (bf16, as the presets train on a GPU), how it was sized, and the
    accumulation that makes up --tokens_per_step with it."""
    tokens, sized_by = size_micro_batch(data_args, args, CUDA_SHAPES, overwrite, model, "bf16")
    return tokens, sized_by, accumulation_steps(data_args.tokens_per_step, tokens, args.world_size, 1)


class MockedMemory:
    """Stands for ``ProbeStep`` on a device of ``capacity`` bytes: a step of t tokens a side needs the model's state
    (``STATE_BYTES`` a parameter) and t times the per-token cost the H200's step shows; beyond the capacity it
    raises CUDA's out-of-memory error, which accelerate recognises. ``tried``: the tokens of each step tried."""

    capacity = 0
    tried: list[int] = []

    def __init__(self, model: torch.nn.Module, training_args, longest: int, precision: str):
        self.state = STATE_BYTES * sum(p.numel() for p in model.parameters())
        self.per_token = (H200_PEAK - self.state) / H200_TOKENS
        assert longest == 128

    def __call__(self, tokens: int) -> None:
        MockedMemory.tried.append(tokens)
        if self.state + tokens * self.per_token > MockedMemory.capacity:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {tokens * self.per_token} bytes")


@pytest.fixture
def device_of(monkeypatch):
    def mocked(gib: float) -> type[MockedMemory]:
        monkeypatch.setattr(MockedMemory, "capacity", gib * GIB)
        monkeypatch.setattr(MockedMemory, "tried", [])
        monkeypatch.setattr(micro_batch, "ProbeStep", MockedMemory)
        return MockedMemory

    return mocked


@pytest.mark.parametrize(
    ("gib", "micro_batches", "tried"),
    [(139, 1, [25_000]), (24, 1, [25_000]), (8, 2, [25_000, 12_500]), (4, 5, [25_000, 12_500, 8_333, 6_250, 5_000])],
)
def test_the_wmt14_step_takes_as_few_micro_batches_as_the_device_holds(tmp_path, device_of, gib, micro_batches, tried):
    """139 GiB (an H200) and 24 GiB hold the whole step of 25,000 tokens a side: 1 micro-batch; 8 GiB hold 12,500
    (2 a step), 4 GiB 5,000 (5): the share of 1, 2, 3, ... micro-batches, tried by accelerate from the largest. The
    tokens of an optimizer step are the preset's 25,000 on every device."""
    model_args, data_args = wmt14(tmp_path)
    args = device_args(tmp_path)
    assert data_args.max_tokens_per_batch == 0 and data_args.tokens_per_step == 25_000
    memory = device_of(gib)
    tokens, sized_by, accumulation = sized(data_args, args, model=preset_model(model_args, data_args))
    assert sized_by == "the device's memory" and memory.tried == tried
    assert tokens == tried[-1] == 25_000 // micro_batches
    assert tokens * accumulation == 25_000 and accumulation == micro_batches


def test_processes_share_the_step(tmp_path, device_of):
    """On 2 processes each takes at most half the step: 12,500 tokens, which 8 GiB hold, in one micro-batch."""
    model_args, data_args = wmt14(tmp_path)
    args = device_args(tmp_path, processes=2)
    device_of(8)
    tokens, sized_by, accumulation = sized(data_args, args, model=preset_model(model_args, data_args))
    assert sized_by == "the device's memory" and MockedMemory.tried == [12_500]
    assert tokens * 2 * accumulation == 25_000 and accumulation == 1


def test_an_explicit_budget_wins_and_nothing_is_probed(tmp_path, device_of):
    model_args, data_args = wmt14(tmp_path, "--max_tokens_per_batch", "3125")
    args = device_args(tmp_path)
    device_of(139)
    assert sized(data_args, args) == (3125, "--max_tokens_per_batch", 8) and MockedMemory.tried == []


def test_a_resumed_run_keeps_the_size_it_started_with(tmp_path, device_of):
    """Its checkpoint's batch plan says 12,500 tokens a micro-batch: a relaunch on a 139 GiB device keeps them
    (another size would cut other pairs into each step), and --overwrite_output_dir starts over, sized anew."""
    checkpoint = tmp_path / "checkpoint-10"
    checkpoint.mkdir()
    (checkpoint / COMPLETE_MARKER).touch()
    (checkpoint / BATCH_PLAN).write_text(
        json.dumps(
            {
                "tokens_per_batch": 12_500,
                "gradient_accumulation_steps": 2,
                "processes": 1,
                "max_tokens_per_batch": 12_500,
            }
        )
    )
    device_of(139)
    for resume, overwrite, tokens in (
        (None, False, 12_500),
        ("auto", False, 12_500),
        (str(checkpoint), False, 12_500),
        ("false", False, 25_000),
        (None, True, 25_000),
    ):
        model_args, data_args = wmt14(tmp_path)
        args = device_args(tmp_path)
        args.resume_from_checkpoint = resume
        assert sized(data_args, args, overwrite, preset_model(model_args, data_args))[0] == tokens, (resume, overwrite)
    assert MockedMemory.tried == [25_000, 25_000]  # probed only where the run starts afresh


def test_on_a_cpu_the_preset_keeps_its_budget_and_the_record_says_so(tmp_path):
    """No probe on a CPU: the paper's per-GPU share, 3,125 tokens a side, 8 micro-batches a step (on 2 processes
    3,125 each, 4 a step), as the preset's budget was; the run's record holds the micro-batch and what sized it."""
    local = ("--dataset", "files", "--train_files", "train.en", "train.de")  # (the Hub's wmt14 is not asked)
    model_args, data_args = wmt14(tmp_path, *local)
    run = resolve_run(model_args, data_args, parse_args(["--config", "wmt14", "--output_dir", str(tmp_path)])[2])
    assert run.batch_plan == {
        "tokens_per_batch": 3125,
        "gradient_accumulation_steps": 8,
        "processes": 1,
        "max_tokens_per_batch": 3125,
    }
    assert run.micro_batch_record == {
        "tokens_per_side": 3125,
        "per_step": 8,
        "sized_by": "the paper's per-GPU share (not probed off CUDA)",
    }
    arguments = {
        "max_steps": 10,
        "num_train_epochs": 3,
        "max_tokens_per_batch": 3125,
        "gradient_accumulation_steps": 8,
        "seed": 1,
    }
    record = run_record(arguments, 10, "cpu", code={}, host={}, micro_batch=run.micro_batch_record)
    check_run_record(record)
    assert record["micro_batch"] == run.micro_batch_record and record["budget"]["tokens_per_step"] == 25_000
    assert run.tokens_per_step == 25_000 and data_args.max_tokens_per_batch == 0  # the arguments stay as parsed
    _, data_args = wmt14(tmp_path)
    two = device_args(tmp_path, "cpu", processes=2)
    assert sized(data_args, two)[::2] == (3125, 4)


def test_what_cannot_be_sized(tmp_path, device_of):
    model_args, data_args = wmt14(tmp_path, "--tokens_per_step", "0")
    with pytest.raises(UsageError, match="--max_tokens_per_batch 0: 0 sizes the micro-batch .* needs --tokens_per_"):
        sized(data_args, device_args(tmp_path))
    model_args, data_args = wmt14(tmp_path, "--tokens_per_step", "1024")
    device_of(0.9)  # less than the model's state (0.94 GiB)
    with pytest.raises(UsageError, match="no micro-batch of at least 128 tokens .* fits on this device"):
        sized(data_args, device_args(tmp_path), model=preset_model(model_args, data_args))
    assert MockedMemory.tried == [1024 // k for k in range(1, 9)]  # down to one pair of the longest bucket, 128


def test_only_running_out_of_memory_means_fewer_tokens():
    def broken(tokens: int) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="illegal memory access"):
        largest_that_fits(broken, 25_000, 128)


def test_the_probe_trains_one_step_of_the_largest_bucket_with_the_optimizers_state(tmp_path):
    """A real step on this machine: the batch is tokens // longest pairs of the longest length; the optimizer (the
    run's, from the arguments) holds its state before the first step tried, and no gradient is left after it."""
    args = Seq2SeqTrainingArguments(tmp_path, use_cpu=True, optim="adamw_torch", report_to=[])
    model = tiny_model().train()
    probe = ProbeStep(model, args, 16, "no")
    assert type(probe.optimizer).__name__ == "AdamW" and probe.buckets == []
    assert all(set(probe.optimizer.state[p]) >= {"exp_avg", "exp_avg_sq"} for p in model.parameters())
    shapes = []
    model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    before = [p.detach().clone() for p in model.parameters()]
    probe(70)
    assert shapes == [(4, 16)]
    assert all(p.grad is None for p in model.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))  # the update ran


@pytest.mark.parametrize(
    ("precision", "computes_in"),
    [("no", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)],
    ids=["fp32", "bf16", "fp16"],
)
def test_the_probe_trains_in_the_precision_of_the_run(tmp_path, precision, computes_in):
    """The probe's step computes in the dtype the run's autocast will (the resolved run's precision, by
    accelerate's name): an fp16 run is sized by an fp16 step, not an fp32 one. Read off the model's first linear
    layer."""
    args = Seq2SeqTrainingArguments(tmp_path, use_cpu=True, optim="adamw_torch", report_to=[])
    model = tiny_model().train()
    computed = []
    first_linear = next(module for module in model.modules() if isinstance(module, torch.nn.Linear))
    first_linear.register_forward_hook(lambda module, inputs, output: computed.append(output.dtype))
    ProbeStep(model, args, 16, precision)(32)
    assert computed == [computes_in]


def test_one_micro_batch_or_several_is_the_same_loss_per_token(tmp_path):
    """The same 12 pairs as one micro-batch and as 3 accumulated ones of unequal target tokens, through the
    trainer's own step: Trainer counts the step's target tokens over its micro-batches (``num_items_in_batch``),
    the model sums each micro-batch's loss and divides by that count, so the step's gradient is that of the loss
    per token of the whole step either way (label smoothing included)."""
    args = Seq2SeqTrainingArguments(tmp_path, use_cpu=True, report_to=[], label_smoothing_factor=0.1)
    training_set = pairs()
    trainer = PaperSeq2SeqTrainer(
        model=tiny_model(),
        args=args,
        training_set=training_set,
        data_collator=pad,
        max_tokens_per_batch=64,
        decoding=RunDecoding(Decoding(), Decoding.paper()),
    )
    rows = list(training_set.dataset.select_columns(["input_ids", "labels"]))
    gradients, losses = [], []
    for ends in ([12], [2, 7, 12]):  # 36 target tokens, then 5 + 15 + 16
        micro_batches = [pad(rows[start:end]) for start, end in zip([0, *ends], ends, strict=False)]
        parts = len(micro_batches)
        trainer.model.zero_grad(set_to_none=True)
        trainer.current_gradient_accumulation_steps = parts
        batches, tokens = trainer.get_batch_samples(iter(micro_batches), parts, trainer.args.device)
        assert int(tokens) == sum(len(row["labels"]) for row in rows) == 36
        losses.append(sum(float(trainer.training_step(trainer.model, batch, tokens)) for batch in batches))
        gradients.append(torch.cat([p.grad.flatten() for p in trainer.model.parameters()]))
    assert trainer.model.config.label_smoothing == 0.1
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    torch.testing.assert_close(gradients[0], gradients[1], rtol=1e-5, atol=1e-7)
