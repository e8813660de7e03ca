"""Kafka's server-side assignors (KIP-848): Kafka's own unit-test cases, and properties.

The worked cases are those of Kafka's `OptimizedUniformAssignmentBuilderTest`
(the homogeneous builder), `UniformHeterogeneousAssignmentBuilderTest` and
`RangeAssignorTest` (group-coordinator, `.../group/assignor/`), with their
expected assignments. Their members A, B, C come in the same order in Kafka's
tests and in Java's `HashMap` (which the lab follows). Kafka walks topics in
the `HashSet` order of their topic ids where the lab walks names in order:
where one of Kafka's cases depends on that order, the topics are named here
so that their names sort as Kafka's test ids hash (said at each).
"""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab_cluster.assignment import SERVER_ASSIGNORS, MemberSpec, ServerRangeAssignor, UniformAssignor
from lab_cluster.assignment.uniform_heterogeneous import HeterogeneousBuilder
from lab_cluster.java_hash import hashmap_order

REPO = Path(__file__).resolve().parent.parent


def spec(topics, assigned=(), instance_id=None):
    return MemberSpec(frozenset(topics), frozenset(assigned), instance_id)


def parts(topic, *partitions):
    return [(topic, p) for p in partitions]


def run(assignor, members, counts):
    out = assignor.assign(members, counts)
    assert set(out) == set(members)
    return {m: sorted(p) for m, p in out.items()}


def uniform(members, counts):
    return run(UniformAssignor(), members, counts)


def server_range(members, counts):
    return run(ServerRangeAssignor(), members, counts)


def test_registry_lists_kafkas_names_default_first():
    assert list(SERVER_ASSIGNORS) == ["uniform", "range"]
    assert all(name == a.name for name, a in SERVER_ASSIGNORS.items())


# --- uniform, homogeneous (Kafka's OptimizedUniformAssignmentBuilderTest) ---


def test_uniform_one_member_no_topic_subscription():
    """Kafka's testOneMemberNoTopicSubscription."""
    assert uniform({"A": spec([])}, {"topic1": 3}) == {"A": []}


def test_uniform_subscription_to_a_topic_not_in_the_metadata_is_ignored():
    """testOneMemberSubscribedToNonexistentTopic: Kafka's assignor throws when handed a topic id the metadata
    lacks; its coordinator never hands it one (a name with no topic resolves to no id), and neither does the lab."""
    assert uniform({"A": spec(["topic2"])}, {"topic1": 3}) == {"A": []}
    assert uniform({"A": spec(["topic1", "topic2"])}, {"topic1": 2}) == {"A": parts("topic1", 0, 1)}


def test_uniform_first_assignment_two_members_two_topics():
    """Kafka's testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks."""
    # Kafka's order here is topic3, then topic1 (their ids' hash order).
    t1, t3 = "b-topic1", "a-topic3"
    members = {"A": spec([t1, t3]), "B": spec([t1, t3])}
    assert uniform(members, {t1: 3, t3: 2}) == {"A": parts(t3, 0, 1) + parts(t1, 0), "B": parts(t1, 1, 2)}


def test_uniform_more_members_than_partitions():
    """Kafka's testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {m: spec(["topic3"]) for m in "ABC"}
    assert uniform(members, {"topic3": 2}) == {"A": parts("topic3", 0), "B": parts("topic3", 1), "C": []}


def test_uniform_unbalanced_previous_assignment():
    """Kafka's testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment."""
    members = {"A": spec(["topic1", "topic2"], parts("topic1", 0, 1) + parts("topic2", 0, 1)),
               "B": spec(["topic1", "topic2"], parts("topic1", 2) + parts("topic2", 2))}
    assert uniform(members, {"topic1": 3, "topic2": 3}) == {
        "A": parts("topic1", 0, 1) + parts("topic2", 0), "B": parts("topic1", 2) + parts("topic2", 1, 2)}


def test_uniform_partitions_added():
    """Kafka's testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics."""
    # Kafka's order here is topic2, then topic1.
    t1, t2 = "b-topic1", "a-topic2"
    members = {"A": spec([t1, t2], parts(t1, 0, 2) + parts(t2, 0)), "B": spec([t1, t2], parts(t1, 1) + parts(t2, 1, 2))}
    assert uniform(members, {t1: 6, t2: 5}) == {"A": parts(t2, 0, 3, 4) + parts(t1, 0, 2, 3),
                                                "B": parts(t2, 1, 2) + parts(t1, 1, 4, 5)}


