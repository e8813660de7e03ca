"""The published report: the lab's committed `REPORT.md` and `report/`, and the only way a run replaces them.

A run never writes there by itself: `run` and `reproduce` render their report
inside the run directory (`RUN_DIR/REPORT.md`, `RUN_DIR/report/`), so a run that
could not work here (no Java, a ZooKeeper that never answered) cannot destroy
the report a user came to reproduce. Two things read the published report:

- `compare(summary)`: which of the findings the published report states held
  in a run, beside whether they held in the published one (`reproduce` prints
  it and keeps it as `RUN_DIR/findings.csv`). Both sides are checked by the
  same code (`report.checked_findings`) on stored results: the run's
  `summary.csv` and the published `report/summary.csv`. A published report an
  older lab rendered may lack a column today's findings read
  (`missing_columns`): its side is then not checked, and `verdict` says why.
- `publish(run_dir)`: what `report RUN_DIR --publish` does (a run of one
  experiment's full profile joins the published report instead of replacing it:
  `full_runs.py`). It refuses, saying
  why, a run with a failed trial, a run that lacks an experiment the published
  report has (it would drop that section), a run of another profile than the
  standard one (the tour's few designs), and a run made by code that was not
  committed (its `lab_commit` ends in `+dirty` or is unknown): every number in
  the published report comes from a stored run of committed code.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments.engine import profiles
from experiments.overhead import COLUMNS as OVERHEAD_COLUMNS
from lab_cluster.errors import LabError

#: the lab's checkout: where REPORT.md and report/ are committed
ROOT = Path(__file__).resolve().parents[2]  # the lab checkout: experiments/report/published.py
REPORT = ROOT / "REPORT.md"
SOURCES = ROOT / "report"


@dataclass(frozen=True)
class Outcome:
    """One finding (by its stable id): did it hold in this run, and in the published report (None: not
    checked there). The claim is this run's wording, or the published one's for a finding this code no
    longer states."""

    experiment: str
    finding: str
    claim: str
    here: bool | None
    published: bool | None

    @property
    def reproduced(self) -> bool:
        return bool(self.here) and bool(self.published)


def published_summary() -> pd.DataFrame | None:
    """The stored results the published report was rendered from, or None where there is none."""
    path = SOURCES / "summary.csv"
    return read_summary(path) if path.exists() else None


#: metrics added after a report was published, which only the findings of designs or experiments added with
#: them read: a summary written before them gets them empty (`with_added_columns`) instead of being refused as older
ADDED_LATER = ("unowned_at_end", "member_partitions", "partitions_moved", "partitions_spread", "members_revoking",
               "partitions_revoked", "generations", "unprocessed_partition_s", "processing_resumed_ms",
               "members_fenced", "requests_fenced",
               # the growth experiment's (`metrics.growth`): empty for every change but a `grow`
               "learnt_ms", "first_new_owned_ms", "new_processing_ms", "new_unowned_partition_s",
               # what the consumer hosts measured of themselves (`experiments/overhead.py`): no finding reads them
               *OVERHEAD_COLUMNS)


def published_computed() -> dict[str, dict[str, pd.DataFrame]]:
    """The computed parts the published report was rendered from (`report/computed/`; empty where none)."""
    from experiments.engine.store import read_computed

    return read_computed(SOURCES)


def missing_columns(summary: pd.DataFrame) -> list[str]:
    """The columns of today's summary that `summary` (written by an older lab, perhaps) lacks."""
    from experiments.engine.harness import SUMMARY_COLUMNS

    return [c for c in SUMMARY_COLUMNS if c not in summary.columns and c not in ADDED_LATER]


