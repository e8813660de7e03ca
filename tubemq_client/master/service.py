"""The TubeMQ master's side of the lab, on a lab broker's wire: client-balance groups and partition metadata.

Loaded with the broker's side by `tubemq_client.service:install`. Requests,
under TubeMQ's RPC names (`TMaster`), each answered with TubeMQ's code in `code`:

- `consumerRegisterC2MV2` {`client_id`, `group`, `topics`, `source_count`,
  `node_id`} -> SUCCESS, or why not (`groups.py`);
- `consumerHeartbeatC2MV2` {`client_id`, `group`, `reported`: [partition
  keys]} -> SUCCESS or HB_NO_NODE;
- `consumerGetPartMetaInfoC2M` {`client_id`, `group`, `topics`} ->
  `partitions`: {key: subscribable}, `brokers`: {id: [host, port]};
- `consumerCloseClientC2M` {`client_id`, `group`} -> SUCCESS.

A partition key is `brokerId:topic:partitionId` (`Partition.getPartitionKey`);
a partition is subscribable (TubeMQ's status 1) while its broker serves it,
which the lab reads from the brokers' metadata: every partition with a
leader, keyed by that leader. The master pushes nothing and assigns nothing
to a client-balance group: what a member learns, it asks for.

Departure, stated: TubeMQ runs its master as its own process (with standby
masters); in the lab every broker hosts one, each with its own memory, and a
client uses the first of `masterHostAndPort` that answers.
"""

from __future__ import annotations

import threading

from lab_cluster.wire import fields_checked

from ..broker.service import WHERE
from ..codes import NAMES, SUCCESS
from .groups import GroupTable

SCAN_INTERVAL_S = 1.0  # `HeartbeatManager` checks timeouts every second


def partition_key(broker_id: int | str, topic: str, partition: int) -> str:
    """`Partition.getPartitionKey`: `brokerId:topic:partitionId`."""
    return f"{broker_id}:{topic}:{partition}"


class TubeMasterService:
    def __init__(self, broker):
        self.broker = broker
        self.groups = GroupTable()
        self._stop = threading.Event()
        for name, handler in (("consumerRegisterC2MV2", self._register), ("consumerHeartbeatC2MV2", self._heartbeat),
                              ("consumerGetPartMetaInfoC2M", self._meta), ("consumerCloseClientC2M", self._close)):
            broker.server.add_api(name, (1,), fields_checked(name, handler, WHERE))
        threading.Thread(target=self._expire_loop, name="tubemq-master-timeouts", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _expire_loop(self) -> None:
        while not self._stop.wait(SCAN_INTERVAL_S):
            for node in self.groups.expire():
                self.broker.record("tubemq_consumer_expired", node=node)

    def _answer(self, api: str, request: dict, code: int, **body) -> dict:
        self.broker.record("tubemq_request", api=api, code=NAMES.get(code, str(code)), client=request.get("client_id"),
                           group=request.get("group"))
        return {"code": code, **body}

    def _register(self, request: dict) -> dict:
        code = self.groups.add_consumer(str(request["group"]), str(request["client_id"]),
                                        [str(t) for t in request["topics"]], source_count=int(request["source_count"]),
                                        node_id=int(request["node_id"]))
        return self._answer("consumerRegisterC2MV2", request, code)

    def _heartbeat(self, request: dict) -> dict:
        code = self.groups.heartbeat(str(request["group"]), str(request["client_id"]),
                                     [str(k) for k in request.get("reported", [])])
        return self._answer("consumerHeartbeatC2MV2", request, code)

    def _meta(self, request: dict) -> dict:
        metadata = self.broker.metadata()
        brokers = {str(i): [b["host"], b["port"]] for i, b in metadata["brokers"].items()}
        partitions = {}
        for topic in request["topics"]:
            for p, leader in metadata["topics"].get(str(topic), {}).items():
                if str(leader) in brokers:
                    partitions[partition_key(leader, str(topic), int(p))] = True
        return self._answer("consumerGetPartMetaInfoC2M", request, SUCCESS, partitions=partitions, brokers=brokers)

    def _close(self, request: dict) -> dict:
        self.groups.remove(str(request["group"]), str(request["client_id"]))
        return self._answer("consumerCloseClientC2M", request, SUCCESS)
