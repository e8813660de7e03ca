"""Every experiment of the lab, in the order the report shows them: the one place an experiment is registered.

`run EXPERIMENT` offers these names, `reproduce` runs them all, the harness
asks each whether its trials keep timelines, and the report renders each one's
section and checks its findings. Adding an experiment: one module that exports
an `Experiment` (`engine/experiment.py`), and one line here.
"""

from __future__ import annotations

from experiments.engine.experiment import Experiment

from . import assignors, broker_churn, conformance, first_message, growth, herd, soak, split_brain, storm, zombie

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    herd.EXPERIMENT,
    split_brain.EXPERIMENT,
    zombie.EXPERIMENT,
    first_message.EXPERIMENT,
    growth.EXPERIMENT,
    assignors.EXPERIMENT,
    storm.EXPERIMENT,
    broker_churn.EXPERIMENT,
    conformance.EXPERIMENT,
    soak.EXPERIMENT,
)}
#: the experiments whose trials keep timelines for their report sections (what the harness is told)
KEEP_TIMELINES: frozenset[str] = frozenset(e.name for e in EXPERIMENTS.values() if e.keeps_timelines)
#: each experiment's version, as a run records it
VERSIONS: dict[str, int] = {e.name: e.version for e in EXPERIMENTS.values()}

#: every design some experiment runs, in a stable order (what `run --designs` accepts)
DESIGNS: tuple[str, ...] = tuple(dict.fromkeys(d for e in EXPERIMENTS.values() for d in e.designs))
