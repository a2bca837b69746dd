"""Serving with ONNX Runtime: `vanilla-export-onnx MODEL_DIR OUT_DIR`, and the engine behind
`vanilla-translate --engine onnx`.

The graphs (``modeling_vanilla.convert_onnx``): the encoder, which also projects every layer's encoder-decoder keys
and values once, and one decoder step with its self-attention cache. The search runs here, over the decoder graph
(``inference.search``: greedy and beam search deciding as ``generate()`` does), so float32 ONNX Runtime gives the
tokens ``generate()`` gives. An export kept in MODEL_DIR/onnx is remade when the weights change.
"""

import argparse
import os
import shutil
from pathlib import Path

import numpy as np
import torch

from modeling_vanilla.convert_onnx import DECODER, ENCODER, cache_names, cross_names, export_onnx, position_limit
from modeling_vanilla.export_checks import check_convertible, check_export_folder
from vanilla_tools.cli import UsageError, console_script, load_model, require
from vanilla_tools.decoding import Decoding
from vanilla_tools.exports import cached_export, export_write_guard

from .engine import BatchTranslation, batch_translation, output_lengths
from .search import Hypotheses, search


def export(model_dir: str | Path, output_dir: str | Path, force: bool = False) -> Path:
    """The model saved in ``model_dir`` as ``encoder.onnx`` and ``decoder.onnx`` in ``output_dir`` (replaced if it
    exists and ``force``)."""
    check_export_folder(model_dir, output_dir, force)
    model = load_model(str(model_dir))
    check_convertible(model.config, model_dir)
    shutil.rmtree(output_dir, ignore_errors=True)  # (checked: no model in it) no file of another export stays
    return export_onnx(model, output_dir)


def cached_onnx(model_dir: str | Path) -> Path:
    """MODEL_DIR/onnx, exported now if it is missing or was made from other weights."""

    def make(source: str | Path, folder: Path) -> Path:
        return export(source, folder, force=True)

    return cached_export(model_dir, Path(model_dir) / "onnx", "onnx-float32", make)


def import_onnxruntime():
    return require("onnxruntime", "ecosystem", "the onnx engine")


class OnnxEngine:
    """Translate batches of sentences with ONNX Runtime, searching as ``decoding`` says (the same ``Decoding`` the
    other engines take). One session per graph, with one thread per core."""

    def __init__(self, onnx_dir: str | Path, tokenizer, decoding: Decoding, config, threads: int | None = None):
        onnxruntime = import_onnxruntime()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        # ONNX Runtime's idle threads spin between steps and took the cores from the search's torch operations
        # (64 sentences, greedy: 1.37x slower with spinning)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CPUExecutionProvider"]
        self.encoder = onnxruntime.InferenceSession(str(Path(onnx_dir) / ENCODER), options, providers=providers)
        self.decoder = onnxruntime.InferenceSession(str(Path(onnx_dir) / DECODER), options, providers=providers)
        self.tokenizer, self.decoding, self.config = tokenizer, decoding, config
        layers = config.decoder_layers
        self.cross, self.past = cross_names(layers), cache_names("past", layers)
        self.present = cache_names("present", layers)

    def _step_function(self, memory: np.ndarray, mask: np.ndarray, cross: list[np.ndarray]):
        """The search's ``Step``: the decoder graph, its self-attention cache kept here between calls."""
        heads = self.config.num_attention_heads
        cache = [np.zeros((memory.shape[0], heads, 0, cross[0].shape[-1]), dtype=np.float32)] * len(self.past)
        fixed = {"encoder_attention_mask": mask, "encoder_hidden_states": memory}
        fixed.update(zip(self.cross, cross, strict=True))

        def step(tokens: torch.Tensor, origin: torch.Tensor | None) -> torch.Tensor:
            nonlocal cache
            if origin is not None:  # each hypothesis continues the one it came from
                order = origin.numpy()
                cache = [layer[order] for layer in cache]
            feeds = {"decoder_input_ids": tokens.numpy(), **fixed, **dict(zip(self.past, cache, strict=True))}
            log_probs, *cache = self.decoder.run(["log_probs", *self.present], feeds)
            return torch.from_numpy(log_probs)

        return step

    def __call__(self, sentences: list[str]) -> BatchTranslation:
        batch = self.tokenizer(sentences, return_tensors="np", padding=True)
        found = self.search(batch["input_ids"], batch["attention_mask"])
        ended, lengths = output_lengths(found.sequences, self.config.eos_token_id)
        source_lengths = batch["attention_mask"].sum(axis=1).tolist()
        return batch_translation(
            self.tokenizer, found.sequences, ended, lengths, source_lengths, self.decoding, found.scores
        )

    def search(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Hypotheses:
        """The encoder graph once, then ``decoding``'s search over the decoder graph: (B, S) -> the n best of each."""
        ids, mask = input_ids.astype(np.int64), attention_mask.astype(np.int64)
        max_new_tokens = self.decoding.max_new_tokens_for(ids.shape[1])
        limit = position_limit(self.config)
        if max(ids.shape[1], max_new_tokens + 1) > limit:
            raise UsageError(
                f"the ONNX export holds {limit} positions: a source of {ids.shape[1]} tokens (and its "
                f"output of up to {max_new_tokens}) needs more; use --engine generate"
            )
        memory, *cross = self.encoder.run(None, {"input_ids": ids, "attention_mask": mask})
        beams = self.decoding.num_beams
        if beams > 1:  # every hypothesis of an input reads the same encoder output: (B, ...) -> (B * K, ...)
            memory, mask, *cross = (np.repeat(a, beams, axis=0) for a in (memory, mask, *cross))
        config = self.config
        return search(
            self._step_function(memory, mask, cross),
            ids.shape[0],
            self.decoding,
            max_new_tokens,
            config.decoder_start_token_id,
            config.eos_token_id,
            config.pad_token_id,
        )


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vanilla-export-onnx", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model_dir", help="a saved model directory")
    parser.add_argument("output_dir", help="where to write encoder.onnx and decoder.onnx")
    parser.add_argument("--force", action="store_true", help="replace output_dir if it exists")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    # before the guard, which removes output_dir whole if a write fails
    check_export_folder(args.model_dir, args.output_dir, args.force)
    with export_write_guard(Path(args.output_dir), "onnx-float32"):
        output = export(args.model_dir, args.output_dir, args.force)
    print(f"exported {args.model_dir} to {output / ENCODER} and {output / DECODER}")


main = console_script(run)

if __name__ == "__main__":
    main()
