"""A finding: a claim an experiment exists to show, checked on a run's stored results.

Each experiment's `findings(summary)` returns them in the order its report
states them. The `id` is stable: tests, `reproduce`'s comparison with the
published report and `findings.csv` name a finding by it, so rewording a claim
changes no test and loses no comparison. It reads `<era>-<case>-<what>`, e.g.
`legacy-join-notified`; an experiment's ids are unique within it.
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
