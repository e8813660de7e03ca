"""Your own assignor (`lab_cluster/assignment/plugins.py`): named in a config, loaded with a clear error when it
cannot be, its user data carried on both wires, run by whichever member leads, and a broken one survived.

The example is `examples/weighted_assignor.py`: each member's weight travels in its subscription's user data.
"""

from __future__ import annotations

import struct
import sys
import textwrap

import pytest
from conftest import PARTITIONS, trace_events, wait_for
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.weighted_assignor import KafkaPythonWeightedAssignor, WeightedAssignor, shares, weight_bytes, weight_of
from lab_cluster.assignment import Assignment, Subscription
from lab_cluster.errors import LabError
from lab_cluster.kafka_listener.subscriptions import (
    from_kafka_assignment,
    from_kafka_subscription,
    to_kafka_assignment,
    to_kafka_subscription,
)
from modern_coord.config import ConsumerConfig
from modern_coord.leader_assignment import AssignorFailed, leader_subscriptions, problems, run_assignor

WEIGHTED = "examples.weighted_assignor:WeightedAssignor"


def _config(**props) -> ConsumerConfig:
    return ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092",
                                     **{k.replace("_", "."): v for k, v in props.items()}})


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module `my_assignors` on sys.path, written by the test, removed after it."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        (tmp_path / "my_assignors.py").write_text(textwrap.dedent(source))
        sys.modules.pop("my_assignors", None)
        return "my_assignors"
    yield write
    sys.modules.pop("my_assignors", None)


# -- naming it in a config ----------------------------------------------------------------------------------
def test_a_class_named_in_the_strategy_list_is_made_configured_and_listed_in_its_place():
    config = _config(partition_assignment_strategy=f"range,{WEIGHTED}", **{"weighted.assignor.weight": "3"})
    built_in, mine = config.assignors()
    assert (built_in.name, mine.name, mine.weight) == ("range", "weighted", 3)
    assert config.as_record()["weighted.assignor.weight"] == "3"
    assert config.assignors()[1] is not mine  # an instance per consumer, as Kafka makes one per consumer


def test_an_assignors_own_setting_is_refused_when_no_listed_assignor_reads_it():
    with pytest.raises(LabError, match="Unknown consumer config key.*weighted.assignor.weight"):
        _config(partition_assignment_strategy="range", **{"weighted.assignor.weight": "3"})


@pytest.mark.parametrize("entry, says", [
    ("no_such_module:Thing", "no module no_such_module"),
    ("examples.weighted_assignor:Missing", "has no class Missing"),
    ("examples.weighted_assignor:weight_of", "is not a subclass of lab_cluster.assignment.Assignor"),
    ("lab_cluster.assignment:Assignor", "does not implement assign"),
    (":Thing", "is not package.module:Class"),
    ("rangee", "must list assignors among"),
])
def test_a_strategy_that_cannot_be_loaded_is_a_clear_error(entry, says):
    with pytest.raises(LabError, match=says) as info:
        _config(partition_assignment_strategy=entry)
    assert "Traceback" not in str(info.value)


def test_two_assignors_with_one_name_bad_settings_and_no_common_protocol_are_refused(plugin_module):
    module = plugin_module("""
        from lab_cluster.assignment import Assignor

        class Ranged(Assignor):
            name = "range"
            def assign(self, partitions_per_topic, subscriptions):
                return {}

        class Cooperative(Assignor):
            name = "only-cooperative"
            supported_protocols = ("cooperative",)
            def assign(self, partitions_per_topic, subscriptions):
                return {}

        class Explodes(Assignor):
            name = "explodes"
            def __init__(self):
                raise RuntimeError("no licence")
            def assign(self, partitions_per_topic, subscriptions):
                return {}
    """)
    with pytest.raises(LabError, match="the assignor name 'range' is used by more than one"):
        _config(partition_assignment_strategy=f"range,{module}:Ranged")
    with pytest.raises(LabError, match="no rebalance protocol in common"):
        _config(partition_assignment_strategy=f"range,{module}:Cooperative")
    with pytest.raises(LabError, match="failed to start: RuntimeError: no licence"):
        _config(partition_assignment_strategy=f"{module}:Explodes")
    with pytest.raises(LabError, match="weighted.assignor.weight='x' is not a whole number"):
        _config(partition_assignment_strategy=WEIGHTED, **{"weighted.assignor.weight": "x"})


# -- the leader's run -----------------------------------------------------------------------------------------
def test_the_leader_gives_the_assignor_each_members_user_data_and_sends_back_what_it_returns():
    subs = leader_subscriptions([
        {"member_id": "a", "metadata": {"topics": ["t"], "user_data": "AAAAAw=="}},  # weight 3
        {"member_id": "b", "metadata": {"topics": ["t"]}}])  # none: weight 1
    result = run_assignor(WeightedAssignor(), {"t": 4}, subs)
    assert result == {"a": Assignment([("t", 0), ("t", 1), ("t", 2)]), "b": Assignment([("t", 3)])}


@pytest.mark.parametrize("returned", [RuntimeError("boom"), {"a": 3}, {"a": [("t", "x")]},
                                      {"a": Assignment([("t", 0)], user_data="text")}])
def test_an_assignor_that_raises_or_returns_no_assignment_fails_the_leaders_round(returned):
    class Broken(WeightedAssignor):
        def assign(self, partitions_per_topic, subscriptions):
            if isinstance(returned, Exception):
                raise returned
            return returned
    with pytest.raises(AssignorFailed):
        run_assignor(Broken(), {"t": 2}, {"a": Subscription(["t"])})


