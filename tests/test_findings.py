"""Findings are named by a stable id: tests, `findings.csv` and the comparison with the published report name a
finding by it, never by the start of its claim's wording (a reworded claim once made a test select nothing and
`all([])` pass)."""

from __future__ import annotations

import re

import pytest

from experiments.engine.families import FAMILIES
from experiments.engine.finding import Finding, by_id
from experiments.report import published
from experiments.report import render as report


def test_every_finding_of_the_published_report_has_a_unique_readable_id():
    checked = report.checked_findings(published.published_summary())
    assert len(checked) >= 17
    for experiment in {e for e, _ in checked}:
        ids = [f.id for e, f in checked if e == experiment]
        assert len(ids) == len(set(ids)), ids
        # named after the design it is about, or `all` for a claim about every design
        assert all(re.fullmatch(rf"({'|'.join([*FAMILIES, 'all'])})-[a-z0-9]+(-[a-z0-9]+)*", i) for i in ids), ids


def test_two_findings_with_one_id_are_refused():
    twins = [Finding("legacy-x", "one", True, ""), Finding("legacy-x", "two", False, "")]
    with pytest.raises(ValueError, match="two findings share an id"):
        by_id(twins)
