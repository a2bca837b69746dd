"""A run's decoding (§6.1), built once from its arguments and carried one way: its evaluations during training search
as --generation_num_beams says (greedy: no length penalty, no early stopping), its final evaluation as --num_beams
and --length_penalty say and returns the alpha it chose, and the model is saved with that decoding."""

from training_helpers import built, train_argv, write_corpus
from transformers import GenerationConfig

from training.step.evaluation import final_evaluation
from vanilla_tools.decoding import Decoding

SEARCH = ("num_beams", "length_penalty", "early_stopping", "max_length", "max_new_tokens")


def searches(trainer, monkeypatch) -> list[dict]:
    """The search arguments of each of the trainer's ``generate()`` calls, as they are made."""
    calls, generate = [], trainer.model.generate

    def spy(**kwargs):
        calls.append({key: kwargs[key] for key in SEARCH if key in kwargs})
        return generate(**kwargs)

    monkeypatch.setattr(trainer.model, "generate", spy)
    return calls


def saved_decoding(folder) -> Decoding:
    return Decoding.resolve(GenerationConfig.from_pretrained(folder))


def test_each_evaluation_searches_as_the_run_decided_and_the_model_is_saved_with_the_final_one(tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "data")
    flags = "--num_beams 2 --length_penalty 2.0 --generation_num_beams 1 --generation_max_length 8"
    argv = train_argv(corpus, tmp_path / "out", *flags.split(), "--max_eval_samples", "4", "--max_steps", "1")
    trainer, _ = built(argv)
    calls = searches(trainer, monkeypatch)

    trainer.evaluate()  # as during training: greedy, whatever alpha the final evaluation has
    assert calls == [{"num_beams": 1, "length_penalty": 1.0, "max_new_tokens": 7}]  # 8 with the start token
    calls.clear()
    trainer.predict(trainer.eval_dataset)  # the final decoding: the flags'
    assert calls == [{"num_beams": 2, "length_penalty": 2.0, "early_stopping": True, "max_new_tokens": 7}]
    trainer.save_model(str(tmp_path / "checkpoint"))  # after evaluating: the final decoding, nothing of generate()'s
    assert saved_decoding(tmp_path / "checkpoint") == Decoding(2, 2.0, True)

    validation = {"validation": trainer.eval_dataset}  # 4 pairs
    results, chosen = final_evaluation(trainer, validation, trainer.decoding.final, [0.5, 2.0])
    search = results["length_penalty_search"]
    assert chosen == Decoding(2, float(max(search, key=search.get)), True, max_length=8)
    trainer.save_final_model(chosen)
    assert saved_decoding(tmp_path / "out") == Decoding(2, chosen.length_penalty, True)  # the length is a flag's
