"""Faults on one client's own link to ZooKeeper, and the trace of what was done."""

import json
import threading
import time

from conftest import kazoo
from kazoo.protocol.states import KazooState

from lab_cluster.faultproxy import Mode
from lab_cluster.faults import Faults, zk_link
from lab_cluster.processes import proc_stat
from lab_cluster.trace import TraceRecorder, trace_path


class States:
    def __init__(self, client):
        self.seen = []
        self._cond = threading.Condition()
        client.add_listener(self._on)

    def _on(self, state):
        with self._cond:
            self.seen.append(state)
            self._cond.notify_all()

    def wait_for(self, state, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while state not in self.seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"never reached {state}; saw {self.seen}")
                self._cond.wait(left)


def test_blackholed_link_suspends_and_the_session_is_lost_when_the_timeout_passes(zk, tmp_path):
    """A partitioned client cannot know that its session expired.

    The server expires the session once the timeout passes (its ephemeral node
    vanishes for everyone else), while the client, cut off, still believes it is
    merely SUSPENDED. It learns it is LOST only when it reaches a server again.
    That gap is where a ZooKeeper-era consumer's split brain comes from.
    """
    link = zk_link(zk, "c1-zk")
    faults = Faults(TraceRecorder(tmp_path, trial="t", design="zookeeper", actor="faults"))
    client = kazoo(link.connect, timeout=4.0)
    states = States(client)
    observer = kazoo(zk.connect, timeout=4.0)
    expired = threading.Event()
    try:
        client.create("/c1-alive", ephemeral=True, makepath=True)
        session = client.client_id[0]
        observer.exists("/c1-alive", watch=lambda event: expired.set())
        faults.link(link, Mode.BLACKHOLE)
        states.wait_for(KazooState.SUSPENDED)
        assert expired.wait(60)  # the server expired the session: the ephemeral node is gone
        assert observer.exists("/c1-alive") is None
        assert states.seen == [KazooState.SUSPENDED]  # ...and the client has no idea
        faults.link(link, Mode.PASS)
        states.wait_for(KazooState.LOST)  # told on reconnecting
        states.wait_for(KazooState.CONNECTED)  # kazoo goes on with a new session
        assert client.client_id[0] != session
    finally:
        client.stop()
        client.close()
        observer.stop()
        observer.close()
        link.close()
        faults.trace.close()
    events = [json.loads(line) for line in trace_path(tmp_path, "faults").read_text().splitlines()]
    done = [(e["kind"], json.loads(e["fields"])["action"], json.loads(e["fields"])["target"])
            for e in events if e["kind"] == "fault"]
    assert done == [("fault", "blackhole", "c1-zk"), ("fault", "pass", "c1-zk")]


def test_reset_link_drops_the_connection_but_keeps_the_session(zk):
    link = zk_link(zk, "c2-zk")
    client = kazoo(link.connect)
    states = States(client)
    try:
        session = client.client_id[0]
        link.set_mode(Mode.RESET)
        states.wait_for(KazooState.SUSPENDED)
        link.set_mode(Mode.PASS)
        states.wait_for(KazooState.CONNECTED)
        assert client.client_id[0] == session  # reconnected within the timeout: same session
        assert KazooState.LOST not in states.seen
    finally:
        client.stop()
        client.close()
        link.close()


def test_delayed_link_answers_late_but_answers(zk):
    link = zk_link(zk, "c3-zk")
    client = kazoo(link.connect)
    try:
        client.ensure_path("/delayed")
        link.set_mode(Mode.DELAY, delay_ms=300)
        t0 = time.monotonic()
        assert client.exists("/delayed") is not None
        assert time.monotonic() - t0 >= 0.6  # held on the way there and on the way back
        assert client.state == KazooState.CONNECTED
    finally:
        client.stop()
        client.close()
        link.close()


def test_process_faults_take_effect_and_are_recorded_in_order(zk, tmp_path):
    import uuid

    from lab_cluster.broker.admin import BrokerProcess

    def state(pid):
        return proc_stat(pid)[0]

    admin = kazoo(zk.connect, timeout=4.0)
    chroot = f"/faults/{uuid.uuid4().hex[:8]}"
    admin.ensure_path(chroot)
    faults = Faults(TraceRecorder(tmp_path, trial="t", design="cluster", actor="faults"))
    broker = BrokerProcess(9, zk.connect + chroot, tmp_path, session_timeout_ms=4000)
    try:
        faults.pause(broker)
        assert state(broker.pid) == "T"  # stopped, as in a long GC pause
        faults.resume(broker)
        assert state(broker.pid) != "T"
        faults.kill(broker)
        assert not broker.alive()
    finally:
        broker.kill()
        faults.trace.close()
        admin.delete(chroot, recursive=True)
        admin.stop()
        admin.close()
    events = [json.loads(line) for line in trace_path(tmp_path, "faults").read_text().splitlines()]
    done = [e for e in events if e["kind"] == "fault"]
    assert [(json.loads(e["fields"])["action"], json.loads(e["fields"])["target"]) for e in done] == [
        ("pause", "broker-9"), ("resume", "broker-9"), ("kill", "broker-9")]
    assert [e["ts_ns"] for e in done] == sorted(e["ts_ns"] for e in done)
