"""The ZooKeeper-era consumer's configuration, with Kafka 0.8's names and defaults.

Kafka 0.8's `ConsumerConfig` keys the lab implements, and the lab's own:

| key | default | meaning |
|---|---|---|
| `group.id` | (required) | the consumer group |
| `consumer.id` | generated | `<group>_<host>-<millis>-<8 hex>` when not given |
| `zookeeper.connect` | (required) | ZooKeeper connect string (with chroot if any) |
| `zookeeper.session.timeout.ms` | 6000 | the consumer's ZooKeeper session timeout |
| `zookeeper.connection.timeout.ms` | the session timeout | how long to wait for the first connection |
| `zookeeper.sync.time.ms` | 2000 | in 0.8.2.2's consumer, only the default of `rebalance.backoff.ms` |
| `rebalance.max.retries` | 4 | attempts before `ConsumerRebalanceFailedException` |
| `rebalance.backoff.ms` | `zookeeper.sync.time.ms` | pause between attempts |
| `auto.commit.enable` | true | commit offsets to ZooKeeper periodically |
| `auto.commit.interval.ms` | 60000 | ... this often |
| `auto.offset.reset` | largest | where to start with no committed offset: `smallest` or `largest` |
| `partition.assignment.strategy` | range | `range` or `roundrobin` (`partition_assignor.py`) |
| `watch_broker_ids` | always | lab: `always` (the mission) or `when_empty` (0.8.2.2's code, see below) |
| `streams` | 1 | lab: consumer threads (streams) per consumer, each a `<consumerId>-<n>` thread id |
| `fetch.max.records` | 500 | lab: records per Fetch request |
| `fetch.wait.max.ms` | 100 | Kafka 0.8's name: how long a Fetch waits for new data |
| `refresh.leader.backoff.ms` | 200 | between two tries of the leader finder after a fetch error |
| `queued.max.message.chunks` | 2 | chunks a stream's queue holds before its fetchers wait (`streams.py`) |
| `lab.processing.ms` | 0 | lab: time the application spends on each record (a zombie wakes up behind) |

Two defaults are derived, as 0.8.2.2 derives them (ConsumerConfig L138, ZkUtils
L746): `rebalance.backoff.ms` is `zookeeper.sync.time.ms` (a search of the
whole 0.8.2.2 tree finds no other use of `zookeeper.sync.time.ms` in the
consumer, nor in the broker: despite its name it is not about follower lag
here), and `zookeeper.connection.timeout.ms` is the session timeout.
An unknown `partition.assignment.strategy` is refused with a clear error (0.8
silently used range for any other string).

`watch_broker_ids`: the mission describes every consumer watching
`/brokers/ids`; Kafka 0.8.2.2's code subscribed to it only when a rebalance
found no broker at all. The lab does the first by default and the second on
request, and records which.

    >>> c = ConsumerConfig.from_dict({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    >>> (c.rebalance_max_retries, c.rebalance_backoff_ms, c.zookeeper_session_timeout_ms)
    (4, 2000, 6000)
    >>> c = ConsumerConfig.from_dict({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181",
    ...                               "zookeeper.sync.time.ms": 500, "zookeeper.session.timeout.ms": 9000})
    >>> (c.rebalance_backoff_ms, c.zookeeper_connection_timeout_ms)
    (500, 9000)
"""

from __future__ import annotations

import secrets
import socket
import time
from dataclasses import asdict, dataclass

from lab_cluster.properties import check_all, field_values

from .partition_assignor import ASSIGNORS


@dataclass(frozen=True)
class ConsumerConfig:
    group_id: str
    zookeeper_connect: str
    consumer_id: str = ""
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    zookeeper_sync_time_ms: int = 2000
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60000
    auto_offset_reset: str = "largest"
    partition_assignment_strategy: str = "range"
    watch_broker_ids: str = "always"
    streams: int = 1
    fetch_max_records: int = 500
    lab_processing_ms: int = 0
    fetch_wait_max_ms: int = 100
    refresh_leader_backoff_ms: int = 200
    queued_max_message_chunks: int = 2

    @staticmethod
    def key_of(field_name: str) -> str:
        """Kafka's dotted key for a field (the lab's own keys keep their names)."""
        return field_name if field_name in ("watch_broker_ids", "streams") else field_name.replace("_", ".")

    @classmethod
    def from_dict(cls, props: dict) -> ConsumerConfig:
        values = field_values(cls, props, cls.key_of, required=("group.id", "zookeeper.connect"))
        # 0.8.2.2's derived defaults
        values.setdefault("rebalance_backoff_ms", values.get("zookeeper_sync_time_ms", cls.zookeeper_sync_time_ms))
        values.setdefault("zookeeper_connection_timeout_ms",
                          values.get("zookeeper_session_timeout_ms", cls.zookeeper_session_timeout_ms))
        config = cls(**values)
        config._validate()
        if not config.consumer_id:
            config = _with(config, consumer_id=new_consumer_id(config.group_id))
        return config

    def _validate(self) -> None:
        checks = [
            (self.zookeeper_session_timeout_ms > 0, "zookeeper.session.timeout.ms must be > 0"),
            (self.zookeeper_connection_timeout_ms > 0, "zookeeper.connection.timeout.ms must be > 0"),
            (self.rebalance_max_retries >= 1, "rebalance.max.retries must be >= 1"),
            (self.rebalance_backoff_ms >= 0, "rebalance.backoff.ms must be >= 0"),
            (self.auto_commit_interval_ms > 0, "auto.commit.interval.ms must be > 0"),
            (self.auto_offset_reset in ("smallest", "largest"), "auto.offset.reset must be smallest or largest"),
            (self.partition_assignment_strategy in ASSIGNORS,
             f"partition.assignment.strategy must be {' or '.join(ASSIGNORS)}"),
            (self.watch_broker_ids in ("always", "when_empty"), "watch_broker_ids must be always or when_empty"),
            (self.streams >= 1, "streams must be >= 1"),
            (self.fetch_max_records >= 1, "fetch.max.records must be >= 1"),
            (self.lab_processing_ms >= 0, "lab.processing.ms must be >= 0"),
            (self.fetch_wait_max_ms >= 0, "fetch.wait.max.ms must be >= 0"),
            (self.refresh_leader_backoff_ms >= 0, "refresh.leader.backoff.ms must be >= 0"),
            (self.queued_max_message_chunks >= 1, "queued.max.message.chunks must be >= 1"),
        ]
        check_all(checks)

    def as_record(self) -> dict:
        """Kafka-named keys and values, for traces and reports."""
        return {self.key_of(k): v for k, v in asdict(self).items()}


def _with(config: ConsumerConfig, **changes) -> ConsumerConfig:
    from dataclasses import replace

    return replace(config, **changes)


def new_consumer_id(group: str) -> str:
    """Kafka 0.8's consumer id: `<group>_<hostname>-<currentTimeMillis>-<8 hex of a random UUID>`."""
    host = socket.gethostname() or "localhost"
    return f"{group}_{host}-{time.time_ns() // 1_000_000}-{secrets.token_hex(4)}"

