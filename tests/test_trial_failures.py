"""A trial that cannot do what it was asked fails, with the reason, at once: one trial on Spark, not a grid.

Kept out of the experiment modules, whose tests read a whole quick grid and are
`long` (not run by default), so that this runs in every default run.
"""

from __future__ import annotations

import pytest

from experiments.engine.harness import analyse, run_grid
from experiments.engine.trial import TrialSpec

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def test_a_group_that_never_converges_fails_its_trial_with_the_reason(spark, tmp_path):
    # A session timeout the client accepts but below the coordinator's group.min.session.timeout.ms (6000):
    # every JoinGroup is refused with INVALID_SESSION_TIMEOUT, so the group never forms.
    spec = TrialSpec("herd", "classic", consumers=2, partitions=4,
                     overrides=("session.timeout.ms=4000", "heartbeat.interval.ms=1000"),
                     converge_limit_s=15)
    results = run_grid(spark, [spec], str(tmp_path))
    assert results.status.tolist() == ["failed"]
    reason = results.reason.iloc[0]
    # JoinGroup's INVALID_SESSION_TIMEOUT is fatal in the Java client (ConsumerFailed here): the member says it
    # gave up, and the runner fails the trial at once instead of waiting out its limit
    assert "the initial group cannot converge: " in reason and "gave up rebalancing" in reason, reason
    summary = analyse(spark, str(tmp_path), [spec], results)
    assert summary.status.tolist() == ["failed"] and summary.notifications_per_change.isna().all()
