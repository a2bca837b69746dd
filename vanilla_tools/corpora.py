"""The corpora the tools know by name: the bundled Multi30k (its files), and what each dataset's test split is
called and shown as (the model card, the run records and the training data agree through these)."""

from pathlib import Path

BUNDLED_DIR = Path(__file__).resolve().parent.parent / "data" / "multi30k"
BUNDLED_SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}  # split -> file stem
TEST_SETS = {"multi30k": "test2016", "wmt14": "newstest2014"}
DISPLAY = {  # --dataset -> (dataset id for a model card's metadata, display name)
    "multi30k": ("multi30k", "Multi30k (task 1)"),
    "wmt14": ("wmt14", "WMT 2014"),
    "files": (None, "local parallel text files"),
}


def test_set_name(dataset: str) -> str:
    """What the test split of ``dataset`` is called (newstest2014 for wmt14), "test" if unknown."""
    return TEST_SETS.get(dataset, "test")


def bundled_files(split: str, source_lang: str, target_lang: str) -> list[str]:
    """The two gzip files of a split of the bundled Multi30k."""
    return [str(BUNDLED_DIR / f"{BUNDLED_SPLITS[split]}.{lang}.gz") for lang in (source_lang, target_lang)]
