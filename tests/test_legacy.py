"""The ZooKeeper-era consumer against a real ZooKeeper and real brokers."""

import json
import threading
import time

import pytest
from conftest import PARTITIONS, _produced, _start_producer, _wait_produced, interrupt, kazoo, produce_values, wait_for

from lab_cluster.broker import zk_layout as L
from lab_cluster.broker.admin import add_partitions, wait_for_metadata
from lab_cluster.faultproxy import Mode
from lab_cluster.faults import zk_link
from lab_cluster.trace import TraceRecorder
from legacy_zk import znodes
from legacy_zk.config import ConsumerConfig
from legacy_zk.consumer import ConsumerState, LegacyConsumer

GROUP = "g"
FAST = {"zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 200, "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": 500}


class Group:
    """Consumers of one group, each with its own trace, started and stopped by the test."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.consumers: list[LegacyConsumer] = []
        self.traces: list[TraceRecorder] = []

    def add(self, name: str, connect: str | None = None, **overrides) -> LegacyConsumer:
        props = {"group.id": GROUP, "zookeeper.connect": connect or self.cluster.connect, **FAST, **overrides}
        trace = TraceRecorder(self.cluster.dir, trial="t", design="zookeeper", actor=name)
        consumer = LegacyConsumer(ConsumerConfig.from_dict(props), ["t"], trace).start()
        self.consumers.append(consumer)
        self.traces.append(trace)
        return consumer

    def live(self):
        return [c for c in self.consumers if c.state is not ConsumerState.STOPPED]

    def settle(self, timeout_s=60, partitions=PARTITIONS):
        """Wait until every live consumer is CONSUMING and their shares cover each of `partitions` once."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            live = self.live()
            owned = [key for c in live for key in c.assignment()]
            if all(c.state is ConsumerState.CONSUMING and not c._triggered.is_set() for c in live) \
                    and sorted(owned) == [("t", p) for p in range(partitions)]:
                return {c.consumer_id: sorted(p for _, p in c.assignment()) for c in live}
            time.sleep(0.05)
        raise AssertionError(f"group did not settle: {[(c.state, c.assignment()) for c in self.live()]}")

    def stop_all(self):
        for c in self.live():
            c.stop()
        for t in self.traces:
            t.close()

    def events(self, index, kind=None):
        path = self.traces[index].path
        self.traces[index].flush()
        events = [json.loads(line) for line in path.read_text().splitlines()]
        return [e for e in events if kind is None or e["kind"] == kind]


@pytest.fixture
def group(cluster):
    g = Group(cluster)
    yield g
    g.stop_all()


def _owner_znodes(cluster, partitions=PARTITIONS):
    out = {}
    for p in range(partitions):
        stat = cluster.zk.exists(f"{znodes.owner_path(GROUP, 't', p)}")
        if stat:
            out[p] = cluster.zk.get(znodes.owner_path(GROUP, "t", p))[0].decode()
    return out


def test_one_consumer_owns_every_partition(group):
    c = group.add("c1")
    shares = group.settle()
    assert shares == {c.consumer_id: list(range(PARTITIONS))}
    assert _owner_znodes(group.cluster) == {p: f"{c.consumer_id}-0" for p in range(PARTITIONS)}
    reg = json.loads(group.cluster.zk.get(znodes.consumer_path(GROUP, c.consumer_id))[0])
    assert reg["version"] == 1 and reg["subscription"] == {"t": 1} and reg["pattern"] == "static"
    assert isinstance(reg["timestamp"], str)


def test_three_consumers_own_range_shares_and_the_znodes_agree(group):
    consumers = [group.add(f"c{i}") for i in range(3)]
    shares = group.settle()
    ordered = sorted(c.consumer_id for c in consumers)
    # Kafka 0.8's formula: 4 partitions over 3 sorted threads -> 2, 1, 1.
    assert [shares[cid] for cid in ordered] == [[0, 1], [2], [3]]
    owners = _owner_znodes(group.cluster)
    believed = {p: thread for c in consumers for (_, p), thread in c.assignment().items()}
    assert owners == believed


def test_a_join_and_a_leave_make_every_consumer_rebalance(group):
    first = [group.add(f"c{i}") for i in range(2)]
    group.settle()
    before = [len(group.events(i, "zk_watch_fired")) for i in range(2)]
    joiner = group.add("c2")
    group.settle()
    after_join = [len(group.events(i, "zk_watch_fired")) for i in range(2)]
    assert all(a > b for a, b in zip(after_join, before, strict=True))  # every member was told
    assert all(c.rebalances >= 2 for c in first)  # and rebalanced again
    joiner.stop()
    shares = group.settle()
    assert set(shares) == {c.consumer_id for c in first}
    after_leave = [len(group.events(i, "zk_watch_fired")) for i in range(2)]
    assert all(a > b for a, b in zip(after_leave, after_join, strict=True))
    for i in range(2):  # each member's watch on the group's ids node fired for the join and for the leave
        fired = [e for e in group.events(i, "zk_watch_fired") if e["path"] == znodes.ids_path(GROUP)]
        assert len(fired) >= 2 and all(json.loads(e["fields"])["event_type"] == "CHILD" for e in fired)


def test_a_graceful_handover_loses_and_duplicates_nothing(group):
    cluster = group.cluster
    _start_producer(cluster, rate=100)
    c1 = group.add("c1")
    group.settle()
    _wait_produced(cluster, at_least=30)
    c2 = group.add("c2")
    group.settle()
    _wait_produced(cluster, at_least=len(_produced(cluster.dir)[0]) + 30)
    c1.stop()
    group.settle()
    cluster.producer.stop()
    cluster.producer = None
    produced = _produced(cluster.dir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # let c2 catch up with the end of every log
        processed = [e for i in range(2) for e in group.events(i, "processed")]
        if len(processed) >= sum(len(v) for v in produced.values()):
            break
        time.sleep(0.2)
    processed = [(e["partition"], e["offset"]) for i in range(2) for e in group.events(i, "processed")]
    expected = [(p, o) for p, items in produced.items() for o, _ in items]
    # each produced message processed exactly once; if not, which were missed, processed twice, or never produced
    missed, extra = sorted(set(expected) - set(processed)), sorted(set(processed) - set(expected))
    twice = sorted(m for m in set(processed) if processed.count(m) > 1)
    assert sorted(processed) == sorted(expected), (f"missed {len(missed)} {missed[:10]}; twice {len(twice)} "
                                                   f"{twice[:10]}; never produced {len(extra)} {extra[:10]}")
    assert c2.state is ConsumerState.CONSUMING
    # a graceful stop closes the session: kazoo reports LOST for it, but nothing expired (0.8's ZkClient.close())
    assert group.events(0, "consumer_stop") and not group.events(0, "session_expired")
    assert any(_fields(e)["zk_state"] == "LOST" for e in group.events(0, "zk_session"))


def test_an_owner_conflict_backs_off_and_succeeds_once_released(group, zk):
    squatter = kazoo(group.cluster.connect)
    squatter.create(znodes.owner_path(GROUP, "t", 0), b"someone-else-0", ephemeral=True, makepath=True)
    c = group.add("c1", **{"rebalance.max.retries": 50})
    deadline = time.monotonic() + 30
    while not group.events(0, "owner_conflict") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.state is not ConsumerState.CONSUMING
    squatter.stop()  # its session closes and the owner znode goes with it
    squatter.close()
    assert group.settle() == {c.consumer_id: list(range(PARTITIONS))}
    ends = [json.loads(e["fields"])["outcome"] for e in group.events(0, "rebalance_end")]
    assert ends[0] == "conflict" and ends[-1] == "ok"
    conflicts = group.events(0, "owner_conflict")
    assert conflicts and conflicts[0]["partition"] == 0


def test_an_owner_conflict_that_lasts_gives_up_after_max_retries(group):
    squatter = kazoo(group.cluster.connect)
    squatter.create(znodes.owner_path(GROUP, "t", 2), b"someone-else-0", ephemeral=True, makepath=True)
    try:
        c = group.add("c1", **{"rebalance.max.retries": 3})
        deadline = time.monotonic() + 30
        while c.state is not ConsumerState.FAILED and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.state is ConsumerState.FAILED
        assert c.assignment() == {} and c.fetching() == set()  # it stops consuming, as 0.8 did
        failed = group.events(0, "rebalance_failed")
        assert len(failed) == 1 and json.loads(failed[0]["fields"])["attempts"] == 3
        assert [json.loads(e["fields"])["outcome"] for e in group.events(0, "rebalance_end")] == ["conflict"] * 3
    finally:
        squatter.stop()
        squatter.close()


def test_after_a_session_expiry_the_consumer_reregisters_and_the_group_converges(group):
    cluster = group.cluster
    link = zk_link(cluster.ensemble, "c1-zk", chroot=cluster.chroot)
    try:
        c1 = group.add("c1", connect=link.connect)
        c2 = group.add("c2")
        group.settle()
        expired = threading.Event()
        cluster.zk.exists(znodes.consumer_path(GROUP, c1.consumer_id), watch=lambda e: expired.set())
        link.set_mode(Mode.BLACKHOLE)
        assert expired.wait(60)  # the server expired c1's session
        link.set_mode(Mode.PASS)
        wait_for(lambda: group.events(0, "session_reestablished"), "c1's new session")
        shares = group.settle()
        assert set(shares) == {c1.consumer_id, c2.consumer_id}
        assert cluster.zk.exists(znodes.consumer_path(GROUP, c1.consumer_id))  # registered again
        assert group.events(0, "session_expired") and group.events(0, "session_reestablished")
    finally:
        group.stop_all()
        link.close()


def test_a_consumer_cut_off_from_zookeeper_keeps_fetching_what_another_now_owns(group):
    cluster = group.cluster
    _start_producer(cluster, rate=50)
    link = zk_link(cluster.ensemble, "c1-zk", chroot=cluster.chroot)
    try:
        c1 = group.add("c1", connect=link.connect)
        group.settle()
        link.set_mode(Mode.BLACKHOLE)  # c1 loses ZooKeeper, not its brokers
        cut_at = time.monotonic_ns()
        c2 = group.add("c2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if c2.state is ConsumerState.CONSUMING and len(c2.assignment()) == PARTITIONS:
                break
            time.sleep(0.1)
        assert len(c2.assignment()) == PARTITIONS  # c1's session expired: c2 took everything
        assert c1.fetching()  # ...while c1, which does not know, still fetches
        time.sleep(1.0)  # let both process for a while
        both = {}
        for i in range(2):
            for e in group.events(i, "processed"):
                if e["ts_ns"] > cut_at:
                    both.setdefault(e["partition"], set()).add(i)
        assert any(owners == {0, 1} for owners in both.values())  # the same partition, processed by two
    finally:
        link.set_mode(Mode.PASS)
        link.close()


def test_consumers_cli_prints_rebalances_and_leaves_nothing_after_ctrl_c(cluster):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from lab_cluster.leaks import find_leaks

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "consumers", "--design", "zookeeper",
                             "--zk", cluster.connect, "--group", GROUP, "--topic", "t", "--count", "2",
                             "--config", "rebalance.backoff.ms=200"],
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo), COLUMNS="200"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    latest = {}
    try:
        for line in proc.stdout:  # "  1.23s {state line}"
            if "{" in line:
                snapshot = json.loads(line[line.index("{"):])
                latest[snapshot["actor"]] = snapshot
            if len(latest) == 2 and all(s["state"] == "consuming" for s in latest.values()):
                if sorted(p for s in latest.values() for p in s["partitions"]) == list(range(PARTITIONS)):
                    break
        assert sorted(latest) == ["c1", "c2"], proc.stderr.read()
        assert cluster.zk.get_children(znodes.ids_path(GROUP)) and len(cluster.zk.get_children(
            znodes.ids_path(GROUP))) == 2
    finally:
        interrupt(proc)
    assert "Traceback" not in proc.stderr.read()
    assert cluster.zk.get_children(znodes.ids_path(GROUP)) == []  # deregistered
    assert cluster.zk.get_children(znodes.owners_path(GROUP, "t")) == []  # and released
    assert find_leaks(proc.pid) == []


def test_a_consumer_in_its_own_process_registers_and_leaves_gracefully(cluster):
    from lab_cluster.processes import LabProcess

    proc = LabProcess("c9", "lab_cluster.consumer_host",
                      ["--family", "legacy_zk", "--address", cluster.connect, "--group", GROUP, "--topic", "t",
                       "--trial-dir", str(cluster.dir), "--name", "c9", "--config", "rebalance.backoff.ms=200"],
                      cluster.dir / "proc" / "c9.log")
    try:
        (consumer_id,) = proc.info["consumers"]
        deadline = time.monotonic() + 30
        while len(cluster.zk.get_children(znodes.owners_path(GROUP, "t")) if cluster.zk.exists(
                znodes.owners_path(GROUP, "t")) else []) < PARTITIONS and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.zk.get_children(znodes.ids_path(GROUP)) == [consumer_id]
        assert sorted(cluster.zk.get_children(znodes.owners_path(GROUP, "t"))) == [str(p) for p in range(PARTITIONS)]
    finally:
        assert proc.stop() == 0
    assert cluster.zk.get_children(znodes.ids_path(GROUP)) == []
    kinds = [json.loads(line)["kind"] for line in (cluster.dir / "traces" / "c9.jsonl").read_text().splitlines()]
    assert kinds[0] == "trace_open" and kinds[-1] == "trace_close" and "assigned" in kinds


def test_bad_consumer_config_is_a_clear_error(cluster):
    from lab_cluster.errors import LabError

    with pytest.raises(LabError, match="Unknown consumer config key"):
        ConsumerConfig.from_dict({"group.id": "g", "zookeeper.connect": cluster.connect, "rebalance.retries": 3})
    with pytest.raises(LabError, match="watch_broker_ids must be always or when_empty"):
        ConsumerConfig.from_dict({"group.id": "g", "zookeeper.connect": cluster.connect, "watch_broker_ids": "x"})


def test_streams_are_thread_ids_in_the_range_split(group):
    c = group.add("c1", streams=2)
    group.settle()
    owners = _owner_znodes(group.cluster)
    assert owners == {0: f"{c.consumer_id}-0", 1: f"{c.consumer_id}-0", 2: f"{c.consumer_id}-1",
                      3: f"{c.consumer_id}-1"}
    reg = json.loads(group.cluster.zk.get(znodes.consumer_path(GROUP, c.consumer_id))[0])
    assert reg["subscription"] == {"t": 2}


@pytest.mark.parametrize("mode", ["always", "when_empty"])
def test_watch_broker_ids_always_or_only_when_empty(group, mode):
    group.add("c1", watch_broker_ids=mode)
    group.settle()
    group.cluster.brokers[3].stop()  # a broker leaves gracefully: /brokers/ids changes at once
    group.add("c2")  # then the group changes: c1 is told of that for sure
    group.settle()
    # ZooKeeper delivers a session's notifications in order: had c1 been watching
    # /brokers/ids, that event would have come before the one for c2's join.
    kinds = [e["path"] for e in group.events(0, "zk_watch_fired")]
    assert "/consumers/g/ids" in kinds
    if mode == "always":
        assert "/brokers/ids" in kinds  # the mission's consumer hears of every broker change
        assert kinds.index("/brokers/ids") < kinds.index("/consumers/g/ids")
    else:
        assert "/brokers/ids" not in kinds  # 0.8.2.2's code armed that watch only when it found no broker


# -- 0.8.2.2's behaviour, point by point (each checked against Kafka 0.8.2.2's source) -----------

def _fields(event):
    return json.loads(event.get("fields") or "{}")


def test_a_link_cut_shorter_than_the_session_starts_no_rebalance_and_every_partition_keeps_being_fetched(group):
    """0.8: a lost connection changes nothing (handleStateChanged does nothing); the watches come back with the
    connection. (kazoo's NONE callbacks used to start a rebalance whose revoke stopped the first fetcher.)"""
    cluster = group.cluster
    _start_producer(cluster, rate=20)
    link = zk_link(cluster.ensemble, "c1-zk", chroot=cluster.chroot)
    try:
        c1 = group.add("c1", connect=link.connect, **{"zookeeper.session.timeout.ms": 20000})
        group.settle()
        settled = len(group.events(0, "rebalance_begin"))
        # RESET rather than BLACKHOLE: kazoo notices at once and reconnects at once after the heal (a connection
        # attempt stuck in a blackhole would wait out its own timeout, and the session with it)
        link.set_mode(Mode.RESET)
        wait_for(lambda: any(_fields(e)["zk_state"] == "SUSPENDED" for e in group.events(0, "zk_session")),
                  "c1 to notice the lost connection")
        cut_seen = time.monotonic_ns()
        time.sleep(2.0)
        link.set_mode(Mode.PASS)
        wait_for(lambda: group.events(0, "zk_rewatched"), "c1 to reconnect and set its watches again")
        healed = time.monotonic_ns()
        wait_for(lambda: {e["partition"] for e in group.events(0, "processed") if e["ts_ns"] > healed}
                  == set(range(PARTITIONS)), "c1 to go on processing every partition")
        assert not group.events(0, "session_expired")
        assert len(group.events(0, "rebalance_begin")) == settled  # no rebalance at all
        assert c1.fetching() == {("t", p) for p in range(PARTITIONS)} and c1.state is ConsumerState.CONSUMING
        during = {e["partition"] for e in group.events(0, "processed") if cut_seen < e["ts_ns"] < healed}
        assert during == set(range(PARTITIONS))  # fetching never stopped while ZooKeeper was away
        (rewatched,) = group.events(0, "zk_rewatched")
        assert _fields(rewatched)["moved"] == []  # nothing changed meanwhile: nothing to deliver
        assert any(_fields(e)["event_type"] == "NONE" for e in group.events(0, "zk_watch_fired"))
    finally:
        link.set_mode(Mode.PASS)
        group.stop_all()
        link.close()


def test_a_change_missed_while_disconnected_is_delivered_on_reconnecting(group):
    """The Java client sends its watches back on reconnecting (SetWatches) and the server fires those whose node
    changed: here, a member that joined while c1 was cut off."""
    cluster = group.cluster
    link = zk_link(cluster.ensemble, "c1-zk", chroot=cluster.chroot)
    try:
        c1 = group.add("c1", connect=link.connect, **{"zookeeper.session.timeout.ms": 20000})
        group.settle()
        link.set_mode(Mode.RESET)
        wait_for(lambda: any(_fields(e)["zk_state"] == "SUSPENDED" for e in group.events(0, "zk_session")),
                  "c1 to notice the lost connection")
        c2 = group.add("c2", **{"rebalance.max.retries": 100})  # conflicts with c1 until c1 hears of it
        wait_for(lambda: group.events(1, "owner_conflict"), "c2 to find c1's claims")
        link.set_mode(Mode.PASS)
        shares = group.settle()
        assert set(shares) == {c1.consumer_id, c2.consumer_id}
        (rewatched,) = group.events(0, "zk_rewatched")
        assert _fields(rewatched)["moved"] == [znodes.ids_path(GROUP)]
        assert not group.events(0, "session_expired")
    finally:
        link.set_mode(Mode.PASS)
        group.stop_all()
        link.close()


def test_after_an_expiry_the_rejoiner_deletes_and_commits_nothing_of_what_it_held_and_its_blocked_commit_lands(
        group):
    """0.8's handleNewSession: resetState empties the registry, so the rejoin's rebalance releases and commits
    nothing; the auto-commit that blocked during the outage writes its old positions on the new session."""
    cluster = group.cluster
    _start_producer(cluster, rate=50)
    link = zk_link(cluster.ensemble, "c1-zk", chroot=cluster.chroot)
    try:
        group.add("c1", connect=link.connect)
        group.add("c2")
        group.settle()
        expired = threading.Event()
        cluster.zk.exists(znodes.consumer_path(GROUP, group.consumers[0].consumer_id), watch=lambda e: expired.set())
        link.set_mode(Mode.BLACKHOLE)
        assert expired.wait(60)  # the server expired c1's session; c2 takes every partition
        wait_for(lambda: len(group.consumers[1].assignment()) == PARTITIONS, "c2 to own every partition")
        link.set_mode(Mode.PASS)
        wait_for(lambda: group.events(0, "session_reestablished"), "c1's new session")
        group.settle()
        events = group.events(0)
        expired_at = next(e["ts_ns"] for e in events if e["kind"] == "session_expired")
        reassigned = next(e["ts_ns"] for e in events if e["kind"] == "assigned" and e["ts_ns"] > expired_at)
        between = [e for e in events if expired_at < e["ts_ns"] < reassigned]
        deletes = [e["path"] for e in between if e["kind"] == "zk_write" and _fields(e)["op"] == "delete"]
        assert not deletes, deletes  # not one of the owner znodes c2 now holds
        assert not [e for e in between if e["kind"] == "commit" and _fields(e)["why"] == "rebalance"]
        # the auto-commit that was writing when the link went down waited, and wrote on the new session
        retried = [e for e in events if e["kind"] == "zk_retry" and _fields(e)["op"] == "setData"]
        assert retried
        landed = [e for e in events if e["kind"] == "commit" and _fields(e)["why"] == "auto-commit"
                  and e["ts_ns"] > retried[0]["ts_ns"]]
        assert landed and landed[0]["ts_ns"] > expired_at
    finally:
        link.set_mode(Mode.PASS)
        group.stop_all()
        link.close()


def test_a_conflict_on_two_partitions_of_a_share_records_two_conflicts_and_undoes_the_rest(group):
    """0.8 tries every partition of its share (a map, no short-circuit), then deletes the claims it made."""
    squatter = kazoo(group.cluster.connect)
    try:
        for p in (0, 2):
            squatter.create(znodes.owner_path(GROUP, "t", p), b"someone-else-0", ephemeral=True, makepath=True)
        c = group.add("c1", **{"rebalance.max.retries": 3})
        wait_for(lambda: group.events(0, "rebalance_failed"), "c1 to give up")
        first_end = group.events(0, "rebalance_end")[0]["ts_ns"]
        first = [e["partition"] for e in group.events(0, "owner_conflict") if e["ts_ns"] < first_end]
        assert first == [0, 2]
        assert len(group.events(0, "owner_conflict")) == 2 * 3  # two per attempt, three attempts
        assert _owner_znodes(group.cluster) == {0: "someone-else-0", 2: "someone-else-0"}  # its own claims undone
        assert c.state is ConsumerState.FAILED
    finally:
        squatter.stop()
        squatter.close()


def test_an_owner_znode_that_holds_our_own_thread_id_is_ours(group):
    """createEphemeralPathExpectConflict: NodeExists with our own data is success ("this is ok")."""
    squatter = kazoo(group.cluster.connect)
    try:
        squatter.create(znodes.owner_path(GROUP, "t", 1), b"g_lab-1-0", ephemeral=True, makepath=True)
        group.add("c1", **{"consumer.id": "g_lab-1"})
        group.settle()
        assert not group.events(0, "owner_conflict")
        assert _owner_znodes(group.cluster) == {p: "g_lab-1-0" for p in range(PARTITIONS)}
    finally:
        squatter.stop()
        squatter.close()


def test_registration_waits_for_a_leftover_ids_node_and_never_deletes_it(cluster):
    """createEphemeralPathExpectConflictHandleZKBug: back off a session timeout and try again until it goes."""
    leftover = kazoo(cluster.connect)
    path = znodes.consumer_path(GROUP, "g_lab-2")
    leftover.create(path, b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}',
                    ephemeral=True, makepath=True)
    trace = TraceRecorder(cluster.dir, trial="t", design="zookeeper", actor="c1")
    config = ConsumerConfig.from_dict({"group.id": GROUP, "zookeeper.connect": cluster.connect, **FAST,
                                       "consumer.id": "g_lab-2"})
    consumer = LegacyConsumer(config, ["t"], trace)
    started = threading.Thread(target=consumer.start, daemon=True)
    started.start()
    try:
        wait_for(lambda: '"registration_conflict"' in trace.path.read_text(), "the registration to back off")
        assert json.loads(cluster.zk.get(path)[0])["timestamp"] == "1"  # still the leftover: not deleted
        leftover.stop()  # the old session ends and its node with it
        leftover.close()
        started.join(30)
        wait_for(lambda: consumer.state is ConsumerState.CONSUMING, "the consumer to register and consume")
        assert json.loads(cluster.zk.get(path)[0])["timestamp"] != "1"
        deletes = [json.loads(line) for line in trace.path.read_text().splitlines()]
        assert not [e for e in deletes if e["kind"] == "zk_write" and _fields(e)["op"] == "delete"]
    finally:
        consumer.stop()
        trace.close()


