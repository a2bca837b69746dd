"""What every console script shares: one clear line and status 1 on a user's error (a bug keeps its traceback),
status 0 on success, and argument types that refuse bad values by name."""

import argparse
import contextlib
import functools
import gzip
import importlib
import logging
import os
import signal
import sys
import traceback
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from modeling_vanilla.modeling_vanilla import local_model_dir

logger = logging.getLogger(__name__)
# the model's files, as loaded from the Hub
HUB_MODULES = ("configuration_vanilla", "modeling_vanilla", "speedups", "checks", "pipeline_vanilla")


class UsageError(ValueError):
    """A user's mistake (a bad flag value, a file that is not what it should be), named in one line. A ValueError so
    that code calling the functions directly catches it as it always did."""


def require(module: str, extra: str, needed_by: str) -> ModuleType:
    """``module``, imported; one line naming the extra that installs it where it is not installed (a module that it
    imports in turn and is missing keeps its own error: that is a broken install, not a missing extra)."""
    package = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] != package:
            raise
        raise UsageError(f'{needed_by} needs {package}: pip install "vanilla-transformer[{extra}]"') from None


def pyplot(needed_by: str) -> ModuleType:
    """matplotlib.pyplot on the Agg backend (figures to files; no display needed), or one line naming the plot extra
    where matplotlib is not installed."""
    require("matplotlib", "plot", needed_by).use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def user_error(error: Exception) -> bool:
    """Whether ``error`` is a user's mistake to print as one line rather than a bug to print with its traceback:
    a ``UsageError``, an OSError (a missing, unreadable or full file), or a ValueError raised by the model's own
    checks of a config or of its inputs, or an ImportError naming a converter's missing extra (modeling_vanilla cannot
    import this module: it travels to the Hub alone)."""
    if isinstance(error, (UsageError, OSError)):
        return True
    if not isinstance(error, (ValueError, ImportError)):
        return False
    frames = list(traceback.walk_tb(error.__traceback__))
    module = frames[-1][0].f_globals.get("__name__", "") if frames else ""
    return module.startswith("modeling_vanilla.") or module.rsplit(".", 1)[-1] in HUB_MODULES


def console_script(run: Callable[[list[str] | None], object]) -> Callable[[], None]:
    """The console-script entry point for ``run(argv)``: exits 0 when it returns (whatever it returns), 1 with
    ``<program>: error: <message>`` on a user's error (``user_error``; VANILLA_TRACEBACK=1 shows its traceback),
    130 on Ctrl-C. A write past the file size limit (``ulimit -f``) fails with EFBIG, named like any failed write
    (vanilla_tools.disk), instead of killing the process with SIGXFSZ."""

    @functools.wraps(run)
    def main() -> None:
        program = Path(sys.argv[0]).name
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        try:
            run(None)
        except KeyboardInterrupt:
            print(f"{program}: interrupted", file=sys.stderr)
            sys.exit(130)
        except Exception as error:
            if not user_error(error) or os.environ.get("VANILLA_TRACEBACK") == "1":
                raise
            print(f"{program}: error: {' '.join(str(error).split())}", file=sys.stderr)  # one line
            sys.exit(1)
        sys.exit(0)

    return main


@contextlib.contextmanager
def whole_gzip(path: str | Path) -> Iterator[None]:
    """Around reading ``path``: a .gz file cut short, not gzip at all, or damaged inside fails as one error naming
    the file (gzip's own errors name none, and its EOFError would reach the user as a traceback)."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise UsageError(f"{path} is not a whole gzip file ({error})") from error


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def load_tokenizer(model: str, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer saved with a model; a local model directory without one, or a path that does not exist, is
    named as such."""
    folder = local_model_dir(model)
    if folder is None:
        try:
            return AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        except OSError as error:
            message = f"{model} is no local directory, and its tokenizer could not be loaded from the Hub: {error}"
            raise OSError(message) from error
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise FileNotFoundError(
            f"{folder} has no tokenizer (tokenizer.json): save the tokenizer next to the model "
            "(vanilla-train does; with your own code, tokenizer.save_pretrained(DIR))"
        )
    return AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)


def load_model(model: str, trust_remote_code: bool = False) -> PreTrainedModel:
    """The sequence-to-sequence model saved at ``model`` (a directory or a Hub id). A directory holding no saved model,
    or a model of a kind that ``AutoModelForSeq2SeqLM`` does not load (a BERT, say), is named as such, instead of
    transformers' error listing every model type it knows."""
    folder = local_model_dir(model)
    if folder is not None and not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json: not a saved model directory")
    try:
        return AutoModelForSeq2SeqLM.from_pretrained(model, trust_remote_code=trust_remote_code)
    except ValueError as error:
        if not str(error).startswith("Unrecognized"):
            raise
        reason = str(error).splitlines()[0].split(" Model type should be")[0]
        raise UsageError(f"{model} holds no model that AutoModelForSeq2SeqLM loads ({reason})") from error


def figure_path(output: str | Path, default_name: str) -> Path:
    """Where a figure goes: ``output``, or ``default_name`` inside it when it is a folder, with ".png" added when it
    has no extension (as matplotlib adds it, unsaid); refused when matplotlib writes no file of its type (checked
    before any work, rather than matplotlib's error once the figure is drawn)."""
    Figure = require("matplotlib.figure", "plot", "drawing a figure").Figure

    path = Path(output)
    if path.is_dir():
        path = path / default_name
    if not path.suffix:
        path = path.with_suffix(".png")
    types = Figure().canvas.get_supported_filetypes()
    if path.suffix[1:].lower() not in types:
        raise UsageError(f"{path}: matplotlib writes no {path.suffix} files ({', '.join(sorted(types))})")
    return path
