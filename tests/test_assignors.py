"""Assignors: worked cases checked by hand against Kafka's documented behaviour, and properties."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modern_coord.assignors import ASSIGNORS, RangeAssignor, RoundRobinAssignor, Subscription

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


def _assign_cli(tmp_path, name, doc):
    path = tmp_path / "group.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return subprocess.run([sys.executable, "-m", "experiments", "assign", "--assignor", name, str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


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