def test_uniform_member_added():
    """Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    both = ["topic1", "topic2"]
    members = {"A": spec(both, parts("topic1", 0, 2) + parts("topic2", 0)),
               "B": spec(both, parts("topic1", 1) + parts("topic2", 1, 2)), "C": spec(both)}
    assert uniform(members, {"topic1": 3, "topic2": 3}) == {
        "A": parts("topic1", 0, 2), "B": parts("topic1", 1) + parts("topic2", 1), "C": parts("topic2", 0, 2)}


def test_uniform_member_removed():
    """Kafka's testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    # Kafka's order here is topic2, then topic1: C's old topic2-2 goes to A, topic1-2 to B.
    t1, t2 = "b-topic1", "a-topic2"
    members = {"A": spec([t1, t2], parts(t1, 0) + parts(t2, 0)), "B": spec([t1, t2], parts(t1, 1) + parts(t2, 1))}
    assert uniform(members, {t1: 3, t2: 3}) == {"A": parts(t2, 0, 2) + parts(t1, 0),
                                                "B": parts(t2, 1) + parts(t1, 1, 2)}


def test_uniform_subscription_removed():
    """Kafka's testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {"A": spec(["topic2"], parts("topic1", 0) + parts("topic2", 0)),
               "B": spec(["topic2"], parts("topic1", 1) + parts("topic2", 1))}
    assert uniform(members, {"topic1": 2, "topic2": 2}) == {"A": parts("topic2", 0), "B": parts("topic2", 1)}


def test_uniform_gives_the_extra_partitions_by_member_order_not_by_what_members_hold():
    """Not a Kafka test: the homogeneous builder hands quotas out in member order, so a newcomer first in that
    order gets the larger quota and both old members give one up, where moving one partition would balance."""
    assert hashmap_order(["B", "C", "A"]) == ["A", "B", "C"]
    members = {"B": spec(["t"], parts("t", 0, 1, 2)), "C": spec(["t"], parts("t", 3, 4)), "A": spec(["t"])}
    assert uniform(members, {"t": 5}) == {"A": parts("t", 2, 4), "B": parts("t", 0, 1), "C": parts("t", 3)}


def test_uniform_member_order_is_javas_hashmap_order():
    """"a" (hash 97, bucket 1) comes before "B" (66, bucket 2) in a HashMap, though "B" < "a": "a" gets the extra."""
    assert uniform({"B": spec(["t"]), "a": spec(["t"])}, {"t": 3}) == {"B": parts("t", 2), "a": parts("t", 0, 1)}


# --- uniform, heterogeneous (Kafka's UniformHeterogeneousAssignmentBuilderTest) ---
# Kafka breaks ties by topic id, and its test ids sort topic1 < topic2 < topic3 < topic4, as the names do.


def test_uniform_heterogeneous_members_of_no_topic():
    """Kafka's testTwoMembersNoTopicSubscription."""
    assert uniform({"A": spec([]), "B": spec([])}, {"topic1": 3}) == {"A": [], "B": []}


def test_uniform_heterogeneous_nonexistent_topics_are_ignored():
    """Kafka's testTwoMembersSubscribedToNonexistentTopics, where the assignor throws (see the homogeneous case)."""
    assert uniform({"A": spec(["topic3"]), "B": spec(["topic2"])}, {"topic1": 3}) == {"A": [], "B": []}


def test_uniform_heterogeneous_first_assignment():
    """Kafka's testFirstAssignmentTwoMembersTwoTopics."""
    members = {"A": spec(["topic1", "topic3"]), "B": spec(["topic3"])}
    assert uniform(members, {"topic1": 3, "topic3": 6}) == {"A": parts("topic1", 0, 1, 2) + parts("topic3", 4),
                                                            "B": parts("topic3", 0, 1, 2, 3, 5)}


