"""vanilla-train's arguments: model flags generated from the config's fields, presets layered with `base:`."""

import argparse
import dataclasses

import pytest
import torch
import yaml

from modeling_vanilla import VanillaTransformerConfig
from training import arguments
from training.arguments import (
    CONFIG_DIR,
    PRESETS,
    SET_BY_TRAINING,
    ModelArguments,
    load_preset,
    model_fields,
    parse_args,
)
from vanilla_tools import hardware
from vanilla_tools.cli import UsageError


def test_every_config_field_is_a_flag_with_the_configs_default_and_help():
    own = set(VanillaTransformerConfig.__annotations__)
    assert set(model_fields()) == own - SET_BY_TRAINING
    defaults = {f.name: f.default for f in dataclasses.fields(ModelArguments)}
    for name in model_fields():
        assert defaults[name] == getattr(VanillaTransformerConfig(), name), name
    helps = {f.name: f.metadata.get("help") for f in dataclasses.fields(ModelArguments)}
    assert helps["ffn_dim"] == "d_ff, inner width of the position-wise feed-forward network (§3.3)."
    assert helps["decoder_layers"] == helps["encoder_layers"]  # documented together: "encoder_layers, decoder_layers"
    model_args, _, training_args = parse_args(["--output_dir", "x", "--layer_norm_eps", "1e-6", "--no_scale_embedding"])
    assert model_args.layer_norm_eps == 1e-6 and model_args.scale_embedding is False
    assert training_args.warmup_steps == 4000  # without a preset, §5.3's warmup


def test_big_is_wmt14_with_the_big_models_differences():
    big, wmt14 = load_preset("big"), load_preset("wmt14")
    assert "base" not in big
    assert {k: v for k, v in big.items() if wmt14.get(k) != v} == {
        "d_model": 1024,
        "num_attention_heads": 16,
        "ffn_dim": 4096,
        "dropout": 0.3,
        "max_steps": 300000,
        "average_last": 20,
        "save_total_limit": 20,
        "output_dir": "runs/big",
    }
    assert yaml.safe_load((CONFIG_DIR / "big.yaml").read_text())["base"] == "wmt14"


def test_a_preset_file_may_build_on_another(tmp_path):
    (tmp_path / "mine.yaml").write_text("base: multi30k\ndropout: 0.2\n")
    (tmp_path / "more.yaml").write_text("base: mine.yaml\nseed: 9\n")  # a file next to it
    settings = load_preset(str(tmp_path / "more.yaml"))
    assert settings == {**load_preset("multi30k"), "dropout": 0.2, "seed": 9}
    assert parse_args(["--config", str(tmp_path / "more.yaml")])[0].dropout == 0.2


@pytest.mark.parametrize("twice", [["--config", "multi30k-tiny"], ["--config=multi30k-tiny"]])
def test_a_second_config_is_refused_rather_than_one_presets_defaults_trained_under_the_others_name(twice):
    with pytest.raises(UsageError, match=r"^--config given 2 times \(multi30k, multi30k-tiny\): give one preset$"):
        parse_args(["--config", "multi30k", "--output_dir", "out", *twice])
    assert arguments.config_name(["--output_dir", "out", "--config=demo"]) == "demo"


def test_presets_based_on_each_other_in_a_circle_are_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(UsageError, match=r"presets based on each other in a circle"):
        load_preset(str(tmp_path / "a.yaml"))


def test_every_preset_stops_at_a_budget_that_does_not_depend_on_the_machine():
    """Steps (or epochs), never minutes: the same command stops at the same step on any machine. The multi30k
    preset's budget is what its canonical bf16 runs reached in their 54 minutes, to a multiple of its checkpoints."""
    for name in PRESETS:
        model_args, _, training_args = parse_args(["--config", name, "--output_dir", "x"])
        assert model_args.max_train_minutes == 0 and (training_args.max_steps > 0 or name == "demo"), name
    _, _, training_args = parse_args(["--config", "multi30k", "--output_dir", "x"])
    assert training_args.max_steps == 7200 and training_args.max_steps % training_args.save_steps == 0


def test_bf16_on_a_cpu_that_would_emulate_it_is_refused_in_one_line(monkeypatch):
    """Without AVX512-BF16 or AMX a bf16 matrix product runs at about 1 GFLOP/s: an explicit --bf16 true there is
    refused before anything is read; the default picks fp32, and the log says which precision and why."""
    monkeypatch.setattr(arguments, "cpu_bf16", lambda: False)
    monkeypatch.setattr(arguments, "bf16_supported", lambda: False)
    with pytest.raises(
        UsageError,
        match=r"^--bf16 true: this CPU has neither AVX512-BF16 nor AMX and would emulate "
        r"bf16 at about 1 GFLOP/s; train in fp32 \(--bf16 false\)",
    ):
        parse_args(["--output_dir", "x", "--use_cpu", "true", "--bf16", "true"])
    _, _, training_args = parse_args(["--output_dir", "x", "--use_cpu", "true"])
    assert not training_args.bf16
    monkeypatch.setattr(hardware, "cpu_bf16", lambda: False)
    line = hardware.precision_line("no", True)
    assert line == "fp32: this CPU has neither AVX512-BF16 nor AMX (bf16 would be emulated)"
    monkeypatch.setattr(arguments, "cpu_bf16", lambda: True)
    _, _, training_args = parse_args(["--output_dir", "x", "--use_cpu", "true", "--bf16", "true"])
    assert training_args.bf16
    monkeypatch.setattr(hardware, "cpu_bf16", lambda: True)
    assert hardware.precision_line("bf16", True) == "bf16 autocast: this CPU has AVX512-BF16 or AMX"
    assert hardware.precision_line("bf16", False) == "bf16 autocast on the GPU"