def test_a_rebalance_attempt_reads_what_0_8_2_2_reads_and_a_notification_re_arms_with_two_reads(group):
    """view.py's table, for B=3 brokers, T=1 topic, N=1 member and k=4 partitions won: 2(1+B) + 2 + T + 2
    + N + k + (1+B) = 22 reads; each notification is re-armed with exists + getChildren before the listener."""
    group.add("c1")
    group.settle()
    events = group.events(0)
    begin = next(i for i, e in enumerate(events) if e["kind"] == "rebalance_begin")
    end = next(i for i, e in enumerate(events) if e["kind"] == "rebalance_end")
    reads = [e for e in events[begin:end] if e["kind"] == "zk_read"]
    assert len(reads) == 2 * (1 + 3) + 2 + 1 + 2 + 1 + PARTITIONS + (1 + 3), [(e["path"], _fields(e)) for e in reads]
    group.add("c2")
    group.settle()
    events = group.events(0)
    fired = next(i for i, e in enumerate(events) if e["kind"] == "zk_watch_fired" and e["path"].endswith("/ids"))
    rearm = [(_fields(e)["op"], e["path"]) for e in events[fired + 1:] if e["kind"] == "zk_read"][:2]
    assert rearm == [("exists", znodes.ids_path(GROUP)), ("getChildren", znodes.ids_path(GROUP))]