def test_uniform_heterogeneous_more_members_than_partitions():
    """Kafka's testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {"A": spec(["topic3"]), "B": spec(["topic3"]), "C": spec(["topic1"])}
    assert uniform(members, {"topic3": 1, "topic1": 2}) == {"A": parts("topic3", 0), "B": [],
                                                            "C": parts("topic1", 0, 1)}


def test_uniform_heterogeneous_unbalanced_previous_assignment():
    """Kafka's testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment."""
    members = {"A": spec(["topic1"], parts("topic1", 0, 1, 2)),
               "B": spec(["topic1", "topic2"], parts("topic1", 3) + parts("topic2", 0)),
               "C": spec(["topic1", "topic2", "topic3"],
                         parts("topic1", 4, 5) + parts("topic2", 1, 2, 3) + parts("topic3", 0, 1, 2, 3))}
    assert uniform(members, {"topic1": 6, "topic2": 4, "topic3": 4}) == {
        "A": parts("topic1", 0, 1, 2, 5), "B": parts("topic1", 3) + parts("topic2", 0, 1, 2, 3),
        "C": parts("topic1", 4) + parts("topic3", 0, 1, 2, 3)}


def test_uniform_heterogeneous_partitions_added():
    """Kafka's testReassignmentWhenPartitionsAreAddedForTwoMembers."""
    members = {"A": spec(["topic1", "topic3"], parts("topic1", 0, 1, 2, 3) + parts("topic3", 0, 1)),
               "B": spec(["topic1", "topic2", "topic3", "topic4"], parts("topic2", 0, 1, 2) + parts("topic4", 0, 1, 2))}
    assert uniform(members, {"topic1": 6, "topic2": 5, "topic3": 3, "topic4": 3}) == {
        "A": parts("topic1", 0, 1, 2, 3, 4, 5) + parts("topic3", 0, 1, 2),
        "B": parts("topic2", 0, 1, 2, 3, 4) + parts("topic4", 0, 1, 2)}


def test_uniform_heterogeneous_member_and_partitions_added():
    """Kafka's testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics."""
    members = {"A": spec(["topic1"], parts("topic1", 0, 2) + parts("topic2", 0)),
               "B": spec(["topic1", "topic2"], parts("topic1", 1) + parts("topic2", 1, 2)),
               "C": spec(["topic1", "topic2"])}
    assert uniform(members, {"topic1": 6, "topic2": 7}) == {
        "A": parts("topic1", 0, 2, 3, 4, 5), "B": parts("topic1", 1) + parts("topic2", 1, 2, 6),
        "C": parts("topic2", 0, 3, 4, 5)}


def test_uniform_heterogeneous_member_removed():
    """Kafka's testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics."""
    members = {"A": spec(["topic1", "topic3"], parts("topic1", 0, 1, 2) + parts("topic3", 0, 1)),
               "B": spec(["topic2"], parts("topic2", 3, 4, 5, 6))}
    assert uniform(members, {"topic1": 3, "topic2": 8, "topic3": 3}) == {
        "A": parts("topic1", 0, 1, 2) + parts("topic3", 0, 1, 2), "B": parts("topic2", 0, 1, 2, 3, 4, 5, 6, 7)}


def test_uniform_heterogeneous_subscription_removed():
    """Kafka's testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {"A": spec(["topic1"], parts("topic1", 0, 2) + parts("topic2", 1, 3)),
               "B": spec(["topic1", "topic2"], parts("topic1", 1) + parts("topic2", 0, 2, 4))}
    assert uniform(members, {"topic1": 3, "topic2": 5}) == {"A": parts("topic1", 0, 1, 2),
                                                            "B": parts("topic2", 0, 1, 2, 3, 4)}


def test_uniform_heterogeneous_partitions_run_out():
    """Kafka's testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions.

    Kafka's test forces the heterogeneous builder on identical subscriptions; so does this one."""
    three = frozenset({"topic1", "topic2", "topic3"})
    members = {"A": MemberSpec(three, frozenset(parts("topic1", 0, 1) + parts("topic2", 0, 1) + parts("topic3", 0, 1))),
               "B": MemberSpec(three)}
    out = HeterogeneousBuilder(members, {"topic1": 2, "topic2": 2, "topic3": 2}, ["A", "B"]).build()
    assert {m: sorted(p) for m, p in out.items()} == {"A": parts("topic2", 0) + parts("topic3", 0, 1),
                                                      "B": parts("topic1", 0, 1) + parts("topic2", 1)}


