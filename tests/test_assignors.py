"""Assignors: worked cases checked by hand against Kafka's documented behaviour, and properties."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab_cluster.assignment import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)

REPO = Path(__file__).resolve().parent.parent


def test_range_gives_the_first_members_the_extra_partition_of_every_topic():
    subs = {m: Subscription(["a", "b"]) for m in ("c0", "c1", "c2")}
    out = RangeAssignor().assign({"a": 4, "b": 4}, subs)
    assert out == {"c0": [("a", 0), ("a", 1), ("b", 0), ("b", 1)], "c1": [("a", 2), ("b", 2)],
                   "c2": [("a", 3), ("b", 3)]}


def test_static_members_come_first_by_instance_id():
    subs = {"a-member": Subscription(["t"]), "z-member": Subscription(["t"], group_instance_id="instance-1"),
            "m-member": Subscription(["t"], group_instance_id="instance-0")}
    out = RangeAssignor().assign({"t": 3}, subs)
    assert out == {"m-member": [("t", 0)], "z-member": [("t", 1)], "a-member": [("t", 2)]}


def test_roundrobin_skips_members_not_subscribed():
    subs = {"c0": Subscription(["t0"]), "c1": Subscription(["t0", "t1"]), "c2": Subscription(["t0", "t1", "t2"])}
    out = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    # t0-0 -> c0; t1-0: c1; t1-1: c2; t2-0: c0 skipped, c1 skipped -> c2; t2-1: c0, c1 skipped -> c2; t2-2 -> c2
    assert out == {"c0": [("t0", 0)], "c1": [("t1", 0)], "c2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]}


def test_members_of_no_known_topic_are_listed_with_nothing():
    for assignor in ASSIGNORS.values():
        out = assignor.assign({"t": 2}, {"c0": Subscription(["t"]), "c1": Subscription(["other"])})
        assert out["c1"] == [] and sorted(out["c0"]) == [("t", 0), ("t", 1)]


groups = st.fixed_dictionaries({
    "topics": st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1),
    "members": st.lists(st.tuples(st.text("xyz0123", min_size=1, max_size=4),
                                  st.sets(st.sampled_from(["a", "b", "c", "d"]), min_size=1),
                                  st.one_of(st.none(), st.text("ij", min_size=1, max_size=2))),
                        min_size=1, max_size=8, unique_by=lambda m: m[0]),
})


def _subs(group):
    return {m: Subscription(sorted(topics), group_instance_id=iid) for m, topics, iid in group["members"]}


@settings(max_examples=300, deadline=None)
@given(group=groups, name=st.sampled_from(sorted(ASSIGNORS)))
def test_every_subscribed_partition_is_assigned_exactly_once_to_a_subscriber(group, name):
    subs = _subs(group)
    out = ASSIGNORS[name].assign(group["topics"], subs)
    assert set(out) == set(subs)
    assigned = [tp for parts in out.values() for tp in parts]
    subscribed = {t for s in subs.values() for t in s.topics}
    expected = [(t, p) for t, n in group["topics"].items() if t in subscribed for p in range(n)]
    assert sorted(assigned) == sorted(expected)
    for member, parts in out.items():
        assert all(t in subs[member].topics for t, _ in parts)


@settings(max_examples=300, deadline=None)
@given(group=groups)
def test_range_is_balanced_per_topic(group):
    subs = _subs(group)
    out = RangeAssignor().assign(group["topics"], subs)
    for topic in group["topics"]:
        counts = [sum(1 for t, _ in out[m] if t == topic) for m in subs if topic in subs[m].topics]
        if counts:
            assert max(counts) - min(counts) <= 1


@settings(max_examples=300, deadline=None)
@given(topics=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 12), min_size=1),
       members=st.sets(st.text("xyz0123", min_size=1, max_size=4), min_size=1, max_size=8))
def test_roundrobin_is_balanced_overall_when_subscriptions_are_identical(topics, members):
    subs = {m: Subscription(sorted(topics)) for m in members}
    counts = [len(p) for p in RoundRobinAssignor().assign(topics, subs).values()]
    assert max(counts) - min(counts) <= 1


def test_sticky_hands_a_leavers_partitions_to_the_others_and_moves_nothing_else():
    topics = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    first = StickyAssignor().assign(topics, {c: Subscription(sorted(topics)) for c in ("C0", "C1", "C2")})
    after = StickyAssignor().assign(topics, {c: Subscription(sorted(topics), first[c], 1) for c in ("C0", "C2")})
    assert set(first["C0"]) <= set(after["C0"]) and set(first["C2"]) <= set(after["C2"])
    assert set(after["C0"]) | set(after["C2"]) == {(t, p) for t in topics for p in range(2)}


def test_sticky_trusts_only_the_newest_generation_and_drops_doubly_claimed_partitions():
    # c1 (generation 2) and c0 (generation 1) both claim t-0: c1, the newer, keeps it.
    # c1 and c2 both claim t-1 in generation 2: neither is trusted with it.
    subs = {"c0": Subscription(["t"], [("t", 0)], 1), "c1": Subscription(["t"], [("t", 0), ("t", 1)], 2),
            "c2": Subscription(["t"], [("t", 1), ("t", 2)], 2)}
    out = StickyAssignor().assign({"t": 3}, subs)
    assert out["c1"] == [("t", 0)] and out["c2"] == [("t", 2)] and out["c0"] == [("t", 1)]


def test_sticky_general_path_keeps_owned_partitions_when_subscriptions_differ():
    subs = {"c0": Subscription(["a"], [("a", 0), ("a", 1)], 3), "c1": Subscription(["a", "b"], [("b", 0)], 3),
            "c2": Subscription(["b"], [], -1)}
    out = StickyAssignor().assign({"a": 2, "b": 2}, subs)
    assert out == {"c0": [("a", 0), ("a", 1)], "c1": [("b", 0)], "c2": [("b", 1)]}


def _sticky_is_balanced(out, subs):
    """Kafka's check: a member two or more partitions ahead of another holds nothing the other could take."""
    for big in out:
        for small in out:
            if len(out[big]) > len(out[small]) + 1:
                assert not any(t in subs[small].topics for t, _ in out[big]), (big, small, out)


