"""The floor every tool stands on: console scripts and their errors (cli), where a result came from (provenance),
translation scores (metrics), the corpora known by name (corpora), the files of a run folder (run_files) and the
decoding settings (decoding). It depends on modeling_vanilla and libraries only; training, inference, hub_card and
benchmarks depend on it (docs/architecture.md)."""
