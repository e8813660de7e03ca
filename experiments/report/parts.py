"""What every section of REPORT.md shares: the designs' colours and names, tables, numbers, findings.

No matplotlib here, so the CLI's results table can format numbers without it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def anchor(heading: str) -> str:
    """The link target GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens.

    >>> anchor("Herd: set-up and every result")
    '#herd-set-up-and-every-result'
    """
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return "#" + kept.replace(" ", "-")


@dataclass(frozen=True)
class Section:
    """One experiment's part of the report: a body that answers its question, and an appendix that backs it.

    The body is what a reader reads in order (question, findings, figure, a short table, what to take
    from it in a few sentences, the command that reproduces it); the appendix holds what a reader checks: why,
    in detail (the mechanism step by step, with the code), the set-up, the consumer configs, every result table,
    the timelines, the lab's overhead and the other families in detail.
    """

    title: str  # the experiment's name as the report says it, e.g. "Herd"
    question: str
    findings: str  # the checked findings, a Markdown list (`findings_list`)
    figure: str  # the body's figure, a Markdown image
    table: str  # the body's short table, with its caption
    takeaway: str  # what to take from it: the answer, with the code that makes it so
    reproduce: str  # `reproduce_line`
    appendix: str  # everything else, under the appendix's heading
    checked_in: str = ""  # where the findings are checked, e.g. "experiments/catalogue/herd.py: findings"
    why: str = ""  # the takeaway's mechanism step by step, with the code: the appendix's first paragraph

    @property
    def appendix_heading(self) -> str:
        return f"{self.title}: set-up and every result"

    def body(self) -> str:
        return f"""## {self.title}

**The question.** {self.question}

**What the run showed** (checked on its results{f' by `{self.checked_in}`' if self.checked_in else ''}):

{self.findings}

{self.figure}

{self.table}

**What to take from it.** {self.takeaway}

{self.reproduce} {"Why, step by step; the" if self.why else "The"} set-up, the configs, every result and the \
other designs in detail: [appendix]({anchor(self.appendix_heading)})."""

    def appendix_section(self) -> str:
        why = f"**Why, in detail.** {self.why}\n\n" if self.why else ""
        return f"## {self.appendix_heading}\n\n{why}{self.appendix}"
