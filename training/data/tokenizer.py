"""§5.1: one subword vocabulary shared by source and target, learned with the tokenizers library.

BPE over Metaspace pre-tokenization (SentencePiece-style "▁" word marks), so decoding gives back detokenized
text, which is what sacreBLEU scores. Punctuation is split from the words before BPE, as the Moses tokenization
of the usual WMT and Multi30k pipelines (and tensor2tensor's subword tokenizer) does: otherwise "Fenster." and
"Fenster" are different words to BPE, the vocabulary fills with word+punctuation merges and rarer words break into
odd pieces. Only "▁" marks a space, so the split costs no reversibility. Wrapped as a PreTrainedTokenizerFast so
``AutoTokenizer`` loads it.
"""

import itertools
import logging
import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import datasets
import numpy as np
from datasets.fingerprint import Hasher
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from vanilla_tools.cli import UsageError

logger = logging.getLogger(__name__)

PAD, UNK, EOS = "<pad>", "<unk>", "</s>"
SPECIAL_TOKENS = [PAD, UNK, EOS]  # ids 0, 1, 2: the model config's pad/decoder-start (0) and eos (2)


def train_tokenizer(
    texts: Iterable[str], vocab_size: int, min_frequency: int = 2, tags: tuple[str, ...] = ()
) -> PreTrainedTokenizerFast:
    """Learn a shared BPE vocabulary of at most ``vocab_size`` tokens from source and target texts together; the
    corpora's ``tags`` are special tokens (ids 3, 4, ...), one id each, never split."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise UsageError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS + list(tags),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    eos_id = tokenizer.token_to_id(EOS)
    # Every sequence, source or target, ends with </s>; the decoder starts from <pad> (Marian's convention).
    tokenizer.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, eos_id)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=EOS,
        **({"additional_special_tokens": list(tags)} if tags else {}),
    )


def sample_sentences(train: datasets.Dataset, count: int, seed: int) -> Iterator[str]:
    """The sources, then the targets, of ``count // 2`` training pairs drawn without replacement from ``seed`` (all
    pairs, in order, if the corpus has no more than ``count`` sentences), read in batches from the Arrow table."""
    rows = np.arange(len(train))
    if 2 * len(train) > count:
        rows = np.sort(np.random.default_rng(seed).choice(len(train), size=count // 2, replace=False))
    sample = train.select(rows) if len(rows) < len(train) else train
    for column in ("source", "target"):
        for batch in sample.select_columns(column).iter(batch_size=10_000):
            yield from batch[column]


def streamed_sentences(pairs: Iterable[dict], count: int) -> Iterator[str]:
    """The sources, then the targets, of the first ``count // 2`` usable pairs of a stream (a corpus read as it
    streams cannot be sampled at random without reading it whole)."""
    first = list(itertools.islice((p for p in pairs if not p["status"]), count // 2))
    yield from (pair["source"] for pair in first)
    yield from (pair["target"] for pair in first)


# Sentences above which the vocabulary is learned in a process of its own. BpeTrainer keeps every distinct word of
# the sample until it is done (+885 MiB on the 2M-sentence sample of benchmarks/wmt_like.py, measured), and memory
# the main process once held stays its peak for the whole run; a spawned process costs ~5 s of imports, more than
# learning from a Multi30k-sized sample takes.
LEARN_APART_ABOVE = 200_000


def learned_tokenizer(
    sentences: Callable[[], Iterator[str]],
    data_key: object,
    vocab_size: int,
    cache_dir: str | None = None,
    sentence_count: int = 0,
    tags: tuple[str, ...] = (),
) -> PreTrainedTokenizerFast:
    """``train_tokenizer`` on ``sentences()``, cached: the same data (``data_key``: its fingerprint and how it was
    sampled), size and recipe (this module's code) give the tokenizer learned before, without learning it again.
    More than ``LEARN_APART_ABOVE`` sentences (``sentence_count``, at most) are learned from in a spawned process,
    so ``sentences`` must then pickle. ``tags``: ``train_tokenizer``'s."""
    key = Hasher.hash((data_key, vocab_size, Hasher.hash(train_tokenizer), *((tags,) if tags else ())))
    folder = Path(cache_dir or datasets.config.HF_DATASETS_CACHE) / "vanilla-tokenizers" / key
    if (folder / "tokenizer.json").is_file():
        logger.info("tokenizer: learned before, from the same data (%s)", folder)
        return AutoTokenizer.from_pretrained(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent))
    start = time.monotonic()
    try:
        if sentence_count > LEARN_APART_ABOVE:
            _learn_in_a_process(sentences, vocab_size, staging, tags)
        else:
            _learn_into(staging, sentences, vocab_size, tags)
        staging.rename(folder)  # atomic: a half-written tokenizer is never taken from the cache
    except OSError:
        if not (folder / "tokenizer.json").is_file():  # not merely another process that cached it meanwhile
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    logger.info("tokenizer: %d tokens learned in %.0f s", len(tokenizer), time.monotonic() - start)
    return tokenizer


def _learn_into(
    folder: Path, sentences: Callable[[], Iterator[str]], vocab_size: int, tags: tuple[str, ...] = ()
) -> None:
    """``train_tokenizer`` on ``sentences()``, saved in ``folder``."""
    train_tokenizer(sentences(), vocab_size, tags=tags).save_pretrained(folder)


def _learn_in_a_process(
    sentences: Callable[[], Iterator[str]], vocab_size: int, folder: Path, tags: tuple[str, ...] = ()
) -> None:
    """``_learn_into`` in a spawned process (forking would copy this process's memory, and the tokenizers library
    disables its threads in a forked child); its errors are raised here."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            pool.submit(_learn_into, folder, sentences, vocab_size, tags).result()
        except BrokenProcessPool:
            raise ChildProcessError(
                "learning the tokenizer failed: its process ended abruptly (killed, most likely for lack of memory; "
                "a smaller --tokenizer_sample needs less)"
            ) from None
