"""One Decoding for every engine: resolved from the generation config plus overrides, its rules written once."""

import pytest
from helpers import tiny_model
from transformers import GenerationConfig

from inference.attention import arguments as attention_arguments
from training.arguments import ModelArguments
from vanilla_tools.cli import UsageError
from vanilla_tools.decoding import Decoding
from vanilla_tools.run_files import TrainingRecipe


def paper_config(**changes) -> GenerationConfig:
    return GenerationConfig(**{"num_beams": 4, "length_penalty": 0.6, "early_stopping": True, **changes})


def test_resolve_takes_the_config_then_the_overrides():
    assert Decoding.resolve(paper_config()) == Decoding(4, 0.6, True)
    assert Decoding.resolve(paper_config(), num_beams=2) == Decoding(2, 0.6, True)
    assert Decoding.resolve(paper_config(), length_penalty=0.0).length_penalty == 0.0  # 0 is a choice, not unset
    assert Decoding.resolve(GenerationConfig()) == Decoding(1, 1.0, False)  # transformers' own defaults


def test_greedy_search_has_no_length_penalty():
    assert Decoding.resolve(paper_config(), num_beams=1).length_penalty == 1.0
    assert Decoding.paper(1, 2.0) == Decoding(1, 1.0, False)
    assert Decoding.paper(4, 2.0).search_kwargs() == {"num_beams": 4, "length_penalty": 2.0, "early_stopping": True}
    assert Decoding.paper(1, 2.0).search_kwargs() == {"num_beams": 1, "length_penalty": 1.0}  # generate() warns else


def test_the_output_length_rule():
    assert Decoding.paper(4, 0.6).max_new_tokens_for(7) == 57  # §6.1: input length + 50
    assert Decoding.resolve(paper_config(max_new_tokens=5)).max_new_tokens_for(7) == 5
    assert Decoding.resolve(paper_config(max_length=12)).max_new_tokens_for(7) == 11  # the start token counts
    assert Decoding.paper(1, 1.0).generate_kwargs(3)["max_new_tokens"] == 53


def test_ctranslate2_refuses_a_beam_search_that_does_not_stop_early():
    assert Decoding.paper(4, 0.6).ctranslate2_refusal() is None
    assert Decoding(1, 1.0, False).ctranslate2_refusal() is None  # greedy: nothing to stop
    refusal = Decoding.resolve(paper_config(early_stopping=False)).ctranslate2_refusal()
    assert refusal == "early_stopping=False with 4 beams: CTranslate2's beam search stops as early_stopping=True does"


def test_save_to_makes_it_the_models_own():
    config = GenerationConfig()
    Decoding.paper(4, 1.5).save_to(config)
    assert Decoding.resolve(config) == Decoding(4, 1.5, True)
    Decoding.paper(1, 1.5).save_to(config)
    assert (config.num_beams, config.length_penalty, config.early_stopping) == (1, 1.0, False)


def test_a_beam_count_below_one_is_named():
    with pytest.raises(UsageError, match=r"num_beams must be an integer >= 1, got 0"):
        Decoding(num_beams=0)


def test_the_papers_decoding_is_one_default_everywhere():
    """§6.1's beam 4, alpha 0.6, early stopping is one constant (PAPER_DECODING, beside the model): the model's own
    generation config, ``Decoding.paper()``, vanilla-train's flags, a run's training_recipe.json and vanilla-attention
    take their defaults from it."""
    paper = Decoding(num_beams=4, length_penalty=0.6, early_stopping=True)
    assert Decoding.resolve(tiny_model().generation_config) == Decoding.paper() == paper
    flags = ModelArguments()
    assert Decoding.paper(flags.num_beams, flags.length_penalty) == paper
    recipe = TrainingRecipe(recipe={})
    assert (recipe.num_beams, recipe.length_penalty) == (paper.num_beams, paper.length_penalty)
    assert attention_arguments().parse_args(["a sentence", "--model", "m"]).num_beams == paper.num_beams
