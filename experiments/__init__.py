"""The lab's experiments and its command line (`python -m experiments`), in layers.

Each layer imports only the ones above it in this list:

- `engine/`: what runs a trial and a grid of trials: the spec and the runner
  (`trial.py`), the steps a scenario is made of (`steps.py`), the group watch
  that says when a group has converged (`group_watch.py`), the family registry
  (`families.py`), the Spark harness (`harness.py`, `slots.py`), the run
  directory (`store.py`), and what an experiment and a finding are
  (`experiment.py`, `finding.py`);
- `metrics.py`: the Spark job that turns traces into one row of figures per trial;
- `catalogue/`: the experiments (`docs/experiments.md`), one module each, registered in
  `catalogue/__init__.py`;
- `report/`: REPORT.md rendered from a stored run only (`render.py`), its parts,
  figures and each experiment's prose, and when it may be published
  (`published.py`);
- `cli/`: the commands (`run`, `reproduce`, `report`, `doctor`, `zk up`,
  `cluster up`, `consumers`, `assign`, `bench`);
- `bench/`: the benchmarks, which write their figures to files.
"""
