"""Full-profile runs in the report: an experiment's long grid, run on its own and shown after its standard section.

The published report comes from every experiment's standard profile. Some questions
need the full one (the herd at N up to 256, where the ZooKeeper era's herd is felt
in earnest), which takes hours here and has no place in a standard reproduction.
Such a run is published on its own, and then stays:

- `report RUN_DIR --publish` on a run of one experiment's full profile
  (`run herd --profile full`) stores its sources (`summary.csv`,
  `environment.json`, `configs.json`, `grid.json`, `computed/`) in the
  published sources' `full/<experiment>/`, then renders `REPORT.md` again from
  the published sources, so nothing else in it changes;
- rendering any report reads the full runs beside its sources
  (`RUN_DIR/full/`, or the published ones when a standard run is published), and
  puts each after its experiment's standard section, rendered by the
  experiment's `full_section` with that run's own environment: the machine it
  ran on, its date and its commit, which differ from the standard run's.

The same rules hold as for the main report (`published.py`): a run with a
failed or invalid trial, or made by uncommitted code, is refused, and so is a
run of an experiment whose report has no full section.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd

from experiments.catalogue import EXPERIMENTS
from experiments.engine import store
from experiments.engine.experiment import StoredRun
from lab_cluster.errors import LabError

#: the folder, beside a report's sources, that holds its full-profile runs (one folder per experiment)
FULL = "full"


def is_full_run(summary: pd.DataFrame, env: dict) -> bool:
    """Whether a run's stored results (`render.load`) are of one experiment's full profile: what
    `publish_full` takes."""
    return env.get("profile") == "full" and summary.experiment.nunique() == 1


def sections(full_dir: Path, report_dir: Path, out_root: Path) -> dict[str, str]:
    """{experiment: its full-profile section} for every full run stored in `full_dir`.

    Each run's figures go to `report_dir/figures`, its links relative to `out_root` (the report's folder)."""
    from experiments.report.render import load

    out = {}
    for name, experiment in EXPERIMENTS.items():
        run_dir = full_dir / name
        if experiment.full_section is None or not (run_dir / "summary.csv").exists():
            continue
        summary, env, configs, grid = load(run_dir)
        run = StoredRun(env, configs, grid, report_dir / "figures", out_root, None, store.read_computed(run_dir))
        out[name] = experiment.render_full_section(summary[summary.experiment == name], run)
    return out


def summary_of(full_dir: Path, name: str) -> pd.DataFrame | None:
    """The summary of experiment `name`'s full-profile run stored in `full_dir`, or None where there is none."""
    from experiments.report.render import load

    if not (full_dir / name / "summary.csv").exists():
        return None
    summary = load(full_dir / name)[0]
    return summary[summary.experiment == name]


def copy_runs(full_dir: Path, report_dir: Path) -> None:
    """Make `report_dir/full` a copy of `full_dir` (or remove it, when there is none)."""
    target = report_dir / FULL
    if full_dir.resolve() == target.resolve():
        return
    shutil.rmtree(target, ignore_errors=True)  # no other report's full runs may stay beside ours
    if full_dir.is_dir():
        shutil.copytree(full_dir, target)


def refusals(summary: pd.DataFrame, env: dict) -> list[str]:
    """Why a full-profile run (`is_full_run`) may not join the published report (empty: it may)."""
    from experiments.report import published

    name = summary.experiment.iloc[0]
    problems = [] if EXPERIMENTS[name].full_section else [f"the report has no full-profile section for {name}"]
    problems += published.trial_and_commit_problems(summary, env)
    if published.published_summary() is None:
        problems.append("there is no published report to add it to (publish a `reproduce` run first)")
    return problems


def publish_full(run_dir: Path) -> Path:
    """Store `run_dir` as the published report's full-profile run of its experiment and render REPORT.md again
    from the published sources; a LabError that says why where it may not be. A failed rendering puts the
    previous full run back."""
    from experiments.report import published, render

    summary, env, _, _ = render.load(run_dir)
    problems = refusals(summary, env)
    if problems:
        raise LabError(f"{run_dir} cannot be published as a full-profile run: " + "; ".join(problems)
                       + ". REPORT.md and report/ are unchanged.",
                       "Publish a `run <experiment> --profile full` of committed code whose trials all ended ok.")
    target = published.SOURCES / FULL / summary.experiment.iloc[0]
    with tempfile.TemporaryDirectory(dir=published.SOURCES) as tmp:
        staged, previous = Path(tmp) / "new", Path(tmp) / "previous"
        staged.mkdir()
        for source in render.SOURCES:
            shutil.copyfile(run_dir / source, staged / source)
        if (run_dir / store.COMPUTED).is_dir():
            shutil.copytree(run_dir / store.COMPUTED, staged / store.COMPUTED)
        if target.exists():
            target.rename(previous)
        target.parent.mkdir(exist_ok=True)
        staged.rename(target)
        try:
            return render.render(published.SOURCES, published.REPORT)
        except BaseException:
            shutil.rmtree(target)
            if previous.exists():
                previous.rename(target)
            raise
