"""Ensembles: one leader, survival of one stopped server, stale reads from a lagging follower, pauses."""

import threading

import pytest
from conftest import kazoo
from kazoo.protocol.states import KazooState

from lab_cluster.faultproxy import Mode
from lab_cluster.zk.server import ServerState

BACKENDS = ["embedded", pytest.param("testcontainers", marks=pytest.mark.docker)]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "testcontainers":
        return request.getfixturevalue("docker_backend")
    return request.param


@pytest.mark.parametrize("size", [3, pytest.param(5, marks=pytest.mark.slow)])
def test_an_ensemble_has_exactly_one_leader(ensembles, size):
    zk = ensembles(servers=size, backend="embedded")
    modes = zk.modes()
    assert sorted(modes.values()) == ["follower"] * (size - 1) + ["leader"]
    assert len(zk.proxies) == size * (size - 1)  # one proxy per directed quorum link
    # no proxy was given a port of the plan (one given the quorum port it forwards to loops on itself)
    planned = {port for s in zk.servers for port in (s.address.client_port, s.address.quorum_port,
                                                      s.address.election_port)}
    assert planned.isdisjoint(p.port for p in zk.proxies.values())
    assert zk.leader().sid in modes and len(zk.followers()) == size - 1


def test_three_servers_keep_serving_with_the_leader_stopped(ensembles, backend):
    zk = ensembles(servers=3, backend=backend)
    # The election after the leader stops can take ~10 s on a cold machine (the
    # notification back-off doubles from 200 ms); a 30 s session (the server's
    # maximum is 40 s) outlives it, so the test asks about the quorum, not the session.
    client = kazoo(zk.connect, timeout=30.0)
    try:
        client.create("/before", b"1")
        old_leader = zk.leader()
        old_leader.stop()
        assert old_leader.state is ServerState.STOPPED
        new_leader = zk.wait_for_quorum(60)
        assert new_leader.sid != old_leader.sid
        client.create("/after", b"2")  # a quorum of two still commits writes
        assert client.get("/before")[0] == b"1"
        old_leader.start()
        old_leader.wait_serving(60)
        zk.wait_for_quorum(60)
        assert old_leader.mode() == "follower"  # it rejoins under the new leader
        assert kazoo(old_leader.connect).get("/after")[0] == b"2"
    finally:
        client.stop()
        client.close()


def test_a_lagging_follower_serves_stale_reads_until_sync(ensembles, backend):
    zk = ensembles(servers=3, backend=backend)
    leader = zk.wait_for_quorum()
    lagging = zk.followers()[0]
    writer, reader = kazoo(leader.connect), kazoo(lagging.connect)
    try:
        writer.create("/x", b"old")
        reader.sync("/x")
        assert reader.get("/x")[0] == b"old"
        # Under syncLimit x tickTime (4 s) for the round trip, so the leader keeps the follower.
        zk.quorum_link(lagging.sid, leader.sid).set_mode(Mode.DELAY, delay_ms=1200)
        writer.set("/x", b"new")  # committed by the leader and the other follower
        assert writer.get("/x")[0] == b"new"
        assert reader.get("/x")[0] == b"old"  # the lagging follower has not seen the commit yet
        reader.sync("/x")  # travels the same delayed, ordered link, behind the commit
        assert reader.get("/x")[0] == b"new"
    finally:
        zk.quorum_link(lagging.sid, leader.sid).set_mode(Mode.PASS)
        for c in (writer, reader):
            c.stop()
            c.close()


def test_pausing_a_server_suspends_its_clients_and_resuming_brings_them_back(ensembles, backend):
    zk = ensembles(servers=1, backend=backend)
    server = zk.servers[0]
    states, suspended, connected = [], threading.Event(), threading.Event()

    def listener(state):
        states.append(state)
        if state == KazooState.SUSPENDED:
            suspended.set()
        elif state == KazooState.CONNECTED and suspended.is_set():
            connected.set()

    client = kazoo(server.connect, timeout=4.0)
    client.add_listener(listener)
    try:
        server.pause()
        assert server.state is ServerState.PAUSED
        assert suspended.wait(60), f"client never went SUSPENDED (states: {states})"
        server.resume()
        assert connected.wait(60), f"client never came back (states: {states})"
        client.ensure_path("/alive")  # and it works again
        assert client.exists("/alive")
    finally:
        server.resume()
        client.stop()
        client.close()
