"""The model card of a trained vanilla Transformer: built with huggingface_hub's ModelCard, ModelCardData and
EvalResult from the files a training run leaves (config.json, eval_results.json, training_recipe.json)."""

from .card import build_model_card, write_model_card

__all__ = ["build_model_card", "write_model_card"]