def test_uniform_heterogeneous_skips_the_most_loaded_when_they_hold_none_of_the_topic():
    """Not a Kafka test: H1 and H2 are the most loaded but hold nothing of t, so the balancer excludes them and
    restarts its most loaded range at M's level (Kafka's comment: "The range is empty due to calls to
    excludeMostLoadedMember()"); M gives its last two partitions of t to L, and stops when they are even."""
    members = {"L": spec(["t"]), "M": spec(["t"], parts("t", 0, 1, 2, 3)),
               "H1": spec(["t", "u"], parts("u", *range(10))), "H2": spec(["t", "v"], parts("v", *range(10)))}
    out = uniform(members, {"t": 4, "u": 10, "v": 10})
    assert out["L"] == parts("t", 2, 3) and out["M"] == parts("t", 0, 1)
    assert out["H1"] == parts("u", *range(10)) and out["H2"] == parts("v", *range(10))


def test_uniform_heterogeneous_member_without_subscriptions():
    """Kafka's testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions."""
    assert uniform({"A": spec(["topic1"]), "B": spec([])}, {"topic1": 3}) == {"A": parts("topic1", 0, 1, 2), "B": []}


@pytest.mark.parametrize("members,phrase", [
    ({"A": spec(["t"], [("t", 3)])}, "t has 3 partitions"),
    ({"A": spec(["t"], [("t", 0)]), "B": spec(["t"], [("t", 0)])}, "assigned to both"),
])
def test_uniform_rejects_a_current_assignment_kafka_could_not_have(members, phrase):
    with pytest.raises(ValueError, match=phrase):
        UniformAssignor().assign(members, {"t": 3})


# --- server-side range (Kafka's RangeAssignorTest) ---


def test_range_one_member_no_topic():
    """Kafka's testOneMemberNoTopic."""
    assert server_range({"A": spec([])}, {"topic1": 3}) == {"A": []}


def test_range_nonexistent_topic_is_ignored():
    """Kafka's testOneMemberSubscribedToNonExistentTopic, where the assignor throws (see uniform's case)."""
    assert server_range({"A": spec(["topic2"])}, {"topic1": 3}) == {"A": []}


def test_range_same_subscriptions():
    """Kafka's testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions."""
    members = {"A": spec(["topic1", "topic3"]), "B": spec(["topic1", "topic3"])}
    assert server_range(members, {"topic1": 3, "topic3": 2}) == {"A": parts("topic1", 0, 1) + parts("topic3", 0),
                                                                 "B": parts("topic1", 2) + parts("topic3", 1)}


def test_range_more_members_than_partitions():
    """Kafka's testFirstAssignmentNumMembersGreaterThanNumPartitions."""
    members = {m: spec(["topic1", "topic3"]) for m in "ABC"}
    assert server_range(members, {"topic1": 3, "topic3": 2}) == {
        "A": parts("topic1", 0) + parts("topic3", 0), "B": parts("topic1", 1) + parts("topic3", 1),
        "C": parts("topic1", 2)}


def test_range_static_member_rejoining_with_a_new_id_keeps_its_ranges():
    """Kafka's testStaticMembership, testMixedStaticMembership."""
    counts = {"topic1": 5}
    members = {"A": spec(["topic1"], instance_id="instanceA"), "C": spec(["topic1"], instance_id="instanceC"),
               "B": spec(["topic1"])}
    first = server_range(members, counts)
    assert first == {"A": parts("topic1", 0, 1), "C": parts("topic1", 2, 3), "B": parts("topic1", 4)}
    del members["A"]
    members["memberA1"] = spec(["topic1"], instance_id="instanceA")
    again = server_range(members, counts)
    assert again["memberA1"] == first["A"] and again["B"] == first["B"] and again["C"] == first["C"]


def test_range_member_added_moves_ranges():
    """Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    both = ["topic1", "topic2"]
    members = {"A": spec(both, parts("topic1", 0, 1) + parts("topic2", 0, 1)),
               "B": spec(both, parts("topic1", 2) + parts("topic2", 2)), "C": spec(both)}
    assert server_range(members, {"topic1": 3, "topic2": 3}) == {
        "A": parts("topic1", 0) + parts("topic2", 0), "B": parts("topic1", 1) + parts("topic2", 1),
        "C": parts("topic1", 2) + parts("topic2", 2)}


def test_range_member_and_partition_added():
    """Kafka's testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {"A": spec(["topic1", "topic2"]), "B": spec(["topic1", "topic2"]), "C": spec(["topic1"])}
    assert server_range(members, {"topic1": 4, "topic2": 3}) == {
        "A": parts("topic1", 0, 1) + parts("topic2", 0, 1), "B": parts("topic1", 2) + parts("topic2", 2),
        "C": parts("topic1", 3)}


