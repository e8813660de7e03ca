"""Findings are named by a stable id: tests, `findings.csv` and the comparison with the published report name a
finding by it, never by the start of its claim's wording (a reworded claim once made a test select nothing and
`all([])` pass)."""

from __future__ import annotations

import doctest
import re

import pandas as pd
import pytest

from experiments.catalogue import herd
from experiments.catalogue.herd import _like_the_labs_consumer, _linear_control
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
    twins = [Finding("zookeeper-x", "one", True, ""), Finding("zookeeper-x", "two", False, "")]
    with pytest.raises(ValueError, match="two findings share an id"):
        by_id(twins)


def _herd_rows(design: str, per_n: dict[int, tuple[int, int]]) -> pd.DataFrame:
    """Summary rows of herd leave trials: N -> (control messages in the change, rounds it took)."""
    return pd.DataFrame([{"experiment": "herd", "design": design, "change": "leave", "status": "ok", "consumers": n,
                          "control_messages_per_change": control, "generations": rounds}
                         for n, (control, rounds) in per_n.items()])


def test_a_real_clients_linear_control_is_judged_per_round_and_the_labs_consumer_per_change():
    # kafka-python as a CI run saw it: a second round at N=16 doubles that change's messages, each round linear
    extra_round = {4: (21, 1), 8: (36, 1), 16: (129, 2)}
    client = _linear_control(_herd_rows("kafka-python", extra_round), "kafka-python", "client", "leave")
    assert client.holds, client
    assert "rounds N=4: 1, N=8: 1, N=16: 2" in client.evidence and "per change N=4: 21" in client.evidence
    # the lab's own consumer is judged per change: the same figures break its claim
    assert not _linear_control(_herd_rows("classic", extra_round), "classic", "lab", "leave").holds
    # a real client whose every round grows faster than N still fails
    quadratic = {4: (16, 1), 8: (64, 1), 16: (256, 1)}
    assert not _linear_control(_herd_rows("librdkafka", quadratic), "librdkafka", "client", "leave").holds


def _revoking_rows(design: str, partitions: int, revoking: dict[int, int]) -> pd.DataFrame:
    """Summary rows of herd join trials at P = `partitions`: N -> members that revoked, in one round."""
    return pd.DataFrame([{"experiment": "herd", "design": design, "change": "join", "status": "ok", "consumers": n,
                          "partitions": partitions, "members_revoking": r, "generations": 1}
                         for n, r in revoking.items()])


def test_a_real_clients_group_wide_stop_counts_the_members_that_own_a_partition():
    # the full profile's run at P=32: past N=32, members beyond the 32nd own nothing and revoke nothing
    owners = {16: 16, 32: 32, 64: 32, 256: 32}
    rows = pd.concat([_revoking_rows("classic", 32, owners), _revoking_rows("kafka-python", 32, owners)])
    assert _like_the_labs_consumer(rows, "kafka-python", "client", "join").holds
    # a client that leaves an owner holding its partitions through the round is not the eager stop
    short = pd.concat([_revoking_rows("classic", 32, owners),
                       _revoking_rows("kafka-python", 32, {**owners, 64: 31})])
    assert not _like_the_labs_consumer(short, "kafka-python", "client", "join").holds
    # while N <= P, every one of the N members revokes, as before
    few = pd.concat([_revoking_rows("classic", 256, {4: 4, 8: 8, 16: 16}),
                     _revoking_rows("librdkafka", 256, {4: 4, 8: 8, 16: 15})])
    assert not _like_the_labs_consumer(few, "librdkafka", "client", "join").holds


def test_the_herd_modules_worked_examples():
    assert doctest.testmod(herd).failed == 0
