"""The client-side strategies (each consumer computes its own share): RocketMQ's two and TubeMQ's modulo.

Each is checked against what the real project says it does: RocketMQ's own unit tests
(`AllocateMessageQueueAveragelyTest`, `AllocateMessageQueueAveragelyByCircleTest`, their cases and
expected results), and TubeMQ's filter against a real JVM's `String.hashCode` arithmetic.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import IN_CI
from hypothesis import given
from hypothesis import strategies as st

from lab_cluster.assignment import range_split
from lab_cluster.assignment.rocketmq import averagely, averagely_by_circle
from lab_cluster.assignment.tubemq import modulo, node_of

CIDS = [f"CID_PREFIX{i}" for i in range(4)]  # RocketMQ's tests: 4 consumers, 10 queues of one broker
QUEUES = [("topic", "brokerName", q) for q in range(10)]


def test_averagely_as_rocketmqs_own_test_expects():
    assert [len(averagely(cid, QUEUES, CIDS)) for cid in CIDS] == [3, 3, 2, 2]


def test_averagely_by_circle_as_rocketmqs_own_test_expects():
    assert averagely_by_circle("CID_PREFIX", QUEUES, CIDS) == []  # an id not in the list gets nothing
    got = {cid: [q for _, _, q in averagely_by_circle(cid, QUEUES, CIDS)] for cid in CIDS}
    assert got == {"CID_PREFIX0": [0, 4, 8], "CID_PREFIX1": [1, 5, 9], "CID_PREFIX2": [2, 6], "CID_PREFIX3": [3, 7]}


def test_empty_input_is_an_error_as_in_rocketmqs_check():
    for args in (("", QUEUES, CIDS), ("c1", [], CIDS), ("c1", QUEUES, [])):
        with pytest.raises(ValueError):
            averagely(*args)


@given(queues=st.integers(1, 40), consumers=st.integers(1, 12))
def test_consumers_that_read_the_same_list_cover_every_queue_once(queues, consumers):
    mq_all, cid_all = list(range(queues)), [f"c{i:02d}" for i in range(consumers)]
    for strategy in (averagely, averagely_by_circle):
        shares = [strategy(cid, mq_all, cid_all) for cid in cid_all]
        assert sorted(q for share in shares for q in share) == mq_all
    # averagely is the range split (Kafka's RangeAssignor's arithmetic), computed by each for itself
    assert {cid: averagely(cid, mq_all, cid_all) for cid in cid_all} == range_split(mq_all, cid_all)


def test_consumers_that_read_different_lists_overlap_or_leave_queues_unowned():
    """The split brain of client-side allocation: c1 has not heard of c3 yet, c2 and c3 have."""
    mq_all = list(range(6))
    shares = {"c1": averagely("c1", mq_all, ["c1", "c2"]), "c2": averagely("c2", mq_all, ["c1", "c2", "c3"]),
              "c3": averagely("c3", mq_all, ["c1", "c2", "c3"])}
    assert shares == {"c1": [0, 1, 2], "c2": [2, 3], "c3": [4, 5]}  # queue 2 twice


@given(keys=st.lists(st.from_regex(r"[1-9]:[a-z]{1,8}:[0-9]{1,3}", fullmatch=True), min_size=1, max_size=30),
       nodes=st.integers(1, 7))
def test_tubemq_nodes_with_distinct_ids_take_every_partition_once(keys, nodes):
    shares = [modulo(keys, nodes, node) for node in range(nodes)]
    assert sorted(k for share in shares for k in share) == sorted(set(keys))


def test_tubemq_modulo_is_a_jvms_unsigned_hash_modulo(tmp_path):
    """TubeMQ's example: ((long) key.hashCode() & 0xffffffffL) % sourceCount, run by a real JVM."""
    java = shutil.which("java")
    if java is None:
        if IN_CI:
            pytest.fail("CI needs Java (scripts/setup.sh installs it)")
        pytest.skip("no java on PATH")
    keys = ["1:t1:0", "2:t1:1", "3:orders:17", "12:payments:255", "7:a:9", "1:" + "x" * 40 + ":3"]
    source = tmp_path / "Modulo.java"
    source.write_text("""public class Modulo { public static void main(String[] a) {
        int n = Integer.parseInt(a[0]);
        for (int i = 1; i < a.length; i++) System.out.println((((long) a[i].hashCode()) & 0xffffffffL) % n);
    } }""")
    for source_count in (1, 2, 3, 5, 7):
        out = subprocess.run([java, str(source), str(source_count), *keys], capture_output=True, text=True,
                             timeout=120, check=True).stdout.split()
        assert [int(x) for x in out] == [node_of(k, source_count) for k in keys]


def test_assign_serves_the_client_side_strategies(tmp_path):
    repo = Path(__file__).resolve().parent.parent
    group = tmp_path / "group.json"
    group.write_text(json.dumps({"topics": {"t1": 5, "t2": 2},
                                 "members": [{"id": "c2", "topics": ["t1", "t2"]}, {"id": "c1", "topics": ["t1"]}]}))

    def assign(name, path):
        result = subprocess.run([sys.executable, "-m", "experiments", "assign", "--assignor", name, str(path)],
                                cwd=repo, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    # each member's own share per topic it subscribes, over the group's sorted ids (RocketMQ asks a broker for
    # every client of the group, whatever it subscribes): t2's queue 0 falls to c1, which does not read t2
    assert assign("rocketmq-averagely", group) == {"c1": [["t1", 0], ["t1", 1], ["t1", 2]],
                                                   "c2": [["t1", 3], ["t1", 4], ["t2", 1]]}
    assert assign("rocketmq-averagely-by-circle", group) == {"c1": [["t1", 0], ["t1", 2], ["t1", 4]],
                                                             "c2": [["t1", 1], ["t1", 3], ["t2", 1]]}
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"source_count": 3, "partition_keys": [f"1:t1:{p}" for p in range(6)]}))
    assert assign("tubemq-modulo", keys) == {"0": ["1:t1:0", "1:t1:3"], "1": ["1:t1:1", "1:t1:4"],
                                             "2": ["1:t1:2", "1:t1:5"]}
