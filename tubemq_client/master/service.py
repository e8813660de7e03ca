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

And for the server-balance variant, the design client balance replaced
(`balancer.py`, `tubemq_client/server_balance/`):

- `consumerRegisterC2M` {`client_id`, `group`, `topics`} -> SUCCESS and
  `brokers`: the consumer joins the group's balance;
- `consumerHeartbeatC2M` {`client_id`, `group`, `held`: [keys], `done`: the
  rebalance id of the event it finished, or null} -> SUCCESS with its next
  `event` ({`kind`, `partitions`, `rebalance_id`} or null), or HB_NO_NODE;
- a chore runs the balancer every `consumerBalancePeriodMs`, the first a
  period after the master started. The lab's default is 30 000 ms, as TubeMQ's
  shipped `conf/master.ini` sets it (and the seed text says); `MasterConfig`'s
  own default is 60 000. A broker's `--config consumerBalancePeriodMs=...`
  changes it.

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

from lab_cluster.clock import monotonic_ms
from lab_cluster.wire import fields_checked

from ..broker.service import WHERE
from ..codes import HB_NO_NODE, NAMES, SUCCESS
from .balancer import ServerBalancer
from .groups import GroupTable

SCAN_INTERVAL_S = 1.0  # `HeartbeatManager` checks timeouts every second
#: `consumerBalancePeriodMs` as TubeMQ's shipped conf/master.ini sets it (MasterConfig's default: 60 000)
CONSUMER_BALANCE_PERIOD_MS = 30_000


def partition_key(broker_id: int | str, topic: str, partition: int) -> str:
    """`Partition.getPartitionKey`: `brokerId:topic:partitionId`."""
    return f"{broker_id}:{topic}:{partition}"


class TubeMasterService:
    def __init__(self, broker):
        self.broker = broker
        self.groups = GroupTable()
        self.balancer = ServerBalancer()
        self.balance_period_ms = int(broker.config.get("consumerBalancePeriodMs", CONSUMER_BALANCE_PERIOD_MS))
        self._stop = threading.Event()
        for name, handler in (("consumerRegisterC2MV2", self._register), ("consumerHeartbeatC2MV2", self._heartbeat),
                              ("consumerGetPartMetaInfoC2M", self._meta), ("consumerCloseClientC2M", self._close),
                              ("consumerRegisterC2M", self._register_server_balance),
                              ("consumerHeartbeatC2M", self._heartbeat_server_balance)):
            broker.server.add_api(name, (1,), fields_checked(name, handler, WHERE))
        threading.Thread(target=self._expire_loop, name="tubemq-master-timeouts", daemon=True).start()
        threading.Thread(target=self._balancer_chore, name="tubemq-master-balancer", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _expire_loop(self) -> None:
        while not self._stop.wait(SCAN_INTERVAL_S):
            for node in self.groups.expire():
                self.broker.record("tubemq_consumer_expired", node=node)
            for group, consumer in self.balancer.expire(monotonic_ms()):
                self.broker.record("tubemq_consumer_expired", node=f"{group}#{consumer}")

    def _balancer_chore(self) -> None:
        """`BalancerChore`: sleep a period, balance every server-balance group, again; the first tick is the
        master's startup balance (blocks)."""
        first = True
        while not self._stop.wait(self.balance_period_ms / 1000):
            partitions = {group: sorted(self._partitions(topics)) for group, topics in self.balancer.topics().items()}
            self.balancer.tick(partitions, first=first)
            self.broker.record("tubemq_balance", groups=sorted(partitions), first=first)
            first = False

    def _partitions(self, topics) -> dict[str, bool]:
        """{partition key: subscribable} of these topics: every partition with a live leader."""
        metadata = self.broker.metadata()
        brokers = {str(i) for i in metadata["brokers"]}
        return {partition_key(leader, str(topic), int(p)): True for topic in topics
                for p, leader in metadata["topics"].get(str(topic), {}).items() if str(leader) in brokers}

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
        return self._answer("consumerGetPartMetaInfoC2M", request, SUCCESS,
                            partitions=self._partitions(request["topics"]), brokers=self._brokers())

    def _brokers(self) -> dict[str, list]:
        return {str(i): [b["host"], b["port"]] for i, b in self.broker.metadata()["brokers"].items()}

    def _register_server_balance(self, request: dict) -> dict:
        self.balancer.register(str(request["group"]), str(request["client_id"]), monotonic_ms(),
                               topics=[str(t) for t in request["topics"]])
        return self._answer("consumerRegisterC2M", request, SUCCESS, brokers=self._brokers())

    def _heartbeat_server_balance(self, request: dict) -> dict:
        done = request.get("done")
        try:
            event = self.balancer.heartbeat(str(request["group"]), str(request["client_id"]),
                                            held=[str(k) for k in request.get("held", [])], now_ms=monotonic_ms(),
                                            done=int(done) if done is not None else None)
        except KeyError:
            return self._answer("consumerHeartbeatC2M", request, HB_NO_NODE)
        body = {"event": None if event is None else {"kind": event.kind, "partitions": list(event.partitions),
                                                      "rebalance_id": event.rebalance_id},
                "brokers": self._brokers()}
        return self._answer("consumerHeartbeatC2M", request, SUCCESS, **body)

    def _close(self, request: dict) -> dict:
        self.groups.remove(str(request["group"]), str(request["client_id"]))
        self.balancer.remove(str(request["group"]), str(request["client_id"]))
        return self._answer("consumerCloseClientC2M", request, SUCCESS)
