"""The TubeMQ master's side of the lab, on a lab broker's wire: client-balance groups and partition metadata.

Loaded with the broker's side by `tubemq_client.service:install`. Requests,
under TubeMQ's RPC names (`TMaster`), each answered with TubeMQ's code in `code`:

- `consumerRegisterC2MV2` {`client_id`, `group`, `topics`, `source_count`,
  `node_id`} -> SUCCESS, or why not (`groups.py`);
- `consumerHeartbeatC2MV2` {`client_id`, `group`, `reported`: [partition
  keys], `topic_meta_info_id`, `lst_assigned_time` (optional: when the client
  last stored metadata, wall-clock ms)} -> SUCCESS or HB_NO_NODE; with
  `topic_meta_info_id`, and if it is not the client's the metadata as below,
  when `groups.heartbeat_meta` says so (a client that stored none for
  `maxMetaForceUpdatePeriodMs`);
- `consumerGetPartMetaInfoC2M` {`client_id`, `group`, `topics`} ->
  `partitions`: {key: subscribable}, `brokers`: {id: [host, port]},
  `topic_meta`: {topic: partition count}, `topic_meta_info_id`: the group's
  metadata as the master holds it (`groups.py`: read from the brokers at the
  group's first query, then once per balance pass);
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
  changes it (and `--config maxMetaForceUpdatePeriodMs=...`, at least 60 000,
  the heartbeat's metadata rule above).

A topic's growth. The chore's pass (`TMaster.balance`) first re-reads every
client-balance group's topic metadata (`processClientBalanceMetaInfo`), then
balances the server-balance groups, reading the partitions that exist now
(`DefaultLoadBalancer.balanceCluster`: `brokerRunManager.getSubBrokerAcceptSubParts`):
partitions nobody holds, new ones included, are handed out at random (`balancer.py`).
So new partitions reach a client-balance group's metadata, and a server-balance
group's consumers, at the master's next pass and not before. For each
server-balance group the pass balanced, the master records `partitions_seen`
(`broker`, `group`) the first time it sees a topic of the group with more
partitions than its last pass for that group saw (a group's first pass is not
a growth: nothing is recorded).

A partition key is `brokerId:topic:partitionId` (`Partition.getPartitionKey`);
a partition is subscribable (TubeMQ's status 1) while its broker serves it,
which the lab reads from the brokers' metadata: every partition with a
leader, keyed by that leader. The master pushes nothing and assigns nothing
to a client-balance group: what a member learns, it asks for.

Departures, stated: TubeMQ runs its master as its own process (with standby
masters); in the lab every broker hosts one, each with its own memory, and a
client uses the first of `masterHostAndPort` that answers. The master's copy of
a group's metadata is each topic's partition count, which TubeMQ's topic
deployment gives (`brokerId:numTopicStores:numPartitions:status` per broker);
the keys are made from it with each partition's leader *now*, and a partition
without a live leader is left out, because a lab partition moves between
brokers where a TubeMQ partition stays on its own (TubeMQ also caches the
status until the next pass). A query's answer carries the whole map every
time (TubeMQ: the list only if the client's `topicMetaInfoId` differs). A
query from a group the master does not know is answered from the brokers'
metadata as it is now, without keeping it (TubeMQ: HB_NO_NODE): so a node
whose master went away and that asks another before its heartbeat has
registered it there again sees a grown topic's count at once. Where the new
partitions come from: the lab grows a topic in ZooKeeper (Kafka's way), and
the master reads its own broker's view of it, at once; in TubeMQ an admin
changes the master's topic deployment (which the client-balance refresh reads),
and the brokers take the change up at their next heartbeat to the master
(`BrokerConfig.heartbeatPeriodMs`, 8 s) and report it back, which is where
the server balance reads its partitions (`BrokerPSInfoHolder`).
"""

from __future__ import annotations

import threading

from lab_cluster.clock import monotonic_ms
from lab_cluster.wire import fields_checked

from ..broker.service import WHERE
from ..codes import HB_NO_NODE, NAMES, SUCCESS
from .balancer import ServerBalancer
from .groups import MAX_META_FORCE_UPDATE_PERIOD_MS, UNDEFINED, GroupTable

SCAN_INTERVAL_S = 1.0  # `HeartbeatManager` checks timeouts every second
#: `consumerBalancePeriodMs` as TubeMQ's shipped conf/master.ini sets it (MasterConfig's default: 60 000)
CONSUMER_BALANCE_PERIOD_MS = 30_000


def partition_key(broker_id: int | str, topic: str, partition: int) -> str:
    """`Partition.getPartitionKey`: `brokerId:topic:partitionId`."""
    return f"{broker_id}:{topic}:{partition}"


