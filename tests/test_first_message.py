"""The first-message experiment end to end: a stable group, one newcomer, its time to its first message.

`pytest -m first_message` runs every design once (one seed) and asserts the
finding: every newcomer of every design processed a message after it started,
and a RocketMQ newcomer, which waits for nobody, does so before a
coordinator-era one, which waits for every member to rejoin. TubeMQ's
newcomer is a replacement: node 0 departs, and a node with its `nodeId` starts;
TubeMQ's server-balance newcomer waits for the master's plan, so a client-balance
node is fed first, and nobody holds a partition twice in the hand-over.
"""

from __future__ import annotations

import pytest
from conftest import run_experiment, vocabulary_problems

from experiments.catalogue import first_message
from experiments.engine.finding import by_id

pytestmark = [pytest.mark.first_message, pytest.mark.long, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def first_run(spark, tmp_path_factory):
    return run_experiment(spark, tmp_path_factory.mktemp("first-message-run"), first_message.grid("standard", seeds=1))


def test_every_newcomer_processed_a_message_after_its_start(first_run):
    _, specs, summary = first_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert set(summary.design) == set(first_message.DESIGNS)
    joins = summary[summary.change == "join"]
    assert len(joins) == len(specs)
    assert (joins.first_message_ms > 0).all(), joins[["design", "first_message_ms"]]
    # TubeMQ's replacement takes exactly the share its predecessor left, which waited unowned meanwhile
    tube = summary[summary.design == "tubemq"].set_index("change")
    assert tube.loc["depart", "unowned_at_end"] == tube.loc["depart", "member_partitions"] > 0
    assert bool(tube.loc["join", "converged"]) and tube.loc["join", "unowned_at_end"] == 0
    checked = by_id(first_message.findings(summary))
    assert checked["all-newcomers-fed"].holds
    # a RocketMQ newcomer waits for nobody; a coordinator-era one for every member's rejoin (seconds apart)
    assert checked["rocketmq-before-classic"].holds, checked["rocketmq-before-classic"]
    # TubeMQ's server balance: every DISCONNECT of the group is done before the newcomer's CONNECT
    server = summary[(summary.design == "tubemq-server") & (summary.change == "join")].iloc[0]
    assert bool(server.converged) and server.double_owned_partition_s == 0 and server.unowned_at_end == 0
    assert checked["tubemq-client-before-server"].holds, checked["tubemq-client-before-server"]


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(first_run):
    assert vocabulary_problems(first_run[0]) == {}