@settings(max_examples=300, deadline=None)
@given(group=groups)
def test_sticky_is_balanced_as_kafkas_is(group):
    subs = _subs(group)
    _sticky_is_balanced(StickyAssignor().assign(group["topics"], subs), subs)


@settings(max_examples=300, deadline=None)
@given(topics=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 12), min_size=1),
       members=st.lists(st.text("xyz0123", min_size=1, max_size=4), min_size=2, max_size=8, unique=True),
       joiner=st.booleans(), data=st.data())
def test_sticky_keeps_every_partition_it_can_when_a_member_joins_or_leaves(topics, members, joiner, data):
    """Identical subscriptions: after one change, every member that stays keeps min(owned, quota) partitions."""
    names = sorted(topics)
    before = StickyAssignor().assign(topics, {m: Subscription(names) for m in members})
    changed = data.draw(st.sampled_from(members))
    if joiner:
        stay = {m: Subscription(names, before[m], 1) for m in members}
        stay[changed + "-new"] = Subscription(names)
    else:
        stay = {m: Subscription(names, before[m], 1) for m in members if m != changed}
    after = StickyAssignor().assign(topics, stay)
    counts = [len(v) for v in after.values()]
    assert max(counts) - min(counts) <= 1
    quota = sum(topics.values()) // len(stay)
    for member, sub in stay.items():
        assert len(set(sub.owned_partitions) & set(after[member])) >= min(len(sub.owned_partitions), quota)


def _owned_after(topics, members, data):
    """A group's state before a change: members that own disjoint partitions from an earlier assignment (by
    some assignor, so ownership is anything but sticky's), one of them perhaps gone, a newcomer perhaps there."""
    names = sorted(topics)
    earlier = ASSIGNORS[data.draw(st.sampled_from(["range", "roundrobin", "sticky"]))].assign(
        topics, {m: Subscription(names) for m in members})
    subs = {m: Subscription(names, earlier[m], 3) for m in members}
    if data.draw(st.booleans()):
        del subs[data.draw(st.sampled_from(members))]
    if data.draw(st.booleans()) or not subs:
        subs["zz-new"] = Subscription(names)
    return subs


@settings(max_examples=300, deadline=None)
@given(topics=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 12), min_size=1),
       members=st.lists(st.text("xyz0123", min_size=1, max_size=4), min_size=1, max_size=8, unique=True),
       data=st.data())