def test_on_a_gpu_a_step_makes_the_host_wait_for_nothing_unless_asked(monkeypatch):
    """On CUDA batches are copied without waiting (accelerate's non_blocking, from Trainer's pinned memory) and the
    loss is not read on the host to filter NaNs: each made the host wait for the GPU in every batch on a lent H200.
    Given flags win; elsewhere Trainer's defaults stay."""
    import torch

    _, _, training_args = parse_args(["--output_dir", "x", "--use_cpu", "true"])
    assert not training_args.accelerator_config.non_blocking and training_args.logging_nan_inf_filter
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(arguments, "bf16_supported", lambda: False)
    on_gpu = ["--output_dir", "x", "--use_cpu", "true"]  # (Trainer would set the device up: this machine has none)
    _, _, training_args = parse_args(on_gpu)
    assert training_args.accelerator_config.non_blocking
    assert not training_args.logging_nan_inf_filter
    _, _, training_args = parse_args(
        [*on_gpu, "--logging_nan_inf_filter", "true", "--accelerator_config", '{"non_blocking": false}']
    )
    assert not training_args.accelerator_config.non_blocking and training_args.logging_nan_inf_filter


@pytest.mark.parametrize("config", ["ddp", "ddp-2x8", "fsdp", "deepspeed_zero2"])
def test_a_precision_flag_against_accelerates_config_is_refused_naming_both(monkeypatch, config):
    """`accelerate launch` sets ACCELERATE_MIXED_PRECISION from its config's mixed_precision (each of the package's
    says bf16), and transformers autocasts by it unless a flag is true: --bf16 false, or this CPU's default, would
    have trained in bf16 autocast under an fp32 label. It is refused in one line; a flag that agrees, or accelerate's
    "no" (its default), runs the flag's precision, which is what autocast_precision returns."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import PrecisionType

    mixed_precision = load_config_from_file(str(CONFIG_DIR / "accelerate" / f"{config}.yaml")).mixed_precision
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", str(PrecisionType(mixed_precision)))  # as its launcher does
    monkeypatch.setattr(arguments, "bf16_supported", lambda: False)  # a CPU without bf16 (this one: AVX2 only)
    refusal = (
        r"^--bf16 false asks for fp32, but ACCELERATE_MIXED_PRECISION=bf16 \(accelerate launch's config's "
        r"mixed_precision, or the environment\) for bf16 autocast, which Trainer would run; make them agree "
        r"\(the flag, or mixed_precision: no\)$"
    )
    for flags in (["--bf16", "false"], []):
        with pytest.raises(UsageError, match=refusal):
            parse_args(["--output_dir", "x", "--use_cpu", "true", *flags])
    monkeypatch.setattr(arguments, "cpu_bf16", lambda: True)  # (else refused as emulated bf16 on this CPU)
    _, _, training_args = parse_args(["--output_dir", "x", "--use_cpu", "true", "--bf16", "true"])
    assert arguments.autocast_precision(training_args) == training_args.mixed_precision == "bf16"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    _, _, training_args = parse_args(["--output_dir", "x", "--use_cpu", "true", "--bf16", "true"])
    assert arguments.autocast_precision(training_args) == "bf16"
    _, _, training_args = parse_args(["--output_dir", "x", "--use_cpu", "true"])
    assert arguments.autocast_precision(training_args) == "no" and hardware.precision("no") == "fp32"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    with pytest.raises(UsageError, match=r"^--bf16 true asks for bf16 autocast, but ACCELERATE_MIXED_PRECISION=fp16"):
        parse_args(["--output_dir", "x", "--use_cpu", "true", "--bf16", "true"])


def test_fp16_on_a_cpu_is_refused_rather_than_trained_in_fp32_under_its_name(monkeypatch):
    """accelerate autocasts fp16 only on an accelerator: on a CPU the run would train in fp32."""
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    refusal = r"^--fp16 true: accelerate runs no fp16 autocast on a CPU, so the run would train in fp32; train with "
    with pytest.raises(UsageError, match=refusal):
        parse_args(["--output_dir", "x", "--use_cpu", "true", "--bf16", "false", "--fp16", "true"])


@pytest.mark.parametrize("cuda", [False, True])
def test_the_command_line_is_parsed_once(monkeypatch, cuda):
    """The preset and the device's defaults are known before the parser is built; the loader's settings on a GPU are
    settled from the one parse (here BPE-dropout's: workers made anew each epoch)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(arguments, "bf16_supported", lambda: False)
    parses = []
    parse = argparse.ArgumentParser.parse_known_args
    monkeypatch.setattr(
        argparse.ArgumentParser, "parse_known_args", lambda *args, **kwargs: parses.append(1) or parse(*args, **kwargs)
    )
    argv = ["--config=multi30k", "--output_dir", "x", "--bpe_dropout", "0.1", "--use_cpu", "true"]
    _, data_args, training_args = parse_args(argv)
    assert len(parses) == 1 and data_args.bpe_dropout == 0.1
    workers = (2, 4, False) if cuda else (0, None, False)
    loader = (
        training_args.dataloader_num_workers,
        training_args.dataloader_prefetch_factor,
        training_args.dataloader_persistent_workers,
    )
    assert loader == workers
