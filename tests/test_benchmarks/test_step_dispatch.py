"""benchmarks.step_dispatch (issue 99, item 4 A): the operators an optimizer step dispatches, and the accumulation adds
among them, counted on a profiled step."""

import pytest
from helpers import batch_of, tiny_model
from torch.profiler import ProfilerActivity, profile, record_function

from benchmarks import step_dispatch


def profiled_step(model, micro_batches: int) -> dict:
    """``count_events`` of one step of ``micro_batches`` accumulated backward passes on the same batch, each batch
    made inside a data loader's label, as Trainer's loop takes it."""
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        for _ in range(micro_batches):
            with record_function("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
                batch = {name: tensor.clone() for name, tensor in batch_of((3, 7, 6)).items()}
            model(**batch).loss.backward()
        model.zero_grad(set_to_none=True)
    return step_dispatch.count_events(profiled.events())


def test_each_micro_batch_after_the_first_adds_into_every_parameters_gradient():
    """Tiny model (2+2 layers, 61 parameters), no dropout: 2 micro-batches dispatch twice one's operators and one
    accumulation add a parameter; 1 dispatches none; the data loader's copies are not counted."""
    model = tiny_model().train()
    parameters = sum(1 for _ in model.parameters())
    one, two = profiled_step(model, 1), profiled_step(model, 2)
    assert parameters == 61 and one["accumulation_adds"] == 0 and two["accumulation_adds"] == parameters
    assert two["dispatched"] == 2 * one["dispatched"] + parameters
    assert "aten::clone" not in one["by_operator"] and one["by_operator"]["aten::mm"] > 0


def test_the_flags_give_the_wmt14_depth_and_step_at_a_tiny_width():
    """The tokens of a step are the wmt14 preset's 25,000 a side, in 8 micro-batches of 3,125 or 1 of 25,000."""
    values = flag_values(step_dispatch.tiny_flags(8, compiled=True))
    assert values["--encoder_layers"] == values["--decoder_layers"] == "6" and values["--d_model"] == "32"
    assert values["--tokens_per_step"] == "25000" and values["--max_tokens_per_batch"] == "3125"
    assert values["--torch_compile"] == "true"
    assert flag_values(step_dispatch.tiny_flags(1, compiled=False))["--max_tokens_per_batch"] == "25000"


def flag_values(flags: list[str]) -> dict[str, str]:
    return dict(zip(flags[::2], flags[1::2], strict=True))


@pytest.mark.slow
def test_the_trainers_accumulated_step_adds_into_each_of_the_181_gradients_7_times():
    """The real Trainer step of the wmt14 depth (6+6 layers, 181 parameters) at a tiny width, eager: 8 micro-batches
    make 1,267 accumulation adds (181 x 7), 1 makes none (about 45 s each on 2 cores)."""
    eight, one = step_dispatch.step_dispatch(8, compiled=False), step_dispatch.step_dispatch(1, compiled=False)
    assert (eight["micro_batches"], eight["parameters"], eight["accumulation_adds"]) == (8, 181, 181 * 7)
    assert (one["micro_batches"], one["accumulation_adds"]) == (1, 0)
    assert one["dispatched"] < eight["dispatched"] / 5
