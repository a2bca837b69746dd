"""The translation pipeline that transformers 5 removed, shipped with the model: ``pipeline("translation",
model=DIR, trust_remote_code=True)``.

transformers 5 raises ``KeyError: The task translation has been removed`` for its own name, but it looks up the tasks
a checkpoint lists in its config's ``custom_pipelines`` first, so a model saved by this package (``save_pretrained``
writes that entry and this file beside the weights) answers to the old call again, batching and generation
parameters included. Adapted from transformers 4.x's ``Text2TextGenerationPipeline`` / ``TranslationPipeline``: the
same inputs (a string or a list of them) and outputs (``[{"translation_text": ...}]``).
"""

import copy

import torch
from transformers import Pipeline

TASK = "translation"
# config.json's custom_pipelines entry (the impl is this module's file, saved beside modeling_vanilla.py)
CUSTOM_PIPELINES = {
    TASK: {
        "impl": f"{__name__.rsplit('.', 1)[-1]}.TranslationPipeline",
        "pt": ["AutoModelForSeq2SeqLM"],
        "tf": [],
        "type": "text",
        "default": {},
    }
}


class TranslationPipeline(Pipeline):
    """Translate strings with ``model.generate()``, searching as the model's generation config says (§6.1: beam 4,
    alpha 0.6, up to input + 50 tokens) unless a call or the pipeline passes ``generate()`` parameters
    (``num_beams``, ``max_length``, ``max_new_tokens``, ``num_return_sequences``, ...).

    ``pipe("A dog.")`` -> ``[{"translation_text": "Ein Hund."}]``; a list of strings -> one such dict per string
    (a list of dicts per string with ``num_return_sequences`` > 1); ``batch_size=B`` pads B strings into one
    ``generate()`` call; ``return_tensors=True`` gives ``translation_token_ids`` instead of text.
    """

    _pipeline_calls_generate = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(
        self, truncation=None, return_tensors=None, clean_up_tokenization_spaces=None, **generate_kwargs
    ):
        preprocess = {} if truncation is None else {"truncation": truncation}
        postprocess = {}
        if return_tensors is not None:
            postprocess["return_tensors"] = return_tensors
        if clean_up_tokenization_spaces is not None:
            postprocess["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess, generate_kwargs, postprocess

    def __call__(self, inputs: str | list[str], **kwargs) -> list[dict] | list[list[dict]]:
        result = super().__call__(inputs, **kwargs)
        if isinstance(inputs, list) and all(len(one) == 1 for one in result):
            return [one[0] for one in result]  # as transformers 4: one dict per string
        return result

    def preprocess(self, text: str, truncation: bool = False) -> dict[str, torch.Tensor]:
        if not isinstance(text, str):
            raise TypeError(f"the translation pipeline translates strings, got {type(text).__name__}")
        return self.tokenizer(text, truncation=truncation, return_tensors="pt")  # (1, L)

    def _forward(self, model_inputs: dict[str, torch.Tensor], **generate_kwargs) -> dict[str, torch.Tensor]:
        batch = model_inputs["input_ids"].shape[0]
        output_ids = self.model.generate(**model_inputs, **self.generate_kwargs(generate_kwargs))
        return {"output_ids": output_ids.reshape(batch, -1, output_ids.shape[-1])}  # (B * K, T) -> (B, K, T)

    def generate_kwargs(self, generate_kwargs: dict) -> dict:
        """The ``generate()`` parameters of this call on top of those the pipeline was made with, as a direct call
        would pass them: transformers' ``_prepare_generate_kwargs`` does that since 5.20. Before, the pipeline holds a
        ``generation_config`` with transformers' defaults filled in (``max_length=20``, which would cut §6.1's input
        length + 50): only what differs from the model's own config so prepared was given to the pipeline."""
        if hasattr(self, "_prepare_generate_kwargs"):
            return self._prepare_generate_kwargs(generate_kwargs)
        prepared = self.model._prepare_generation_config(copy.deepcopy(self.model.generation_config))[0].to_dict()
        given = {key: value for key, value in self.generation_config.to_dict().items() if prepared.get(key) != value}
        return {**given, **generate_kwargs}

    def postprocess(
        self,
        model_outputs: dict[str, torch.Tensor],
        return_tensors: bool = False,
        clean_up_tokenization_spaces: bool = False,
    ) -> list[dict]:
        if return_tensors:
            return [{"translation_token_ids": ids} for ids in model_outputs["output_ids"][0]]
        texts = self.tokenizer.batch_decode(
            model_outputs["output_ids"][0],
            skip_special_tokens=True,
            clean_up_tokenization_spaces=clean_up_tokenization_spaces,
        )
        return [{"translation_text": text.strip()} for text in texts]
