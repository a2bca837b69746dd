"""What a user's mistake or a damaged file ends in: for each case, the exact outcome.

Two tables. ``ERRORS``: calls into the model, config, loading, data, training and averaging code, each raising one
exception type with a message that names the argument, the value or the file. ``CLI``: the console scripts, each
ending with an exit status and one line on stderr (no traceback). ``OUTCOMES`` holds the inputs that are accepted
and must give the right result. docs/reliability.md counts them.
"""

import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import datasets
import huggingface_hub
import pytest
import torch
from helpers import PAD, VOCAB, padded_batch, tiny_config, tiny_model
from safetensors.torch import load_file, save_file
from training_helpers import write_corpus
from transformers import BertConfig, MarianConfig

from hub_card import push
from inference import attention, bench, ct2, onnx_runtime, translate
from inference.engine import GenerateEngine
from modeling_vanilla import MultiHeadAttention, VanillaTransformerConfig, VanillaTransformerForSeq2Seq
from modeling_vanilla.checks import local_model_dir
from modeling_vanilla.modeling_vanilla import VanillaTransformerEncoder
from training import train as train_cli
from training.arguments import parse_args
from training.data.bpe_dropout import BPEDropoutPairs
from training.data.corpus import DataArguments, load_parallel_data, text_form
from training.run import plot_curve
from training.run.checkpoints import COMPLETE_MARKER as MARKER
from training.run.checkpoints import resolve_checkpoint
from training.run.stopping import TimeBudget
from training.schedules import NoamSchedule
from training.step import average
from training.step.average import average_checkpoints, average_state_dict, last_checkpoints
from vanilla_tools.cli import load_tokenizer
from vanilla_tools.decoding import Decoding


@dataclass
class Kit:
    """What the cases work on, made once: a saved model with its tokenizer, a corpus, a run with checkpoints."""

    model_dir: Path
    corpus: dict
    run_dir: Path
    scratch: Path

    def copy_model(self, name: str) -> Path:
        return Path(shutil.copytree(self.model_dir, self.scratch / name))

    def copy_run(self, name: str) -> Path:
        return Path(shutil.copytree(self.run_dir, self.scratch / name))

    def text(self, name: str, content: bytes | str) -> str:
        path = self.scratch / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return str(path)


@pytest.fixture(scope="module")
def kit(tokenizer, trained_run, tmp_path_factory) -> Kit:
    scratch = tmp_path_factory.mktemp("bad-inputs")
    model_dir = scratch / "model"
    torch.manual_seed(0)
    model = VanillaTransformerForSeq2Seq(tiny_config(vocab_size=len(tokenizer))).eval()
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return Kit(model_dir, write_corpus(scratch / "corpus", pairs=30), trained_run["output"], scratch)


def model_call(**inputs):
    """The tiny model's forward with a padded batch, ``inputs`` replacing or adding arguments."""
    ids, mask = padded_batch()
    return tiny_model()(**{"input_ids": ids, "attention_mask": mask, "decoder_input_ids": ids[:, :4], **inputs})


def generate(**inputs):
    ids, mask = padded_batch()
    return tiny_model().generate(**{"input_ids": ids, "attention_mask": mask, "max_new_tokens": 3, **inputs})


def damaged_weights(kit: Kit, name: str, damage) -> Path:
    folder = kit.copy_model(name)
    damage(folder / "model.safetensors")
    return folder