def test_roundrobin_deals_partitions_in_hash_order_to_sorted_threads(group):
    """0.8.2's RoundRobinAssignor: partitions sorted by "[t,p]".hashCode, threads sorted, one each in turn."""
    a = group.add("c1", **{"partition.assignment.strategy": "roundrobin", "consumer.id": "g_a"})
    b = group.add("c2", **{"partition.assignment.strategy": "roundrobin", "consumer.id": "g_b"})
    shares = group.settle()
    # "[t,0]".."[t,3]" hash in increasing order, so g_a-0 gets 0 and 2, g_b-0 gets 1 and 3
    assert shares == {a.consumer_id: [0, 2], b.consumer_id: [1, 3]}


def test_without_auto_commit_nothing_is_committed_on_rebalance_or_stop(group):
    """0.8 commits on a rebalance and at shutdown only if auto.commit.enable."""
    _start_producer(group.cluster, rate=50)
    c1 = group.add("c1", **{"auto.commit.enable": False})
    group.settle()
    wait_for(lambda: group.events(0, "processed"), "c1 to process")
    group.add("c2")
    group.settle()
    c1.stop()
    assert not group.events(0, "commit")
    assert not group.cluster.zk.exists(znodes.offset_path(GROUP, "t", 0))


def test_after_a_fetch_error_the_leader_finder_reads_the_brokers_from_zookeeper_again(cluster):
    """0.8's `LeaderFinderThread`: each try reads the brokers from ZooKeeper (`getAllBrokersInCluster`) before
    its Metadata request. A fetcher started with a broker list that is gone finds the leader through them."""
    from lab_cluster.ports import free_port
    from legacy_zk.fetching import LeaderFinder, PartitionFetcher
    from legacy_zk.streams import PartitionTopicInfo, Stream

    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    reads = []

    def read_brokers():
        reads.append(1)
        return {b: ("127.0.0.1", broker.port) for b, broker in cluster.brokers.items()}

    with TraceRecorder(cluster.dir, trial="t", design="zookeeper", actor="c1") as trace:
        info = PartitionTopicInfo("t", 0, "c1-0", consumed=0)
        stream = Stream("c1-0", trace).start()
        fetcher = PartitionFetcher(info, stream, {9: ("127.0.0.1", free_port())},
                                   finder=LeaderFinder(read_brokers)).start()
        try:
            wait_for(lambda: info.consumed >= 3, "partition 0 to be fetched through the brokers read again")
        finally:
            fetcher.stop()
            stream.stop()
    assert reads


