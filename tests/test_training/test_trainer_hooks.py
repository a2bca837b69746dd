"""PaperSeq2SeqTrainer and transformers' Trainer: every private name of transformers, Accelerate, torch, datasets and
argparse that the repository's code touches (training/, vanilla_tools/, modeling_vanilla/, inference/, experiments/,
benchmarks/) is found in its code and listed in tests/private_registry.py with its reason, and exists and behaves on
the installed releases, whichever they are; only the trainer's module reaches into a Trainer's private parts, the
private methods it still overrides exist as it expects them (a release that renames one fails here, by name, rather
than silently skipping our override), and the public hooks it moved to do their work."""

import ast
import inspect
from pathlib import Path

import pytest
import torch
import transformers
from private_registry import PRIVATE_USES
from private_uses import private_uses
from training_helpers import pairs, tiny_trainer
from transformers import Seq2SeqTrainer, TrainerCallback

from training.data.batching import TokenBatchSampler
from training.schedules import NoamSchedule
from training.step.trainer import PaperSeq2SeqTrainer
from vanilla_tools.decoding import Decoding

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "training"
# vanilla-train and its floor, the model (parsed only: its files import no registry), the entry points and tools
PACKAGES = tuple(
    ROOT / name for name in ("training", "vanilla_tools", "modeling_vanilla", "inference", "experiments", "benchmarks")
)
OVERRIDDEN = [hook for hook in PRIVATE_USES if hook in vars(PaperSeq2SeqTrainer)]


def unlisted(uses) -> list[str]:
    return sorted(str(use) for use in uses if use.name not in PRIVATE_USES)


def on_this_release(name: str) -> bool:
    try:
        PRIVATE_USES[name].find()
    except (AttributeError, ImportError):
        return False
    return True


def test_every_internal_touched_is_listed_with_its_reason():
    uses = [use for package in PACKAGES for use in private_uses(package)]
    assert not unlisted(uses), f"private names used, not in tests/private_registry.py: {unlisted(uses)}"
    # a name the installed release lacks is not found in the code (``self._name`` is the library's only where its class
    # has it): its entry is checked through ``instead`` by the next test
    unused = sorted(name for name in set(PRIVATE_USES) - {use.name for use in uses} if on_this_release(name))
    assert not unused, f"tests/private_registry.py lists what the code no longer touches: {unused}"
    assert all(name.startswith("_") and len(use.why) > 20 for name, use in PRIVATE_USES.items())


@pytest.mark.parametrize("name", sorted(PRIVATE_USES))
def test_each_private_name_exists_and_behaves_on_the_installed_release(name):
    """Whatever release pip installed: the name resolves (or, where a release lacks it, the one the code uses
    instead does), and where a call is cheap it does what the code relies on."""
    use = PRIVATE_USES[name]
    try:
        found = use.find()
    except (AttributeError, ImportError) as error:
        assert use.instead, f"{use.library} has no {name} any more: {error}"
        PRIVATE_USES[use.instead].find()  # the code's way on this release
        return
    assert use.behaves is None or use.behaves(found), f"{use.library}'s {name} no longer serves: {use.why}"


def test_a_release_without_a_private_name_fails_by_name_unless_the_code_has_another_way(monkeypatch):
    """A release that drops a name the code needs fails the check, naming it; one that drops a name the code uses only
    where the other is missing (the pipeline's before and since transformers 5.20) passes."""
    monkeypatch.delattr(transformers.Trainer, "_save_checkpoint")
    with pytest.raises(AssertionError, match="transformers has no _save_checkpoint any more"):
        test_each_private_name_exists_and_behaves_on_the_installed_release("_save_checkpoint")
    monkeypatch.delattr(transformers.Pipeline, "_prepare_generate_kwargs", raising=False)  # absent before 5.20
    test_each_private_name_exists_and_behaves_on_the_installed_release("_prepare_generate_kwargs")
    monkeypatch.setattr(transformers.CompileConfig, "_compile_all_devices", True)
    with pytest.raises(AssertionError, match="_compile_all_devices no longer serves"):
        test_each_private_name_exists_and_behaves_on_the_installed_release("_compile_all_devices")


PLANTED = """
import datasets
import torch
from torch._inductor.cpp_builder import get_cpp_compiler


def key(data: datasets.Dataset) -> tuple:
    return data._fingerprint, torch.cpu._is_avx512_bf16_supported(), torch._dynamo.utils.counters, data._hidden
"""


def test_the_uses_of_torch_and_datasets_are_found_and_an_unlisted_one_fails(tmp_path):
    (tmp_path / "module.py").write_text(PLANTED)
    uses = private_uses(tmp_path)
    assert {(use.name, use.line) for use in uses} == {
        ("_inductor", 4),  # a private module
        ("_fingerprint", 8),  # of an object of an annotated library class
        ("_is_avx512_bf16_supported", 8),  # reached from the library's module
        ("_dynamo", 8),
        ("_hidden", 8),
    }
    assert unlisted(uses) == ["_hidden (module.py:8)"]


def test_only_the_trainers_module_reaches_into_a_trainer():
    """Outside training/step/trainer.py no module uses a Trainer's private methods or its callback handler: what needs
    them is a public method of PaperSeq2SeqTrainer (save_checkpoint: a stopped run's checkpoint)."""
    private = sorted(str(use) for use in private_uses(PACKAGE) if use.on_trainer and use.name.startswith("_"))
    assert not private, private
    handler = sorted(
        f"{path.name}:{node.lineno}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "trainer.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "callback_handler"
    )
    assert not handler, handler


