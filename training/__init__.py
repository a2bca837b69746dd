"""Training, data and evaluation for the vanilla Transformer (depends on modeling_vanilla, never the reverse).

Importing it registers the model with the Auto classes, so saved models load without trust_remote_code."""

import modeling_vanilla  # noqa: F401
