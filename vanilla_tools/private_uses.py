"""Every private name of another library that vanilla-train and its floor (``training``, ``vanilla_tools``) use, in
one registry: the library, why no public way serves, and the public alternative where there is one (``public``). A
private name may change in any release: ``CHECKED`` holds the releases of each library the uses were checked on, and
tests/test_training/test_trainer_hooks.py finds every use by parsing the code (tests/private_uses.py), failing on one
used and not listed here, on one listed and no longer used, on a library release outside the range checked, and on
an overridden method whose parameters a release changed (docs/architecture.md).

The transformers names: Trainer's private methods overridden or called, Trainer's own state read or set, and names
of its modules that transformers does not export."""

from dataclasses import dataclass

# the releases each library's uses were checked on, oldest and newest (transformers': modeling_vanilla/compat.py's
# TESTED_RELEASES; the others: pyproject's floor and the release installed when the registry was written; argparse:
# Python's)
CHECKED = {
    "transformers": ("5.17.0", "5.25.0"),
    "accelerate": ("1.0.0", "1.16.0"),
    "datasets": ("3.0.0", "5.2.0"),
    "torch": ("2.10.0", "2.13.0"),
    "argparse": ("3.10", "3.13"),
}


@dataclass(frozen=True)
class PrivateUse:
    library: str
    why: str
    public: str | None = None  # the public alternative, if any, and why it does not serve


