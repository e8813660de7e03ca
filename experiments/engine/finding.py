"""A finding: a claim an experiment exists to show, checked on a run's stored results.

Each experiment's `findings(summary)` returns them in the order its report
states them. The `id` is stable: tests, `reproduce`'s comparison with the
published report and `findings.csv` name a finding by it, so rewording a claim
changes no test and loses no comparison. It reads `<design>-<case>-<what>`, e.g.
`zookeeper-join-notified`; an experiment's ids are unique within it. The ids changed once, with the designs'
names; a `findings.csv` saved before reads under today's (`report/published.py: current_finding_id`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    id: str
    claim: str
    holds: bool
    evidence: str


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    """The findings keyed by id (an experiment that gave two the same id is a bug, and raises)."""
    out = {f.id: f for f in findings}
    if len(out) != len(findings):
        raise ValueError(f"two findings share an id: {[f.id for f in findings]}")
    return out



def design_of(finding_id: str) -> str:
    """The design a finding is about: the longest family name its id starts with, else `all`."""
    from experiments.engine.families import FAMILIES

    return max((d for d in FAMILIES if finding_id.startswith(f"{d}-")), key=len, default="all")


def of_designs_run(findings: list[Finding], summary) -> list[Finding]:
    """The findings about designs `summary` has trials of, and those about `all`: a run without a design states
    nothing about it, as a run without an experiment states none of its findings."""
    run = set(summary.design)
    return [f for f in findings if design_of(f.id) == "all" or design_of(f.id) in run]
