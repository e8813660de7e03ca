"""The trial runner's view of a group, from the consumer hosts' state lines, without any process: lines are fed
as a host prints them."""

from __future__ import annotations

import json
import time

from experiments.engine.group_watch import GroupWatch
from lab_cluster.family import MemberSnapshot


def _line(actor, state, partitions, generation=None, gave_up=False) -> str:
    return MemberSnapshot(state, gave_up, partitions, generation).line(actor)  # as a host prints it


def test_a_zookeeper_era_group_converges_when_every_member_consumes_a_disjoint_cover():
    watch = GroupWatch("zookeeper", partitions=4)
    since = time.monotonic_ns()
    watch.update(_line("c1", "consuming", [0, 1]))
    assert watch.problem(["c1", "c2"], since) == "no rebalance seen yet from c2"
    watch.update(_line("c2", "rebalancing", []))
    assert watch.problem(["c1", "c2"], since) == "c2 is rebalancing"
    watch.update(_line("c2", "consuming", [1, 2]))
    assert watch.problem(["c1", "c2"], since) == "a partition is assigned to two members"
    watch.update(_line("c2", "consuming", [2]))
    assert watch.problem(["c1", "c2"], since) == "partitions [3] are not assigned"
    watch.update(_line("c2", "consuming", [2, 3]))
    assert watch.problem(["c1", "c2"], since) is None
    assert watch.wait_converged(["c1", "c2"], since, limit_s=5) is None


def test_lines_from_before_the_change_do_not_count_and_other_output_is_ignored():
    watch = GroupWatch("zookeeper", partitions=1)
    watch.update(_line("c1", "consuming", [0]))
    since = time.monotonic_ns()
    for noise in ("starting up", "[1, 2]", json.dumps({"state": "consuming"})):
        watch.update(noise)
    assert watch.problem(["c1"], since) == "no rebalance seen yet from c1"


def test_a_coordinator_era_group_must_also_agree_on_one_generation():
    watch = GroupWatch("classic", partitions=2)
    since = time.monotonic_ns()
    watch.update(_line("c1", "stable", [0], generation=3))
    watch.update(_line("c2", "stable", [1], generation=2))
    assert watch.problem(["c1", "c2"], since) == "members are in different generations [2, 3]"
    watch.update(_line("c2", "stable", [1], generation=3))
    assert watch.problem(["c1", "c2"], since) is None


def test_a_member_that_gave_up_ends_the_wait_at_once_with_the_reason():
    for design, state in (("zookeeper", "failed"), ("classic", "unjoined")):
        watch = GroupWatch(design, partitions=2)
        since = time.monotonic_ns()
        watch.update(_line("c1", state, [], gave_up=True))
        # an hour's limit: were the wait to run it out, the test's own timeout would fail it
        assert watch.wait_converged(["c1"], since, limit_s=3600) == f"c1 gave up rebalancing (c1 is {state})"


def test_a_member_forgotten_is_missing_again():
    watch = GroupWatch("zookeeper", partitions=1)
    since = time.monotonic_ns()
    watch.update(_line("c1", "consuming", [0]))
    watch.forget("c1")
    assert watch.problem(["c1"], since) == "no rebalance seen yet from c1"


def test_a_group_that_never_settles_is_given_up_on_at_the_limit_with_what_was_missing():
    watch = GroupWatch("classic", partitions=2)
    since = time.monotonic_ns()
    watch.update(_line("c1", "completing_rebalance", [], generation=1))
    assert watch.wait_converged(["c1"], since, limit_s=0.2) == "c1 is completing_rebalance"


def test_a_member_that_gave_up_is_the_reason_even_while_another_has_said_nothing_yet():
    watch = GroupWatch("classic", partitions=2)
    since = time.monotonic_ns()
    watch.update(_line("c1", "unjoined", [], generation=-1, gave_up=True))  # c2 has printed nothing yet
    assert watch.problem(["c1", "c2"], since) == "c1 gave up rebalancing (c1 is unjoined)"


def test_a_server_balanced_group_converges_on_the_masters_fixpoint_not_on_every_member_reporting():
    """TubeMQ's master moves only the consumers a tick must move: after a join, members it leaves alone say
    nothing, and the old members still cover every partition while the newcomer has none."""
    watch = GroupWatch("tubemq-server", partitions=6)
    for actor, held in (("c1", [0, 1, 2]), ("c2", [3, 4, 5])):
        watch.update(_line(actor, "STARTED", held))
    since = time.monotonic_ns()
    assert watch.problem(["c1", "c2", "j1"], since) == "no rebalance seen yet from j1"
    watch.update(_line("j1", "STARTED", []))
    assert watch.problem(["c1", "c2", "j1"], since) == "the loads are not even yet (c1 3, c2 3, j1 0)"
    watch.update(_line("c1", "STARTED", [0, 1]))  # the tick's DISCONNECT: c1 gave up one
    assert watch.problem(["c1", "c2", "j1"], since) == "partitions [2] are not assigned"
    watch.update(_line("j1", "STARTED", [2]))  # its CONNECT; c2 was not moved and said nothing since the join
    assert watch.problem(["c1", "c2", "j1"], since) == "the loads are not even yet (c1 2, c2 3, j1 1)"
    watch.update(_line("c2", "STARTED", [3, 4]))
    watch.update(_line("j1", "STARTED", [2, 5]))
    assert watch.problem(["c1", "c2", "j1"], since) is None