class TubeMasterService:
    def __init__(self, broker):
        self.broker = broker
        self.groups = GroupTable(meta_force_update_period_ms=int(
            broker.config.get("maxMetaForceUpdatePeriodMs", MAX_META_FORCE_UPDATE_PERIOD_MS)))
        self.balancer = ServerBalancer()
        self.balance_period_ms = int(broker.config.get("consumerBalancePeriodMs", CONSUMER_BALANCE_PERIOD_MS))
        self._seen: dict[tuple[str, str], int] = {}  # (server-balance group, topic) -> partitions its last pass saw
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
        """`BalancerChore`: sleep a period, then a pass (`TMaster.balance`), again; the first pass is the
        master's startup balance (blocks)."""
        first = True
        while not self._stop.wait(self.balance_period_ms / 1000):
            self.balance_pass(first)
            first = False

    def balance_pass(self, first: bool = False) -> None:
        """One pass: the client-balance groups' metadata read again (`processClientBalanceMetaInfo`), then the
        server-balance groups balanced on the partitions there are now (`processServerBalance`)."""
        refreshed = self.groups.refresh_topic_meta(self.broker.partition_count)
        subscribed = self.balancer.topics()
        counts = {t: self.broker.partition_count(t) for ts in subscribed.values() for t in ts}
        partitions = {group: sorted(self._partitions(topics)) for group, topics in subscribed.items()}
        self._seen = {k: n for k, n in self._seen.items() if k[0] in subscribed}
        balanced = self.balancer.tick(partitions, first=first,
                                      on_balance=lambda group: self._note_seen(group, subscribed[group], counts))
        self.broker.record("tubemq_balance", groups=sorted(partitions), first=first, balanced=balanced,
                           meta_changed=refreshed)

    def _note_seen(self, group: str, topics: set[str], counts: dict[str, int]) -> None:
        """A group this pass balances: `partitions_seen` for each of its topics with more partitions than the
        group's last balanced pass saw (recorded before the plan, so before any consumer hears of it)."""
        for topic in sorted(topics):
            now, before = counts.get(topic, 0), self._seen.get((group, topic))
            if before is not None and now > before:
                self.broker.record("partitions_seen", group=group, topic=topic, partitions=now, before=before)
            if before is None or now > before:
                self._seen[(group, topic)] = now

    def _partitions(self, topics, counts: dict[str, int] | None = None) -> dict[str, bool]:
        """{partition key: subscribable} of these topics: every partition with a live leader (with `counts`,
        {topic: partition count}, only the partitions below each topic's count)."""
        metadata = self.broker.metadata()
        brokers = {str(i) for i in metadata["brokers"]}
        return {partition_key(leader, str(topic), int(p)): True for topic in topics
                for p, leader in metadata["topics"].get(str(topic), {}).items()
                if str(leader) in brokers and (counts is None or int(p) < counts.get(str(topic), 0))}

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
        group, client = str(request["group"]), str(request["client_id"])
        code = self.groups.heartbeat(group, client, [str(k) for k in request.get("reported", [])])
        if code != SUCCESS:
            return self._answer("consumerHeartbeatC2MV2", request, code)
        lst_assigned = request.get("lst_assigned_time")
        meta_id = self.groups.heartbeat_meta(group, client, int(lst_assigned) if lst_assigned is not None else None)
        if meta_id is None:
            return self._answer("consumerHeartbeatC2MV2", request, code)
        body = {"topic_meta_info_id": meta_id}
        if meta_id != int(request.get("topic_meta_info_id", UNDEFINED)):
            body = self._meta_body(group, request.get("topics"))
        return self._answer("consumerHeartbeatC2MV2", request, code, **body)

    def _meta(self, request: dict) -> dict:
        return self._answer("consumerGetPartMetaInfoC2M", request, SUCCESS,
                            **self._meta_body(str(request["group"]), request["topics"]))

    def _meta_body(self, group: str, topics) -> dict:
        """The group's metadata as the master holds it (read from the brokers if it has none yet), as keys."""
        meta = self.groups.topic_meta(group, self.broker.partition_count)
        if meta is None:  # a group the master does not know: the brokers' metadata as it is
            counts = {str(t): self.broker.partition_count(str(t)) for t in topics or ()}
            meta = (UNDEFINED, {t: n for t, n in counts.items() if n > 0})
        meta_id, counts = meta
        return {"partitions": self._partitions(sorted(counts), counts), "brokers": self._brokers(),
                "topic_meta": counts, "topic_meta_info_id": meta_id}

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
