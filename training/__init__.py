"""Training, data and evaluation for the vanilla Transformer (depends on modeling_vanilla, never the reverse)."""
