"""The trace vocabulary: every kind of event an actor of the lab writes, and the fields it always carries.

Traces are the lab's only measurement (`trace.py` writes them, the metrics
read them with Spark SQL), so this is the contract between every writer (the
families' consumers, the brokers and their coordinators, the producer, the
trial runner, the fault injector) and `experiments/metrics.py`. One concept has
one name here: a consumer of either family starts with `consumer_start` and
reports its state with `consumer_state`; `rebalance_begin`'s `attempt` is the
try within one rebalance (Kafka 0.8's 1..`rebalance.max.retries`) and
`rebalance` the consumer's running count of rebalances.

`TraceRecorder.record` refuses a kind that is not listed here, so a writer
cannot invent one; `problems(event)` says what a written event lacks, and a
test reads every event of real trials of each experiment through it. A new
family adds the kinds its protocol needs (with their fields) to this file.

    >>> problems({"kind": "assigned", "member": "c1", "partitions": [["t", 0]]})
    []
    >>> problems({"kind": "assigned", "member": "c1"})
    ['assigned lacks partitions']
    >>> problems({"kind": "gossip"})
    ['gossip is not an event kind of the lab (lab_cluster/events.py)']
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class EventKind:
    name: str
    required: tuple[str, ...]  # fields every event of this kind carries (a column or a key of `fields`)
    about: str


def _kinds(*kinds: EventKind) -> dict[str, EventKind]:
    return {k.name: k for k in kinds}


KINDS: dict[str, EventKind] = _kinds(
    # -- every trace ----------------------------------------------------------------------------------
    EventKind("trace_open", ("pid",), "the first line of every trace (`trace.py`)"),
    EventKind("trace_close", ("events",), "the last line of a trace that was closed, with its event count"),
    # -- a consumer of any family ----------------------------------------------------------------------
    EventKind("consumer_start", ("member", "config", "topics"),
              "a consumer starts, with its whole config: marks the actor as a consumer"),
    EventKind("consumer_state", ("member", "state"), "the consumer's state changed (its family's state enum)"),
    EventKind("consumer_stop", ("member",), "the consumer stopped"),
    EventKind("consumer_failed", ("member", "reason"), "the consumer stopped on a fatal error"),
    EventKind("rebalance_begin", ("member",), "a rebalance (or one attempt of it, `attempt`) begins"),
    EventKind("rebalance_end", ("member", "outcome"), "it ended: `ok` or why not"),
    EventKind("rebalance_failed", ("member", "attempts"), "the consumer gave up after its last attempt"),
    EventKind("revoked", ("member", "partitions"), "the consumer let go of these partitions"),
    EventKind("assigned", ("member", "partitions"),
              "the consumer's new assignment; where each member computes its own (`Family.computes`), `view`: "
              "the id of the membership view it came from (the ZooKeeper era: the ids node's `cversion`)"),
    EventKind("processed", ("topic", "partition", "offset"), "the application processed one record"),
    EventKind("commit", ("member", "topic", "partition", "offset", "outcome"),
              "an offset commit and its outcome: `accepted`, `fenced` or an error"),
    EventKind("commit_error", ("member", "error"), "a commit could not be made at all"),
    EventKind("partitions_seen", ("topic", "partitions", "before"),
              "an actor learnt that a topic it serves or subscribes to has more partitions (`partitions`) than it "
              "knew (`before`), the way its design learns it: a consumer (`member`), or the coordinator or master "
              "that assigns for its group (`broker`)"),
    # -- the ZooKeeper era (legacy_zk) -----------------------------------------------------------------
    EventKind("zk_read", ("op", "path"), "a read request to ZooKeeper (`zkclient.py: TracedZk`)"),
    EventKind("zk_write", ("op", "path"), "a write request to ZooKeeper"),
    EventKind("zk_retry", ("op", "path", "error"), "a request retried after a lost connection"),
    EventKind("zk_watch_fired", ("path", "event_type"), "a watch notification reached the consumer"),
    EventKind("zk_watch_unheard", ("member", "path"),
              "a watch the consumer's own close triggers and it will not hear (counted by the cross-check)"),
    EventKind("zk_rewatched", ("paths", "moved"), "zkclient re-armed its watches after a reconnect"),
    EventKind("zk_event_error", ("event", "error"), "a listener raised while handling a watch event"),
    EventKind("zk_session", ("member", "zk_state"), "the ZooKeeper connection's state changed"),
    EventKind("session_expired", ("member",), "the ZooKeeper session expired"),
    EventKind("session_reestablished", ("member",), "registered again on a new session (`handleNewSession`)"),
    EventKind("registration_conflict", ("path", "backoff_ms"), "the ids node was still there, a dead session's"),
    EventKind("view", ("members", "cversion"), "the membership a rebalance attempt read (with its `cversion`)"),
    EventKind("owner_conflict", ("member", "topic", "partition"), "an owner znode already held by another"),
    EventKind("fetchers_stopped", ("member", "partitions"), "the fetchers stopped (closeFetchers)"),
    EventKind("no_brokers", ("member",), "a rebalance found no broker and kept the assignment"),
    EventKind("rebalance_error", ("member", "error"), "the rebalance loop raised"),
    EventKind("stop_incomplete", ("member", "error"), "a part of the shutdown did not finish"),
    # -- the coordinator era (modern_coord), client side -----------------------------------------------
    EventKind("find_coordinator", ("error",), "a FindCoordinator answer"),
    EventKind("coordinator_lost", ("reason",), "the consumer marked its coordinator unknown"),
    EventKind("join", ("member", "generation", "error"), "a JoinGroup answer"),
    EventKind("sync", ("member", "generation", "error"), "a SyncGroup answer"),
    EventKind("heartbeat", ("member", "generation", "error"), "a Heartbeat answer"),
    EventKind("leave", ("member", "error"), "a LeaveGroup answer"),
    EventKind("leader_assignment", ("member", "generation", "assignment"), "the leader's computed assignment"),
    EventKind("assignor_failed", ("member", "generation", "protocol", "error"),
              "the group's assignor raised (or returned no assignment): no SyncGroup from the leader, a rejoin"),
    EventKind("generation_reset", ("member", "error"), "member id and generation reset after an error"),
    EventKind("positions_unknown", ("member", "partitions"), "committed offsets could not be fetched yet"),
    EventKind("offset_reset", ("topic", "partition", "position", "offset", "policy"),
              "a position past the leader's log reset by `auto.offset.reset` (OFFSET_OUT_OF_RANGE)"),
    EventKind("poll_timeout", ("member",), "`max.poll.interval.ms` passed between two polls"),
    # -- brokers, coordinators, producer ---------------------------------------------------------------
    EventKind("broker_registered", ("broker", "port"), "a broker registered in /brokers/ids"),
    EventKind("broker_stopped", ("broker",), "a broker stopped"),
    EventKind("controller_elected", ("broker", "controller_epoch"), "a broker became the controller"),
    EventKind("leader_elected", ("broker", "topic", "partition", "leader"), "the controller chose a leader"),
    EventKind("leader_seen", ("broker", "topic", "partition", "leader"), "a broker learnt a partition's leader"),
    EventKind("plugin_stop_failed", ("broker", "plugin", "error"),
              "a broker plug-in's stop raised; the broker went on stopping (its registration still goes)"),
    EventKind("coordinator_request", ("broker", "api", "group"), "a group API request reached a coordinator"),
    EventKind("kafka_request", ("broker", "api", "version", "client", "error"),
              "a request on the broker's Kafka listener was answered (`error`: the first error code in the answer)"),
    EventKind("kafka_connection_closed", ("broker", "peer", "reason"),
              "the Kafka listener closed a connection: an API or version it does not serve, or a malformed frame"),
    EventKind("kafka_record_refused", ("broker", "topic", "partition", "reason"),
              "a produced record the lab's logs cannot hold as it is (a key, headers, a null or non-UTF-8 value)"),
    EventKind("group_state", ("broker", "group", "from", "to"), "a group's state changed on its coordinator"),
    EventKind("member_added", ("broker", "group", "member"), "the coordinator added a member"),
    EventKind("member_removed", ("broker", "group", "member", "reason"), "the coordinator removed a member"),
    EventKind("member_expired", ("broker", "group", "member"), "a member's session expired on the coordinator"),
    EventKind("member_replaced", ("broker", "group", "member", "replaced", "group_instance_id"),
              "a static member restarted: its group.instance.id passed from the `replaced` member id to `member`"),
    EventKind("join_postponed", ("broker", "group"),
              "a join completed with nobody rejoined (only silent static members left): it waits again"),
    EventKind("group_epoch", ("broker", "group", "generation"),
              "a KIP-848 group's epoch went up (`generation`: the group epoch), and why"),
    EventKind("target_assignment", ("broker", "group", "generation", "target"),
              "a KIP-848 coordinator computed every member's target assignment for a group epoch"),
    EventKind("member_epoch", ("broker", "group", "member", "generation", "state"),
              "a KIP-848 member's epoch or reconciliation state changed on its coordinator"),
    EventKind("offsets_loaded", ("broker", "offsets_partition"), "a coordinator loaded an offsets partition"),
    EventKind("offsets_topic_created", ("broker", "partitions"), "`__consumer_offsets` was created"),
    EventKind("rocketmq_request", ("broker", "api", "code"),
              "a RocketMQ client request reached a broker's consumer manager (`rocketmq_client/broker/service.py`)"),
    EventKind("consumer_ids_changed", ("broker", "group", "channels"),
              "a RocketMQ broker's CHANGE: NOTIFY_CONSUMER_IDS_CHANGED pushed to these channels"),
    EventKind("channel_expired", ("broker", "channel"),
              "a RocketMQ broker's scan dropped a channel silent for 120 s (and told nobody)"),
    # -- RocketMQ's client (rocketmq_client) -------------------------------------------------------------
    EventKind("notified", ("member", "broker"),
              "a RocketMQ consumer received NOTIFY_CONSUMER_IDS_CHANGED from a broker (it rebalances at once)"),
    EventKind("rocketmq_request_failed", ("member", "api", "broker", "error"),
              "a RocketMQ consumer's request to a broker failed (RocketMQ logs it and goes on)"),
    # -- TubeMQ's client balance (tubemq_client) ---------------------------------------------------------
    EventKind("tubemq_master_register", ("member", "attempt", "code"),
              "a TubeMQ node's registration with the master (up to 5 tries) and its answer"),
    EventKind("tubemq_connect", ("member", "key", "attempt", "code"),
              "a TubeMQ node's registration of one partition at its broker (`connect2Partition`) and its answer"),
    EventKind("tubemq_meta_failed", ("member", "error"),
              "a TubeMQ node could not query its partitions from the master: it skips this balance round, as "
              "TubeMQ's ClientBalanceConsumerExample does"),
    EventKind("tubemq_request", ("broker", "api", "code"),
              "a TubeMQ request reached a broker or the master it hosts (`tubemq_client/*/service.py`)"),
    EventKind("tubemq_released", ("broker", "group", "topic", "partition"),
              "a TubeMQ broker released a registration silent for 30 s (its in-flight batch rolled back)"),
    EventKind("tubemq_consumer_expired", ("broker", "node"), "a TubeMQ master removed a node silent for 30 s"),
    EventKind("tubemq_balance", ("broker", "groups", "first"),
              "a TubeMQ master's balancer tick over its server-balance groups (`tubemq_client/master/balancer.py`)"),
    EventKind("tubemq_event", ("member", "event", "partitions", "rebalance_id"),
              "a TubeMQ server-balance consumer did an event its master handed it (connect or disconnect)"),
    EventKind("produced", ("topic", "partition", "offset"), "the producer wrote one record"),
    EventKind("producer_stopped", ("produced",), "the producer stopped, with its count"),
    EventKind("produce_failed", ("topic", "partition", "error"),
              "a real system's broker refused or lost a send, not resent (`real_systems/kafka_producer.py`)"),
    # -- the trial runner and the fault injector -------------------------------------------------------
    EventKind("setup", ("topic", "partitions", "group", "consumers"), "the trial's set-up, with its spec"),
    EventKind("member_started", ("member", "pid"), "the runner started a consumer process"),
    EventKind("hosts_placed", ("hosts",), "the group's hosts started as tasks of a Spark barrier stage, and where "
              "each ran (`experiments/engine/host_tasks.py`)"),
    EventKind("membership", ("member", "action"), "the runner added or removed a member"),
    EventKind("topic_grown", ("topic", "before", "partitions"),
              "the runner added partitions to the topic (`grow`): `before` to `partitions`, as its system's admin "
              "tool does it"),
    EventKind("change", ("index", "change", "members_before", "members_after"), "a step of the scenario begins"),
    EventKind("converged", ("index", "members"), "the runner saw the group converged after a change"),
    EventKind("not_converged", ("index",), "it did not converge within the limit"),
    EventKind("zk_server_counters", ("index", "at", "counters"), "every ZooKeeper server's `mntr` around a change"),
    EventKind("end", (), "the scenario ended"),
    EventKind("fault", ("action", "target"), "a fault was injected or lifted (`faults.py`)"),
    # -- every consumer host -----------------------------------------------------------------------------
    EventKind("host_health", ("host", "pid", "window_s", "late_ms_max", "cpu_share", "session_timeout_ms"),
              "a consumer host measured itself over one window: how late its threads woke, its CPU, its "
              "ZooKeeper clients' pings (`host_health.py`)"),
)


def problems(event: dict) -> list[str]:
    """What `event` (a trace line, parsed) lacks to be what its kind promises; empty if nothing."""
    kind = KINDS.get(event.get("kind"))
    if kind is None:
        return [f"{event.get('kind')} is not an event kind of the lab (lab_cluster/events.py)"]
    fields = json.loads(event["fields"]) if isinstance(event.get("fields"), str) else {}
    missing = [f for f in kind.required if f not in event and f not in fields]
    return [f"{kind.name} lacks {', '.join(missing)}"] if missing else []