def with_added_columns(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` with every `ADDED_LATER` column it lacks, empty."""
    return summary.assign(**{c: float("nan") for c in ADDED_LATER if c not in summary.columns})


def read_summary(path: Path) -> pd.DataFrame:
    """A stored `summary.csv` as today's code reads it: every `ADDED_LATER` column it lacks, empty, and its designs
    under today's names (`families.RENAMED`: a run stored before the renaming says `legacy` for `zookeeper`)."""
    from experiments.engine.families import current_name

    summary = with_added_columns(pd.read_csv(path))
    return summary.assign(design=summary.design.map(current_name)) if "design" in summary else summary


def compare(summary: pd.DataFrame, computed: dict[str, dict[str, pd.DataFrame]] | None = None) -> list[Outcome]:
    """Every finding checked in this run (its summary, and `computed`: the computed parts it stored) or stated by
    the published report, published order first."""
    from experiments.report.render import checked_findings

    published = published_summary()
    checkable = published is not None and not missing_columns(published)
    theirs = {(e, f.id): f for e, f in checked_findings(published, published_computed())} if checkable else {}
    ours = {(e, f.id): f for e, f in checked_findings(summary, computed)}
    keys = list(theirs) + [k for k in ours if k not in theirs]

    def holds(side: dict, key) -> bool | None:
        return side[key].holds if key in side else None

    return [Outcome(e, fid, (ours.get((e, fid)) or theirs[(e, fid)]).claim, holds(ours, (e, fid)),
                    holds(theirs, (e, fid))) for e, fid in keys]


def verdict(outcomes: list[Outcome]) -> str:
    """`N of M findings reproduced`, M being those the published report holds and this run checked (a run of fewer
    designs or experiments, the tour say, checks fewer: how many it left to others is said after).

    >>> verdict([Outcome("herd", "a", "", True, True), Outcome("herd", "b", "", None, True)])[:52]
    '1 of 1 findings of the published report reproduced ('
    """
    stated = [o for o in outcomes if o.published]
    published = published_summary()
    lacks = missing_columns(published) if published is not None else []
    if lacks:
        return (f"the published report was rendered by an older lab (its summary has no "
                f"{', '.join(lacks)}): its findings cannot be checked with this code")
    if not stated:
        return "there is no published report to compare with"
    checked = [o for o in stated if o.here is not None]
    text = f"{sum(o.reproduced for o in checked)} of {len(checked)} findings of the published report reproduced"
    if len(checked) < len(stated):
        text += (f" ({len(stated) - len(checked)} more of its findings are about designs or experiments this run "
                 "did not run)")
    return text


FINDINGS_FILE = "findings.csv"


def save(outcomes: list[Outcome], run_dir: Path) -> Path:
    path = run_dir / FINDINGS_FILE
    pd.DataFrame([vars(o) for o in outcomes], columns=["experiment", "finding", "claim", "here", "published"]).to_csv(
        path, index=False)
    return path


def load(run_dir: Path) -> list[Outcome]:
    """The outcomes `save` kept in a run's directory (none if it kept none: the run ended before its report)."""
    path = run_dir / FINDINGS_FILE
    if not path.exists():
        return []
    side = {"True": True, "False": False, "": None}  # pandas wrote a None as an empty field
    rows = list(csv.DictReader(path.open()))
    if rows and "here" not in rows[0]:  # a report's own findings.csv (`render`), not a run's comparison
        return []
    return [Outcome(row["experiment"], current_finding_id(row["finding"]), row["claim"], side[row["here"]],
                    side[row["published"]]) for row in rows]


def current_finding_id(finding: str) -> str:
    """A finding's id today, given one a run saved before the designs were renamed (its id names the design).

    >>> current_finding_id("legacy-join-notified"), current_finding_id("modern-kip848-cut-fenced")
    ('zookeeper-join-notified', 'consumer-848-cut-fenced')
    >>> current_finding_id("rocketmq-before-modern"), current_finding_id("all-processing-resumes")
    ('rocketmq-before-classic', 'all-processing-resumes')
    """
    from experiments.engine.families import RENAMED

    for old in sorted(RENAMED, key=len, reverse=True):  # modern-kip848 before modern
        if finding.startswith(f"{old}-"):
            return RENAMED[old] + finding[len(old):]
        if finding.endswith(f"-{old}"):
            return finding[:-len(old)] + RENAMED[old]
    return finding


def trial_and_commit_problems(summary: pd.DataFrame, env: dict) -> list[str]:
    """What bars any run from the published report: a trial that failed or was invalid, code not committed."""
    problems = []
    failed = summary[summary.status != "ok"].drop_duplicates("trial")
    if not failed.empty:
        problems.append(f"{len(failed)} of {summary.trial.nunique()} trials failed or were invalid "
                        f"({', '.join(failed.trial.head(3))}{', ...' if len(failed) > 3 else ''}): "
                        f"{failed.reason.iloc[0]}")
    commit = env.get("lab_commit", "unknown")
    if commit == "unknown" or commit.endswith("+dirty"):
        problems.append(f"it was made by code that was not committed (lab commit {commit})")
    return problems


def refusals(run_dir: Path) -> list[str]:
    """Why `run_dir` may not replace the published report, or join it as a full-profile run (empty: it may)."""
    from experiments.report import full_runs
    from experiments.report.render import load

    summary, env, _, _ = load(run_dir)
    if full_runs.is_full_run(summary, env):
        return full_runs.refusals(summary, env)
    problems = trial_and_commit_problems(summary, env)
    if profiles.of_run(env) != profiles.STANDARD:
        problems.append(f"it ran the {profiles.of_run(env)} profile, and the published report comes from the "
                        f"{profiles.STANDARD} one (every design in every experiment)")
    published = published_summary()
    if published is not None:
        missing = sorted(set(published.experiment) - set(summary.experiment))
        if missing:
            problems.append(f"it has no trial of {', '.join(missing)}, which the published report has (publishing "
                            "would drop those sections)")
    return problems


def publish(run_dir: Path) -> Path:
    """Render `run_dir` as the published report, or a LabError that says why it may not be. A run of one
    experiment's full profile joins the published report instead (`full_runs.py`); the published full-profile
    runs stay when a run replaces it."""
    from experiments.report import full_runs
    from experiments.report.render import load, render

    if full_runs.is_full_run(*load(run_dir)[:2]):
        return full_runs.publish_full(run_dir)
    problems = refusals(run_dir)
    if problems:
        raise LabError(f"{run_dir} cannot be published: " + "; ".join(problems) + ". REPORT.md and report/ are "
                       "unchanged.", "Publish a `reproduce` run of committed code whose trials all ended ok; its "
                       "own report is in the run directory either way.")
    return render(run_dir, REPORT, full_dir=SOURCES / full_runs.FULL)


def is_published_sources(path: Path) -> bool:
    return path.resolve() == SOURCES.resolve()

