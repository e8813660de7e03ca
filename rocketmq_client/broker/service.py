"""The RocketMQ side of a lab broker: the plug-in that puts the consumer table, offsets and locks on the wire.

Start a broker with it::

    python -m lab_cluster.broker --id 1 --zk ZK --trial-dir DIR --plugin rocketmq_client.broker.service:install

It adds RocketMQ's consumer-facing requests, under RocketMQ's request-code names
(`RequestCode`), each answered by the I/O-free cores beside it:

| request | body | answer |
|---|---|---|
| `HEART_BEAT` | `client_id`, `consumer_data`: [{`group`, `topics`: {topic: version}}] | registered (this channel) |
| `UNREGISTER_CLIENT` | `client_id`, `consumer_group` | removed |
| `GET_CONSUMER_LIST_BY_GROUP` | `consumer_group` | `consumer_id_list`, or SYSTEM_ERROR |
| `UPDATE_CONSUMER_OFFSET` | `consumer_group`, `topic`, `queue_id`, `commit_offset` | stored, from anyone |
| `QUERY_CONSUMER_OFFSET` | `consumer_group`, `topic`, `queue_id` | `offset`, or QUERY_NOT_FOUND |
| `LOCK_BATCH_MQ`, `UNLOCK_BATCH_MQ` | `consumer_group`, `client_id`, `mq_set`: [[topic, broker, q]] | locked set |
| `PULL_MESSAGE` | `consumer_group`, `topic`, `queue_id`, `queue_offset`, `max_msg_nums`, `commit_offset`? | `records` |

`PULL_MESSAGE` is `PullMessageProcessor`'s: the records from `queue_offset`,
and, when the pull carries `commit_offset` (RocketMQ's COMMIT_OFFSET flag,
set by a consumer whose in-memory offset is above 0), that offset stored for
the group, from anyone, as UPDATE_CONSUMER_OFFSET stores it. So the broker's
offset is at most one pull behind what the consumer processed.

A connection is a RocketMQ channel (`lab_cluster.wire.Channel`): the consumer
table is keyed by it, its close is `doChannelCloseEvent`, and a CHANGE pushes
`{"push": "NOTIFY_CONSUMER_IDS_CHANGED", "consumer_group": g}` on every channel
of the group at once (4.9.8's `DefaultConsumerIdsChangeListener`). The scan
runs every 10 s and closes the channels it drops.

Departures, stated: RocketMQ's response code travels in the answer's `code`
(`SUCCESS`, `SYSTEM_ERROR`, `QUERY_NOT_FOUND`) while the lab frame's
`error_code` stays Kafka's NONE; offsets live in the broker's memory and are
flushed every 5 s as RocketMQ's are, but to a file beside the partition's log
(`lab_cluster/partition_offsets.py`), so that they move with the partition's
leader as the lab's queue does (a RocketMQ queue stays on its broker); the
broker-side first-time quirk of `QUERY_CONSUMER_OFFSET` (0 rather than
not-found for a young queue) is not modelled; a pull is answered at once
(RocketMQ's broker holds an empty one up to 15 s, long polling), and a pull of
a queue this broker does not lead is refused with SYSTEM_ERROR (a RocketMQ
queue never leaves its broker; a lab queue is named after its leader, see
`rocketmq_client/instance.py`).
A pull is not checked against the subscription's version: RocketMQ's broker
refuses a pull whose `subVersion` is newer than the one its last heartbeat
registered (SUBSCRIPTION_NOT_LATEST, PullMessageProcessor), and the client
pulls again `pullTimeDelayMillsWhenException` (1 s) later; this happens when a
rebalance raised the version before the heartbeat carrying it arrived, which
RocketMQ 4.9.7's own client, run beside this one, does on most joins
(`real_systems/rocketmq49/`); the lab's newcomer is never refused, so its first
message comes up to a second sooner.
"""

from __future__ import annotations

import threading

from lab_cluster.partition_offsets import OffsetFlusher, PartitionOffsets
from lab_cluster.wire import Channel, fields_checked

from .consumer_manager import SCAN_INTERVAL_MS, ConsumerManager, NoConsumer
from .locks import RebalanceLockManager
from .offsets import ConsumerOffsetManager

NOTIFY_CONSUMER_IDS_CHANGED = "NOTIFY_CONSUMER_IDS_CHANGED"
WHERE = "rocketmq_client/broker/service.py"  # where a malformed request's sender reads each body


