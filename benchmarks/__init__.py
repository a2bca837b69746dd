"""The repository's benchmarks (``python -m benchmarks.NAME`` from a checkout, records in results/benchmarks/): not
installed with the package. ``vanilla-bench``, the installed one, is inference.bench."""
