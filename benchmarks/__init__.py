"""The repository's benchmarks (``python -m benchmarks.NAME`` from a checkout, records in results/benchmarks/): not
installed with the package. ``vanilla-bench``, the installed one, is inference.bench."""

import json
from pathlib import Path


def write_record(record: dict, path: str | None) -> None:
    """A benchmark's record (provenance and measurement) as JSON at ``path``, if one is given."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=1) + "\n")