SOURCE = """
import transformers
from transformers import Seq2SeqTrainer, TrainerCallback
from transformers.trainer import PREFIX_CHECKPOINT_DIR, _is_peft_model
from transformers.trainer_utils import IntervalStrategy, TrainOutput


class Ours(Seq2SeqTrainer):
    def evaluation_loop(self, *args, **kwargs):
        self.gather_function = self.accelerator.gather_for_metrics
        self.mine, self._own = 1, 2
        return super()._save_checkpoint(self._own, self.mine)

    def _inner_training_loop(self, *args):
        pass


class Listening(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        return args._frozen, state.global_step, kwargs["model"]._tied_weights_keys


def stop(trainer: Ours, result: TrainOutput):
    trainer.control = trainer.callback_handler.on_save(trainer.args, trainer.state, trainer.control)
    return getattr(trainer, "_gen_kwargs"), result._replace(), transformers.__version__, IntervalStrategy.NO
"""


def test_the_internals_are_found_in_the_code(tmp_path):
    (tmp_path / "module.py").write_text(SOURCE)
    found = {(use.name, use.line, use.on_trainer) for use in private_uses(tmp_path)}
    assert found == {
        ("_is_peft_model", 4, False),  # a private name imported (PREFIX_CHECKPOINT_DIR and TrainOutput are public)
        ("_save_checkpoint", 12, False),  # a private method called (Trainer's gather_function and accelerator are not)
        ("_inner_training_loop", 14, False),  # and overridden (``_own``, the subclass's own, is not Trainer's)
        ("_frozen", 20, False),  # a callback's arguments are Trainer's objects
        ("_tied_weights_keys", 20, False),
        ("_gen_kwargs", 25, True),  # by getattr too, on a Trainer; namedtuple's _replace is public
    }


@pytest.mark.parametrize("hook", OVERRIDDEN)
def test_each_private_hook_we_override_is_still_trainers(hook):
    ours = inspect.signature(getattr(PaperSeq2SeqTrainer, hook)).parameters
    theirs = getattr(Seq2SeqTrainer, hook, None)
    assert theirs is not None, (
        f"transformers' Trainer has no {hook} any more: PaperSeq2SeqTrainer.{hook} is never called"
    )
    assert list(inspect.signature(theirs).parameters) == list(ours), f"Trainer.{hook} changed its parameters"


def test_training_draws_its_batches_from_the_token_sampler(tmp_path):
    loader = tiny_trainer(tmp_path).get_train_dataloader()
    assert isinstance(loader.batch_sampler, TokenBatchSampler) or isinstance(
        getattr(loader.batch_sampler, "batch_sampler", None), TokenBatchSampler
    )
    for batch in loader:  # every batch within the token budget of the sampler
        assert batch["input_ids"].numel() <= 24 and batch["labels"].numel() <= 24


def test_each_train_call_runs_the_papers_schedule_from_its_first_step(tmp_path):
    """§5.3's schedule is made by the public create_scheduler for each train(), over that call's optimizer: a second
    call starts again at step 1 of the warmup (Trainer remakes its own schedulers the same way)."""
    run = tiny_trainer(tmp_path)
    rates = []
    for _ in range(2):
        run.train()
        rates.append(run.lr_scheduler.get_last_lr()[0])
        assert run.lr_scheduler.optimizer is run.optimizer
    assert rates[0] == rates[1] == NoamSchedule(4)(3)  # after 3 steps: the rate of step 4, the warmup's peak


class GradientNorms(TrainerCallback):
    """The norm of the whole gradient the optimizer steps with, each step (after Trainer's clipping)."""

    def __init__(self):
        self.norms = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        grads = [p.grad.norm() for p in model.parameters() if p.grad is not None]
        self.norms.append(torch.linalg.vector_norm(torch.stack(grads)).item())


def test_max_grad_norm_clips_the_gradient_the_optimizer_steps_with(tmp_path):
    """--max_grad_norm (fairseq's --clip-norm: 25 in the multi30k-tiny preset, off in the others) reaches the optimizer
    step: with it, every step's gradient has exactly that norm where it had more."""
    free, clipped = GradientNorms(), GradientNorms()
    run = tiny_trainer(tmp_path / "free", max_grad_norm=0.0)
    run.add_callback(free)
    run.train()
    limit = min(free.norms) / 10
    run = tiny_trainer(tmp_path / "clipped", max_grad_norm=limit)
    run.add_callback(clipped)
    run.train()
    assert len(clipped.norms) == 3 and min(free.norms) > 0
    assert clipped.norms == pytest.approx([limit] * 3, rel=1e-5)


def test_an_evaluations_search_lives_as_long_as_its_call(tmp_path, monkeypatch):
    """evaluate and predict hand their search to each batch's generate() (``generate_kwargs``) for the length of the
    call only: between calls, and after one that failed, the trainer holds none. (predict: an evaluation without
    metrics computes its loss alone.)"""
    run = tiny_trainer(tmp_path, predict_with_generate=True, per_device_eval_batch_size=4)
    seen, asked = [], Decoding.paper(2, 0.6)
    generate_kwargs = run.generate_kwargs
    monkeypatch.setattr(
        run, "generate_kwargs", lambda inputs, search: seen.append(search) or generate_kwargs(inputs, search)
    )
    assert run.search is None
    run.predict(pairs().dataset, decoding=asked)
    run.predict(pairs().dataset)
    assert seen == [asked] * 3 + [run.decoding.final] * 3 and run.search is None
    monkeypatch.setattr(run, "generate_kwargs", lambda inputs, search: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        run.predict(pairs().dataset)
    assert run.search is None