def test_cooperative_sticky_never_assigns_in_one_round_a_partition_another_member_still_owns(topics, members, data):
    """KIP-429's rule, and the second round: what was withheld goes out once its owner has revoked it."""
    subs = _owned_after(topics, members, data)
    first, withheld = CooperativeStickyAssignor().assign_withholding(topics, subs)
    for member, parts in first.items():
        others = {tp for m, s in subs.items() if m != member for tp in s.owned_partitions}
        assert not set(parts) & others, (member, parts, subs)
    given_out = [tp for parts in first.values() for tp in parts]
    every = [(t, p) for t, n in topics.items() for p in range(n)]
    assert sorted(given_out + list(withheld)) == sorted(every)  # each partition assigned or withheld, once
    # the same as sticky, but for the withheld partitions
    sticky = StickyAssignor().assign(topics, subs)
    assert {m: sorted(v) for m, v in first.items()} == \
        {m: sorted(tp for tp in v if withheld.get(tp) != m) for m, v in sticky.items()}
    # the owners revoked what they lost and rejoined: round two withholds nothing and gives out the rest
    second_subs = {m: Subscription(sorted(topics), first[m], 4) for m in subs}
    second, withheld_again = CooperativeStickyAssignor().assign_withholding(topics, second_subs)
    assert withheld_again == {}
    assert sorted(tp for parts in second.values() for tp in parts) == sorted(every)
    for member, parts in first.items():
        assert set(parts) <= set(second[member])  # nobody loses in round two what round one left it


def test_cooperative_sticky_withholds_nothing_when_nothing_changes_owner():
    subs = {"a": Subscription(["t"], [("t", 0), ("t", 1)], 2), "b": Subscription(["t"], [("t", 2), ("t", 3)], 2)}
    assert CooperativeStickyAssignor().assign_withholding({"t": 4}, subs) == (
        {"a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)]}, {})


def test_cooperative_sticky_general_path_withholds_what_changes_owner():
    """Subscriptions differ (Kafka's general path): the withheld set is recomputed from the owned lists."""
    subs = {"a": Subscription(["t", "u"], [("t", 0), ("t", 1), ("u", 0)], 2), "b": Subscription(["t"], [], 2)}
    first, withheld = CooperativeStickyAssignor().assign_withholding({"t": 2, "u": 1}, subs)
    assert withheld and all(member == "b" for member in withheld.values())
    assert not set(first["b"]) & set(subs["a"].owned_partitions)


def _assign_cli(tmp_path, name, doc):
    path = tmp_path / "group.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return subprocess.run([sys.executable, "-m", "experiments", "assign", "--assignor", name, str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def test_assign_cli_serves_cooperative_sticky_with_owned_and_generation(tmp_path):
    doc = {"topics": {"t": 6}, "members": [
        {"id": "C0", "topics": ["t"], "owned": [["t", 0], ["t", 1], ["t", 2]], "generation": 1},
        {"id": "C1", "topics": ["t"], "owned": [["t", 3], ["t", 4], ["t", 5]], "generation": 1},
        {"id": "C2", "topics": ["t"]}]}
    result = _assign_cli(tmp_path, "cooperative-sticky", doc)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"C0": [["t", 0], ["t", 1]], "C1": [["t", 3], ["t", 4]], "C2": []}


def test_assign_cli_prints_every_member_with_sorted_partitions(tmp_path):
    doc = {"topics": {"t1": 3}, "members": [
        {"id": "c2", "topics": ["t1"], "owned": [["t1", 0]], "generation": 1, "group_instance_id": None},
        {"id": "c1", "topics": ["t1"]}, {"id": "c3", "topics": ["t2"]}]}
    result = _assign_cli(tmp_path, "roundrobin", doc)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"c1": [["t1", 0], ["t1", 2]], "c2": [["t1", 1]], "c3": []}


@pytest.mark.parametrize("doc,phrase", [("{not json", "is not JSON"), ({"members": []}, "does not describe a group")])
def test_assign_cli_rejects_bad_files_clearly(tmp_path, doc, phrase):
    result = _assign_cli(tmp_path, "range", doc)
    assert result.returncode == 2 and phrase in result.stderr and "Traceback" not in result.stderr
