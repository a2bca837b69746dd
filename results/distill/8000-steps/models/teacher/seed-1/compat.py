"""What differs between the transformers releases this model runs on, found in the installed release's own API
rather than read from its version number, so that one code base is right on each of them.

transformers 5.24 renamed the cache from ``past_key_values`` to ``cache``: ``generate()`` passes it to ``forward``
as ``cache=`` and reads it back from ``outputs.cache``, and every ``ModelOutput`` field holding it was renamed. Older
releases pass and read ``past_key_values``. The model takes ``cache`` and accepts ``past_key_values`` as Marian and
BART do since 5.24 (``accepts_past_key_values``), and returns its cache under the installed release's field name
(``CACHE_NAME``). The mask functions take the cache as their fourth positional argument in every release.

This file travels to the Hub with ``modeling_vanilla.py`` (it imports only transformers).
"""

import re

import transformers
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import logging
from transformers.utils.deprecation import deprecate_kwarg

logger = logging.get_logger(__name__)

# The oldest and the newest transformers release the model's tests run on (`make test` and `make compat`, CI).
TESTED_RELEASES = ("5.17.0", "5.25.0")

# The name under which the installed release's generate() passes the cache to forward and reads it from the output.
CACHE_NAME = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"

# ``forward(cache=...)`` also takes ``past_key_values=``. Where the release has renamed it, with transformers' own
# FutureWarning (its removal is 5.40's, as for Marian's); where the release still passes ``past_key_values`` itself,
# the version named is one already reached, for which ``deprecate_kwarg`` renames without a warning.
accepts_past_key_values = deprecate_kwarg(
    "past_key_values", "5.40.0" if CACHE_NAME == "cache" else transformers.__version__, new_name="cache"
)


def release(version: str) -> tuple[int, int, int]:
    """``"5.24.0"`` -> (5, 24, 0); a pre-release or dev suffix is ignored (``"5.25.0.dev0"`` -> (5, 25, 0))."""
    major, minor, patch = (re.findall(r"\d+", version) + ["0", "0"])[:3]
    return int(major), int(minor), int(patch)


def note_untested_release(installed: str = transformers.__version__) -> bool:
    """Log once, and return True, when ``installed`` lies outside the releases the model was tested on. A newer
    release is not refused: the model loads and runs, and the log says which range was tested."""
    oldest, newest = TESTED_RELEASES
    if release(oldest) <= release(installed) <= release(newest):
        return False
    logger.warning(
        f"the vanilla Transformer was tested on transformers {oldest} to {newest}, and {installed} is installed: "
        f"if it misbehaves, `pip install transformers=={newest}` is the newest release tested"
    )
    return True
