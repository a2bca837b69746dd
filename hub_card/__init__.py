"""The Hub side of a trained vanilla Transformer: its model card, built with huggingface_hub's ModelCard,
ModelCardData and EvalResult from the files a training run leaves (config.json, eval_results.json,
training_recipe.json), and `vanilla-push` (push.py)."""

from .card import build_model_card, write_model_card

__all__ = ["build_model_card", "write_model_card"]