def test_partitions_added_under_a_stable_group_are_heard_by_every_member_and_all_get_owners(group):
    """A topic grown under the group (issue 39): 0.8.2.2's `ZKTopicPartitionChangeListener`
    (`legacy_zk/topic_listener.py`; its unit tests, on a fake ZooKeeper, are `test_legacy_growth.py`)."""
    grown, topic = PARTITIONS + 2, L.topic_path("t")
    consumers = [group.add(f"c{i}") for i in range(2)]
    group.settle()

    def events(i, kind):
        return [{**e, **_fields(e)} for e in group.events(i, kind)]

    fired_before = [len([e for e in events(i, "zk_watch_fired") if e["path"] == topic]) for i in range(2)]
    rebalances = [c.rebalances for c in consumers]

    add_partitions(group.cluster.zk, "t", grown, [1, 2, 3])  # AdminUtils.addPartitions: the topic's znode rewritten
    shares = group.settle(partitions=grown)

    ordered = sorted(c.consumer_id for c in consumers)
    assert [shares[cid] for cid in ordered] == [[0, 1, 2], [3, 4, 5]]  # 0.8's range: 6 over 2 sorted threads
    believed = {p: thread for c in consumers for (_, p), thread in c.assignment().items()}
    assert _owner_znodes(group.cluster, grown) == believed
    for i, consumer in enumerate(consumers):
        (seen,) = events(i, "partitions_seen")  # once per member, by its topic listener
        assert (seen["member"], seen["topic"], seen["before"], seen["partitions"], seen["via"]) == \
            (consumer.consumer_id, "t", PARTITIONS, grown, "listener")
        fired = [e for e in events(i, "zk_watch_fired") if e["path"] == topic]
        assert len(fired) == fired_before[i] + 1 and fired[-1]["event_type"] == "CHANGED"  # one notification
        assert consumer.rebalances > rebalances[i] and consumer.topic_listener.known("t") == grown
        assert events(i, "view")[-1]["partitions"] == {"t": grown}  # the rebalance read the topic's partitions again

    # the new partitions are consumed: their owners' fetchers find the new leaders
    wait_for_metadata(group.cluster.zk, "t", grown)
    written = produce_values(group.cluster, 2, "grown")
    assert sorted(written) == list(range(grown))
    wait_for(lambda: {e["partition"] for i in range(2) for e in group.events(i, "processed")}
             >= set(range(PARTITIONS, grown)), "the new partitions' records to be processed")
