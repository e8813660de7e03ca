"""The wire protocol and the partition log, on real sockets and real files."""

import socket
import struct
import threading

import pytest
from conftest import wait_for
from hypothesis import given, settings
from hypothesis import strategies as st

from lab_cluster.partition_log import PartitionLog
from lab_cluster.wire import ErrorCode, WireClient, WireError, WireServer, encode, read_frame


@pytest.fixture
def server():
    srv = WireServer(max_frame_bytes=4096, name="test")

    def echo(request):
        return {"echo": request.get("text")}

    def boom(request):
        raise RuntimeError("handler bug")

    def refuse(request):
        raise WireError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such topic")

    srv.add_api("Echo", (1, 2), echo)
    srv.add_api("Boom", (1,), boom)
    srv.add_api("Refuse", (1,), refuse)
    srv.start()
    yield srv
    srv.stop()


def _raw(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def test_request_and_answer(server):
    client = WireClient("127.0.0.1", server.port, client_id="t")
    answer = client.call("Echo", 2, text="hi")
    assert answer["echo"] == "hi" and answer["error"] == "NONE" and answer["correlation_id"] == 1
    assert client.call("Echo", 1, text="again")["correlation_id"] == 2
    client.close()


def test_error_answers_keep_the_connection(server):
    client = WireClient("127.0.0.1", server.port)
    with pytest.raises(WireError) as info:
        client.call("Refuse")
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert client.request("Nope")["error"] == "INVALID_REQUEST"
    assert client.request("Echo", 9)["error"] == "UNSUPPORTED_VERSION"
    bug = client.request("Boom")
    assert bug["error_code"] == -1 and "handler bug" in bug["message"]
    assert client.call("Echo", text="still here")["echo"] == "still here"  # same connection


@pytest.mark.parametrize("garbage", [
    struct.pack(">I", 5) + b"nope!",             # not JSON
    struct.pack(">I", 2) + b"[]",                # not an object
    struct.pack(">I", 10_000_000) + b"{}",       # over the frame limit
])
def test_a_broken_frame_is_answered_and_its_connection_closed(server, garbage):
    bystander = WireClient("127.0.0.1", server.port)
    bystander.call("Echo", text="before")
    with _raw(server) as sock:
        sock.sendall(garbage)
        answer = read_frame(sock)
        assert answer["error"] == "INVALID_REQUEST" and answer["correlation_id"] == -1
        assert sock.recv(10) == b""  # closed by the server
    assert bystander.call("Echo", text="after")["echo"] == "after"  # everyone else is still served


def test_a_connection_cut_mid_frame_does_not_disturb_the_server(server):
    with _raw(server) as sock:
        sock.sendall(encode({"api": "Echo", "version": 1})[:7])
    assert WireClient("127.0.0.1", server.port).call("Echo", text="ok")["echo"] == "ok"


def test_client_reports_a_dead_server_as_connection_error(server):
    client = WireClient("127.0.0.1", server.port, timeout_s=2)
    server.stop()
    with pytest.raises(ConnectionError):
        client.call("Echo", text="x")


# -- partition log -----------------------------------------------------------

def test_append_and_read_from_any_offset(tmp_path):
    log = PartitionLog.open(tmp_path, "t", 0)
    assert log.append(["a", "b", "c"]) == 0
    assert log.append(["d"]) == 3
    assert [r["value"] for r in log.read(0, 10)] == ["a", "b", "c", "d"]
    assert [r["offset"] for r in log.read(2, 1)] == [2]
    assert log.read(4, 10) == []  # the end: nothing yet, not an error
    for bad in (-1, 5):
        with pytest.raises(WireError) as info:
            log.read(bad, 1)
        assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_new_leader_sees_what_earlier_leaders_wrote(tmp_path):
    first = PartitionLog.open(tmp_path, "t", 3)
    first.append([f"v{i}" for i in range(5)])
    first.close()
    with open(tmp_path / "t-3.log", "ab") as f:
        f.write(b'{"offset": 5, "ts_')  # a crash in the middle of an append
    second = PartitionLog.open(tmp_path, "t", 3)
    assert second.log_end_offset == 5  # the torn record is cut off
    assert second.append(["v5"]) == 5
    assert [r["value"] for r in second.read(0, 100)] == [f"v{i}" for i in range(6)]


def test_wait_for_wakes_on_append(tmp_path):
    log = PartitionLog.open(tmp_path, "t", 0)
    woke = threading.Event()

    def waiter():
        log.wait_for(0, timeout_s=30)
        woke.set()

    t = threading.Thread(target=waiter)
    t.start()
    log.append(["x"])
    t.join(30)
    assert woke.is_set()


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.lists(st.text(max_size=20), min_size=1, max_size=5), max_size=8),
       start=st.integers(min_value=0, max_value=40), count=st.integers(min_value=0, max_value=40))
