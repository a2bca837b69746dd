"""vanilla-train end to end on a tiny model: outputs, loading, evaluation, translation, checkpoint averaging."""

import errno
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel

from inference.translate import translate
from training.arguments import parse_args
from training.run.checkpoints import ON_SIGNAL_MARKER
from training.run.record import check_run_record
from training.step.average import average_checkpoints, average_newest_into, last_checkpoints
from vanilla_tools.cli import UsageError

pytestmark = pytest.mark.slow


def test_presets_and_overrides():
    model_args, data_args, training_args = parse_args(["--config", "demo", "--d_model", "64", "--output_dir", "x"])
    assert model_args.d_model == 64 and model_args.encoder_layers == 3  # flag beats preset beats default
    assert (training_args.adam_beta1, training_args.adam_beta2, training_args.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert training_args.label_smoothing_factor == 0.1 and data_args.dataset == "multi30k"
    for preset in ("multi30k", "wmt14", "big"):
        assert parse_args(["--config", preset])[2].label_smoothing_factor == 0.1
    assert parse_args(["--config", "big"])[0].dropout == 0.3
    assert parse_args(["--config", "multi30k"])[1].bpe_dropout == 0.1
    assert parse_args(["--config", "multi30k", "--bpe_dropout", "0"])[1].bpe_dropout == 0.0
    with pytest.raises(FileNotFoundError, match="no preset"):
        parse_args(["--config", "nope"])
    with pytest.raises(ValueError, match="unknown arguments"):
        parse_args(["--config", "demo", "--not_a_flag", "1"])


def test_run_writes_a_loadable_model_with_results(trained_run):
    output = trained_run["output"]
    for name in (
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "eval_results.json",
        "modeling_vanilla.py",
        "configuration_vanilla.py",
    ):
        assert (output / name).is_file(), name
    results = json.loads((output / "eval_results.json").read_text())
    assert results["train"]["train_loss"] > 0 and results["train"]["epoch"] > 0
    test = results["test"]
    assert 0 <= test["test_bleu"] <= 100 and 0 <= test["test_chrf"] <= 100
    assert test["test_signature"].startswith("nrefs:1|case:mixed") and test["test_length_ratio"] >= 0
    model = AutoModelForSeq2SeqLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert model.config.d_model == 32 and len(tokenizer) == model.config.vocab_size
    assert model.generation_config.num_beams == 2  # --num_beams of the run
    assert model.config.text_form == "raw"  # trained without --moses_lowercase_tokenize: read as given


def state_log(trained_run) -> list[dict]:
    """Trainer's log of the run (its last checkpoint's trainer_state.json)."""
    return json.loads((trained_run["output"] / "checkpoint-6" / "trainer_state.json").read_text())["log_history"]


def test_training_reduced_the_loss(trained_run):
    log = state_log(trained_run)
    losses = [entry["loss"] for entry in log if "loss" in entry]
    learning_rates = [entry["learning_rate"] for entry in log if "learning_rate" in entry]
    assert losses[-1] < losses[0]
    peak = 2.0 * 32**-0.5 * 4**-0.5  # lr_scale * d_model^-0.5 * warmup^-0.5 at step 4
    assert max(learning_rates) == pytest.approx(peak, rel=1e-6)


def test_learning_curve_summary_and_averaging(trained_run):
    curve = (trained_run["summary"] / "learning_curve.csv").read_text().splitlines()
    assert curve[0] == "minutes,step,epoch,eval_loss,eval_bleu,eval_chrf,train_loss"
    rows = [line.split(",") for line in curve[1:]]
    assert [int(r[1]) for r in rows] == [3, 6] and float(rows[0][0]) <= float(rows[1][0])
    summary = json.loads((trained_run["summary"] / "summary.json").read_text())
    results = trained_run["results"]
    assert summary["test"]["bleu"] == results["test"]["test_bleu"]  # local files: the test set is "test"
    assert summary["test"]["signature"].startswith("nrefs:1|case:mixed")
    assert summary["test"]["bleu_lc_tok"] == results["test"]["test_bleu_lc_tok"]  # the Multi30k literature's BLEU
    assert summary["test"]["lc_tok_signature"].endswith("|pre:lc+moses-norm+moses-tok-de")
    # the record of what ran: every resolved argument, the commit, the machine
    arguments = summary["arguments"]
    assert arguments["d_model"] == 32 and arguments["average_last"] == 2 and arguments["dataset"] == "files"
    assert arguments["learning_rate"] == pytest.approx(2.0 * 32**-0.5) and arguments["seed"] == 7
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    run = summary["run"]
    check_run_record(run)
    assert run["code"]["commit"] == head and isinstance(run["code"]["uncommitted_changes"], bool)
    assert run["code"]["uncommitted_changes"] == bool(run["code"]["changed_files"])
    assert run["machine"]["cpu_cores"] >= 1 and run["machine"]["torch"] == torch.__version__
    assert set(run["machine"]["cpu_features"]) <= {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    assert run["device"] == {"type": "cpu", "name": run["machine"]["processor"]} and run["seed"] == 7
    assert run["precision"] == ("bf16 autocast" if arguments["bf16"] else "fp32")
    assert run["budget"] == {
        "max_steps": 6,
        "num_train_epochs": None,
        "max_train_minutes": None,
        "tokens_per_step": arguments["max_tokens_per_batch"],
    }
    assert set(summary["machine_speed"]) == {"fp32_gflops_before", "fp32_gflops_after"}  # fp32 GFLOP/s
    assert min(summary["machine_speed"].values()) > 0
    assert summary["validation"]["chrf"] == results["validation"]["validation_chrf"]
    assert 0 < summary["train_minutes"] <= summary["wall_clock_minutes"] and summary["parameters"] > 0
    # where the minutes went (the demo's profile): the phases make up the whole command, training's are train_minutes,
    # the evaluations at steps 3 and 6 lie within training, and the final evaluation decoded both splits
    phases = summary["phase_minutes"]
    assert set(phases) == {"prepare", "train", "evaluations_in_training", "final_evaluation", "rest"}
    assert sum(phases[name] for name in ("prepare", "train", "final_evaluation", "rest")) == pytest.approx(
        summary["wall_clock_minutes"], abs=0.03
    )
    evaluations = [entry["eval_runtime"] for entry in state_log(trained_run) if "eval_runtime" in entry]
    assert len(evaluations) == 2 and phases["evaluations_in_training"] == round(sum(evaluations) / 60, 2)
    assert phases["train"] == summary["train_minutes"] and phases["evaluations_in_training"] <= phases["train"]
    decodes = (results["validation"]["validation_runtime"] + results["test"]["test_runtime"]) / 60
    assert phases["final_evaluation"] >= round(decodes, 2) - 0.01 and min(phases.values()) >= 0
    assert summary["command"].startswith("vanilla-train --dataset files") and "--average_last 2" in summary["command"]
    # the final model is the mean of checkpoints 4 and 6 (§6.1), not the last weights
    assert summary["averaged_checkpoints"] == ["checkpoint-4", "checkpoint-6"]
    assert summary["final_model"] == {  # the record says which model was scored, and why
        "model": "average",
        "checkpoints": ["checkpoint-4", "checkpoint-6"],
        "why": "--final_model average: §6.1's average of the last 2 checkpoints (--average_last)",
    }
    assert run["steps"] == 6 and summary["epochs"] == round(results["train"]["epoch"], 2) > 0
    # one launch, steps 0-6, its minutes those of the summary, what it ran on that of the run
    [launch] = run["launches"]
    assert (launch["first_step"], launch["last_step"], launch["train_minutes"]) == (0, 6, summary["train_minutes"])
    assert {key: launch[key] for key in ("code", "machine", "device", "precision")} == {
        "code": run["code"],
        "machine": run["machine"],
        "device": run["device"],
        "precision": run["precision"],
    } and launch["processes"] == 1
    saved = json.loads((trained_run["output"] / "checkpoint-6" / "launches.json").read_text())
    assert [(entry["first_step"], entry["last_step"]) for entry in saved] == [(0, 6)]
    train, wall = (round(summary[key] * 60) for key in ("train_minutes", "wall_clock_minutes"))  # 0.01 min: 0.6 s
    last = trained_run["stdout"].strip().splitlines()[-1]
    match = re.fullmatch(
        r"trained 6 steps \([0-9.]+ epochs\) in (\d+) min (\d+) s, the whole command took (\d+) min (\d+) s; "
        r"the record: (.+)",
        last,
    )  # minutes too: a loaded machine takes more than one for the six steps
    assert match and match[5] == str(trained_run["summary"] / "summary.json"), last
    printed = [60 * int(match[i]) + int(match[i + 1]) for i in (1, 3)]
    assert abs(printed[0] - train) <= 1 and abs(printed[1] - wall) <= 1, (last, summary)
    final = load_file(trained_run["output"] / "model.safetensors")
    ckpts = [load_file(trained_run["output"] / f"checkpoint-{s}" / "model.safetensors") for s in (4, 6)]
    for name, tensor in final.items():
        torch.testing.assert_close(tensor, (ckpts[0][name] + ckpts[1][name]) / 2)


def test_length_penalty_is_chosen_on_validation_and_saved(trained_run):
    results = trained_run["results"]
    search = results["length_penalty_search"]
    assert list(search) == ["0.5", "2.0"]
    chosen = max(search, key=search.get)  # the first of equal scores, as the run chooses
    assert results["validation"]["validation_bleu"] == search[chosen]
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_run["output"])
    assert model.generation_config.length_penalty == float(chosen)
    summary = json.loads((trained_run["summary"] / "summary.json").read_text())
    assert summary["beam"] == {"num_beams": 2, "length_penalty": float(chosen)}
    assert summary["length_penalty_search"] == search


def test_a_corpus_without_validation_trains_with_the_presets_evaluation_off(tmp_path, caplog):
    """docs/training.md's commands on a corpus of train and test files alone: the preset evaluates every epoch,
    which Trainer refuses without a validation set; the run trains without evaluating and says so."""
    from training_helpers import train_argv, write_corpus

    from training.train import run

    corpus = write_corpus(tmp_path / "data")
    del corpus["validation"]
    argv = [
        "--config",
        "demo",
        *train_argv(
            corpus,
            tmp_path / "out",
            "--max_steps",
            "2",
            "--translate_examples",
            "0",
            "--summary_dir",
            str(tmp_path / "summary"),
        ),
    ]
    with caplog.at_level(logging.WARNING, logger="vanilla_train"):
        results = run(argv)
    assert "no validation set (--validation_files): --eval_strategy epoch is off" in caplog.text
    assert results["train"]["steps"] == 2 and "validation" not in results
    assert 0 <= results["test"]["test_bleu"] <= 100


def test_every_checkpoint_is_marked_complete(trained_run):
    assert [p.name for p in last_checkpoints(trained_run["output"], 3)] == [
        "checkpoint-2",
        "checkpoint-4",
        "checkpoint-6",
    ]


def test_average_checkpoints(trained_run, tmp_path):
    checkpoints = last_checkpoints(trained_run["output"], 2)
    averaged_dir = average_checkpoints(checkpoints, tmp_path / "avg")
    weights = [load_file(p / "model.safetensors") for p in checkpoints]
    averaged = load_file(averaged_dir / "model.safetensors")
    for name, tensor in averaged.items():
        torch.testing.assert_close(tensor, (weights[0][name] + weights[1][name]) / 2)
    model = AutoModelForSeq2SeqLM.from_pretrained(averaged_dir)
    assert model.lm_head.weight is model.model.shared.weight
    assert AutoTokenizer.from_pretrained(averaged_dir).eos_token_id == 2
    with pytest.raises(ValueError, match="fewer than the 9"):
        last_checkpoints(trained_run["output"], 9)


def test_a_checkpoint_saved_on_a_signal_is_not_averaged(trained_run, tmp_path):
    run = Path(shutil.copytree(trained_run["output"], tmp_path / "run"))
    (run / "checkpoint-6" / ON_SIGNAL_MARKER).write_text("SIGTERM\n")  # as if a SIGTERM had stopped the run at 6
    assert [p.name for p in last_checkpoints(run, 2)] == ["checkpoint-2", "checkpoint-4"]
    with pytest.raises(ValueError, match="has 2 complete checkpoints written on schedule, fewer than the 3"):
        last_checkpoints(run, 3)


def test_a_checkpoint_without_its_model_file_is_refused_by_name(trained_run, tmp_path):
    """A checkpoint FSDP saved sharded holds its model in a folder of shards, no model.safetensors to average."""
    run = Path(shutil.copytree(trained_run["output"], tmp_path / "run"))
    (run / "checkpoint-6" / "model.safetensors").unlink()
    with pytest.raises(UsageError, match=r"checkpoint-6 holds no model.safetensors to average \(a checkpoint FSDP"):
        average_checkpoints(last_checkpoints(run, 2), tmp_path / "avg")
    assert not (tmp_path / "avg").exists()


def test_a_failed_write_of_the_average_removes_what_it_wrote(trained_run, tmp_path, monkeypatch):
    def full_disk(self, folder, **kwargs):
        Path(folder).mkdir(exist_ok=True)
        (Path(folder) / "config.json").write_text("{}")  # written before the weights fill the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full_disk)
    checkpoints = last_checkpoints(trained_run["output"], 2)
    with pytest.raises(UsageError, match=r"^cannot write the averaged model under .*avg: no space left on the device"):
        average_checkpoints(checkpoints, tmp_path / "avg")
    assert not (tmp_path / "avg").exists()  # made by the call: removed whole
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    with pytest.raises(UsageError, match="then run again \\(the checkpoints are untouched\\)$"):
        average_checkpoints(checkpoints, tmp_path / "mine")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]  # the user's file stays


