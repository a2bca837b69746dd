"""Every private name of another library that the repository's code uses (vanilla-train and its floor:
``training``, ``vanilla_tools``; the model: ``modeling_vanilla``; the entry points: ``inference``; and
``experiments``, ``benchmarks``), in one registry: the library, why no public way serves, and the public alternative
where there is one (``public``). A private name may change in any release: ``CHECKED`` holds the releases of each
library the uses were checked on, and tests/test_training/test_trainer_hooks.py finds every use by parsing the code
(tests/private_uses.py), failing on one used and not listed here, on one listed and no longer used, on a library
release outside the range checked, and on an overridden method whose parameters a release changed
(docs/architecture.md). modeling_vanilla/'s files travel to the Hub and import only torch and transformers: they are
listed here, never import this.

The transformers names: Trainer's private methods overridden or called, Trainer's own state read or set, the
model's and the pipeline's hooks and the helpers transformers' own model files are written with, and names of its
modules that transformers does not export."""

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
    # the model (modeling_vanilla/): what transformers' own model files are written with, not exported at its top
    # level; the model cannot write them itself without leaving what transformers does for every model (attention
    # implementations, output capture, caches, loading)
    "ACT2FN": PrivateUse(
        "transformers",
        ("the FFN's activation by its config name (activation_function), and the names the config accepts"),
        ("torch.nn's activations, by a table of our own: the names would differ from every transformers model's"),
    ),
    "GenerateOutput": PrivateUse(
        "transformers",
        ("generate()'s return annotation: the union of generation's output classes, as GenerationMixin's own"),
        ("none: the top level exports neither the union nor its members"),
    ),
    "create_bidirectional_mask": PrivateUse(
        "transformers",
        (
            "the encoder's padding mask and the decoder's cross-attention mask (§3.2.3) in the form the attention "
            "implementation in use takes (sdpa, eager, flex, flash)"
        ),
        ("none: masks of our own would have to follow every implementation's form"),
    ),
    "create_causal_mask": PrivateUse(
        "transformers",
        ("the decoder's causal self-attention mask (§3.2.3), with the cache, in the implementation's form"),
        ("none, as for create_bidirectional_mask"),
    ),
    "create_sliding_window_causal_mask": PrivateUse(
        "transformers",
        ("the decoder's causal mask under --attention_window (config.sliding_window)"),
        ("none, as for create_bidirectional_mask"),
    ),
    "sliding_window_bidirectional_overlay": PrivateUse(
        "transformers",
        ("the encoder's window under --attention_window, added to its padding mask"),
        ("none, as for create_bidirectional_mask"),
    ),
    "BaseModelOutput": PrivateUse(
        "transformers",
        ("the encoder's output, whose fields generate() and the pipelines read by name"),
        ("none: transformers documents its model outputs under transformers.modeling_outputs only"),
    ),
    "BaseModelOutputWithPastAndCrossAttentions": PrivateUse(
        "transformers",
        ("the decoder's output, with its cache and attentions"),
        ("none, as for BaseModelOutput"),
    ),
    "Seq2SeqModelOutput": PrivateUse(
        "transformers",
        ("VanillaTransformerModel's output"),
        ("none, as for BaseModelOutput"),
    ),
    "Seq2SeqLMOutput": PrivateUse(
        "transformers",
        (
            "VanillaTransformerForSeq2Seq's output (the logits and loss generate() and Trainer read); compat.py "
            "finds by its fields the name this release gives the cache"
        ),
        ("none, as for BaseModelOutput"),
    ),
    "ALL_ATTENTION_FUNCTIONS": PrivateUse(
        "transformers",
        (
            "the attention implementation config._attn_implementation names (sdpa, flash, flex, or one a user "
            "registered), looked up for each call"
        ),
        (
            "AttentionInterface is exported, for registering an implementation; the registry models look them up "
            "in is this instance of it"
        ),
    ),
    "Unpack": PrivateUse(
        "transformers",
        ("the annotation of the **kwargs transformers passes to the layers (Unpack[TransformersKwargs])"),
        (
            "typing.Unpack from Python 3.11 (the floor is 3.10) or typing_extensions, which the model's files "
            "would need as a third import"
        ),
    ),
    "TransformersKwargs": PrivateUse(
        "transformers",
        ("the keyword arguments transformers passes through a model to its layers (output_attentions, ...)"),
        ("none: a typing aid, as in transformers' own models"),
    ),
    "can_return_tuple": PrivateUse(
        "transformers",
        ("gives forward's output as a tuple where return_dict=False asks"),
        ("none but checking return_dict in each forward"),
    ),
    "merge_with_config_defaults": PrivateUse(
        "transformers",
        ("fills the stacks' forward arguments left None (output_attentions, use_cache) from the config"),
        ("none but reading each from the config in each forward"),
    ),
    "OutputRecorder": PrivateUse(
        "transformers",
        ("names which module's output is the self- and the cross-attention weights capture_outputs collects"),
        ("none: transformers 5 collects the attentions and hidden states so"),
    ),
    "capture_outputs": PrivateUse(
        "transformers",
        ("collects the stacks' attentions and hidden states by hooks where output_attentions asks for them"),
        ("none but returning them from every layer, as transformers 4's models did"),
    ),
    "deprecate_kwarg": PrivateUse(
        "transformers",
        (
            "compat.py: forward takes the cache as past_key_values too where a release renamed it cache, with "
            "transformers' own FutureWarning"
        ),
        ("none but a wrapper of our own"),
    ),
    "_attn_implementation": PrivateUse(
        "transformers",
        (
            "the attention implementation a model was loaded with (attn_implementation=...), read by the attention "
            "layers and copied onto a model converted from Marian"
        ),
        ("none: PreTrainedConfig has no public attribute for it (its constructor takes attn_implementation)"),
    ),
    "_init_weights": PrivateUse(
        "transformers",
        ("overridden: tensor2tensor's initialisation, which post_init and from_pretrained apply to each module"),
        ("none: post_init applies it; transformers' models initialise so"),
    ),
    "_tied_weights_keys": PrivateUse(
        "transformers",
        (
            "the tied embeddings (§3.4: the shared source, target and output matrices), by target and source, "
            "which saving, loading and tie_weights read"
        ),
        ("none: each transformers model declares its ties so"),
    ),
    "_prepare_cache_for_generation": PrivateUse(
        "transformers",
        (
            "overridden: generate()'s encoder-decoder cache under --attention_window is remade full (cross-attention "
            "sees the whole source), where transformers would make it of sliding-window layers"
        ),
        ("past_key_values given to generate(): every caller (pipelines, Hub users) would have to build it"),
    ),
    "_sanitize_parameters": PrivateUse(
        "transformers",
        ("the translation pipeline (pipeline_vanilla.py) sorts a call's arguments into its steps"),
        ("none: transformers' documentation of a new pipeline names the methods it implements"),
    ),
    "_forward": PrivateUse(
        "transformers",
        ("the translation pipeline's generate() call"),
        ("none, as for _sanitize_parameters"),
    ),
    "_prepare_generate_kwargs": PrivateUse(
        "transformers",
        ("the pipeline's generate() arguments over the call's, as a direct generate() call gets them (5.20 on)"),
        ("none: the pipeline's generation_config holds transformers' defaults filled in"),
    ),
    "_prepare_generation_config": PrivateUse(
        "transformers",
        ("before 5.20: the model's own generation config so prepared, from which the pipeline's differs"),
        ("none, as for _prepare_generate_kwargs"),
    ),
    # the entry points (inference/)
    "_compile_all_devices": PrivateUse(
        "transformers",
        (
            "vanilla-bench's generate-static-compiled mode on a CPU: transformers compiles generate()'s step on "
            "CUDA only unless it is set"
        ),
        ("none: CompileConfig takes no public flag for it"),
    ),
    # benchmarks/
    "AcceleratedOptimizer": PrivateUse(
        "accelerate",
        (
            "benchmarks/host_time.py times accelerate's wrapper of the optimizer, as Trainer steps it, over an "
            "optimizer of one element per parameter (accelerate.optimizer is not exported at the top level)"
        ),
        ("none: Trainer's own wrapped optimizer holds the run's parameters, whose arithmetic it would time"),
    ),
}