def halve(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def html_page(path: Path) -> None:
    path.write_bytes(b"<html>not found</html>")  # what a failed download can leave behind


def flip_payload(path: Path) -> None:
    """Overwrite every 7th byte of the tensor data (the header stays valid) with 0xFF: NaN-producing garbage."""
    data = bytearray(path.read_bytes())
    header = struct.unpack("<Q", data[:8])[0]
    for i in range(8 + header, len(data), 7):
        data[i] = 0xFF
    path.write_bytes(bytes(data))


def without_shared_embedding(kit: Kit) -> Path:
    folder = kit.copy_model("no-shared")
    weights = load_file(folder / "model.safetensors")
    weights.pop("model.shared.weight")
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def data(kit: Kit, train: list[str], **fields) -> DataArguments:
    return DataArguments(dataset="files", train_files=train, **fields)


def read_data(args: DataArguments) -> datasets.DatasetDict:
    """The splits of ``args`` in the text form they ask for, as a tool without a run reads them."""
    return load_parallel_data(args, text_form(args))


def two_corpora(kit: Kit, output: str, *second: str) -> list[str]:
    """vanilla-train's arguments for the kit's corpus and a ``second`` --train_files group, into ``output``."""
    return [
        *("--dataset", "files", "--train_files", *kit.corpus["train"], "--train_files", *second),
        *("--output_dir", str(kit.scratch / output)),
    ]


def damaged_run(kit: Kit, name: str, damage) -> str:
    """A copy of the trained run whose newest checkpoint (checkpoint-6) ``damage`` changed."""
    run = kit.copy_run(name)
    damage(run / "checkpoint-6")
    return str(run)


def checkpoint_without_a_tensor(kit: Kit) -> list[Path]:
    run = kit.copy_run("partial-tensors")
    path = run / "checkpoint-4" / "model.safetensors"
    weights = load_file(path)
    weights.pop("model.encoder.layers.0.ffn.fc1.bias")
    save_file(weights, str(path), metadata={"format": "pt"})
    return last_checkpoints(run, 2)


ids, mask = padded_batch()
ERRORS = [
    # ---- model API: ids -----------------------------------------------------------------------------------------
    (
        "float input_ids",
        lambda k: model_call(input_ids=ids.float()),
        ValueError,
        r"`input_ids` must hold integer token ids, got dtype torch.float32",
    ),
    ("bool input_ids", lambda k: model_call(input_ids=ids > 5), ValueError, r"`input_ids` must hold integer"),
    (
        "1-D input_ids",
        lambda k: model_call(input_ids=ids[0], attention_mask=None),
        ValueError,
        r"`input_ids` must be a non-empty \(batch, length\) tensor, got shape \(7,\)",
    ),
    (
        "empty batch",
        lambda k: model_call(input_ids=ids[:0], attention_mask=None),
        ValueError,
        r"non-empty .* got shape \(0, 7\)",
    ),
    (
        "id beyond the vocabulary",
        lambda k: model_call(input_ids=ids.index_fill(1, torch.tensor([2]), VOCAB + 5)),
        ValueError,
        rf"`input_ids` holds token id {VOCAB + 5}, outside \[0, vocab_size={VOCAB}\)",
    ),
    (
        "negative id",
        lambda k: model_call(input_ids=ids.index_fill(1, torch.tensor([0]), -3)),
        ValueError,
        r"`input_ids` holds token id -3",
    ),
    (
        "decoder id beyond the vocabulary",
        lambda k: model_call(decoder_input_ids=torch.full((3, 2), 999)),
        ValueError,
        r"`decoder_input_ids` holds token id 999",
    ),
    (
        "float decoder ids",
        lambda k: model_call(decoder_input_ids=ids[:, :4].double()),
        ValueError,
        r"`decoder_input_ids` must hold integer token ids",
    ),
    (
        "label beyond the vocabulary",
        lambda k: model_call(decoder_input_ids=None, labels=torch.full((3, 4), VOCAB)),
        ValueError,
        rf"`labels` holds token id {VOCAB}, outside \[0, vocab_size={VOCAB}\) or -100",
    ),
    (
        "negative label other than -100",
        lambda k: model_call(decoder_input_ids=None, labels=torch.full((3, 4), -1)),
        ValueError,
        r"`labels` holds token id -1",
    ),
    (
        "label in training mode",
        lambda k: tiny_model().train()(input_ids=ids, labels=torch.full((3, 4), VOCAB)),
        ValueError,
        r"`labels` holds token id 61",
    ),
    (
        "no decoder input",
        lambda k: model_call(decoder_input_ids=None),
        ValueError,
        r"Give `decoder_input_ids` \(or `labels`",
    ),
    (
        "ids and embeddings both",
        lambda k: model_call(inputs_embeds=torch.zeros(3, 7, 32)),
        ValueError,
        r"Give exactly one of `input_ids` and `inputs_embeds`",
    ),
    (
        "neither ids nor embeddings",
        lambda k: model_call(input_ids=None, attention_mask=None),
        ValueError,
        r"Give exactly one of `input_ids` and `inputs_embeds`",
    ),
    # ---- model API: masks ---------------------------------------------------------------------------------------
    (
        "mask of another shape",
        lambda k: model_call(attention_mask=mask[:, :6]),
        ValueError,
        r"`attention_mask` has shape \(3, 6\) but must be \(3, 7\), the shape of the `input_ids`",
    ),
    (
        "additive mask",
        lambda k: model_call(attention_mask=torch.zeros(3, 7).masked_fill(mask == 0, float("-inf"))),
        ValueError,
        r"`attention_mask` must hold 1 \(attend\) and 0 \(padding\), found -inf: an additive mask",
    ),
    ("mask with a 2", lambda k: model_call(attention_mask=mask * 2), ValueError, r"must hold 1 .* found 2"),
    (
        "decoder mask of another length",
        lambda k: model_call(decoder_attention_mask=mask),
        ValueError,
        r"`decoder_attention_mask` has shape \(3, 7\) but must be \(3, 4\), the shape of the 0 cached and 4 new",
    ),
    (
        "additive decoder mask",
        lambda k: model_call(decoder_attention_mask=torch.full((3, 4), float("-inf"))),
        ValueError,
        r"`decoder_attention_mask` must hold 1",
    ),
    # ---- model API: embeddings and attention ---------------------------------------------------------------------
    (
        "embeddings of the wrong width",
        lambda k: model_call(input_ids=None, inputs_embeds=torch.zeros(3, 7, 16)),
        ValueError,
        r"`inputs_embeds` must be \(batch, length, d_model=32\), got shape \(3, 7, 16\)",
    ),
    (
        "NaN embeddings",
        lambda k: model_call(input_ids=None, inputs_embeds=torch.full((3, 7, 32), float("nan"))),
        ValueError,
        r"`inputs_embeds` holds NaN or infinite values",
    ),
    (
        "integer embeddings",
        lambda k: model_call(input_ids=None, inputs_embeds=torch.zeros(3, 7, 32, dtype=torch.long)),
        ValueError,
        r"`inputs_embeds` must be a floating-point tensor",
    ),
    (
        "decoder embeddings of the wrong width",
        lambda k: model_call(decoder_input_ids=None, decoder_inputs_embeds=torch.zeros(3, 4, 8)),
        ValueError,
        r"`decoder_inputs_embeds` must be \(batch, length, d_model=32\)",
    ),
    (
        "attention key of the wrong width",
        lambda k: MultiHeadAttention(32, 4)(torch.zeros(2, 5, 32), torch.zeros(2, 6, 16)),
        ValueError,
        r"`key` has width 16, but this attention expects 32",
    ),
    (
        "attention query of the wrong width",
        lambda k: MultiHeadAttention(32, 4)(torch.zeros(2, 5, 31)),
        ValueError,
        r"`query` has width 31, but this attention expects 32",
    ),
    (
        "keys and values of different lengths",
        lambda k: MultiHeadAttention(32, 4)(torch.zeros(2, 5, 32), torch.zeros(2, 6, 32), torch.zeros(2, 7, 32)),
        ValueError,
        r"`key` \(2, 6, 32\) and `value` \(2, 7, 32\) must have the same positions",
    ),
    (
        "heads that do not divide the width",
        lambda k: MultiHeadAttention(30, 4),
        ValueError,
        r"embed_dim \(30\) must be a positive multiple of num_heads \(4\)",
    ),
    (
        "decoder without the encoder output",
        lambda k: tiny_model().model.decoder(input_ids=ids),
        ValueError,
        r"needs `encoder_hidden_states`",
    ),
    (
        "learned positions beyond their table",
        lambda k: tiny_model(position_embedding_type="learned")(
            input_ids=torch.ones(1, 17, dtype=torch.long), decoder_input_ids=ids[:1]
        ),
        ValueError,
        r"position 16 is beyond max_position_embeddings=16",
    ),
    (
        "logits skipped without labels",
        lambda k: model_call(skip_logits=True),
        ValueError,
        r"skip_logits=True returns only the loss, which needs labels",
    ),
    # ---- generate() ---------------------------------------------------------------------------------------------
    (
        "generate with an id beyond the vocabulary",
        lambda k: generate(input_ids=ids.clamp(max=VOCAB) + VOCAB),
        ValueError,
        r"`input_ids` holds token id",
    ),
    (
        "generate with an additive mask",
        lambda k: generate(attention_mask=(1 - mask) * -1e9),
        ValueError,
        r"an additive mask",
    ),
    (
        "generate with an empty batch",
        lambda k: generate(input_ids=ids[:0], attention_mask=None),
        ValueError,
        r"non-empty",
    ),
    (
        "generate with a decoder mask of another length",
        lambda k: generate(decoder_input_ids=torch.zeros(3, 2, dtype=torch.long), decoder_attention_mask=mask),
        ValueError,
        r"`decoder_attention_mask` has shape \(3, 7\) but must be \(3, 2\)",
    ),
    # ---- config -------------------------------------------------------------------------------------------------
    (
        "heads that do not divide d_model",
        lambda k: VanillaTransformerConfig(d_model=100, num_attention_heads=8),
        ValueError,
        r"`d_model` \(100\) must be divisible by `num_attention_heads` \(8\)",
    ),
    (
        "no layers",
        lambda k: VanillaTransformerConfig(encoder_layers=0),
        ValueError,
        r"`encoder_layers` must be a positive integer, got 0",
    ),
    (
        "a float layer count",
        lambda k: VanillaTransformerConfig(decoder_layers=2.5),
        ValueError,
        r"`decoder_layers` must be a positive integer, got 2.5",
    ),
    ("dropout 1", lambda k: VanillaTransformerConfig(dropout=1.0), ValueError, r"`dropout` must be in \[0, 1\)"),
    (
        "negative label smoothing",
        lambda k: VanillaTransformerConfig(label_smoothing=-0.1),
        ValueError,
        r"`label_smoothing` must be in \[0, 1\)",
    ),
    (
        "unknown activation",
        lambda k: VanillaTransformerConfig(activation_function="sigmoidish"),
        ValueError,
        r"`activation_function` 'sigmoidish' is unknown",
    ),
    (
        "unknown position type",
        lambda k: VanillaTransformerConfig(position_embedding_type="rotary"),
        ValueError,
        r"`position_embedding_type` must be one of \('sinusoidal', 'learned'\), got 'rotary'",
    ),
    (
        "unknown sinusoid layout",
        lambda k: VanillaTransformerConfig(sinusoidal_layout="zigzag"),
        ValueError,
        r"`sinusoidal_layout` must be one of",
    ),
    (
        "odd d_model for sinusoids",
        lambda k: VanillaTransformerConfig(d_model=9, num_attention_heads=3),
        ValueError,
        r"`d_model` must be even for sinusoidal positions",
    ),
    (
        "pad id beyond the vocabulary",
        lambda k: VanillaTransformerConfig(vocab_size=10, pad_token_id=10),
        ValueError,
        r"`pad_token_id` \(10\) must be an integer in \[0, vocab_size=10\)",
    ),
    (
        "eos id beyond the vocabulary",
        lambda k: VanillaTransformerConfig(vocab_size=10, eos_token_id=12),
        ValueError,
        r"`eos_token_id` \(12\) must be an integer in \[0, vocab_size=10\)",
    ),
    (
        "one of several eos ids beyond",
        lambda k: VanillaTransformerConfig(vocab_size=10, eos_token_id=[2, 40]),
        ValueError,
        r"`eos_token_id\[1\]` \(40\)",
    ),
    (
        "config changed after it was made",
        lambda k: VanillaTransformerForSeq2Seq(setattr(c := tiny_config(), "dropout", 1.5) or c),
        ValueError,
        r"`dropout` must be in \[0, 1\), got 1.5",
    ),
    (
        "from_pretrained overriding dropout with 1",
        lambda k: VanillaTransformerForSeq2Seq.from_pretrained(k.model_dir, dropout=1.0),
        ValueError,
        r"`dropout` must be in \[0, 1\), got 1.0",
    ),
    # ---- loading ------------------------------------------------------------------------------------------------
    (
        "a model directory that does not exist",
        lambda k: VanillaTransformerForSeq2Seq.from_pretrained(str(k.scratch / "nowhere")),
        FileNotFoundError,
        r"no such model directory: .*nowhere",
    ),
    (
        "a directory without config.json",
        lambda k: VanillaTransformerForSeq2Seq.from_pretrained(k.scratch / "corpus"),
        FileNotFoundError,
        r"corpus has no config.json: it is not a saved model directory",
    ),
    (
        "weights cut short",
        lambda k: VanillaTransformerForSeq2Seq.from_pretrained(damaged_weights(k, "cut", halve)),
        OSError,
        r"cut/model.safetensors holds \d+ bytes but its header describes \d+: the file was cut short",
    ),
    (
        "weights that are not safetensors",
        lambda k: VanillaTransformerForSeq2Seq.from_pretrained(damaged_weights(k, "junk", html_page)),
        OSError,
        r"junk/model.safetensors is not a safetensors file",
    ),
    (
        "weights overwritten with garbage",
        lambda k: VanillaTransformerForSeq2Seq.from_pretrained(damaged_weights(k, "garbage", flip_payload)),
        ValueError,
        r"garbage: weight `.*` holds NaN or infinite values; the checkpoint is damaged",
    ),
    (
        "resize below the special ids",
        lambda k: tiny_model().resize_token_embeddings(2),
        ValueError,
        r"resize_token_embeddings\(2\) would drop `eos_token_id` \(2\)",
    ),
    # ---- data ---------------------------------------------------------------------------------------------------
    (
        "files of different line counts",
        lambda k: read_data(data(k, [k.text("a.en", "a\nb\nc\n"), k.text("a.de", "x\ny\n")])),
        ValueError,
        r"a.en has 3 lines but .*a.de has 2: parallel files must have one line per sentence pair",
    ),
    (
        "empty training files",
        lambda k: read_data(data(k, [k.text("e.en", ""), k.text("e.de", "")])),
        ValueError,
        r"train: no usable sentence pair in .*e.en and .*e.de \(dropped: none\)",
    ),
    (
        "training files of invalid UTF-8 only",
        lambda k: read_data(data(k, [k.text("u.en", b"\xff\xfe\n\xc3\n"), k.text("u.de", "x\ny\n")])),
        ValueError,
        r"train: no usable sentence pair .* \(dropped: 2 invalid UTF-8\)",
    ),
    (
        "a data file that does not exist",
        lambda k: read_data(data(k, [str(k.scratch / "missing.en"), k.text("m.de", "x\n")])),
        FileNotFoundError,
        r"data file not found: .*missing.en",
    ),
    (
        "a TSV line of three columns",
        lambda k: read_data(data(k, [k.text("t.tsv", "a\tb\nc\td\te\n")])),
        ValueError,
        r"t.tsv:2: expected 2 tab-separated columns, found 3",
    ),
    (
        "a JSONL line that is not JSON",
        lambda k: read_data(data(k, [k.text("j.jsonl", '{"en": "a", "de": "b"}\n{"en": \n')])),
        ValueError,
        r"j.jsonl:2: not valid JSON",
    ),
    (
        "a JSONL line without the target language",
        lambda k: read_data(data(k, [k.text("k.jsonl", '{"en": "a", "fr": "b"}\n')])),
        ValueError,
        r"k.jsonl:1: needs keys 'en' and 'de', has \['en', 'fr'\]",
    ),
    (
        "a gzip training file cut short",
        lambda k: read_data(
            data(
                k,
                [
                    k.text("cut.en.gz", gzip.compress(b"A dog.\n" * 500)[:-12]),
                    k.text("cut.de.gz", gzip.compress(b"Ein Hund.\n" * 500)),
                ],
            )
        ),
        ValueError,
        r"cut.en.gz is not a whole gzip file \(Compressed file ended before the end-of-stream marker was reached\)",
    ),
    (
        "a .gz training file that is not gzip",
        lambda k: read_data(data(k, [k.text("plain.en.gz", "A dog.\n"), k.text("plain.de.gz", "Ein Hund.\n")])),
        ValueError,
        r"plain.en.gz is not a whole gzip file \(Not a gzipped file",
    ),
    (
        "three data files",
        lambda k: read_data(data(k, [k.text("f1", "a\n")] * 3)),
        ValueError,
        r"give two parallel files or one .tsv/.jsonl file, got 3",
    ),
    (
        "one plain text file",
        lambda k: read_data(data(k, [k.text("one.txt", "a\n")])),
        ValueError,
        r"one.txt: a single data file must be .tsv or .jsonl",
    ),
    (
        "--dataset files without files",
        lambda k: read_data(DataArguments(dataset="files")),
        ValueError,
        r"--dataset files needs --train_files",
    ),
    # ---- training arguments -------------------------------------------------------------------------------------
    (
        "an unknown preset",
        lambda k: parse_args(["--config", "nope"]),
        FileNotFoundError,
        r"--config nope: no preset of that name and no file nope",
    ),
    (
        "a preset file with an unknown field",
        lambda k: parse_args(["--config", k.text("p.yaml", "d_model: 64\nwidth: 3\n")]),
        ValueError,
        r"sets unknown fields: \['width'\]",
    ),
    (
        "an unknown flag",
        lambda k: parse_args(["--output_dir", "x", "--d_modle", "64"]),
        ValueError,
        r"unknown arguments: \['--d_modle', '64'\]",
    ),
    (
        "a warmup of 0 with the paper's schedule",
        lambda k: NoamSchedule(0),
        ValueError,
        r"the paper's schedule needs warmup_steps > 0, got 0",
    ),
    (
        "a warmup of 0 on the command line",
        lambda k: parse_args(["--output_dir", "x", "--warmup_steps", "0"]),
        ValueError,
        r"--warmup_steps 0: the paper's schedule \(--lr_schedule paper\) needs warmup_steps above 0",
    ),
    (
        "a warmup of 0 with fairseq's inverse_sqrt",
        lambda k: parse_args(["--output_dir", "x", "--lr_schedule", "inverse_sqrt", "--warmup_steps", "0"]),
        ValueError,
        r"--lr_schedule inverse_sqrt needs --warmup_steps and --learning_rate above 0, got 0 and 5e-05",
    ),
    (
        "Moses preprocessing of a stream",
        lambda k: read_data(DataArguments(streaming=True, moses_lowercase_tokenize=True)),
        ValueError,
        r"--moses_lowercase_tokenize preprocesses the Arrow tables, not --streaming's pairs",
    ),
    (
        "no steps and no epochs",
        lambda k: parse_args(["--output_dir", "x", "--max_steps", "-5", "--num_train_epochs", "0"]),
        ValueError,
        r"nothing to train: --max_steps -5 and --num_train_epochs 0; give one of them above 0",
    ),
    (
        "a negative number of checkpoints to average",
        lambda k: parse_args(["--output_dir", "x", "--average_last", "-1"]),
        ValueError,
        r"--average_last -1: a number of checkpoints, or 0 for the last",
    ),
    ("a time budget of 0 minutes", lambda k: TimeBudget(0), ValueError, r"a time budget needs minutes > 0, got 0"),
    (
        "BPE-dropout above 1",
        lambda k: BPEDropoutPairs(None, None, 1.5, 8, 8),
        ValueError,
        r"BPE-dropout probability must be in \(0, 1\], got 1.5",
    ),
    # ---- resume -------------------------------------------------------------------------------------------------
    (
        "resume from a directory that does not exist",
        lambda k: resolve_checkpoint(str(k.scratch / "checkpoint-99"), str(k.scratch)),
        ValueError,
        r"--resume_from_checkpoint .*checkpoint-99: no such directory",
    ),
    (
        "resume from a checkpoint not marked complete",
        lambda k: resolve_checkpoint(damaged_run(k, "unmarked", lambda c: (c / MARKER).unlink()) + "/checkpoint-6", ""),
        ValueError,
        r"checkpoint-6 is not a complete checkpoint \(no .checkpoint-complete\)",
    ),
    (
        "resume without optimizer.pt",
        lambda k: resolve_checkpoint("auto", damaged_run(k, "no-optimizer", lambda c: (c / "optimizer.pt").unlink())),
        ValueError,
        r"cannot resume from .*checkpoint-6: optimizer.pt is missing",
    ),
    (
        "resume with trainer_state.json cut short",
        lambda k: resolve_checkpoint(
            "auto", damaged_run(k, "short", lambda c: os.truncate(c / "trainer_state.json", 10))
        ),
        ValueError,
        r"checkpoint-6: trainer_state.json has 10 bytes, \d+ when saved",
    ),
    (
        "resume with an unreadable marker",
        lambda k: resolve_checkpoint("auto", damaged_run(k, "bad-marker", lambda c: (c / MARKER).write_text("{"))),
        ValueError,
        r"checkpoint-6/.checkpoint-complete is unreadable",
    ),
    # ---- averaging ----------------------------------------------------------------------------------------------
    (
        "average 0 checkpoints",
        lambda k: last_checkpoints(k.run_dir, 0),
        ValueError,
        r"the number of checkpoints to average must be at least 1, got 0",
    ),
    (
        "average more checkpoints than written",
        lambda k: last_checkpoints(k.run_dir, 9),
        ValueError,
        r"has 3 complete checkpoints written on schedule, fewer than the 9 to average",
    ),
    (
        "average a run directory that does not exist",
        lambda k: last_checkpoints(k.scratch / "norun", 2),
        FileNotFoundError,
        r"no such run directory: .*norun",
    ),
    (
        "average checkpoints that hold different tensors",
        lambda k: average_state_dict(checkpoint_without_a_tensor(k)),
        ValueError,
        r"do not hold the same weights: model.encoder.layers.0.ffn.fc1.bias",
    ),
    (
        "average into a directory holding a model",
        lambda k: average_checkpoints(last_checkpoints(k.run_dir, 2), k.copy_model("occupied")),
        ValueError,
        r"occupied already holds a model \(config.json, model.safetensors\); choose another output directory",
    ),
    # ---- push ---------------------------------------------------------------------------------------------------
    (
        "push a MarianMTModel's folder (before any Hub call)",
        lambda k: push.push_model_dir(
            model_with_config(k, "marian", MarianConfig(vocab_size=VOCAB)), "alice/x", token="hf_x"
        ),
        ValueError,
        r"marian holds a marian model, not this package's: a MarianMTModel converts with from_marian first",
    ),
    (
        "push a directory that is no saved model",
        lambda k: push.push_model_dir(k.scratch / "corpus", "alice/x"),
        FileNotFoundError,
        r"corpus is not a saved model directory: missing config.json, model.safetensors",
    ),
]


@pytest.mark.parametrize(("action", "error", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_input_raises_a_clear_error(kit, action, error, message):
    with pytest.raises(error) as raised:
        action(kit)
    assert type(raised.value) is error or issubclass(type(raised.value), error)
    assert re.search(message, str(raised.value)), str(raised.value)


# ---- the console scripts: exit status and one line -----------------------------------------------------------
def translate_args(kit: Kit, *extra: str) -> list[str]:
    return ["--model", str(kit.model_dir), *extra]


def model_without_tokenizer(kit: Kit) -> str:
    folder = kit.copy_model("no-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    return str(folder)


def model_with_config(kit: Kit, name: str, config=None) -> str:
    """A copy of the saved model whose config.json is ``config``'s (None: removed)."""
    folder = kit.copy_model(name)
    (folder / "config.json").unlink()
    if config is not None:
        config.save_pretrained(folder)
    return str(folder)


def ct2_export(kit: Kit) -> str:
    """A folder laid out as a CTranslate2 export (its files' contents do not matter to the case)."""
    folder = kit.scratch / "int8"
    folder.mkdir(exist_ok=True)
    for name in ("config.json", "model.bin", "shared_vocabulary.json"):
        (folder / name).write_text("{}")
    return str(folder)


CLI = [
    # (case, console entry, argv, exit status, the last line of stderr)
    (
        "translate --batch_size 0",
        translate.main,
        lambda k: translate_args(k, "--batch_size", "0"),
        2,
        r"argument --batch_size: must be at least 1, got 0",
    ),
    (
        "translate --num_beams -1",
        translate.main,
        lambda k: translate_args(k, "--num_beams", "-1"),
        2,
        r"argument --num_beams: must be at least 1, got -1",
    ),
    (
        "translate --batch_size x",
        translate.main,
        lambda k: translate_args(k, "--batch_size", "x"),
        2,
        r"argument --batch_size: 'x' is not an integer",
    ),
    (
        "translate a missing input file",
        translate.main,
        lambda k: translate_args(k, str(k.scratch / "none.en")),
        1,
        r"vanilla-translate: error: input file not found: .*none.en",
    ),
    (
        "translate a folder",
        translate.main,
        lambda k: translate_args(k, str(k.scratch)),
        1,
        r"vanilla-translate: error: input .* is a folder, not a text file$",
    ),
    (
        "translate into a folder",
        translate.main,
        lambda k: translate_args(k, k.text("one.en", "A dog.\n"), "--output", str(k.scratch)),
        1,
        r"vanilla-translate: error: --output .* is a folder: name the file to write$",
    ),
    (
        "translate over its own input",
        translate.main,
        lambda k: translate_args(k, path := k.text("same.en", "A dog.\n"), "--output", path),
        1,
        r"vanilla-translate: error: --output .*same.en is the input file: the translations would replace it$",
    ),
    (
        "translate over the references",
        translate.main,
        lambda k: translate_args(
            k, k.text("in2.en", "A dog.\n"), "--references", ref := k.text("r2.de", "Ein Hund.\n"), "--output", ref
        ),
        1,
        r"vanilla-translate: error: --output .*r2.de is the --references file: the translations would replace it$",
    ),
    (
        "translate with a prefix file one line short",
        translate.main,
        lambda k: translate_args(k, k.text("in3.en", "A dog.\nA cat.\n"), "--prefix", k.text("p3.de", "Ein\n")),
        1,
        r"vanilla-translate: error: .*in3.en has 2 lines but --prefix .*p3.de has 1: one prefix per input line$",
    ),
    (
        "translate --score with --sample",
        translate.main,
        lambda k: translate_args(
            k, k.text("in4.en", "A dog.\n"), "--score", k.text("s4.de", "Ein Hund.\n"), "--sample"
        ),
        1,
        r"vanilla-translate: error: --score scores the given translations instead of translating: drop --sample$",
    ),
    (
        "translate --score with the onnx engine",
        translate.main,
        lambda k: translate_args(
            k, k.text("in5.en", "A dog.\n"), "--score", k.text("s5.de", "Ein Hund.\n"), "--engine", "onnx"
        ),
        1,
        r"vanilla-translate: error: the onnx engine cannot --score: use --engine generate or ctranslate2$",
    ),
    (
        "translate --top_k without --sample",
        translate.main,
        lambda k: translate_args(k, k.text("in6.en", "A dog.\n"), "--top_k", "5"),
        1,
        r"vanilla-translate: error: --top_k: sampling options, which need --sample$",
    ),
    (
        "translate --score with flags it would drop",
        translate.main,
        lambda k: translate_args(
            k,
            k.text("in7.en", "A dog.\n"),
            "--score",
            k.text("s7.de", "Ein Hund.\n"),
            "--num_beams",
            "2",
            "--length_penalty",
            "0.6",
            "--detokenize",
        ),
        1,
        r"vanilla-translate: error: --score scores the given translations instead of translating: drop --num_beams, "
        r"--length_penalty, --detokenize$",
    ),
    (
        "translate greedily with a length penalty",
        translate.main,
        lambda k: translate_args(k, k.text("in8.en", "A dog.\n"), "--num_beams", "1", "--length_penalty", "0.6"),
        1,
        r"vanilla-translate: error: --length_penalty ranks a beam search's hypotheses: greedy search \(--num_beams 1\) "
        r"keeps one; drop --length_penalty$",
    ),
    (
        "translate --sample with a length penalty",
        translate.main,
        lambda k: translate_args(k, k.text("in9.en", "A dog.\n"), "--sample", "--length_penalty", "0.6"),
        1,
        r"vanilla-translate: error: --length_penalty ranks a beam search's hypotheses: --sample draws one; drop "
        r"--length_penalty$",
    ),
    (
        "translate with a missing model",
        translate.main,
        lambda k: ["--model", str(k.scratch / "gone"), "-"],
        1,
        r"vanilla-translate: error: no such model directory: .*gone$",
    ),
    (
        "translate with a Hub id, offline",
        translate.main,
        lambda k: ["--model", "nobody/no-model", "-"],
        1,
        r"error: nobody/no-model is no local directory, and its tokenizer could not be loaded from the Hub: "
        r"We couldn't connect to 'https://huggingface.co'",
    ),
    (
        "translate with a model without tokenizer",
        translate.main,
        lambda k: ["--model", model_without_tokenizer(k), k.text("in.en", "A dog.\n")],
        1,
        r"error: .*no-tokenizer has no tokenizer \(tokenizer.json\)",
    ),
    (
        "translate with a folder without config.json",
        translate.main,
        lambda k: ["--model", model_with_config(k, "no-config"), "-"],
        1,
        r"vanilla-translate: error: .*no-config has no config.json: not a saved model directory$",
    ),
    (
        "translate with a BERT",
        translate.main,
        lambda k: ["--model", model_with_config(k, "bert", BertConfig(vocab_size=VOCAB)), "-"],
        1,
        r"error: .*bert holds no model that AutoModelForSeq2SeqLM loads \(Unrecognized configuration class "
        r".*BertConfig'> for this kind of AutoModel: AutoModelForSeq2SeqLM.\)$",
    ),
    (
        "attention with a folder without config.json",
        attention.main,
        lambda k: ["--model", model_with_config(k, "no-config-2"), "A dog."],
        1,
        r"vanilla-attention: error: .*no-config-2 has no config.json: not a saved model directory$",
    ),
    (
        "translate a gzip file cut short",
        translate.main,
        lambda k: translate_args(k, k.text("cut.en.gz", gzip.compress(b"A dog.\n" * 50)[:-12])),
        1,
        r"vanilla-translate: error: .*cut.en.gz is not a whole gzip file \(Compressed file ended before the",
    ),
    (
        "translate a .gz file that is not gzip",
        translate.main,
        lambda k: translate_args(k, k.text("no.en.gz", "A dog.\n")),
        1,
        r"vanilla-translate: error: .*no.en.gz is not a whole gzip file \(Not a gzipped file",
    ),
    (
        "translate input that is not UTF-8",
        translate.main,
        lambda k: translate_args(k, k.text("l1.en", b"caf\xe9\n")),
        1,
        r"error: .*l1.en is not UTF-8 text",
    ),
    (
        "translate with fewer references than lines",
        translate.main,
        lambda k: translate_args(
            k, k.text("two.en", "A dog.\nA cat.\n"), "--references", k.text("one.de", "Ein Hund.\n"), "--num_beams", "1"
        ),
        1,
        r"error: .*two.en has 2 lines but --references .*one.de has 1: one reference per input line$",
    ),
    (
        "average -n 0",
        average.main,
        lambda k: [str(k.run_dir), str(k.scratch / "avg0"), "-n", "0"],
        2,
        r"argument -n/--last: must be at least 1, got 0",
    ),
    (
        "average -n -1",
        average.main,
        lambda k: [str(k.run_dir), str(k.scratch / "avg1"), "-n", "-1"],
        2,
        r"argument -n/--last: must be at least 1, got -1",
    ),
    (
        "average more than written",
        average.main,
        lambda k: [str(k.run_dir), str(k.scratch / "avg9"), "-n", "9"],
        1,
        r"vanilla-average-checkpoints: error: .* has 3 complete checkpoints written on schedule, fewer than the 9 to "
        r"average",
    ),
    (
        "train with an unknown preset",
        train_cli.main,
        lambda k: ["--config", "nope"],
        1,
        r"vanilla-train: error: --config nope: no preset of that name",
    ),
    (
        "train with a misspelt flag",
        train_cli.main,
        lambda k: ["--output_dir", str(k.scratch / "t"), "--lr_sclae", "2"],
        1,
        r"vanilla-train: error: unknown arguments: \['--lr_sclae', '2'\]",
    ),
    (
        "train on files of different line counts",
        train_cli.main,
        lambda k: [
            "--dataset",
            "files",
            "--train_files",
            k.text("c.en", "a\nb\n"),
            k.text("c.de", "x\n"),
            "--output_dir",
            str(k.scratch / "t2"),
        ],
        1,
        r"vanilla-train: error: .*c.en has 2 lines but .*c.de has 1",
    ),
    (
        "train on a second corpus whose file is missing",
        train_cli.main,
        lambda k: [*two_corpora(k, "t4", str(k.scratch / "none.en"), k.corpus["train"][1])],
        1,
        r"vanilla-train: error: data file not found: .*none.en",
    ),
    (
        "train on a second corpus of different line counts",
        train_cli.main,
        lambda k: [*two_corpora(k, "t5", k.text("d.en", "a\nb\n"), k.text("d.de", "x\n"), "tag=<BT>")],
        1,
        r"vanilla-train: error: .*d.en has 2 lines but .*d.de has 1",
    ),
    (
        "train on a corpus tagged with two words",
        train_cli.main,
        lambda k: [*two_corpora(k, "t6", *k.corpus["train"], "tag=<B T>")],
        1,
        r"vanilla-train: error: --train_files tag='<B T>': a tag must be one token, without whitespace",
    ),
    (
        "train on a corpus of negative weight",
        train_cli.main,
        lambda k: [*two_corpora(k, "t7", *k.corpus["train"], "weight=-2")],
        1,
        r"vanilla-train: error: --train_files weight=-2: must be a finite number >= 0",
    ),
    (
        "train with a dropout of 1",
        train_cli.main,
        lambda k: [
            "--dataset",
            "files",
            "--train_files",
            *k.corpus["train"],
            "--output_dir",
            str(k.scratch / "t3"),
            "--dropout",
            "1",
            "--d_model",
            "32",
            "--num_attention_heads",
            "2",
            "--vocab_size",
            "200",
        ],
        1,
        r"vanilla-train: error: `dropout` must be in \[0, 1\), got 1.0",
    ),
    (
        "train into a CTranslate2 export",
        train_cli.main,
        lambda k: ["--dataset", "files", "--train_files", *k.corpus["train"], "--output_dir", ct2_export(k)],
        1,
        r"vanilla-train: error: .*int8 holds a saved model \(config.json, model.bin\) but no checkpoint and no "
        r"finished run of vanilla-train: training would write over it; pass --overwrite_output_dir",
    ),
    (
        "attention --layer out of range",
        attention.main,
        lambda k: ["--model", str(k.model_dir), "A dog.", "--layer", "5", "--output", str(k.scratch / "a.png")],
        1,
        r"vanilla-attention: error: --layer 5 is out of range: the model has 2",
    ),
    (
        "plot a missing curve",
        plot_curve.main,
        lambda k: [str(k.scratch / "none.csv")],
        1,
        r"vanilla-plot-curve: error: .*No such file or directory: .*none.csv",
    ),
    (
        "plot a CSV that is no learning curve",
        plot_curve.main,
        lambda k: [k.text("other.csv", "a,b\n1,2\n")],
        1,
        r"vanilla-plot-curve: error: .*other.csv is not a learning curve of vanilla-train: no column minutes, "
        r"eval_loss, eval_bleu$",
    ),
    (
        "plot a curve with a word for a number",
        plot_curve.main,
        lambda k: [k.text("word.csv", "minutes,eval_loss,eval_bleu\n1.0,high,3.0\n")],
        1,
        r"vanilla-plot-curve: error: .*word.csv holds a value that is not a number \(could not convert",
    ),
    (
        "plot to a type matplotlib does not write",
        plot_curve.main,
        lambda k: [k.text("ok.csv", "minutes,eval_loss,eval_bleu\n1.0,2.0,3.0\n"), "-o", str(k.scratch / "c.xyz")],
        1,
        r"vanilla-plot-curve: error: .*c.xyz: matplotlib writes no .xyz files \(.*png",
    ),
    (
        "attention to a type matplotlib does not write",
        attention.main,
        lambda k: ["--model", str(k.model_dir), "A dog.", "--output", str(k.scratch / "a.xyz")],
        1,
        r"vanilla-attention: error: .*a.xyz: matplotlib writes no .xyz files",
    ),
    (
        "export-onnx into the model's folder",
        onnx_runtime.main,
        lambda k: [str(k.copy_model("onnx-self"))] * 2,
        1,
        r"vanilla-export-onnx: error: the output folder .*onnx-self holds the model .*onnx-self: export to another "
        r"folder$",
    ),
    (
        "export-onnx over a folder",
        onnx_runtime.main,
        lambda k: [str(k.model_dir), str(k.scratch / "corpus")],
        1,
        r"vanilla-export-onnx: error: .* exists; pass force=True \(--force\) to replace it$",
    ),
    (
        "export-ct2 to a file",
        ct2.main,
        lambda k: [str(k.model_dir), k.text("out.bin", "x"), "--force"],
        1,
        r"vanilla-export-ct2: error: .*out.bin is a file, not a folder: export to a folder$",
    ),
    (
        "bench --repeats 0",
        bench.main,
        lambda k: ["--repeats", "0"],
        2,
        r"argument --repeats: must be at least 1, got 0",
    ),
    (
        "bench --translate a missing model",
        bench.main,
        lambda k: ["--translate", str(k.scratch / "gone")],
        1,
        r"vanilla-bench: error: no such model directory: .*gone$",
    ),
    (
        "bench --translate with fewer references",
        bench.main,
        lambda k: [
            "--translate",
            str(k.model_dir),
            "--source",
            k.text("s.en", "A.\nB.\n"),
            "--references",
            k.text("r.de", "A.\n"),
        ],
        1,
        r"vanilla-bench: error: 2 source sentences but 1 references in .*r.de$",
    ),
    (
        "bench --json into a missing folder",
        bench.main,
        lambda k: ["--json", str(k.scratch / "no" / "b.json")],
        1,
        r"vanilla-bench: error: --json .*b.json: there is no folder .*no$",
    ),
    (
        "push a directory that is no model",
        push.main,
        lambda k: [str(k.scratch / "corpus"), "alice/x"],
        1,
        r"vanilla-push: error: .*corpus is not a saved model directory",
    ),
]


@pytest.mark.parametrize(("entry", "argv", "status", "message"), [c[1:] for c in CLI], ids=[c[0] for c in CLI])
def test_console_script_ends_with_a_status_and_one_line(kit, monkeypatch, capsys, entry, argv, status, message):
    """The entry point each console script calls (``main``), with the script's name and arguments in sys.argv."""
    program = {
        translate.main: "vanilla-translate",
        average.main: "vanilla-average-checkpoints",
        train_cli.main: "vanilla-train",
        attention.main: "vanilla-attention",
        plot_curve.main: "vanilla-plot-curve",
        push.main: "vanilla-push",
        onnx_runtime.main: "vanilla-export-onnx",
        ct2.main: "vanilla-export-ct2",
        bench.main: "vanilla-bench",
    }[entry]
    monkeypatch.setattr(sys, "argv", [program, *argv(kit)])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: the variable is too late
    with pytest.raises(SystemExit) as exited:
        entry()
    stderr = capsys.readouterr().err
    assert exited.value.code == status, stderr[-2000:]
    assert "Traceback" not in stderr
    assert re.search(message, stderr.strip().splitlines()[-1]), stderr[-2000:]


def test_a_missing_folder_under_a_local_folder_is_no_hub_id(kit, monkeypatch):
    """A typo under a local folder (runs/typo): named at once, rather than a minute of retries to reach the Hub."""
    monkeypatch.chdir(kit.scratch)
    with pytest.raises(FileNotFoundError, match=r"^no such model directory: corpus/gone \(read as a path: corpus is"):
        VanillaTransformerForSeq2Seq.from_pretrained("corpus/gone")
    assert local_model_dir("nobody/no-model") is None  # no local folder "nobody": a Hub id


def test_stdin_that_is_not_utf8_is_named(kit):
    """Piped in, as a user does (the locale's C.UTF-8 would pass the byte on as a lone surrogate to the tokenizer)."""
    script = Path(sys.executable).parent / "vanilla-translate"
    done = subprocess.run(
        [str(script), "--model", str(kit.model_dir), "--num_beams", "1"],
        input=b"caf\xe9\n",
        capture_output=True,
        timeout=300,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert re.search(
        r"^vanilla-translate: error: stdin is not UTF-8 text \('utf-8' codec can't decode byte 0xe9",
        stderr.strip().splitlines()[-1],
    )


@pytest.mark.parametrize(("mode", "lines"), [("--prefix", "Ein\n"), ("--score", "Ein Hund.\nEine Katze.\nEin Mann.\n")])
def test_a_side_file_that_stdin_outruns_is_named_with_both_counts(kit, mode, lines):
    """Stdin cannot be counted beforehand: it is counted as it is read, the rest of the longer side too, and the
    console script refuses both counts in one line, as it does for an input file."""
    side = kit.text(f"side{mode}.de", lines)
    script = Path(sys.executable).parent / "vanilla-translate"
    done = subprocess.run(
        [str(script), "--model", str(kit.model_dir), "--engine", "generate", mode, side],
        input="A dog.\nA cat.\n",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    count, what = (1, "prefix") if mode == "--prefix" else (3, "translation")
    assert done.stderr.strip().splitlines()[-1] == (
        f"vanilla-translate: error: the input has 2 lines but {mode} has {count}: one {what} per input line"
    )


MISSING_EXTRAS = [
    # (case, console entry, argv, the modules made missing, the last line of stderr)
    (
        "plot-curve without matplotlib",
        plot_curve.main,
        lambda k: [k.text("m.csv", "minutes,eval_loss,eval_bleu\n1.0,2.0,3.0\n")],
        ("matplotlib",),
        'vanilla-plot-curve: error: vanilla-plot-curve needs matplotlib: pip install "vanilla-transformer[plot]"',
    ),
    (
        "attention without matplotlib",
        attention.main,
        lambda k: ["--model", str(k.model_dir), "A dog."],
        ("matplotlib", "matplotlib.figure"),
        'vanilla-attention: error: drawing a figure needs matplotlib: pip install "vanilla-transformer[plot]"',
    ),
    (
        "attention --html without bertviz",
        attention.main,
        lambda k: ["--model", str(k.model_dir), "A dog.", "--html", str(k.scratch / "a.html")],
        ("bertviz",),
        'vanilla-attention: error: --html needs bertviz: pip install "vanilla-transformer[ecosystem]"',
    ),
    (
        "export-ct2 without ctranslate2",
        ct2.main,
        lambda k: [str(k.model_dir), str(k.scratch / "ct2-none")],
        ("ctranslate2",),
        'vanilla-export-ct2: error: CTranslate2 is not installed: pip install -e ".[ct2]" (or pip install ctranslate2)',
    ),
]


@pytest.mark.parametrize(
    ("entry", "argv", "modules", "line"), [c[1:] for c in MISSING_EXTRAS], ids=[c[0] for c in MISSING_EXTRAS]
)
def test_a_missing_extra_is_named_in_one_line(kit, monkeypatch, capsys, entry, argv, modules, line):
    program = {
        plot_curve.main: "vanilla-plot-curve",
        attention.main: "vanilla-attention",
        ct2.main: "vanilla-export-ct2",
    }[entry]
    monkeypatch.setattr(sys, "argv", [program, *argv(kit)])
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(SystemExit) as exited:
        entry()
    stderr = capsys.readouterr().err
    assert exited.value.code == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == line


# ---- inputs that are accepted, and must give the right result ---------------------------------------------------
def test_boolean_and_integer_masks_give_the_same_logits():
    model = tiny_model()
    as_int = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :4]).logits
    as_bool = model(input_ids=ids, attention_mask=mask.bool(), decoder_input_ids=ids[:, :4]).logits
    as_float = model(input_ids=ids, attention_mask=mask.float(), decoder_input_ids=ids[:, :4]).logits
    torch.testing.assert_close(as_bool, as_int)
    torch.testing.assert_close(as_float, as_int)


def test_labels_of_minus_100_are_ignored_not_refused():
    labels = torch.randint(3, VOCAB, (3, 4))
    labels[0, 2:] = -100
    assert torch.isfinite(model_call(decoder_input_ids=None, labels=labels).loss)


def test_generate_with_decoder_inputs_and_their_mask_continues_them():
    """transformers' convention: the 2-D decoder mask covers the cached tokens and the new ones, and generate()
    grows it every step (it was refused once a cache was in use)."""
    model = tiny_model()
    start = torch.tensor([[PAD, 5], [PAD, 6], [PAD, 7]])
    for beams in (1, 2):
        kwargs = dict(attention_mask=mask, decoder_input_ids=start, max_new_tokens=4, num_beams=beams)
        with_mask = model.generate(ids, decoder_attention_mask=torch.ones_like(start), **kwargs)
        assert torch.equal(with_mask, model.generate(ids, **kwargs)) and torch.equal(with_mask[:, :2], start)


def test_a_checkpoint_without_the_shared_embedding_reports_it_and_initialises_it(kit):
    model, info = VanillaTransformerForSeq2Seq.from_pretrained(without_shared_embedding(kit), output_loading_info=True)
    assert "model.shared.weight" in info["missing_keys"]
    assert model.model.shared.weight.device.type == "cpu" and torch.isfinite(model.model.shared.weight).all()
    assert model.lm_head.weight is model.model.shared.weight


def test_the_stacks_load_on_their_own(kit, tmp_path):
    model = tiny_model()
    model.model.encoder.save_pretrained(tmp_path)
    encoder = VanillaTransformerEncoder.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(
        encoder(ids, attention_mask=mask).last_hidden_state,
        model.model.encoder(ids, attention_mask=mask).last_hidden_state,
    )


def test_plain_generate_stops_at_input_length_plus_50_without_a_warning(capfd):
    """§6.1's maximum output length is generate()'s default; the saved generation config sets no max_length, so a
    call with max_new_tokens does not warn that both are set."""
    model = tiny_model()
    assert model.generation_config.max_length is None
    out = model.generate(ids, attention_mask=mask, num_beams=1, min_new_tokens=57)
    assert out.shape[1] == 1 + ids.shape[1] + 50  # decoder start + input length + 50
    model.generate(ids, attention_mask=mask, max_new_tokens=3)
    assert "seem to have been set" not in capfd.readouterr().err


def test_translate_keeps_empty_lines_order_and_reads_gzip(kit, tmp_path, monkeypatch, capsys):
    lines = ["A dog runs.", "", "Two men play football in the park near a house.", "   ", "A cat."]
    source = tmp_path / "in.en.gz"
    with gzip.open(source, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    output = tmp_path / "out.de"
    argv = translate_args(kit, str(source), "--output", str(output), "--num_beams", "1", "--batch_size", "2")
    monkeypatch.setattr(sys, "argv", ["vanilla-translate", *argv])
    with pytest.raises(SystemExit) as exited:
        translate.main()
    assert exited.value.code == 0
    written = output.read_text(encoding="utf-8").split("\n")
    assert len(written) == len(lines) + 1 and written[-1] == ""  # one line per input line, newline-terminated
    assert written[1] == "" and written[3] == ""  # empty in, empty out
    assert not Path(f"{output}.partial").exists()
    model = VanillaTransformerForSeq2Seq.from_pretrained(kit.model_dir)
    tokenizer = load_tokenizer(str(kit.model_dir))
    alone = translate.translate(model, tokenizer, [lines[2]], progress=False, num_beams=1)
    assert written[2] == alone[0]  # the same translation whatever batch it was in


def test_translate_reads_lazily_and_reports_suspect_lengths(kit):
    """Translations come out before the input is read to its end (memory stays flat); lines longer than the model
    was trained on, and outputs cut at the length limit, are reported by line number."""
    model = VanillaTransformerForSeq2Seq.from_pretrained(kit.model_dir)
    tokenizer = load_tokenizer(str(kit.model_dir))
    read = []

    def lines():
        for i in range(3 * translate.CHUNK_BATCHES):
            read.append(i)
            yield "A dog runs across the meadow." if i != 4 else "a very long line " * 40

    report = translate.LengthReport()
    engine = GenerateEngine(model, tokenizer, Decoding(num_beams=1, max_new_tokens=2))
    stream = translate.translate_stream(engine, lines(), batch_size=1, report=report, max_source_tokens=20)
    first = next(stream)
    assert isinstance(first, str) and len(read) == translate.CHUNK_BATCHES  # one chunk read, not the whole input
    rest = list(stream)
    assert len(rest) == 3 * translate.CHUNK_BATCHES - 1
    assert report.longer_than_trained == [5]  # 1-based line numbers
    assert report.cut_at_limit[:3] == [1, 2, 3]  # 2 new tokens never reach </s> with a random model


@pytest.mark.slow
def test_console_scripts_installed_exit_0_and_1(kit, trained_run, tmp_path):
    """The installed entry points themselves (not the functions): status 0 on success, 1 with one line on error."""
    import subprocess

    def script(name: str, *argv: str) -> subprocess.CompletedProcess:
        command = [str(Path(sys.executable).parent / name), *argv]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)

    source = tmp_path / "in.en"
    source.write_text("A dog runs.\n", encoding="utf-8")
    ok = script("vanilla-translate", "--model", str(kit.model_dir), str(source), "--num_beams", "1")
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 1, ok.stderr[-2000:]
    failed = script("vanilla-average-checkpoints", str(trained_run["output"]), str(tmp_path / "avg"), "-n", "9")
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.strip().splitlines()[-1].startswith("vanilla-average-checkpoints: error: ")
    averaged = script("vanilla-average-checkpoints", str(trained_run["output"]), str(tmp_path / "avg"), "-n", "2")
    assert averaged.returncode == 0 and json.loads((tmp_path / "avg" / "config.json").read_text())["d_model"] == 32


def test_push_names_a_bad_repo_id_a_missing_token_and_an_unreachable_hub(kit, tmp_path, monkeypatch):
    """vanilla-push's mistakes and failures before and at the network, each one line (huggingface_hub's own were a
    validation traceback, an unreachable Hub without a word about the missing token, and httpx's ConnectError)."""
    with pytest.raises(ValueError, match=r"'bad repo id!!' is not a Hub repository id: Repo id must use"):
        push.push_model_dir(kit.model_dir, "bad repo id!!", token="hf_x")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "token"))  # no stored login
    with pytest.raises(ValueError, match=r"no Hub token: pass --token, set HF_TOKEN, or log in with `hf auth login`"):
        push.push_model_dir(kit.model_dir, "alice/x")
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(ValueError, match=r"could not reach the Hub at http://127.0.0.1:9 \(.*\): the model was not"):
        push.push_model_dir(kit.model_dir, "alice/x", token="hf_x")
