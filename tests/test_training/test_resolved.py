"""The run resolved once (training/resolved.py, ``build.resolve_run``): every derived value is decided in one place,
and the parsed Seq2SeqTrainingArguments are written in one place. Both found by parsing training/ with ``ast``, and
each check shown to fail on a use planted where it does not belong."""

import ast
import dataclasses
from pathlib import Path

import pytest

from training import resolved
from training.arguments import parse_args
from training.build import resolve_run

TRAINING = Path(resolved.__file__).parent
RESOLUTION = ("build.py", "resolve_run")  # the one function that makes the ResolvedRun
# The derived values the run decides once, each by the names that compute it: a call of one of ``calls``, or a read
# of one of ``reads`` (an attribute), is allowed in the functions listed only (file, function).
DERIVED = {
    "accumulation": {
        "calls": {"accumulation_steps"},
        "reads": {"tokens_per_step"},  # what it is computed from (with the micro-batch)
        "in": {RESOLUTION, ("micro_batch.py", "size_micro_batch")},
    },
    "batch shapes": {
        "calls": {"batch_shapes", "for_device"},
        "reads": set(),
        "in": {RESOLUTION, ("batching.py", "batch_shapes")},  # (the latter: by device, from the data's flags)
    },
    "micro-batch": {
        "calls": {"size_micro_batch"},
        "reads": {"max_tokens_per_batch"},  # of the arguments: the run's is ResolvedRun.micro_batch
        "in": {RESOLUTION, ("micro_batch.py", "size_micro_batch")},
    },
    "precision": {
        "calls": {"autocast_precision"},
        "reads": {"mixed_precision", "bf16", "fp16"},
        # check_precision refuses an emulated bf16 at parsing, before any work; resolved_arguments labels a run
        # that was parsed, not resolved (experiments' planned runs)
        "in": {
            RESOLUTION,
            ("arguments.py", "autocast_precision"),
            ("arguments.py", "check_precision"),
            ("record.py", "resolved_arguments"),
        },
    },
    "text form": {
        "calls": {"text_form", "moses_lowercase"},
        "reads": {"moses_lowercase_tokenize"},
        "in": {RESOLUTION, ("corpus.py", "text_form")},  # (the latter: the rule, from the data's flags)
    },
    "corpora": {
        "calls": {"given_corpora"},
        "reads": {"train_files"},
        # the rule, from the flag; and the readers of the files, which tools without a run (experiments/) use too:
        # each split's files, each corpus's pairs
        "in": {
            RESOLUTION,
            ("corpus.py", "given_corpora"),
            ("corpus.py", "known_before_reading"),
            ("corpus.py", "split_files"),
            ("corpus.py", "training_pairs"),
        },
    },
}
ARGUMENT_NAMES = ("data_args", "training_args", "args")  # the parsed arguments, as training/ names them


def functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            yield node


