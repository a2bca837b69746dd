"""The micro-batch sized to the device (issue 99): §5.1's batch stays ``--tokens_per_step`` tokens a side per
optimizer step, and each device takes as many of them a micro-batch as its memory holds, up to its share
(``--tokens_per_step`` / processes); gradient accumulation makes up only the rest.

``--max_tokens_per_batch 0`` (the wmt14 and big presets) asks for it; any other value is the per-device budget as
given. Decided once, in the run's resolution (``build.resolve_run``), and held in ``resolved.ResolvedRun``, from
which the accumulation, the sampler and the records follow:

- a resumed run keeps the size it started with, read from its checkpoint's batch plan;
- on CUDA, the largest of the share, the share / 2, / 3, ... (k micro-batches a step) with which one training step
  (forward, backward and the optimizer's update, its state allocated first) on the largest bucket shape runs
  without running out of memory. accelerate's ``find_executable_batch_size`` (Trainer's --auto_find_batch_size)
  runs the tries; processes take the smallest size any of them found;
- elsewhere (a CPU: no probe runs off CUDA), the paper's per-GPU share, ``--tokens_per_step`` / 8 (§5.2: 8 GPUs),
  as the presets said before: a CPU run's micro-batches stay what they were.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate.utils import find_executable_batch_size
from accelerate.utils.memory import clear_device_cache
from transformers import Trainer

from vanilla_tools.batch_shapes import BatchShapes
from vanilla_tools.cli import UsageError

from ..data.corpus import DataArguments
from ..run.checkpoints import BATCH_PLAN, NEWEST, NO_RESUME, complete_checkpoints

logger = logging.getLogger(__name__)

SIZED_TO_DEVICE = 0  # --max_tokens_per_batch 0
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}  # accelerate's names of the dtypes autocast runs
PAPER_GPUS = 8  # §5.2: the paper's batch was shared by 8 P100s; a device that is not probed takes one GPU's part


@dataclass(frozen=True)
class Vocabulary:
    """What ``build.build_model`` reads of a tokenizer, for the model the probe trains before the run's tokenizer
    exists: a vocabulary of --vocab_size (the size the run's is learned to) and special token ids."""

    size: int
    pad_token_id: int = 0
    eos_token_id: int = 1

    def __len__(self) -> int:
        return self.size


def size_micro_batch(
    data_args: DataArguments,
    training_args,
    shapes: BatchShapes,
    overwrite: bool,
    build_model: Callable[[], torch.nn.Module],
    precision: str,
) -> tuple[int, str]:
    """The per-device micro-batch (tokens a side) and how it was sized: --max_tokens_per_batch where given, else
    sized to the device (module docstring, logged). ``shapes``: the run's batch shapes; ``overwrite``:
    --overwrite_output_dir (a run started over keeps nothing); ``build_model``: the run's model; ``precision``: the
    run's autocast (accelerate's name), which the probe's step runs under."""
    if data_args.max_tokens_per_batch > 0:
        return data_args.max_tokens_per_batch, "--max_tokens_per_batch"
    if data_args.max_tokens_per_batch < 0 or not data_args.tokens_per_step:
        raise UsageError(
            f"--max_tokens_per_batch {data_args.max_tokens_per_batch}: 0 sizes the micro-batch to the device, up to "
            "--tokens_per_step / processes, and needs --tokens_per_step; give it, or a budget above 0"
        )
    share = data_args.tokens_per_step // training_args.world_size
    longest = shapes.padded_length(max(data_args.max_source_length, data_args.max_target_length))
    kept = kept_size(training_args, overwrite)
    if kept:
        tokens, sized_by = kept, "the checkpoint it resumes"
    elif training_args.device.type == "cuda":
        probe = ProbeStep(build_model(), training_args, longest, precision)
        tokens, sized_by = agreed(largest_that_fits(probe, share, longest)), "the device's memory"
        del probe  # its model and optimizer: the run's own take their place
        clear_device_cache(garbage_collection=True)
    else:
        tokens = min(share, data_args.tokens_per_step // PAPER_GPUS)
        sized_by = "the paper's per-GPU share (not probed off CUDA)"
    logger.info(
        "micro-batch: %d tokens per side per device, sized by %s (up to %d: --tokens_per_step %d / %d processes)",
        tokens,
        sized_by,
        share,
        data_args.tokens_per_step,
        training_args.world_size,
    )
    return tokens, sized_by


def kept_size(training_args, overwrite: bool) -> int | None:
    """The per-device micro-batch of the checkpoint this launch resumes (--resume_from_checkpoint, or the newest
    complete one in --output_dir, as ``relaunch.plan_start`` chooses), from its batch plan; None when it starts
    afresh, or from a checkpoint written before batch plans were recorded."""
    resume = training_args.resume_from_checkpoint
    if resume is None or resume in NEWEST:  # not given: the newest of the run, as given "auto"
        found = [] if overwrite else complete_checkpoints(training_args.output_dir)
        checkpoint = found[-1] if found else None
    elif resume in NO_RESUME:
        return None
    else:
        checkpoint = Path(resume)
    if checkpoint is None or not (checkpoint / BATCH_PLAN).is_file():
        return None
    plan = json.loads((checkpoint / BATCH_PLAN).read_text())
    # the sampler's batch over all processes is what the run keeps (relaunch.check_resume refuses a share that
    # does not divide it)
    return plan["tokens_per_batch"] // training_args.world_size


def largest_that_fits(step: Callable[[int], None], share: int, longest: int) -> int:
    """The largest of ``share``, ``share`` // 2, // 3, ... tokens with which ``step`` runs without running out of
    memory: accelerate's ``find_executable_batch_size`` makes the tries, taking what it recognises as running out
    of memory (``should_reduce_batch_size``) as the sign to try the next; each candidate is a whole number of
    micro-batches a step, so that accumulation makes up the share exactly (to k tokens). Refused when not even a
    micro-batch of one pair of ``longest`` tokens fits."""
    micro_batches = 1

    def fewer_tokens() -> int:
        nonlocal micro_batches
        micro_batches += 1
        tokens = share // micro_batches
        return tokens if tokens >= longest else 0  # 0: accelerate gives up

    @find_executable_batch_size(starting_batch_size=share, reduce_batch_size_fn=fewer_tokens)
    def attempt(tokens: int) -> int:
        step(tokens)
        return tokens

    try:
        return attempt()
    except RuntimeError as error:
        if "No executable batch size found" not in str(error):
            raise
        raise UsageError(
            f"no micro-batch of at least {longest} tokens (one pair of the longest bucket) fits on this "
            "device: give --max_tokens_per_batch, or train a smaller model"
        ) from None


class ProbeStep:
    """One training step of ``model`` (the run's architecture, on the run's device) at a candidate number of
    tokens: a batch of the largest bucket shape (tokens // ``longest`` pairs of ``longest`` tokens on each side: the
    most a batch of the sampler holds, at the longest attention), forward and backward under the run's precision,
    then the optimizer's update. The run's optimizer (Trainer's choice from the arguments) has its state allocated
    first, as in every step after the first, and on several processes a gradient-sized reserve stands for DDP's
    gradient buckets. Eager: a compiled step (--torch_compile) needs less memory, not more. ``precision``: the run's
    autocast, by accelerate's name ("no", "bf16", "fp16")."""

    def __init__(self, model: torch.nn.Module, training_args, longest: int, precision: str):
        self.device, self.longest = training_args.device, longest
        self.autocast = AUTOCAST.get(precision)
        self.model = model.to(self.device).train()
        optimizer_class, kwargs = Trainer.get_optimizer_cls_and_kwargs(training_args, self.model)
        self.optimizer = optimizer_class(self.model.parameters(), **kwargs)
        for parameter in self.model.parameters():
            parameter.grad = torch.zeros_like(parameter)
        self.optimizer.step()  # allocates the state (Adam's two moments)
        self.optimizer.zero_grad(set_to_none=True)
        several = training_args.world_size > 1
        self.buckets = [torch.empty_like(p) for p in self.model.parameters()] if several else []

    def __call__(self, tokens: int) -> None:
        ids = torch.full((max(1, tokens // self.longest), self.longest), 5, device=self.device)
        try:
            with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
                loss = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
            loss.backward()
            self.optimizer.step()
        finally:
            self.optimizer.zero_grad(set_to_none=True)


def agreed(tokens: int) -> int:
    """The smallest of the processes' ``tokens``: data-parallel processes take the same micro-batch."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return tokens
    found = torch.tensor(tokens, device=f"cuda:{torch.cuda.current_device()}")
    torch.distributed.all_reduce(found, op=torch.distributed.ReduceOp.MIN)
    return int(found)