PRIVATE_USES = {
    "_get_train_sampler": PrivateUse(
        "transformers",
        (
            "overridden: Trainer's _get_dataloader hands the token sampler, a BatchRebalanceSampler, to the "
            "DataLoader as its batch sampler and keeps Accelerate from sharding it again; get_train_dataloader "
            "would repeat that work"
        ),
        ("get_train_dataloader (it would repeat Trainer's _get_dataloader)"),
    ),
    "_save_checkpoint": PrivateUse(
        "transformers",
        (
            "overridden, so that a failed write removes the unmarked folder and keeps the previous complete "
            "checkpoint (no callback runs before or around Trainer's writes); called by save_checkpoint: no "
            "public method writes a resumable one"
        ),
        ("save_model writes no resumable checkpoint; callbacks run only after the write"),
    ),
    "gather_function": PrivateUse(
        "transformers",
        (
            "set by evaluation_loop to accelerator.gather_for_metrics: Seq2SeqTrainer's evaluate and predict set "
            "accelerator.gather, which keeps the pairs the ranks' last batches repeat (BLEU failed on 2 "
            "processes)"
        ),
    ),
    "callback_handler": PrivateUse(
        "transformers",
        ("save_checkpoint runs the on_save callbacks after Trainer's save, as Trainer's loop does"),
        ("add_callback adds, but no public method runs an event's callbacks"),
    ),
    "control": PrivateUse(
        "transformers",
        ("save_checkpoint keeps what the on_save callbacks return, as Trainer's loop does"),
    ),
    "label_smoother": PrivateUse(
        "transformers",
        (
            "set to None: the model computes §5.4's label-smoothed loss in one fused cross_entropy, where "
            "Trainer's would take the log-probabilities of the whole vocabulary a second time"
        ),
    ),
    "lr_scheduler": PrivateUse(
        "transformers",
        ("create_scheduler leaves §5.3's schedule where Trainer's loop steps it and its checkpoints save it"),
        ("create_scheduler is public: the override sets the attribute Trainer's loop steps"),
    ),
    "state": PrivateUse(
        "transformers",
        ("train() takes the TrainerState of a checkpoint of the run's last step as the trained run's"),
    ),
    "accelerator": PrivateUse(
        "transformers",
        (
            "Trainer's Accelerate object, for what Trainer has no public method for: gather_for_metrics, "
            "unwrap_model (the model averaged, the one its generation config is saved into) and the FSDP plugin's"
            " state dict type"
        ),
    ),
    "is_fsdp_enabled": PrivateUse(
        "transformers",
        (
            "whether Accelerate shards the model (the tied embedding's loading, the state dict check, the model "
            "averaged); Trainer has no public flag"
        ),
    ),
    "BatchRebalanceSampler": PrivateUse(
        "transformers",
        (
            "TokenBatchSampler derives from it only because Trainer hands a sampler of this class (an isinstance "
            "check) to the DataLoader as its batch sampler without sharding it again; none of its methods is used"
        ),
    ),
    "TRAINER_STATE_NAME": PrivateUse(
        "transformers",
        ("the file of a checkpoint's TrainerState, whose step a relaunch and the record read"),
    ),
    "TRAINING_ARGS_NAME": PrivateUse(
        "transformers",
        (
            "the file of a checkpoint's TrainingArguments, written again by CompleteCheckpoints with the run's "
            "save_total_limit (Trainer wrote its own arguments, which rotate nothing: "
            "checkpoints.trainer_arguments)"
        ),
    ),
    "TrainOutput": PrivateUse(
        "transformers",
        ("Trainer.train()'s result: made for a run with nothing left to train, and with a launch's metrics"),
    ),
    "HubStrategy": PrivateUse(
        "transformers",
        ("--hub_strategy's values, which HubPush acts on in Trainer's stead"),
    ),
    "SAFE_WEIGHTS_NAME": PrivateUse(
        "transformers",
        ("the file of the final model's weights, removed when writing it fails"),
    ),
    "clear_device_cache": PrivateUse(
        "accelerate",
        (
            "accelerate's own release of device memory between find_executable_batch_size's tries "
            "(accelerate.utils does not export it): micro_batch frees the probe's model and optimizer with it "
            "before the run's are built"
        ),
        ("torch.cuda.empty_cache after gc.collect, which accelerate's does on every device kind"),
    ),
    "_actions": PrivateUse(
        "argparse",
        (
            "HfArgumentParser's (argparse's) flags, whose destinations a preset's fields are checked against: no "
            "public list of them"
        ),
    ),
    "_fingerprint": PrivateUse(
        "datasets",
        (
            "the content hash of a Dataset (the identity datasets caches its transforms under): the cache keys of"
            " the learned tokenizer and of --moses_lowercase_tokenize's text are derived from it, so a changed "
            "corpus is a new key"
        ),
        (
            "none: datasets exposes no public hash of a Dataset's content (Hasher.hash of the whole Dataset reads"
            " its every row)"
        ),
    ),
    "_generate_tables": PrivateUse(
        "datasets",
        (
            "ParallelText (an ArrowBasedBuilder) writes the pairs' Arrow tables here, and its code is hashed into"
            " the builder's cache key"
        ),
        (
            "none: datasets' documentation names _info, _split_generators and _generate_tables as the methods a "
            "builder implements"
        ),
    ),
    "_info": PrivateUse(
        "datasets",
        ("ParallelText's features (source, target), the method a builder implements"),
    ),
    "_split_generators": PrivateUse(
        "datasets",
        ("ParallelText's one split, the method a builder implements"),
    ),
    "_is_avx512_bf16_supported": PrivateUse(
        "torch",
        (
            "whether the CPU multiplies bf16 in hardware (vanilla_tools.hardware.cpu_bf16): the default "
            "precision, and the refusal of an emulated bf16 at 1 GFLOP/s"
        ),
        ("none: torch.backends.cpu.get_cpu_capability names the vector ISA (AVX512), not its BF16 extension"),
    ),
    "_is_amx_tile_supported": PrivateUse(
        "torch",
        ("whether the CPU has AMX tiles, the other way to bf16 in hardware (cpu_bf16)"),
        ("none, as for AVX512-BF16"),
    ),
    "_inductor": PrivateUse(
        "torch",
        (
            "inductor's settings (fallback_random, the CUDA graph warning limit), its table of what each compile "
            "mode sets, and its C++ compiler check (compiled.py)"
        ),
        ("torch.compile(options=...) takes the settings per call, but Trainer makes the torch.compile call"),
    ),
    "_dynamo": PrivateUse(
        "torch",
        ("maybe_mark_dynamic on a batch's tensors, and dynamo's counters and timers of a compilation (compiled.py)"),
        (
            "torch._dynamo.mark_dynamic is documented (torch.compiler's docs) under this module; torch.compiler "
            "has no counters"
        ),
    ),
    "_functorch": PrivateUse(
        "torch",
        ("AOTAutograd's cache switch for custom autograd.Functions (configure_inductor)"),
        ("none (pytorch/pytorch#149751 leaves it off by default)"),
    ),
}