def test_reads_are_exactly_the_appended_slice(tmp_path_factory, batches, start, count):
    log = PartitionLog.open(tmp_path_factory.mktemp("log"), "t", 0)
    values = [v for batch in batches for v in batch]
    for batch in batches:
        log.append(batch)
    if start > len(values):
        with pytest.raises(WireError):
            log.read(start, count)
    else:
        got = log.read(start, count)
        assert [r["value"] for r in got] == values[start:start + count]
        assert [r["offset"] for r in got] == list(range(start, start + len(got)))
    log.close()


def test_a_server_that_never_started_stops_at_once():
    server = WireServer()
    server.stop()  # would block forever if it waited for an accept loop that never ran
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)


@pytest.fixture
def channel_server():
    """A server whose `Register` remembers the asker's channel and whose `Notify` pushes to every channel."""
    srv = WireServer(name="channels")
    seen, closed = {}, []

    def register(request, channel):
        seen[request["client_id"]] = channel
        return {"channel": channel.id}

    def notify(request, channel):
        for other in list(seen.values()):
            other.push("NOTIFY", group=request["group"])
        return {"pushed": len(seen)}

    srv.add_api("Register", (1,), register, with_channel=True)
    srv.add_api("Notify", (1,), notify, with_channel=True)
    srv.on_channel_closed(closed.append)
    srv.start()
    yield srv, seen, closed
    srv.stop()


def test_a_channel_is_one_connection_and_its_end_is_told(channel_server):
    from lab_cluster.wire import DuplexClient

    srv, seen, closed = channel_server
    a, b = DuplexClient("127.0.0.1", srv.port, client_id="a"), DuplexClient("127.0.0.1", srv.port, client_id="b")
    first, again = a.call("Register")["channel"], a.call("Register")["channel"]
    assert first == again != b.call("Register")["channel"]
    a.close()
    wait_for(lambda: closed, "the server to tell its listener the channel closed", timeout_s=10)
    assert [c.id for c in closed] == [first] and seen["a"].closed
    assert not seen["a"].push("NOTIFY", group="g")  # a push to a closed channel says so
    assert a.call("Register")["channel"] not in (first, seen["b"].id)  # a new connection is a new channel
    a.close()
    b.close()


def test_pushes_reach_the_client_between_and_during_its_requests(channel_server):
    from lab_cluster.wire import DuplexClient

    srv, seen, _ = channel_server
    pushed = {"a": [], "b": []}
    got_b = threading.Event()

    def on_push_b(frame):
        pushed["b"].append(frame)
        got_b.set()

    a = DuplexClient("127.0.0.1", srv.port, client_id="a", on_push=pushed["a"].append)
    b = DuplexClient("127.0.0.1", srv.port, client_id="b", on_push=on_push_b)
    a.call("Register")
    b.call("Register")
    assert a.call("Notify", group="g")["pushed"] == 2  # a's own push arrived before its answer
    assert got_b.wait(5)  # b was idle: its reader got it anyway
    assert pushed == {"a": [{"push": "NOTIFY", "group": "g"}], "b": [{"push": "NOTIFY", "group": "g"}]}
    a.close()
    b.close()