def test_a_partition_given_twice_or_to_nobody_or_to_a_stranger_is_recorded_not_refused_as_in_kafka():
    subs = {"a": Subscription(["t"]), "b": Subscription(["t"])}
    assert problems({"t": 3}, subs, {"a": [("t", 0), ("t", 1)], "b": [("t", 2)]}) == {
        "assigned_twice": [], "unassigned": [], "unknown_members": [], "left_out": []}
    assert problems({"t": 3}, subs, {"a": [("t", 0)], "x": [("t", 0)]}) == {
        "assigned_twice": [["t", 0]], "unassigned": [["t", 1], ["t", 2]], "unknown_members": ["x"],
        "left_out": ["b"]}


def test_under_the_cooperative_protocol_a_partition_may_not_move_straight_to_another_owner():
    class Mover(WeightedAssignor):
        supported_protocols = ("eager", "cooperative")

        def assign(self, partitions_per_topic, subscriptions):
            return {"a": [], "b": [("t", 0)]}
    subs = {"a": Subscription(["t"], owned_partitions=[("t", 0)]), "b": Subscription(["t"])}
    with pytest.raises(AssignorFailed, match="violates its requirements"):
        run_assignor(Mover(), {"t": 1}, subs, "cooperative")
    assert run_assignor(Mover(), {"t": 1}, subs, "eager")["b"].partitions == [("t", 0)]


# -- the example ---------------------------------------------------------------------------------------------
@settings(deadline=None, max_examples=200)
@given(count=st.integers(0, 64), weights=st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_weighted_shares_give_every_partition_once_within_one_of_each_weights_share(count, weights):
    got = shares(count, weights)
    assert sum(got) == count
    assert all(abs(n - count * w / sum(weights)) < 1 for n, w in zip(got, weights, strict=True))


def test_a_weight_that_is_not_a_positive_int32_counts_one():
    assert [weight_of(b) for b in (None, b"", b"\x00\x00\x00\x00", struct.pack(">i", -2), b"abc")] == [1] * 5
    assert weight_of(weight_bytes(7)) == 7


def test_user_data_crosses_the_kafka_listener_both_ways_byte_for_byte():
    """A lab member's user data reaches a kafka-python leader's assignor as Kafka's bytes, and the other way."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    lab = WeightedAssignor(5)
    as_kafka = ConsumerProtocolSubscription.decode(to_kafka_subscription(
        {"topics": ["t"], "owned": [], "generation": 2, "user_data": "AAAABQ=="}))
    assert as_kafka.user_data == lab.subscription_user_data(["t"]) == weight_bytes(5)
    kp_bytes = KafkaPythonWeightedAssignor(4).metadata({"t"}).encode()
    assert weight_of(leader_subscriptions([{"member_id": "k", "metadata": from_kafka_subscription(kp_bytes)}])
                     ["k"].user_data) == 4
    back = from_kafka_assignment(to_kafka_assignment({"partitions": [["t", 1]], "user_data": "AAE="}))
    assert (back["partitions"], back["user_data"]) == ([["t", 1]], "AAE=")


# -- in a real group -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_lab_consumers_and_kafka_python_share_a_weighted_group_and_a_broken_round_is_survived(cluster,
                                                                                              plugin_module):
    """Two lab consumers (weights 3 and 1) and a kafka-python consumer (weight 2) in one group on the Kafka and
    JSON listeners: whichever leads, each gets its weighted share. The group's assignor fails its first round
    (it raises once): the leader records it, sends no SyncGroup, and the group forms at the next round."""
    from test_kafka_clients import KpPoller, kp_consumer

    from lab_cluster.trace import TraceRecorder
    from modern_coord.consumer import ModernConsumer

    module = plugin_module("""
        from examples.weighted_assignor import WeightedAssignor

        class FailsOnce(WeightedAssignor):
            failed = False
            def assign(self, partitions_per_topic, subscriptions):
                if not FailsOnce.failed:
                    FailsOnce.failed = True
                    raise RuntimeError("the first round fails")
                return super().assign(partitions_per_topic, subscriptions)
    """)
    lab, traces = [], []
    for name, weight in (("lab-3", 3), ("lab-1", 1)):
        trace = TraceRecorder(cluster.dir, trial="t", design="classic", actor=name)
        traces.append(trace)
        lab.append(ModernConsumer(ConsumerConfig.from_dict({
            "group.id": "weighted", "bootstrap.servers": cluster.bootstrap, "client.id": name,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": f"{module}:FailsOnce", "weighted.assignor.weight": str(weight)}),
            ["t"], trace, name=name).start())
    wait_for(lambda: any(trace_events(cluster.dir, n, "assignor_failed") for n in ("lab-3", "lab-1")),
             timeout_s=60, what="the first round's assignor to fail")
    kp = KpPoller(kp_consumer(cluster, "weighted", "kp-2",
                              partition_assignment_strategy=[KafkaPythonWeightedAssignor(2)]))
    every = {("t", p) for p in range(PARTITIONS)}
    want = dict(zip(("lab-3", "lab-1", "kp-2"), shares(PARTITIONS, [3, 1, 2]), strict=True))
    try:
        def weighted():
            views = {"lab-3": set(lab[0].assignment()), "lab-1": set(lab[1].assignment()), "kp-2": kp.assignment()}
            return (set().union(*views.values()) == every and sum(map(len, views.values())) == len(every)
                    and {n: len(v) for n, v in views.items()} == want)
        wait_for(weighted, timeout_s=90, what=f"the three members to hold their weighted shares {want}")
        failed = [e for n in ("lab-3", "lab-1") for e in trace_events(cluster.dir, n, "assignor_failed")]
        assert failed and "RuntimeError: the first round fails" in failed[0]["error"]
    finally:
        for consumer in lab:
            consumer.stop()
        for trace in traces:
            trace.close()
        kp.stop()
        kp.consumer.close()
