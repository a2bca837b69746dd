"""The Transformer of "Attention Is All You Need" as a Hugging Face model.

Importing this package registers the model with AutoConfig, AutoModel and AutoModelForSeq2SeqLM, and marks the
classes for ``save_pretrained`` to write their code next to the weights (``trust_remote_code`` loading).
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration_vanilla import VanillaTransformerConfig
from .convert_marian import from_marian, to_marian
from .modeling_vanilla import (
    MultiHeadAttention,
    VanillaTransformerForSeq2Seq,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
)

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VanillaTransformerConfig, VanillaTransformerForSeq2Seq, exist_ok=True)
VanillaTransformerConfig.register_for_auto_class()
VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForSeq2Seq.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = [
    "MultiHeadAttention",
    "VanillaTransformerConfig",
    "VanillaTransformerForSeq2Seq",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
    "from_marian",
    "to_marian",
]