class RocketMQService:
    def __init__(self, broker, *, scan_interval_ms: int = SCAN_INTERVAL_MS):
        self.broker = broker
        self.consumers = ConsumerManager(self._on_change)
        self.offsets_files = PartitionOffsets(broker.logs_dir, "rocketmq")
        self.offsets = ConsumerOffsetManager(loader=self.offsets_files.load)
        self.locks = RebalanceLockManager()
        self._stop = threading.Event()
        self._scan_interval_s = scan_interval_ms / 1000
        server = broker.server
        for name, handler, with_channel in (
                ("HEART_BEAT", self._heartbeat, True), ("UNREGISTER_CLIENT", self._unregister, True),
                ("GET_CONSUMER_LIST_BY_GROUP", self._consumer_list, False),
                ("UPDATE_CONSUMER_OFFSET", self._update_offset, False),
                ("QUERY_CONSUMER_OFFSET", self._query_offset, False),
                ("LOCK_BATCH_MQ", self._lock, False), ("UNLOCK_BATCH_MQ", self._unlock, False),
                ("PULL_MESSAGE", self._pull, False)):
            server.add_api(name, (1,), fields_checked(name, handler, WHERE), with_channel=with_channel)
        server.on_channel_closed(self.consumers.do_channel_close_event)
        self._scanner = threading.Thread(target=self._scan, name="rocketmq-scan", daemon=True)
        self._scanner.start()
        # `ConsumerOffsetManager.persist`: first 10 s after the start (`BrokerController`), then every
        # flushConsumerOffsetInterval
        self.flusher = OffsetFlusher(broker, self.offsets_files, self.offsets, first_ms=10_000)

    def stop(self) -> None:
        """A broker that shuts down persists its offsets (`BrokerController.shutdown`)."""
        self._stop.set()
        self.flusher.stop()

    # -- the consumer table ----------------------------------------------------------------
    def _on_change(self, event: str, group: str, channels: list[Channel]) -> None:
        if event != "CHANGE":
            return
        self.broker.record("consumer_ids_changed", group=group, channels=[c.id for c in channels])
        for channel in channels:
            channel.push(NOTIFY_CONSUMER_IDS_CHANGED, consumer_group=group)

    def _scan(self) -> None:
        while not self._stop.wait(self._scan_interval_s):
            for channel in self.consumers.scan_not_active_channel():
                self.broker.record("channel_expired", channel=channel.id)
                channel.close()

    def _answer(self, api: str, request: dict, code: str = "SUCCESS", **body) -> dict:
        self.broker.record("rocketmq_request", api=api, code=code, client=request.get("client_id"),
                           group=request.get("consumer_group"))
        return {"code": code, **body}

    def _heartbeat(self, request: dict, channel: Channel) -> dict:
        for data in request.get("consumer_data", []):
            self.consumers.register_consumer(str(data["group"]), channel, str(request["client_id"]),
                                             {str(t): int(v) for t, v in dict(data.get("topics", {})).items()})
        return self._answer("HEART_BEAT", request)

    def _unregister(self, request: dict, channel: Channel) -> dict:
        self.consumers.unregister_consumer(str(request["consumer_group"]), channel)
        return self._answer("UNREGISTER_CLIENT", request)

    def _consumer_list(self, request: dict) -> dict:
        try:
            ids = self.consumers.find_consumer_id_list(str(request["consumer_group"]))
        except NoConsumer as exc:
            return self._answer("GET_CONSUMER_LIST_BY_GROUP", request, "SYSTEM_ERROR", remark=str(exc))
        return self._answer("GET_CONSUMER_LIST_BY_GROUP", request, consumer_id_list=ids)

    # -- offsets and locks ------------------------------------------------------------------
    def _update_offset(self, request: dict) -> dict:
        self.offsets.commit_offset(str(request["consumer_group"]), str(request["topic"]), int(request["queue_id"]),
                                   int(request["commit_offset"]))
        return self._answer("UPDATE_CONSUMER_OFFSET", request)

    def _query_offset(self, request: dict) -> dict:
        offset = self.offsets.query_offset(str(request["consumer_group"]), str(request["topic"]),
                                           int(request["queue_id"]))
        if offset is None:
            return self._answer("QUERY_CONSUMER_OFFSET", request, "QUERY_NOT_FOUND", remark="Not found")
        return self._answer("QUERY_CONSUMER_OFFSET", request, offset=offset)

    def _pull(self, request: dict) -> dict:
        """`PullMessageProcessor`: read, then store the piggy-backed offset (it is stored whatever was found).
        A pull is frequent: the broker's trace has it only when refused (the consumer traces the commit)."""
        topic, queue_id = str(request["topic"]), int(request["queue_id"])
        log = self.broker.leader_log(topic, queue_id)
        if log is None:
            return self._answer("PULL_MESSAGE", request, "SYSTEM_ERROR", remark=f"{topic}-{queue_id} is not here")
        try:
            records = log.read(int(request["queue_offset"]), int(request.get("max_msg_nums", 32)))
        finally:  # RocketMQ stores the carried offset whatever the read found
            if request.get("commit_offset") is not None:
                self.offsets.commit_offset(str(request["consumer_group"]), topic, queue_id,
                                           int(request["commit_offset"]))
        return {"code": "SUCCESS", "records": records, "max_offset": log.log_end_offset}

    def _lock(self, request: dict) -> dict:
        queues = [tuple(mq) for mq in request.get("mq_set", [])]
        granted = self.locks.try_lock_batch(str(request["consumer_group"]), queues, str(request["client_id"]))
        return self._answer("LOCK_BATCH_MQ", request, lock_ok_mq_set=[list(mq) for mq in sorted(granted)])

    def _unlock(self, request: dict) -> dict:
        queues = [tuple(mq) for mq in request.get("mq_set", [])]
        self.locks.unlock_batch(str(request["consumer_group"]), queues, str(request["client_id"]))
        return self._answer("UNLOCK_BATCH_MQ", request)


def install(broker) -> RocketMQService:
    return RocketMQService(broker)
