"""The multi30k-tiny preset (issue 101): Wu et al.'s Transformer-Tiny recipe, its lowercased and Moses-tokenized
text, and the BLEU fairseq's scorer prints on that text."""

import contextlib
import gzip
import io
import json
import math
from collections import Counter

import pytest
from training_helpers import TINY_SHAPE, write_corpus

from training.arguments import load_preset, parse_args
from training.data.corpus import DataArguments, load_parallel_data
from vanilla_tools.cli import load_tokenizer
from vanilla_tools.corpora import BUNDLED_DIR
from vanilla_tools.metrics import tokenized_bleu
from vanilla_tools.text_form import TextForm

# Their recipe, by resolved argument (training/configs/multi30k-tiny.yaml names the source of each)
RECIPE = {
    "moses_lowercase_tokenize": True,
    "vocab_size": 10067,
    "bpe_dropout": 0.0,
    "d_model": 128,
    "encoder_layers": 4,
    "decoder_layers": 4,
    "num_attention_heads": 4,
    "ffn_dim": 256,
    "dropout": 0.3,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "activation_function": "relu",
    "layer_norm_eps": 1e-5,
    "scale_embedding": True,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
    "position_embedding_type": "sinusoidal",
    "sinusoidal_layout": "concat",
    "max_tokens_per_batch": 4096,
    "tokens_per_step": 8192,
    "required_batch_size_multiple": 8,
    "required_seq_len_multiple": 1,
    "num_batch_buckets": 0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "adam_epsilon": 1e-8,
    "weight_decay": 0.0,
    "lr_schedule": "inverse_sqrt",
    "learning_rate": 0.005,
    "warmup_steps": 2000,
    "warmup_init_lr": 1e-7,
    "label_smoothing_factor": 0.1,
    "max_grad_norm": 25.0,
    "max_steps": 8000,
    "save_strategy": "epoch",
    "save_total_limit": 10,
    "average_last": 10,
    "num_beams": 5,
    "length_penalty": 1.0,
    "length_penalty_candidates": [],
}


def resolved(argv: list[str]) -> dict:
    model_args, data_args, training_args = parse_args(argv)
    arguments = {**vars(model_args), **vars(data_args), **training_args.to_dict()}
    return {name: arguments[name] for name in RECIPE}


def test_the_preset_is_their_recipe_whatever_the_hour_preset_becomes():
    assert resolved(["--config", "multi30k-tiny"]) == RECIPE
    preset = load_preset("multi30k-tiny")
    assert {name: preset[name] for name in RECIPE} == RECIPE  # each set in the preset, none left to multi30k's
    _, _, training_args = parse_args(["--config", "multi30k-tiny"])
    assert training_args.optim == "adamw_torch_fused" and training_args.eval_strategy == "epoch"


def test_the_text_is_lowercased_and_moses_tokenized_on_every_split(tmp_path):
    corpus = write_corpus(tmp_path / "data", pairs=20)
    files = {f"{split}_files": corpus[split] for split in ("train", "validation", "test")}
    data = load_parallel_data(
        DataArguments(dataset="files", **files, moses_lowercase_tokenize=True, cache_dir=str(tmp_path / "cache")),
        TextForm.moses_lowercase("en", "de"),
    )
    assert data["train"][0] == {
        "source": "two young , white males are outside near many bushes .",
        "target": "zwei junge weiße männer sind im freien in der nähe vieler büsche .",
    }
    assert set(data) == {"train", "validation", "test"}
    for split in data.values():
        assert all(text == text.lower() for text in [*split["source"], *split["target"]])


def fairseq_bleu(hypotheses: list[str], references: list[str]) -> float:
    """BLEU4 as fairseq's scorer counts it (fairseq/bleu.py): clipped n-gram matches of whitespace tokens, n = 1-4,
    their precisions' geometric mean times the brevity penalty, x 100."""
    matches, totals, system, reference = [0] * 4, [0] * 4, 0, 0
    for hypothesis, ref in zip(hypotheses, references, strict=True):
        hyp_tokens, ref_tokens = hypothesis.split(), ref.split()
        system, reference = system + len(hyp_tokens), reference + len(ref_tokens)
        for n in range(1, 5):
            hyp_grams = Counter(tuple(hyp_tokens[i : i + n]) for i in range(len(hyp_tokens) - n + 1))
            ref_grams = Counter(tuple(ref_tokens[i : i + n]) for i in range(len(ref_tokens) - n + 1))
            matches[n - 1] += sum((hyp_grams & ref_grams).values())
            totals[n - 1] += max(len(hyp_tokens) - n + 1, 0)
    brevity = math.exp(min(0.0, 1 - reference / system))
    return 100 * brevity * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / 4)