def test_a_connection_the_server_ends_fails_the_waiting_request_and_is_told(channel_server):
    from lab_cluster.wire import DuplexClient

    srv, seen, _ = channel_server
    ended = threading.Event()
    hold = threading.Event()
    srv.add_api("Hold", (1,), lambda request: hold.wait(10) and {})
    c = DuplexClient("127.0.0.1", srv.port, client_id="c", on_close=ended.set)
    c.call("Register")
    failed = []
    waiter = threading.Thread(target=lambda: failed.append(pytest.raises(ConnectionError, c.request, "Hold")))
    waiter.start()
    threading.Event().wait(0.2)
    seen["c"].close()  # the broker drops the channel while a request is in flight
    waiter.join(10)
    hold.set()
    assert failed and "connection closed" in str(failed[0].value) and ended.wait(5)
    c.close()


def test_a_request_without_an_answer_in_time_closes_its_connection_and_the_next_opens_a_new_channel(channel_server):
    """RocketMQ's `invokeSync` closes a channel whose answer timed out (`closeSocketIfTimeout`, true by default),
    so a link that silently lost its far end is not kept forever."""
    from lab_cluster.wire import DuplexClient

    srv, seen, closed = channel_server
    release = threading.Event()
    srv.add_api("Hold", (1,), lambda request: release.wait(10) and {})
    ended = threading.Event()
    c = DuplexClient("127.0.0.1", srv.port, client_id="c", on_close=ended.set)
    first = c.call("Register")["channel"]
    with pytest.raises(ConnectionError, match="no answer within"):
        c.request("Hold", timeout_s=0.3)
    assert ended.wait(5)  # the client ended that connection itself
    release.set()
    wait_for(lambda: [ch.id for ch in closed] == [first], "the server to see the channel close", timeout_s=10)
    assert c.call("Register")["channel"] != first
    c.close()


def test_a_request_that_may_time_out_without_closing_keeps_its_connection(channel_server):
    """RocketMQ's `invokeAsync` (its pulls): a timed-out answer fails only its caller, the channel stays."""
    from lab_cluster.wire import DuplexClient

    srv, seen, closed = channel_server
    release = threading.Event()
    srv.add_api("Hold", (1,), lambda request: release.wait(10) and {})
    ended = threading.Event()
    c = DuplexClient("127.0.0.1", srv.port, client_id="c", on_close=ended.set)
    first = c.call("Register")["channel"]
    with pytest.raises(ConnectionError, match="no answer within"):
        c.request("Hold", timeout_s=0.3, close_on_timeout=False)
    release.set()  # its late answer is dropped; the same channel answers the next request
    assert c.call("Register")["channel"] == first and not ended.is_set() and not closed
    c.close()


def test_a_oneway_request_returns_at_once_and_its_answer_only_feeds_a_callback(channel_server):
    """RocketMQ's `invokeOneway` (offset updates): nothing waits for the answer, so nothing closes the channel;
    one still in flight when the connection ends is told None."""
    from lab_cluster.wire import DuplexClient

    srv, seen, closed = channel_server
    release = threading.Event()
    srv.add_api("Hold", (1,), lambda request: release.wait(10) and {"held": True})
    c = DuplexClient("127.0.0.1", srv.port, client_id="c")
    first = c.call("Register")["channel"]
    answers, got = [], threading.Event()

    def on_answer(frame):
        answers.append(frame)
        got.set()

    c.send_oneway("Hold", on_answer=on_answer)  # the server holds it: this returns anyway
    assert not answers
    release.set()
    assert got.wait(5) and answers[0]["held"] and c.call("Register")["channel"] == first
    release.clear()
    got.clear()
    c.send_oneway("Hold", on_answer=on_answer)
    seen["c"].close()  # the server ends the channel before it answers
    assert got.wait(5) and answers[-1] is None
    release.set()
    c.close()
