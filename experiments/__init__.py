"""The lab's experiments and its command line (`python -m experiments`).

The experiments of DESIGN.md §5 (each a module registered in `catalogue.py`),
the trial runner (`trial.py`, `steps.py`, `group_watch.py`, the families in
`families.py`), the Spark harness and metrics (`harness.py`, `metrics.py`),
the report (`report.py`, `published.py`), the benchmarks (`bench_*.py`) and
the CLI (`cli.py`: `run`, `reproduce`, `report`, `doctor`, `zk up`,
`cluster up`, `consumers`, `assign`, `bench`).
"""
