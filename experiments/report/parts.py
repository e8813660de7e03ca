"""What every section of REPORT.md shares: the designs' colours and names, tables, numbers, findings.

No matplotlib here, so the CLI's results table can format numbers without it.
"""

from __future__ import annotations

import pandas as pd

from experiments.engine import profiles
from experiments.engine.families import FAMILIES

#: {design: (colour, label)} of every family, in the registry's order (`engine/families.py`)
STYLE = {f.name: (f.colour, f.label) for f in FAMILIES.values()}


def cell(v) -> str:
    """A number as the report and the CLI's tables show it: thousands grouped, three significant digits below 100."""
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(v)


def table(header: list[str], rows) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def findings_list(checked) -> str:
    """An experiment's `findings()`, as a list that says which held on the data."""
    return "\n".join(f"- {'✅' if f.holds else '❌'} {f.claim}. *{f.evidence}.*" for f in checked)


def reproduce_line(experiment: str, env: dict) -> str:
    """A section's last line: the command that reruns its grid, in the profile the run ran (today's name).

    >>> reproduce_line("herd", {"profile": "quick"})
    '**Reproduce:** `python -m experiments run herd --profile standard` (or `reproduce --profile standard`).'
    """
    profile = profiles.of_run(env)
    return (f"**Reproduce:** `python -m experiments run {experiment} --profile {profile}` "
            f"(or `reproduce --profile {profile}`).")
