"""One rule decides whether two runs may be compared (experiments/comparable.py), on synthetic run records: the same
code, budget, kind of device and precision, each difference named; and the run records every runner writes hold to
one schema (training/run/record.py)."""

import pytest
from training_helpers import synthetic_run

from experiments import comparable
from experiments.comparable import BF16, FP32, groups, precisions_agree, single_runs_agree, why_not
from training.run.record import check_run_record, run_budget, run_record


def reasons(a: dict, b: dict, **kwargs) -> list[str]:
    return [str(apart) for apart in why_not(a, b, **kwargs)]


def test_runs_alike_are_compared_and_each_difference_is_named(monkeypatch):
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    assert why_not(synthetic_run(seed=1), synthetic_run(seed=2)) == []  # seeds are the replicates
    assert reasons(synthetic_run(), synthetic_run(code="older")) == ["other code (new and older)"]
    assert reasons(synthetic_run(), synthetic_run(max_steps=3000)) == [
        "other budgets (1,000 steps of 2048 tokens; 3,000 steps of 2048 tokens)"
    ]
    assert reasons(synthetic_run(), synthetic_run(tokens=4096)) == [
        "other budgets (1,000 steps of 2048 tokens; 1,000 steps of 4096 tokens)"
    ]
    assert reasons(synthetic_run(), synthetic_run(device="cuda")) == [
        "other devices (cpu and cuda): not measured to train alike"
    ]
    assert reasons(synthetic_run(FP32), synthetic_run(BF16)) == [
        "other precisions (fp32 and bf16 autocast): not measured to train alike"
    ]
    assert reasons(synthetic_run(), synthetic_run(None)) == ["a precision not recorded"]
    minutes = synthetic_run(max_steps=None, minutes=54)
    assert reasons(minutes, minutes) == ["a budget in minutes (54): the steps it reaches depend on the machine"]
    everything = why_not(synthetic_run(), synthetic_run(BF16, code="older", max_steps=3000, device="cuda"))
    assert [apart.criterion for apart in everything] == ["code", "budget", "device", "precision"]
    assert why_not(synthetic_run(), synthetic_run(code="older"), ignoring=("code",)) == []


def test_precisions_compare_once_measured_to_agree(monkeypatch):
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    assert comparable.experiment_precision() == FP32  # not measured: fp32, the precision every machine runs
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", "docs/table3.md#precision")
    assert why_not(synthetic_run(FP32), synthetic_run(BF16)) == []
    monkeypatch.setattr(comparable, "bf16_supported", lambda: True)
    assert comparable.experiment_precision() == BF16  # then each machine runs the precision fast on it
    monkeypatch.setattr(comparable, "bf16_supported", lambda: False)
    assert comparable.experiment_precision() == FP32


def test_runs_split_into_groups_that_compare(monkeypatch):
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", None)  # the rule before the precisions are measured
    runs = [{"run": synthetic_run(p, code=c)} for p, c in ((FP32, "a"), (BF16, "a"), (FP32, "a"), (FP32, "b"))]
    assert [len(group) for group in groups(runs)] == [2, 1, 1]
    assert [len(group) for group in groups(runs, ignoring=("precision",))] == [3, 1]
    monkeypatch.setattr(comparable, "PRECISION_EVIDENCE", "docs/multi30k.md#bf16-autocast-and-fp32")
    assert [len(group) for group in groups(runs)] == [3, 1]  # measured alike: precision no longer splits


def test_the_precision_rule_needs_no_difference_found_and_one_under_the_seed_spread():
    assert precisions_agree([16.0, 15.6, 16.5], [16.3, 15.3, 16.4])  # -0.03, spread ~0.6: agree
    assert not precisions_agree([19.0, 18.6, 19.5], [16.3, 15.3, 16.4])  # interval excludes zero
    assert not precisions_agree([17.2, 16.2, 17.3], [16.3, 15.3, 16.4])  # holds zero, but moved 0.9 > 0.61
    assert precisions_agree([16.0, 15.6], [16.3, 15.3, 16.4]) is None  # too few seeds
    # the preset once in each precision, with the spread of its six bf16 runs (test2016: 0.398, band 1.10)
    assert single_runs_agree(38.0, 38.94, 0.398) and not single_runs_agree(37.8, 38.94, 0.398)
    assert single_runs_agree(41.11, 39.6, 0.566) and not single_runs_agree(41.11, 39.5, 0.566)  # band 1.57


def test_a_run_record_holds_to_its_schema():
    arguments = {
        "max_steps": 7200,
        "num_train_epochs": 40,
        "max_train_minutes": 0.0,
        "max_tokens_per_batch": 2048,
        "gradient_accumulation_steps": 2,
        "bf16": False,
        "seed": 3,
    }
    run = run_record(arguments, 7200, "cpu", processes=2, code={"commit": "abc"}, host={"processor": "x", "gpus": []})
    check_run_record(run)
    assert run["budget"] == {
        "max_steps": 7200,
        "num_train_epochs": None,
        "max_train_minutes": None,
        "tokens_per_step": 8192,
    }
    assert run["device"] == {"type": "cpu", "name": "x"} and run["precision"] == FP32 and run["seed"] == 3
    assert run_budget({**arguments, "max_steps": -1})["num_train_epochs"] == 40
    gpu = run_record({**arguments, "bf16": True}, 10, "cuda", code={}, host={"processor": "x", "gpus": ["NVIDIA H100"]})
    assert gpu["device"] == {"type": "cuda", "name": "NVIDIA H100"} and gpu["precision"] == BF16
    for broken, message in (
        ({**run, "seed": "1"}, "'seed' is '1'"),
        ({**run, "steps": True}, "'steps' is True"),
        ({k: v for k, v in run.items() if k != "device"}, "no 'device'"),
        ({**run, "budget": {**run["budget"], "max_steps": None}}, "lacks a length"),
        ({**run, "schema": 2}, "schema 2, this code reads 1"),
    ):
        with pytest.raises(ValueError, match=message):
            check_run_record(broken)
