"""What an experiment is, and what its report section reads.

An experiment module (`catalogue/herd.py`, `split_brain.py`, `zombie.py`) starts from a
question and exports one `Experiment`: its grid of trials per profile, the
findings it checks on a run's summary, and the report section that shows them.
`catalogue/__init__.py` lists every experiment once; the runner (`run`, `reproduce`), the
harness (which trials keep timelines) and the report read that list and nothing
else, so a new experiment is one new module and one line there.

A report section is rendered from a `StoredRun` alone: the run's own summary,
environment, consumer configs, grid and timelines, never from today's code
constants, so an old run re-renders as it ran.

An experiment may also have a **computed part** (`Experiment.compute`): tables
derived without a cluster, such as every assignment strategy replayed over a
sequence of membership changes (`catalogue/assignors.py`). `run` and
`reproduce` call it once per run and store its tables in the run directory
beside the trials' results (`store.write_computed`:
`computed/<experiment>/<table>.csv`); its findings and its section read them
back from there (`StoredRun.computed`), never by computing again, so that the
page shows what the run stored, as it does for trials. Such an experiment's
`findings` takes `(summary, computed)`; `Experiment.check` calls either kind.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from experiments.engine.finding import Finding
from experiments.engine.profiles import STANDARD, canonical
from experiments.engine.trial import TrialSpec
from lab_cluster.errors import LabError


@dataclass(frozen=True)
class StoredRun:
    """What a report section may read: the stored results of one run, and where its figures go."""

    env: dict  # environment.json
    configs: dict  # configs.json: {design: the consumer config as a consumer recorded it}
    grid: list[dict]  # grid.json: every trial's spec as the run was given it
    figures: Path  # where the section writes its figures
    root: Path  # the report's folder: figure links are relative to it
    timelines: tuple[pd.DataFrame, pd.DataFrame] | None  # timelines.csv, marks.csv (fault experiments)
    #: {experiment: {table: its rows}}: the computed parts the run stored (`computed/<experiment>/<table>.csv`)
    computed: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)

    def spec(self, experiment: str, field: str) -> str:
        """The values one field of the trial specs took in an experiment, as grid.json recorded them: `3`,
        `0.5`, or `1 or 3` where trials differed (a set-up fact of the report is read here, never from
        the code's constants, so an old run re-renders as it ran)."""
        values = sorted({spec[field] for spec in self.grid if spec["experiment"] == experiment})
        return " or ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) or "?"

    def overrides(self, experiment: str) -> list[tuple[str, str]]:
        """(design, its config overrides) in one experiment's trials, as grid.json recorded them."""
        by_design: dict[str, dict[str, None]] = {}  # an ordered set: the overrides in the order the grid gave
        for spec in self.grid:
            if spec["experiment"] == experiment:
                by_design.setdefault(spec["design"], {}).update(dict.fromkeys(json.loads(spec["overrides"])))
        return [(design, ", ".join(f"`{o}`" for o in found) or "none")
                for design, found in sorted(by_design.items())]


@dataclass(frozen=True)
class Experiment:
    """One experiment: a question, its trials, the findings it checks and the section that reports them."""

    name: str  # also its pytest marker and the `experiment` column of summary.csv
    question: str
    designs: tuple[str, ...]
    #: {profile: the grid's parameters}: "standard" and "full" for every experiment, "tour" for those in the tour
    #: (its "designs" and "why": `engine/profiles.py`)
    profiles: dict[str, dict]
    grid: Callable[..., list[TrialSpec]]  # (profile, designs, consumers, partitions, seeds) -> trials
    findings: Callable[[pd.DataFrame], list[Finding]]  # checked on the run's summary rows of this experiment
    section: str  # "module:function" rendering its report section from (its summary rows, StoredRun)
    keeps_timelines: bool = False  # the harness keeps who processed which partition when, for the report
    #: raised when what the experiment runs or claims changes (a run records the versions it ran: runs of
    #: different versions of one experiment are not the same measurement); its history is in the module
    version: int = 1
    #: its computed part, if any: (profile) -> {table name: rows}, derived without a cluster; `run` and
    #: `reproduce` store the tables in the run, and `findings(summary, computed)` and the section read them there
    compute: Callable[[str], dict[str, pd.DataFrame]] | None = None
    #: "module:function" rendering the section of its full-profile run, published apart from the standard
    #: reproduction (`report/full_runs.py`), from (that run's summary rows, its StoredRun); None: it has none
    full_section: str | None = None
    #: its section shows the real systems' rows beside the lab's designs (elsewhere they are shown apart, in the
    #: report's part on the real systems): a table of verdicts, one row per design, real or not
    with_real: bool = False

    def runs_in(self, profile: str) -> bool:
        """Whether this experiment has a grid in `profile` (every one is in `standard` and `full`; a few in `tour`)."""
        return canonical(profile) in self.profiles

    def designs_in(self, profile: str) -> tuple[str, ...]:
        """The designs `profile` runs: the profile's own list (the tour's), else every design of the experiment."""
        return tuple(self.profiles[canonical(profile)].get("designs", self.designs))

    def specs(self, profile: str, designs: tuple[str, ...] | None = None, **grid_args) -> list[TrialSpec]:
        """The trials of `profile` (an old name allowed: `profiles.canonical`) for `designs` (default: the
        profile's), or a LabError where this experiment has no such grid."""
        profile = canonical(profile)
        if profile not in self.profiles:
            raise LabError(f"{self.name} has no {profile} profile (it has {', '.join(self.profiles)}).",
                           f"Run it with --profile {STANDARD}.")
        return self.grid(profile, designs or self.designs_in(profile), **grid_args)

    def check(self, summary: pd.DataFrame, computed: dict[str, pd.DataFrame] | None = None) -> list[Finding]:
        """The findings on a run's stored results: its summary rows of this experiment and, for an experiment
        with a computed part, the tables the run stored for it (`computed`; empty if the run stored none)."""
        if self.compute is None:
            return self.findings(summary)
        return self.findings(summary, computed or {})

    def render_section(self, rows: pd.DataFrame, run: StoredRun) -> str:
        return _resolve(self.section)(rows, run)

    def render_full_section(self, rows: pd.DataFrame, run: StoredRun) -> str:
        """The section of its full-profile run (`full_section`)."""
        return _resolve(self.full_section)(rows, run)


def _resolve(ref: str) -> Callable[[pd.DataFrame, StoredRun], str]:
    """A section's "module:function", resolved only when a report is rendered: the report modules import
    matplotlib, which running trials does not need, and they import the experiment modules (no cycle)."""
    module, function = ref.split(":")
    return getattr(importlib.import_module(module), function)
