"""The four-letter-word client against a real server: every word parsed into what the server said."""

import re

from lab_cluster import fourlw


def _hostport(zk):
    server = zk.servers[0]
    return server.address.host, server.address.client_port


def test_ruok_and_srvr(zk):
    host, port = _hostport(zk)
    assert fourlw.ruok(host, port) == {"ok": True}
    info = fourlw.srvr(host, port)
    assert info["serving"] is True
    assert info["mode"] == "standalone"
    assert re.match(r"3\.9\.\d+", info["version"])
    assert isinstance(info["zxid"], int) and isinstance(info["node_count"], int)


def test_mntr_counts_what_a_client_did(zk, zk_client):
    host, port = _hostport(zk)
    before = fourlw.mntr(host, port)
    zk_client.create("/counted", b"x")
    zk_client.get("/counted", watch=lambda event: None)
    after = fourlw.mntr(host, port)
    assert after["zk_version"].startswith("3.9")
    assert after["zk_znode_count"] == before["zk_znode_count"] + 1
    assert after["zk_watch_count"] >= before["zk_watch_count"] + 1
    assert after["zk_packets_received"] > before["zk_packets_received"]


def test_wchc_lists_the_data_watches_of_our_session(zk, zk_client):
    host, port = _hostport(zk)
    zk_client.create("/watched", b"x")
    zk_client.get("/watched", watch=lambda event: None)
    session = f"0x{zk_client.client_id[0]:x}"
    watches = fourlw.wchc(host, port)
    assert session in watches
    assert [p for p in watches[session] if p.endswith("/watched")] == [watches[session][0]]


def test_wchc_does_not_list_child_watches_but_mntr_counts_them(zk, zk_client):
    """A server fact the lab's cross-checks depend on (see the fourlw module doc)."""
    host, port = _hostport(zk)
    zk_client.create("/parent", b"x")
    session = f"0x{zk_client.client_id[0]:x}"
    before = fourlw.mntr(host, port)["zk_watch_count"]
    zk_client.get_children("/parent", watch=lambda event: None)
    assert fourlw.mntr(host, port)["zk_watch_count"] == before + 1
    assert not any(p.endswith("/parent") for p in fourlw.wchc(host, port).get(session, []))


def test_cons_lists_our_connection(zk, zk_client):
    host, port = _hostport(zk)
    session = f"0x{zk_client.client_id[0]:x}"
    connections = fourlw.cons(host, port)
    ours = [c for c in connections if c.get("sid") == session]
    assert len(ours) == 1
    assert ours[0]["address"].startswith("127.0.0.1:")
    assert ours[0]["to"] > 0  # the negotiated session timeout


def test_a_closed_port_is_a_clear_error():
    from lab_cluster.errors import LabError
    from lab_cluster.ports import free_port

    port = free_port()
    try:
        fourlw.ruok("127.0.0.1", port, timeout_s=2)
    except LabError as exc:
        assert f"127.0.0.1:{port}" in exc.problem
    else:
        raise AssertionError("ruok on a closed port must raise LabError")
