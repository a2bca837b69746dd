"""The repository's experiment runners: Table 3 on Multi30k (``python -m experiments.table3``) and the results page
(``python -m experiments.results_index``). Run from a checkout: they train through vanilla-train and write records
under results/ and pages under docs/ of this repository, so they are not part of what ``pip install`` installs
(docs/architecture.md)."""