def test_averaging_more_checkpoints_than_a_run_wrote_takes_those_it_has(trained_run, caplog):
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_run["output"])
    with caplog.at_level(logging.WARNING, logger="training.step.average"):
        averaged = average_newest_into(model, trained_run["output"], 9)
    assert [p.name for p in averaged] == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert "but " + str(trained_run["output"]) + " has only 3" in caplog.text
    weights = [load_file(p / "model.safetensors") for p in averaged]
    state = model.state_dict()
    for name in weights[0]:
        torch.testing.assert_close(state[name], sum(w[name] for w in weights) / 3)


def test_translate_function_and_cli(trained_run, tmp_path):
    output = trained_run["output"]
    model = AutoModelForSeq2SeqLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    sentences = ["A dog runs.", "Two men are standing outside near a large building with many windows.", ""]
    out = translate(model, tokenizer, sentences, batch_size=2, progress=False, num_beams=1)
    assert len(out) == 3 and all(isinstance(t, str) for t in out)
    source = tmp_path / "in.en"
    source.write_text("\n".join(sentences[:2]) + "\n", encoding="utf-8")
    references = tmp_path / "ref.de"
    references.write_text("Ein Hund rennt.\nZwei Männer stehen draußen.\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "inference.translate",
            "--model",
            str(output),
            str(source),
            "--references",
            str(references),
            "--num_beams",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(result.stdout.splitlines()) == 2
    assert "BLEU = " in result.stderr and "nrefs:1|case:mixed" in result.stderr
    assert "seem to have been set" not in result.stderr  # max_new_tokens (input + 50) without a competing max_length


@pytest.mark.parametrize(("name", "kind"), [("ddp", "MULTI_GPU"), ("fsdp", "FSDP"), ("deepspeed_zero2", "DEEPSPEED")])
def test_accelerate_configs_load(name, kind):
    from accelerate.commands.config.config_args import load_config_from_file

    from training.arguments import CONFIG_DIR

    config = load_config_from_file(str(CONFIG_DIR / "accelerate" / f"{name}.yaml"))
    assert config.distributed_type.name == kind and config.mixed_precision == "bf16" and config.num_processes == 8
    if kind == "FSDP":
        assert config.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "EncoderLayer,DecoderLayer"
    if kind == "DEEPSPEED":
        assert config.deepspeed_config["zero_stage"] == 2


def test_attention_maps_and_heat_map(trained_run, tmp_path):
    from inference.attention import attention_maps, plot_attention

    output = trained_run["output"]
    model = AutoModelForSeq2SeqLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    maps = attention_maps(model, tokenizer, "A dog runs in the park.", num_beams=2)
    source, target = len(maps.source_tokens), len(maps.target_tokens)
    assert maps.source_tokens[-1] == "</s>" and maps.cross.shape == (1, 2, target, source)
    assert maps.encoder.shape == (1, 2, source, source)
    torch.testing.assert_close(maps.cross.sum(-1), torch.ones(1, 2, target))  # each row a distribution
    assert model.config._attn_implementation == "sdpa"  # restored after the eager pass
    for layer, head in ((None, None), (0, 1)):
        png = plot_attention(maps, tmp_path / f"a{layer}{head}.png", layer, head)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_learning_curve_plot(trained_run, tmp_path):
    from training.run.plot_curve import plot_curve

    png = plot_curve(trained_run["summary"] / "learning_curve.csv", tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    # a folder gets the CSV's name, a name without an extension gets .png: the path returned is the file written
    assert plot_curve(trained_run["summary"] / "learning_curve.csv", tmp_path) == tmp_path / "learning_curve.png"
    assert plot_curve(trained_run["summary"] / "learning_curve.csv", tmp_path / "bare") == tmp_path / "bare.png"
    assert (tmp_path / "learning_curve.png").is_file() and (tmp_path / "bare.png").is_file()


@pytest.mark.parametrize("view", ["head", "model"])
def test_bertviz_views_of_every_attention(trained_run, tmp_path, view):
    """vanilla-attention --html: bertviz's encoder-decoder view with encoder, decoder and cross attention of every
    layer and head, the weights the model returns with output_attentions=True."""
    pytest.importorskip("bertviz")
    script = Path(sys.executable).parent / "vanilla-attention"
    html = tmp_path / f"{view}.html"
    done = subprocess.run(
        [
            str(script),
            "--model",
            str(trained_run["output"]),
            "A dog runs in the park.",
            "--num_beams",
            "2",
            "--html",
            str(html),
            "--view",
            view,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    page = html.read_text(encoding="utf-8")
    params = json.JSONDecoder().raw_decode(page, page.index('{"attention": '))[0]  # the data bertviz draws
    from inference.attention import attention_maps

    model = AutoModelForSeq2SeqLM.from_pretrained(trained_run["output"])
    maps = attention_maps(model, AutoTokenizer.from_pretrained(trained_run["output"]), "A dog runs in the park.", 2)
    views = {entry["name"]: entry for entry in params["attention"]}
    assert set(views) == {"Encoder", "Decoder", "Cross"}
    for name, weights in (("Encoder", maps.encoder), ("Decoder", maps.decoder), ("Cross", maps.cross)):
        attn = torch.tensor(views[name]["attn"])  # (layers, heads, queries, keys)
        assert attn.shape == weights.shape == (1, 2) + weights.shape[2:]
        torch.testing.assert_close(attn, weights, rtol=0, atol=1e-6)
    shown = [token.replace("\u2581", " ") for token in maps.source_tokens]  # bertviz prettifies SentencePiece's ▁
    assert views["Cross"]["left_text"] == maps.decoder_input_tokens and views["Cross"]["right_text"] == shown
