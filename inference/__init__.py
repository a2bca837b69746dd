"""Using a trained model: `vanilla-translate` (generate() or CTranslate2), `vanilla-export-ct2`, and
`vanilla-attention` (depends on modeling_vanilla and training's shared helpers, never the reverse)."""
