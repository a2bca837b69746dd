"""Using a trained model: `vanilla-translate` (generate() or CTranslate2), `vanilla-export-ct2`, `vanilla-attention`
and `vanilla-bench` (the engines, and MarianMTModel on the same weights, measured). Depends on modeling_vanilla and
vanilla_tools, never the reverse."""
