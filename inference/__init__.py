"""Using a trained model: CTranslate2 export and serving (depends on modeling_vanilla, never the reverse)."""
