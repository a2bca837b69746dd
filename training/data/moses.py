"""The text of ``--moses_lowercase_tokenize`` on the data (``vanilla_tools.text_form``, where the steps and their
fidelity to the Multi30k literature's files are described): ``datasets.map``'s function, cached by datasets."""

import sacremoses
from datasets import Dataset
from datasets.fingerprint import Hasher

from vanilla_tools.text_form import TextForm


class TextFormMap:
    """datasets.map's function: the ``source`` and ``target`` columns in ``form`` (each side in its language)."""

    def __init__(self, form: TextForm):
        self.form = form

    def fingerprint(self, data: Dataset) -> str:
        """The cache key of ``data`` so prepared: its fingerprint, the form, sacremoses' release and this code."""
        code = Hasher.hash(TextForm.prepare)
        return Hasher.hash((data._fingerprint, self.form, sacremoses.__version__, code))

    def __call__(self, batch: dict) -> dict:
        return {
            "source": [self.form.source(text) for text in batch["source"]],
            "target": [self.form.target(text) for text in batch["target"]],
        }
