"""`python -m experiments compare RUN_DIR`: a run beside the published report, finding by finding and figure by figure.

Two reports of the same grid never match line for line (timings differ from run to
run), so a reproduction is judged on what the report claims: each published
finding, checked by the same code on both runs' stored results
(`report/published.py: compare`), and the headline figures per design
(`report/headline.py`) side by side. Nothing is run and nothing is written. For
other tools: a run's `findings.csv` (written by `reproduce`) holds each finding
there and in the published report; the published `report/findings.csv` holds
the report's own findings with their evidence.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from lab_cluster.errors import LabError


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="a run's findings and headline figures beside the published report's")
    p.add_argument("run_dir", type=Path, help="a run directory (`run` or `reproduce` wrote it: it holds summary.csv)")
    p.add_argument("--all", action="store_true", help="list every finding, not only those this run checked and "
                                                       "found otherwise than the published report")
    p.set_defaults(run=run_compare)


def run_compare(args) -> int:
    from experiments.engine import store
    from experiments.report import published
    from experiments.report.headline import COLUMNS, headline

    path = args.run_dir / "summary.csv"
    if not path.exists():
        raise LabError(f"{args.run_dir} is not a run directory: it has no summary.csv.",
                       "Give the directory a `run` or `reproduce` wrote, or run one.")
    summary = published.read_summary(path)
    absent = published.missing_columns(summary)
    if absent:
        raise LabError(f"{path} was written by an older version of the lab: it has no {', '.join(absent)}.",
                       "Compare it with the lab's commit it records (environment.json), or run it again.")
    theirs = published.published_summary()
    if theirs is None:
        raise LabError("There is no published report to compare with (report/summary.csv is missing).",
                       "Check out the lab's committed report/ folder, or publish a run first.")
    outcomes = published.compare(summary, store.read_computed(args.run_dir))
    console = Console()
    console.print(published.verdict(outcomes))
    shown = outcomes if args.all else [o for o in outcomes if o.here is not None and o.here != o.published]
    if not shown:
        console.print("No finding this run checked came out otherwise than in the published report (--all lists "
                      "every one).")
    else:
        findings = Table(title="findings" if args.all else "findings that came out otherwise in this run")
        for column in ("experiment", "finding", "published", "this run"):
            findings.add_column(column)
        for o in shown:
            findings.add_row(o.experiment, o.finding, _side(o.published), _side(o.here))
        console.print(findings)
    figures = Table(title="headline figures: published | this run")
    figures.add_column("per design")
    ours, published_rows = headline(summary).set_index("design"), headline(theirs).set_index("design")
    designs = [d for d in published_rows.index.union(ours.index, sort=False)]
    for design in designs:
        figures.add_column(design, justify="right")
    for column, label in COLUMNS:
        figures.add_row(label, *(f"{_cell(published_rows, d, column)} | {_cell(ours, d, column)}" for d in designs))
    console.print(figures)
    return 0


def _side(holds: bool | None) -> str:
    return {True: "holds", False: "does not hold", None: "not checked"}[holds]


def _cell(rows: pd.DataFrame, design: str, column: str) -> str:
    from experiments.report.parts import cell

    return cell(rows.at[design, column]) if design in rows.index else "–"
