"""How a translation is searched for (§6.1), decided in one place for every engine: ``generate()``, CTranslate2,
training's evaluation and the benchmarks all take a ``Decoding``.

The model's generation config holds its defaults (``PAPER_DECODING``: beam 4, alpha 0.6, early stopping, set by the
model itself, which travels to the Hub without this package); a ``Decoding`` is that config with a command's
overrides resolved once. The tools' defaults are the same constant (``PAPER_NUM_BEAMS``, ``PAPER_LENGTH_PENALTY``).
"""

from dataclasses import asdict, dataclass, replace

from transformers import GenerationConfig

from modeling_vanilla.modeling_vanilla import EXTRA_OUTPUT_TOKENS, PAPER_DECODING

from .cli import UsageError

PAPER_NUM_BEAMS: int = PAPER_DECODING["num_beams"]
PAPER_LENGTH_PENALTY: float = PAPER_DECODING["length_penalty"]


@dataclass(frozen=True)
class Sampling:
    """Random sampling instead of a search, the usual way to back-translate (Edunov et al., 2018): each token is drawn
    from the model's distribution divided by ``temperature``, kept to its ``top_k`` most probable tokens (0: all) and
    to the fewest whose probability reaches ``top_p`` (1.0: all). ``num_samples`` are drawn for each input; a run
    with the same ``seed``, inputs and batches draws the same ones."""

    top_k: int = 0
    top_p: float = 1.0
    temperature: float = 1.0
    num_samples: int = 1
    seed: int = 0

    def __post_init__(self):
        if self.top_k < 0:
            raise UsageError(f"top_k must be >= 0 (0: the whole vocabulary), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise UsageError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.temperature <= 0.0:
            raise UsageError(f"temperature must be > 0, got {self.temperature}")
        if self.num_samples < 1:
            raise UsageError(f"num_samples must be >= 1, got {self.num_samples}")


@dataclass(frozen=True)
class Decoding:
    """Beam search (or greedy with ``num_beams=1``) as transformers defines it: a finished hypothesis scores its
    log-probability divided by its length (end token counted) to the power ``length_penalty``; with
    ``early_stopping=True`` a batch entry ends once ``num_beams`` hypotheses have finished.

    The output length: at most ``max_new_tokens`` new tokens, or ``max_length`` tokens in all, where the generation
    config sets one; else §6.1's input length + 50 (``EXTRA_OUTPUT_TOKENS``), the input being a batch's longest.

    ``nbest``: None returns the best translation alone; K returns the K best of the beam, each with its score, the
    one beam search ranks by: log-probability / length^alpha (greedy: alpha 1, the mean log-probability a token).

    ``sampling``: draw tokens (``Sampling``) instead of searching; one beam, no n-best list.
    """

    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    max_new_tokens: int | None = None
    max_length: int | None = None
    nbest: int | None = None
    sampling: Sampling | None = None

    def __post_init__(self):
        if self.sampling is not None and (self.num_beams != 1 or self.nbest is not None):
            raise UsageError("sampling draws its tokens instead of searching: no beams, no n-best list")
        if not isinstance(self.num_beams, int) or self.num_beams < 1:
            raise UsageError(f"num_beams must be an integer >= 1, got {self.num_beams!r}")
        if self.nbest is not None and not 1 <= self.nbest <= self.num_beams:
            raise UsageError(f"an n-best list of {self.nbest} needs 1 <= n <= num_beams ({self.num_beams})")
        if self.num_beams == 1:  # greedy search has no finished hypotheses to compare: alpha means nothing there
            object.__setattr__(self, "length_penalty", 1.0)

    @classmethod
    def resolve(
        cls,
        generation_config: GenerationConfig,
        num_beams: int | None = None,
        length_penalty: float | None = None,
        nbest: int | None = None,
        sampling: Sampling | None = None,
    ) -> "Decoding":
        """The model's decoding (its generation config), with a command's ``num_beams`` / ``length_penalty`` /
        ``nbest`` where given (None: the config's; a length penalty of 0 is a choice, not "unset"); ``sampling``
        replaces the config's beams with one."""
        config = generation_config
        if length_penalty is None:
            length_penalty = 1.0 if config.length_penalty is None else config.length_penalty  # transformers' default
        if sampling is not None and num_beams is None:
            num_beams = 1
        return cls(
            num_beams=num_beams or config.num_beams or 1,
            length_penalty=length_penalty,
            early_stopping=False if config.early_stopping is None else config.early_stopping,  # or "never"
            max_new_tokens=config.max_new_tokens,
            max_length=config.max_length,
            nbest=nbest,
            sampling=sampling,
        )

    @classmethod
    def paper(cls, num_beams: int = PAPER_NUM_BEAMS, length_penalty: float = PAPER_LENGTH_PENALTY) -> "Decoding":
        """§6.1's search: ``num_beams`` beams stopping as soon as that many hypotheses have finished."""
        return cls(num_beams=num_beams, length_penalty=length_penalty, early_stopping=num_beams > 1)

    def with_length_penalty(self, length_penalty: float) -> "Decoding":
        return replace(self, length_penalty=length_penalty)

    def search_kwargs(self) -> dict:
        """What ``generate()`` (or ``Seq2SeqTrainer.predict``) takes for the search itself (early stopping only for
        a beam search: transformers warns that greedy search ignores it; an n-best list asks for the scores)."""
        search = {"num_beams": self.num_beams, "length_penalty": self.length_penalty}
        if self.sampling is not None:
            sampling = self.sampling
            search.update(do_sample=True, top_k=sampling.top_k, top_p=sampling.top_p)
            search.update(temperature=sampling.temperature, num_return_sequences=sampling.num_samples)
        if self.num_beams > 1:
            search["early_stopping"] = self.early_stopping
        if self.nbest is not None:
            search.update(num_return_sequences=self.nbest, output_scores=True, return_dict_in_generate=True)
        return search

    @property
    def outputs_per_input(self) -> int:
        """How many outputs each input gets: its n-best list's, its samples' or 1."""
        return self.nbest or (self.sampling.num_samples if self.sampling else 1)

    def max_new_tokens_for(self, input_length: int) -> int:
        """The most tokens to generate for a batch whose longest input has ``input_length`` tokens."""
        if self.max_new_tokens is not None:
            return self.max_new_tokens
        if self.max_length is not None:
            return max(self.max_length - 1, 0)  # the decoder start token counts in max_length
        return input_length + EXTRA_OUTPUT_TOKENS

    def generate_kwargs(self, input_length: int) -> dict:
        """``generate()``'s arguments for a batch of inputs ``input_length`` tokens wide: the search and its length
        (given explicitly, so models without the §6.1 rule, such as MarianMTModel, decode as ours does)."""
        return {**self.search_kwargs(), "max_new_tokens": self.max_new_tokens_for(input_length)}

    def save_to(self, generation_config: GenerationConfig) -> None:
        """Make this the model's own decoding (what ``generate()`` does without arguments, saved with the model)."""
        generation_config.update(
            num_beams=self.num_beams, length_penalty=self.length_penalty, early_stopping=self.early_stopping
        )

    def ctranslate2_refusal(self) -> str | None:
        """Why CTranslate2 cannot search as this decoding does (None if it can): its beam search always stops as
        ``early_stopping=True`` does."""
        if self.num_beams > 1 and self.early_stopping is not True:
            return (
                f"early_stopping={self.early_stopping!r} with {self.num_beams} beams: CTranslate2's beam search "
                "stops as early_stopping=True does"
            )
        return None

    def as_dict(self) -> dict:
        return asdict(self)
