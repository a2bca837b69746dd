"""``--push_to_hub`` through vanilla-push's upload (hub_card.push) in place of Trainer's own, which uploads the
whole output directory: the run's lock and ``training_args.bin`` (a pickle of the arguments, ``--hub_token`` among
them) reached the Hub with the first checkpoint, and stayed there."""

import copy
import logging
from pathlib import Path

from huggingface_hub.errors import HfHubHTTPError
from transformers import TrainerCallback, TrainingArguments
from transformers.trainer_utils import HubStrategy

from hub_card.push import HubRepo
from vanilla_tools.cli import UsageError

from .checkpoints import checkpoint_folder

logger = logging.getLogger(__name__)

# What of a checkpoint is the model (its weights, config, generation config, code and tokenizer): its optimizer,
# RNG and data states, Trainer's state and the run's arguments stay in the output directory.
CHECKPOINT_MODEL = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "*.py",
    "tokenizer*.json",
    "special_tokens_map.json",
]


class HubPush(TrainerCallback):
    """The run's Hub repository (``--hub_model_id``, else the output directory's name; ``--hub_private_repo``,
    ``--hub_revision``, ``--hub_token``), created before training so that a wrong id or token fails before the first
    step, not after the last. With ``--hub_strategy every_save`` (Trainer's default) each checkpoint's model and
    tokenizer go to it as they are saved (``on_save``, after ``CompleteCheckpoints``), and ``push_final`` uploads
    the final model with its card and results when the run ends. ``end`` pushes the final model only.
    ``checkpoint`` and ``all_checkpoints`` (which push the state to resume from) are refused: a run resumes from
    its output directory (``relaunch``)."""

    def __init__(self, args: TrainingArguments):
        if args.hub_strategy in (HubStrategy.CHECKPOINT, HubStrategy.ALL_CHECKPOINTS):
            raise UsageError(
                f"--hub_strategy {args.hub_strategy.value}: vanilla-train pushes models, not the state "
                "to resume from (a run resumes from its --output_dir); use every_save or end"
            )
        self.repo = HubRepo(
            args.hub_model_id or Path(args.output_dir).absolute().name,
            bool(args.hub_private_repo),
            args.hub_revision,
            args.hub_token,
        )
        self.every_save = args.hub_strategy == HubStrategy.EVERY_SAVE
        if args.process_index == 0:  # the one process that pushes
            self.repo = self.repo.open()

    @staticmethod
    def trainer_args(args: TrainingArguments) -> TrainingArguments:
        """``args`` for the Trainer, with its own pushes off (a copy: the run's record keeps ``--push_to_hub``)."""
        own = copy.copy(args)
        own.push_to_hub = False
        return own

    def on_save(self, args, state, control, **kwargs):
        if not (self.every_save and state.is_world_process_zero):
            return
        _, folder = checkpoint_folder(args, state.global_step)
        try:
            self.repo.upload(
                folder, f"Training in progress, step {state.global_step}", card=False, only=CHECKPOINT_MODEL
            )
        except (UsageError, HfHubHTTPError, OSError) as error:  # training goes on; the final push tries again
            logger.warning("could not push %s to the Hub (%s): training goes on", folder.name, error)

    def push_final(self, args: TrainingArguments) -> None:
        """The final model in ``args.output_dir``, its tokenizer, results and card (vanilla-push's files)."""
        if args.process_index == 0:
            self.repo.upload(args.output_dir, "vanilla-train: final model, tokenizer, results and card")
