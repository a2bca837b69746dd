"""A synthetic parallel corpus whose vocabulary looks like WMT14 en-de's, for the data-path benchmark.

Multi30k joined with itself has Multi30k's ~25k word types whatever its size; WMT14 en-de has millions (names,
numbers, compounds), which is what makes learning BPE and tokenizing slow (the BPE word cache misses). Here each
side's words are drawn, seeded, from the ``wordfreq`` package's real English and German frequency lists (320k and
634k words, Zipf-distributed as in text), and 4% of the words from a long tail of rare types made on the fly:
German compounds and English names (two listed words joined, capitalised), numbers, years and hyphenated forms, as
in news text. Sentence lengths are log-normal around WMT's (median 20 words, mean about 23, up to 150); the first
word is capitalised, some words are followed by a comma, and a sentence ends with ".", "?" or "!". The two sides
are independent draws: the benchmark measures the data path, not translation.
"""

from pathlib import Path

import numpy as np

TAIL = 0.04  # share of words drawn from the rare tail
MEDIAN_WORDS, LENGTH_SIGMA, MAX_WORDS = 20, 0.55, 150
COMMA = 0.06
CHUNK = 100_000  # sentences generated at a time


def frequency_list(lang: str) -> tuple[np.ndarray, np.ndarray]:
    """``wordfreq``'s large list for ``lang`` (words with a letter or digit) and their probabilities."""
    from wordfreq import top_n_list, word_frequency

    words = [w for w in top_n_list(lang, 10**7, wordlist="large") if any(c.isalnum() for c in w)]
    frequency = np.array([word_frequency(w, lang, wordlist="large") for w in words])
    return np.array(words, dtype=object), frequency / frequency.sum()


def rare_word(rng: np.random.Generator, lang: str, words: np.ndarray) -> str:
    """One type of the long tail: a compound or name from two mid-frequency words, a number, a year, a range."""
    kind = rng.integers(5)
    a, b = words[rng.integers(1_000, min(len(words), 60_000), size=2)]
    if kind == 0:
        return (a.capitalize() + b) if lang == "de" else (a.capitalize() + b.lower())  # Haustür / Rivermoor
    if kind == 1:
        return f"{a}-{b}"
    if kind == 2:
        return (
            f"{rng.integers(1, 1_000):,}.{rng.integers(0, 1_000):03d}"
            if lang == "de"
            else f"{rng.integers(1000, 10**7):,}"
        )
    if kind == 3:
        return str(rng.integers(1800, 2030))
    return f"{rng.integers(1, 100)}-{rng.integers(1, 100)}"


def sentences(
    rng: np.random.Generator, lang: str, words: np.ndarray, probability: np.ndarray, lengths: np.ndarray
) -> list[str]:
    """One sentence of ``lengths[i]`` words for each i."""
    total = int(lengths.sum())
    drawn = words[rng.choice(len(words), size=total, p=probability)].copy()
    for i in np.flatnonzero(rng.random(total) < TAIL):
        drawn[i] = rare_word(rng, lang, words)
    commas = rng.random(total) < COMMA
    drawn[commas] = drawn[commas] + ","
    ends = rng.choice(np.array([".", "?", "!"], dtype=object), size=len(lengths), p=[0.9, 0.05, 0.05])
    out, start = [], 0
    for length, end in zip(lengths.tolist(), ends, strict=True):
        sentence = drawn[start : start + length]
        start += length
        text = " ".join(sentence).rstrip(",")
        out.append(text[:1].upper() + text[1:] + end)
    return out


def write_corpus(folder: Path, pairs: int, seed: int = 0) -> list[str]:
    """``pairs`` synthetic pairs as ``train.en`` and ``train.de`` in ``folder``; returns their paths."""
    rng = np.random.default_rng(seed)
    paths = []
    for lang in ("en", "de"):
        words, probability = frequency_list(lang)
        path = folder / f"train.{lang}"
        with open(path, "w", encoding="utf-8") as f:
            for start in range(0, pairs, CHUNK):
                n = min(CHUNK, pairs - start)
                lengths = np.clip(np.rint(rng.lognormal(np.log(MEDIAN_WORDS), LENGTH_SIGMA, size=n)), 1, MAX_WORDS)
                f.write("\n".join(sentences(rng, lang, words, probability, lengths.astype(int))) + "\n")
        paths.append(str(path))
    return paths
