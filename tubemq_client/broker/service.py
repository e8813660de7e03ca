"""The TubeMQ side of a lab broker: registrations, fetches and confirms of client-balance consumers, on the wire.

Loaded with the master's side by `tubemq_client.service:install`. Requests,
under TubeMQ's RPC names (`BrokerServiceServer`), each answered with TubeMQ's
code in `code` (the lab frame's `error_code` stays Kafka's NONE, as for
RocketMQ's plug-in):

- `consumerRegisterC2B` {`client_id`, `group`, `op_type` (`REGISTER` or
  `UNREGISTER`), `topic`, `partition_id`, `read_status`, `curr_offset`
  (REGISTER; -1 keeps the stored offset)} -> `curr_offset`, `max_offset`;
- `consumerHeartbeatC2B` {`client_id`, `group`, `partitions`: [[topic, id]]}
  -> `failure_info`: [[code, topic, id]] (the answer itself succeeds);
- `getMessagesC2B` {`client_id`, `group`, `topic`, `partition_id`,
  `last_pack_consumed`, `max_records`} -> `records`, `curr_offset`;
- `consumerCommitC2B` {`client_id`, `group`, `topic`, `partition_id`,
  `last_pack_consumed`} -> `curr_offset`.

Who may do what is `registrations.py`'s (one holder per group and partition,
30 s release), and where a group reads is `offsets.py`'s (the broker moves
the offset itself; a client never sends one after registering). A partition
this broker does not lead is NOT_FOUND.

Departures, stated: partition ids are the lab's partition numbers (TubeMQ's
are `store * 10000 + i` on each broker); offsets live in the broker's memory
and are flushed every 5 s as TubeMQ's are (`offsetStgCacheFlushMs`), but to a
file beside the partition's log (`lab_cluster/partition_offsets.py`), so that
they move with the partition's leader as the lab's partition key does (a
TubeMQ partition stays on its broker).
"""

from __future__ import annotations

import threading

from lab_cluster.partition_offsets import OffsetFlusher, PartitionOffsets
from lab_cluster.wire import fields_checked

from ..codes import NAMES, NOT_FOUND, SUCCESS
from .offsets import READ_NORMAL, OffsetManager
from .registrations import Registrations

SCAN_INTERVAL_S = 1.0  # `HeartbeatManager` checks timeouts every second
WHERE = "tubemq_client/broker/service.py and master/service.py"  # where each request's body is described


class TubeBrokerService:
    def __init__(self, broker):
        self.broker = broker
        self.offsets_files = PartitionOffsets(broker.logs_dir, "tubemq")
        self.offsets = OffsetManager(loader=self.offsets_files.load)
        self.registrations = Registrations(on_release=self._released)
        self._stop = threading.Event()
        for name, handler in (("consumerRegisterC2B", self._register), ("consumerHeartbeatC2B", self._heartbeat),
                              ("getMessagesC2B", self._get_messages), ("consumerCommitC2B", self._commit)):
            broker.server.add_api(name, (1,), fields_checked(name, handler, WHERE))
        threading.Thread(target=self._expire_loop, name="tubemq-broker-timeouts", daemon=True).start()
        self.flusher = OffsetFlusher(broker, self.offsets_files, self.offsets)  # every offsetStgCacheFlushMs

    def stop(self) -> None:
        """A broker that shuts down commits its offsets (`DefaultOffsetManager.close`)."""
        self._stop.set()
        self.flusher.stop()

    def _expire_loop(self) -> None:
        while not self._stop.wait(SCAN_INTERVAL_S):
            for group, topic, partition in self.registrations.expire():
                self.broker.record("tubemq_released", group=group, topic=topic, partition=partition)

    def _released(self, group: str, topic: str, partition: int, consumed: bool) -> None:
        self.offsets.commit(group, topic, partition, consumed=consumed)

    def _answer(self, api: str, request: dict, code: int, **body) -> dict:
        self.broker.record("tubemq_request", api=api, code=NAMES.get(code, str(code)), client=request.get("client_id"),
                           group=request.get("group"), topic=request.get("topic"),
                           partition=request.get("partition_id"))
        return {"code": code, **body}

    def _log(self, request: dict):
        return self.broker.leader_log(str(request["topic"]), int(request["partition_id"]))

    def _register(self, request: dict) -> dict:
        api, client, group = "consumerRegisterC2B", str(request["client_id"]), str(request["group"])
        topic, partition = str(request["topic"]), int(request["partition_id"])
        if request["op_type"] == "UNREGISTER":
            code = self.registrations.unregister(group, topic, partition, client,
                                                 consumed=int(request.get("read_status", 0)) == READ_NORMAL)
            return self._answer(api, request, code)
        log = self._log(request)
        if log is None:
            return self._answer(api, request, NOT_FOUND)
        code = self.registrations.register(group, topic, partition, client)
        if code != SUCCESS:
            return self._answer(api, request, code)
        offset = self.offsets.load_offset(group, topic, partition, int(request.get("read_status", READ_NORMAL)),
                                          int(request.get("curr_offset", -1)), min_offset=0,
                                          max_offset=log.log_end_offset)
        return self._answer(api, request, code, curr_offset=offset, max_offset=log.log_end_offset)

    def _heartbeat(self, request: dict) -> dict:
        failures = self.registrations.heartbeat(str(request["group"]),
                                                [(str(t), int(p)) for t, p in request.get("partitions", [])],
                                                str(request["client_id"]))
        return self._answer("consumerHeartbeatC2B", request, SUCCESS,
                            failure_info=[[code, t, p] for (t, p), code in sorted(failures.items())])

    def _get_messages(self, request: dict) -> dict:
        group, topic, partition = str(request["group"]), str(request["topic"]), int(request["partition_id"])
        log = self._log(request)
        if log is None:
            return self._answer("getMessagesC2B", request, NOT_FOUND)
        code = self.registrations.fetch(group, topic, partition, str(request["client_id"]))
        if code != SUCCESS:
            return self._answer("getMessagesC2B", request, code)
        offset = self.offsets.fetch_offset(group, topic, partition,
                                           last_pack_consumed=bool(request.get("last_pack_consumed")))
        records = log.read(offset, int(request.get("max_records", 32)))
        self.offsets.book(group, topic, partition, len(records))
        # a fetch is frequent: traced only when it hands records out or is refused
        body = {"records": records, "curr_offset": offset}
        return self._answer("getMessagesC2B", request, code, **body) if records else {"code": code, **body}

    def _commit(self, request: dict) -> dict:
        group, topic, partition = str(request["group"]), str(request["topic"]), int(request["partition_id"])
        code = self.registrations.commit(group, topic, partition, str(request["client_id"]))
        if code != SUCCESS:
            return self._answer("consumerCommitC2B", request, code)
        offset = self.offsets.commit(group, topic, partition, consumed=bool(request.get("last_pack_consumed")))
        return self._answer("consumerCommitC2B", request, code, curr_offset=offset)