def german(split: str) -> list[str]:
    with gzip.open(BUNDLED_DIR / f"{split}.de.gz", "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def test_tokenized_bleu_on_the_presets_text_is_fairseqs_bleu():
    """The preset's references and outputs are lowercased, tokenized text. tokenized_bleu lowercases, normalizes and
    tokenizes them again: on this text a no-op (every German line of validation and test2016), so it scores the
    tokens fairseq's scorer scores. With tokenizer.perl's escapes (&apos;, &quot;) it would split each into three
    tokens and score higher than fairseq."""
    moses = TextForm.moses_lowercase("en", "de")
    for split in ("val", "test_2016_flickr"):
        references = [moses.target(line) for line in german(split)]
        hypotheses = [" ".join(ref.split()[: max(1, len(ref.split()) - 2)]) for ref in references]  # the last two cut
        assert tokenized_bleu(hypotheses, references, "de")[0] == pytest.approx(
            fairseq_bleu(hypotheses, references), abs=0.005
        )
        if split == "test_2016_flickr":  # the test set of their README: reflen=12103
            assert sum(len(reference.split()) for reference in references) == 12103
    escape = {"'": "&apos;", '"': "&quot;"}
    escaped = [moses.target(line).translate(str.maketrans(escape)) for line in german("test_2016_flickr")]
    cut = [" ".join(ref.split()[: max(1, len(ref.split()) - 2)]) for ref in escaped]
    assert tokenized_bleu(cut, escaped, "de")[0] > fairseq_bleu(cut, escaped) + 0.005


def test_the_preset_trains_and_scores_with_tiny_sizes(tmp_path):
    """--config multi30k-tiny end to end with only the sizes made tiny (and eager steps): the text it trains on
    and is scored on is lowercased and tokenized, the rate follows inverse_sqrt from its initial rate, the epoch
    checkpoints are averaged, test is decoded with beam 5 at length penalty 1, and the record says what text it is."""
    from training.train import run

    corpus = write_corpus(tmp_path / "data", pairs=20)  # 4 steps an epoch
    files = [arg for split in ("train", "validation", "test") for arg in (f"--{split}_files", *corpus[split])]
    argv = [
        "--config",
        "multi30k-tiny",
        "--dataset",
        "files",
        *files,
        "--output_dir",
        str(tmp_path / "out"),
        "--summary_dir",
        str(tmp_path / "summary"),
        "--cache_dir",
        str(tmp_path / "cache"),
        *TINY_SHAPE,
        "--vocab_size",
        "200",
        "--max_tokens_per_batch",
        "128",
        "--tokens_per_step",
        "256",
        "--max_steps",
        "5",
        "--warmup_steps",
        "2",
        "--torch_compile",
        "false",
        "--logging_steps",
        "1",
        "--per_device_eval_batch_size",
        "10",
        "--max_eval_samples",
        "10",
        "--translate_examples",
        "0",
        "--disable_tqdm",
        "true",
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        results = run(argv)
    output, summary = tmp_path / "out", json.loads((tmp_path / "summary" / "summary.json").read_text())
    state = json.loads((output / "checkpoint-5" / "trainer_state.json").read_text())
    rates = [entry["learning_rate"] for entry in state["log_history"] if "learning_rate" in entry]
    peak = 0.005
    expected = [1e-7, 1e-7 + (peak - 1e-7) / 2, peak, peak * (2 / 3) ** 0.5, peak * (2 / 4) ** 0.5]
    assert rates == pytest.approx(expected, rel=1e-6)  # logged with each step: the rate it stepped with
    assert results["averaged_checkpoints"] == ["checkpoint-4", "checkpoint-5"]  # the epoch's end, the part epoch's
    assert summary["beam"] == {"num_beams": 5, "length_penalty": 1.0} and "length_penalty_search" not in results
    assert summary["arguments"]["max_grad_norm"] == 25.0 and summary["arguments"]["gradient_accumulation_steps"] == 2
    assert summary["text"].startswith("lowercased and Moses-tokenized (sacremoses) before the BPE")
    assert summary["test"]["lc_tok_signature"].endswith("|pre:lc+moses-norm+moses-tok-de")
    moses, tokenizer = TextForm.moses_lowercase("en", "de"), load_tokenizer(str(output))
    assert summary["train_tokens"] == {  # an epoch's text as the run's tokenizer cuts it (tokens a second count it)
        side: sum(len(tokenizer(moses.prepare(line, lang)).input_ids) for line in open(path, encoding="utf-8"))
        for side, lang, path in zip(("source", "target"), ("en", "de"), corpus["train"], strict=True)
    }
    recipe = json.loads((output / "training_recipe.json").read_text())["recipe"]
    schedule = "inverse_sqrt: linear from 1e-07 to 0.005 over 2 steps, then 0.005 * sqrt(2 / step)"
    assert recipe["learning rate"] == schedule
    assert recipe["data"].startswith("files en->de, lowercased and Moses-tokenized")
    for folder in (output, output / "checkpoint-5"):  # the text it reads travels with the model, checkpoints too
        config = json.loads((folder / "config.json").read_text())
        assert config["text_form"] == TextForm.moses_lowercase("en", "de").as_config()
