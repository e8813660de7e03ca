"""A real lab broker with the RocketMQ plug-in, real clients on real sockets: the consumer table over the wire."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from conftest import kazoo, wait_for

from lab_cluster.wire import DuplexClient

PLUGIN = "rocketmq_client.broker.service:install"


@pytest.fixture
def broker(zk, tmp_path):
    from lab_cluster.broker.admin import start_broker

    chroot = f"/clusters/{uuid.uuid4().hex[:10]}"
    admin = kazoo(zk.connect)
    admin.ensure_path(chroot)
    b = start_broker(1, zk.connect + chroot, tmp_path, session_timeout_ms=4000, plugins=(PLUGIN,))
    yield b
    b.stop()
    admin.delete(chroot, recursive=True)
    admin.stop()
    admin.close()


class Consumer:
    """A client's channel to the broker, and the pushes it got."""

    def __init__(self, broker, client_id: str):
        self.client_id, self.pushes, self.got = client_id, [], threading.Event()
        self.wire = DuplexClient("127.0.0.1", broker.port, client_id=client_id, on_push=self._pushed)

    def _pushed(self, frame):
        self.pushes.append(frame)
        self.got.set()

    def heartbeat(self, group="g", topics=None):
        return self.wire.call("HEART_BEAT", consumer_data=[{"group": group, "topics": topics or {"t": 1}}])


def test_heartbeats_build_the_table_and_every_change_is_pushed_to_the_group(broker, tmp_path):
    c1, c2 = Consumer(broker, "c1"), Consumer(broker, "c2")
    c1.heartbeat()
    wait_for(lambda: len(c1.pushes) == 1, "c1 to be told of its own registration")
    c2.heartbeat()
    wait_for(lambda: len(c1.pushes) == 2 and len(c2.pushes) == 1, "both to be told of c2's")
    c1.heartbeat()  # no change: nobody is told
    assert c1.wire.call("GET_CONSUMER_LIST_BY_GROUP", consumer_group="g")["consumer_id_list"] == ["c1", "c2"]
    assert c1.pushes[0] == {"push": "NOTIFY_CONSUMER_IDS_CHANGED", "consumer_group": "g"}

    c2.wire.close()  # the connection closes: doChannelCloseEvent, CHANGE
    wait_for(lambda: len(c1.pushes) == 3, "c1 to be told c2's channel closed")
    assert c1.wire.call("GET_CONSUMER_LIST_BY_GROUP", consumer_group="g")["consumer_id_list"] == ["c1"]
    c1.wire.call("UNREGISTER_CLIENT", consumer_group="g")
    answer = c1.wire.call("GET_CONSUMER_LIST_BY_GROUP", consumer_group="g")
    assert answer["code"] == "SYSTEM_ERROR" and "no consumer for this group, g" in answer["remark"]
    assert len(c1.pushes) == 3  # the CHANGE goes to the channels left: none
    c1.wire.close()

    assert broker.stop() == 0  # its trace is whole once it stopped
    events = [json.loads(line) for line in (tmp_path / "traces" / "broker-1.jsonl").read_text().splitlines()]
    changed = [json.loads(e["fields"])["channels"] for e in events if e["kind"] == "consumer_ids_changed"]
    assert len(changed) == 4 and changed[-1] == []


def test_offsets_are_taken_from_anyone_and_locks_from_one(broker):
    a, b = Consumer(broker, "a"), Consumer(broker, "b")
    q = {"consumer_group": "g", "topic": "t", "queue_id": 0}
    assert a.wire.call("QUERY_CONSUMER_OFFSET", **q)["code"] == "QUERY_NOT_FOUND"
    a.wire.call("UPDATE_CONSUMER_OFFSET", commit_offset=90, **q)
    b.wire.call("UPDATE_CONSUMER_OFFSET", commit_offset=30, **q)  # b never registered: accepted, backwards
    assert a.wire.call("QUERY_CONSUMER_OFFSET", **q)["offset"] == 30
    mqs = [["t", "broker-a", 0], ["t", "broker-a", 1]]
    assert a.wire.call("LOCK_BATCH_MQ", consumer_group="g", client_id="a", mq_set=mqs)["lock_ok_mq_set"] == mqs
    assert b.wire.call("LOCK_BATCH_MQ", consumer_group="g", client_id="b", mq_set=mqs)["lock_ok_mq_set"] == []
    a.wire.call("UNLOCK_BATCH_MQ", consumer_group="g", client_id="a", mq_set=mqs[:1])
    assert b.wire.call("LOCK_BATCH_MQ", consumer_group="g", client_id="b", mq_set=mqs)["lock_ok_mq_set"] == mqs[:1]
    a.wire.close()
    b.wire.close()


def test_a_malformed_request_is_refused_clearly_and_the_channel_keeps_serving(broker):
    c = Consumer(broker, "c")
    answer = c.wire.request("HEART_BEAT", consumer_data=[{"topics": {"t": 1}}])  # no group
    assert answer["error"] == "INVALID_REQUEST" and "HEART_BEAT: bad or missing field" in answer["message"]
    assert c.heartbeat()["code"] == "SUCCESS"
    c.wire.close()