def derived_elsewhere(root: Path = TRAINING) -> list[str]:
    """Each place under ``root`` that computes a derived value (``DERIVED``) outside the functions allowed to."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for function in functions(path):
            for node in ast.walk(function):
                called = isinstance(node, ast.Call) and (
                    getattr(node.func, "id", None) or getattr(node.func, "attr", "")
                )
                read = (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Load)
                    and getattr(node.value, "id", None) in ARGUMENT_NAMES
                    and node.attr
                )
                for value, rule in DERIVED.items():
                    if (called in rule["calls"] or read in rule["reads"]) and (path.name, function.name) not in rule[
                        "in"
                    ]:
                        found.append(f"{value}: {path.relative_to(root)}:{node.lineno} {function.name}")
    return found


def test_every_derived_value_is_decided_in_the_runs_resolution_only():
    assert not derived_elsewhere(), derived_elsewhere()


def training_arguments_written(root: Path = TRAINING) -> list[str]:
    """Each assignment to a field of ``training_args`` or ``args`` under ``root`` outside ``ResolvedRun.write``."""
    changes = []
    for path in sorted(root.rglob("*.py")):
        for function in functions(path):
            if (path.name, function.name) == ("resolved.py", "write"):
                continue
            for node in ast.walk(function):
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                for target in (t for t in targets if isinstance(t, ast.Tuple | ast.Attribute)):
                    for field in target.elts if isinstance(target, ast.Tuple) else [target]:
                        name = getattr(field, "value", None)
                        if isinstance(name, ast.Name) and name.id in ("training_args", "args"):
                            changes.append(f"{path.relative_to(root)}:{field.lineno} {function.name}")
    return changes


def test_only_the_resolved_run_writes_the_training_arguments():
    """Seq2SeqTrainingArguments are changed in one step (``ResolvedRun.write``): no other function of training/
    assigns to a field of ``training_args`` or ``args`` (an in-place change that a record would then read back)."""
    assert not training_arguments_written(), training_arguments_written()


@pytest.mark.parametrize(
    ("planted", "value"),
    [
        (
            "def f(data_args, run):\n    return max(1, round(data_args.tokens_per_step / run.micro_batch))\n",
            "accumulation",
        ),
        ("def f(data_args):\n    return BatchShapes.for_device('cpu', 128)\n", "batch shapes"),
        ("def f(data_args):\n    return data_args.max_tokens_per_batch * 2\n", "micro-batch"),
        ("def f(training_args):\n    return 'bf16' if training_args.bf16 else 'no'\n", "precision"),
        ("def f(data_args):\n    return TextForm.moses_lowercase('en', 'de')\n", "text form"),
        ("def f(data_args):\n    return data_args.moses_lowercase_tokenize and 'lowercased'\n", "text form"),
        ("def f(data_args):\n    return [corpus.tag for corpus in given_corpora(data_args)]\n", "corpora"),
    ],
)
def test_the_checks_find_a_value_computed_elsewhere_and_a_second_write(tmp_path, planted, value):
    (tmp_path / "planted.py").write_text(planted + "\n\ndef g(training_args):\n    training_args.learning_rate = 1\n")
    assert derived_elsewhere(tmp_path) == [f"{value}: planted.py:2 f"]
    assert training_arguments_written(tmp_path) == ["planted.py:6 g"]


def test_the_resolved_run_writes_the_runs_changes_once_where_it_is_resolved(tmp_path, caplog):
    """The changes a run makes to the parsed arguments, decided and written where the run is resolved, before
    anything is built: the accumulation of --tokens_per_step, a stream's position kept by itself, no evaluation
    without a validation set (a corpus of training files alone), §5.3's rate from d_model, the compile mode."""
    argv = ["--config", "wmt14", "--output_dir", str(tmp_path), "--max_tokens_per_batch", "3125", "--streaming"]
    corpus = ["--dataset", "files", "--train_files", "train.en", "train.de"]
    model_args, data_args, training_args = parse_args([*argv, *corpus, "--max_steps", "10"])
    assert training_args.gradient_accumulation_steps == 1 and not training_args.ignore_data_skip  # as parsed
    run = resolve_run(model_args, data_args, training_args)
    assert (run.micro_batch, run.accumulation, run.tokens_per_step) == (3125, 8, 25_000) and not run.validation
    assert training_args.gradient_accumulation_steps == 8 and training_args.ignore_data_skip
    assert training_args.eval_strategy == "no" and "--eval_strategy steps is off" in caplog.text
    assert training_args.learning_rate == run.learning_rate == 512**-0.5
    assert training_args.torch_compile_mode == run.compile_mode is None


def test_the_resolved_run_is_made_whole_and_stays_as_made(tmp_path):
    """Its settings (what a relaunch compares) are made with it, from the batch plan and shapes it holds, and it is
    frozen: nothing is set on it once made."""
    run = resolve_run(*parse_args(["--config", "demo", "--output_dir", str(tmp_path), "--tokens_per_step", "8192"]))
    assert run.validation and run.settings["batch_shapes"] == dataclasses.asdict(run.shapes)
    assert [run.settings[key] for key in ("tokens_per_batch", "gradient_accumulation_steps")] == [
        run.batch_plan["tokens_per_batch"],
        run.accumulation,
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.settings = {}