def test_range_subscriptions_changed():
    """Kafka's testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    members = {"A": spec(["topic1"], parts("topic1", 0, 1, 2) + parts("topic2", 0)),
               "B": spec(["topic1", "topic2", "topic3"], parts("topic2", 1)),
               "C": spec(["topic2"], parts("topic2", 2) + parts("topic3", 0, 1))}
    assert server_range(members, {"topic1": 3, "topic2": 3, "topic3": 2}) == {
        "A": parts("topic1", 0, 1), "B": parts("topic1", 2) + parts("topic2", 0, 1) + parts("topic3", 0, 1),
        "C": parts("topic2", 2)}


# --- properties ---

TOPICS = ["a", "b", "c", "d"]


@st.composite
def groups(draw, homogeneous=False, max_members=8):
    """A group as the coordinator sees it: partition counts, subscriptions (perhaps naming a topic with no
    metadata, "zz"), and a current target assignment in which each partition has at most one owner, perhaps
    a member no longer subscribed to its topic."""
    counts = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1))
    ids = draw(st.lists(st.text("xyzAB01", min_size=1, max_size=4), min_size=1, max_size=max_members, unique=True))
    names = st.sets(st.sampled_from([*TOPICS, "zz"]))
    shared = draw(names)
    subscriptions = {m: shared if homogeneous else draw(names) for m in ids}
    owned: dict[str, list] = {m: [] for m in ids}
    for topic, count in counts.items():
        for partition in range(count):
            owner = draw(st.one_of(st.none(), st.sampled_from(ids)))
            if owner is not None:
                owned[owner].append((topic, partition))
    instance = st.one_of(st.none(), st.text("ij", min_size=1, max_size=3))
    return counts, {m: spec(subscriptions[m], owned[m], draw(instance)) for m in ids}


def _check_valid(members, counts, out):
    assert set(out) == set(members)
    given = [tp for ps in out.values() for tp in ps]
    subscribed = {t for s in members.values() for t in s.topics}
    assert sorted(given) == sorted((t, p) for t, n in counts.items() if t in subscribed for p in range(n))
    for member, ps in out.items():
        assert all(t in members[member].topics for t, _ in ps), (member, ps)


@settings(max_examples=300, deadline=None)
@given(group=groups(), name=st.sampled_from(sorted(SERVER_ASSIGNORS)))
def test_every_subscribed_partition_is_assigned_once_to_a_subscriber(group, name):
    counts, members = group
    _check_valid(members, counts, SERVER_ASSIGNORS[name].assign(members, counts))


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True))
def test_uniform_homogeneous_loads_differ_by_at_most_one(group):
    counts, members = group
    sizes = [len(ps) for ps in UniformAssignor().assign(members, counts).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(group=groups(), name=st.sampled_from(sorted(SERVER_ASSIGNORS)))
def test_rerunning_on_its_own_output_changes_nothing(group, name):
    """Stickiness: given its result as every member's current assignment, an assignor returns it unchanged."""
    counts, members = group
    assignor = SERVER_ASSIGNORS[name]
    out = assignor.assign(members, counts)
    again = {m: MemberSpec(s.topics, out[m], s.instance_id) for m, s in members.items()}
    assert assignor.assign(again, counts) == out


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True, max_members=7), newcomer=st.text("xyzAB01", min_size=5, max_size=6))
def test_uniform_homogeneous_newcomer_takes_no_more_than_quotas_force(group, newcomer):
    """One member joins a group whose assignment the uniform assignor made. A member that stays keeps
    min(held, quota) of its partitions and its quota is at least P // M (M members now), so it gives up at most
    held - P // M, and never gains and loses at once. (A minimal move would give up only held - ceil(P / M) each;
    Kafka may take one more, handing the extra partitions out by member order.)"""
    counts, members = group
    before = UniformAssignor().assign(members, counts)
    staying = {m: MemberSpec(s.topics, before[m]) for m, s in members.items()}
    after = UniformAssignor().assign({**staying, newcomer: MemberSpec(next(iter(members.values())).topics)}, counts)
    total = sum(len(ps) for ps in before.values())
    floor = total // (len(members) + 1)
    moved = 0
    for member, held in before.items():
        lost, gained = held - after[member], after[member] - held
        assert len(lost) <= max(0, len(held) - floor)
        assert not (lost and gained)
        moved += len(lost)
    assert moved <= sum(max(0, len(held) - floor) for held in before.values())
    assert len(after[newcomer]) in (floor, -(-total // (len(members) + 1)))


def _ranges(partitions):
    """The partition numbers of each topic, as (first, last, count)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return {t: (min(ps), max(ps), len(ps)) for t, ps in by_topic.items()}


@settings(max_examples=300, deadline=None)
@given(group=groups())
def test_range_gives_each_subscriber_one_contiguous_range_per_topic_in_member_order(group):
    """Per topic, its subscribers in static-first order hold consecutive ranges, the first P % N one longer."""
    counts, members = group
    out = ServerRangeAssignor().assign(members, counts)
    order = sorted(members, key=lambda m: (0, members[m].instance_id) if members[m].instance_id else (1, m))
    for topic, count in counts.items():
        subscribers = [m for m in order if topic in members[m].topics]
        if not subscribers:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            mine = sorted(p for t, p in out[member] if t == topic)
            length = min(quota + (i < extra), count - start)
            assert mine == list(range(start, start + length)), (topic, member, mine)
            start += length


@settings(max_examples=100, deadline=None)
@given(group=groups())
def test_range_reads_no_current_assignment(group):
    counts, members = group
    fresh = {m: MemberSpec(s.topics, frozenset(), s.instance_id) for m, s in members.items()}
    assert ServerRangeAssignor().assign(members, counts) == ServerRangeAssignor().assign(fresh, counts)


# --- the CLI ---


def _assign_cli(tmp_path, name, doc):
    path = tmp_path / "group.json"
    path.write_text(json.dumps(doc))
    return subprocess.run([sys.executable, "-m", "experiments", "assign", "--assignor", name, str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


GROUP = {"topics": {"x": 3, "y": 3}, "members": [
    {"id": "A", "topics": ["x", "y"], "owned": [["x", 0], ["x", 2], ["y", 0]], "generation": 4},
    {"id": "B", "topics": ["x", "y"], "owned": [["x", 1], ["y", 1], ["y", 2]], "generation": 4},
    {"id": "C", "topics": ["x", "y"], "group_instance_id": "i-0"}]}


def test_assign_cli_serves_uniform_sticky_to_owned(tmp_path):
    result = _assign_cli(tmp_path, "uniform", GROUP)
    assert result.returncode == 0, result.stderr
    # Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics
    assert json.loads(result.stdout) == {"A": [["x", 0], ["x", 2]], "B": [["x", 1], ["y", 1]],
                                         "C": [["y", 0], ["y", 2]]}
    # C also names a topic that does not exist: the subscriptions differ by name, and Kafka takes the
    # heterogeneous builder, which moves x-1 (B's last of x), then x-2 (A's), to C.
    doc = copy.deepcopy(GROUP)
    doc["members"][2]["topics"].append("unknown")
    result = _assign_cli(tmp_path, "uniform", doc)
    assert json.loads(result.stdout) == {"A": [["x", 0], ["y", 0]], "B": [["y", 1], ["y", 2]],
                                         "C": [["x", 1], ["x", 2]]}


def test_assign_cli_serves_server_range_static_first(tmp_path):
    result = _assign_cli(tmp_path, "server-range", GROUP)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"A": [["x", 1], ["y", 1]], "B": [["x", 2], ["y", 2]],
                                         "C": [["x", 0], ["y", 0]]}


def test_assign_cli_rejects_an_impossible_current_assignment(tmp_path):
    doc = {"topics": {"x": 2}, "members": [{"id": "A", "topics": ["x"], "owned": [["x", 0]]},
                                           {"id": "B", "topics": ["x"], "owned": [["x", 0]]}]}
    result = _assign_cli(tmp_path, "uniform", doc)
    assert result.returncode == 2 and "assigned to both" in result.stderr and "Traceback" not in result.stderr
