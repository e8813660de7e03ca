"""The coordinator-era consumer's configuration, with the Java client's names and defaults.

| key | default | meaning |
|---|---|---|
| `group.id` | (required) | the consumer group |
| `bootstrap.servers` | (required) | `host:port,...` of brokers to ask for metadata and the coordinator |
| `client.id` | `consumer-<group>-<n>` | prefix of the member id the coordinator hands out |
| `session.timeout.ms` | 45000 | silent this long, the coordinator evicts the member (Kafka 3.0+; 10000 before) |
| `heartbeat.interval.ms` | 3000 | heartbeat period; keep it under a third of the session timeout |
| `max.poll.interval.ms` | 300000 | the rebalance timeout the member announces in JoinGroup |
| `enable.auto.commit` | true | commit positions periodically, and before every rejoin |
| `auto.commit.interval.ms` | 5000 | ... this often |
| `auto.offset.reset` | latest | where to start with no committed offset: `earliest` or `latest` |
| `partition.assignment.strategy` | range | assignors this member supports, most preferred first (`range,sticky`) |
| `retry.backoff.ms` | 100 | pause before retrying a failed request (coordinator lookup, heartbeat) |
| `request.timeout.ms` | 30000 | how long to wait for an answer (JoinGroup: rebalance timeout + 5 s, as Kafka) |
| `fetch.max.wait.ms` | 500 | how long one Fetch may wait for data |
| `max.poll.records` | 500 | records per Fetch request |
| `lab.processing.ms` | 0 | lab only: time the application spends on each record |
| `lab.coordinator.via` | (none) | lab only, not Kafka: reach the coordinator through this `host:port` (a fault proxy) |

`lab.coordinator.via` exists so that the zombie experiment can cut one
member's link to its coordinator while its links to the partition leaders stay
up: FindCoordinator still answers with the coordinator's own address, and the
member then connects to this address instead (the proxy forwards it there).

Kafka 3.x lists `range` then `cooperative-sticky` as its default strategy; the
lab builds only eager assignors, so its default is `range` alone (the
default of Kafka 2.x). The Java client refuses a heartbeat interval not lower
than the session timeout; so does the lab.

    >>> c = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092"})
    >>> (c.session_timeout_ms, c.heartbeat_interval_ms, c.strategies)
    (45000, 3000, ['range'])
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

from lab_cluster.assignment import ASSIGNORS
from lab_cluster.properties import check_all, field_values, parse_addresses, valid_addresses

_client_numbers = itertools.count(1)


@dataclass(frozen=True)
class ConsumerConfig:
    group_id: str
    bootstrap_servers: str
    client_id: str = ""
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    auto_offset_reset: str = "latest"
    partition_assignment_strategy: str = "range"
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30000
    fetch_max_wait_ms: int = 500
    max_poll_records: int = 500
    lab_processing_ms: int = 0
    lab_coordinator_via: str = ""

    @staticmethod
    def key_of(field_name: str) -> str:
        return field_name.replace("_", ".")

    @classmethod
    def from_dict(cls, props: dict) -> ConsumerConfig:
        config = cls(**field_values(cls, props, cls.key_of, required=("group.id", "bootstrap.servers")))
        config._validate()
        if not config.client_id:
            config = replace(config, client_id=f"consumer-{config.group_id}-{next(_client_numbers)}")
        return config

    @property
    def strategies(self) -> list[str]:
        return [s.strip() for s in self.partition_assignment_strategy.split(",") if s.strip()]

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return parse_addresses(self.bootstrap_servers)

    @property
    def coordinator_via(self) -> tuple[str, int] | None:
        if not self.lab_coordinator_via:
            return None
        host, _, port = self.lab_coordinator_via.rpartition(":")
        return host, int(port)

    def _validate(self) -> None:
        def via_ok():
            try:
                return self.coordinator_via[1] > 0
            except ValueError:
                return False
        checks = [
            (valid_addresses(self.bootstrap_servers),
             f"bootstrap.servers={self.bootstrap_servers!r} must be host:port[,host:port...]"),
            (self.session_timeout_ms > 0, "session.timeout.ms must be > 0"),
            (0 < self.heartbeat_interval_ms < self.session_timeout_ms,
             "heartbeat.interval.ms must be > 0 and lower than session.timeout.ms"),
            (self.max_poll_interval_ms > 0, "max.poll.interval.ms must be > 0"),
            (self.auto_commit_interval_ms > 0, "auto.commit.interval.ms must be > 0"),
            (self.auto_offset_reset in ("earliest", "latest"), "auto.offset.reset must be earliest or latest"),
            (bool(self.strategies) and all(s in ASSIGNORS for s in self.strategies),
             f"partition.assignment.strategy must list assignors among {sorted(ASSIGNORS)}"),
            (self.retry_backoff_ms >= 0, "retry.backoff.ms must be >= 0"),
            (self.request_timeout_ms > 0, "request.timeout.ms must be > 0"),
            (self.fetch_max_wait_ms >= 0, "fetch.max.wait.ms must be >= 0"),
            (self.max_poll_records >= 1, "max.poll.records must be >= 1"),
            (self.lab_processing_ms >= 0, "lab.processing.ms must be >= 0"),
            (not self.lab_coordinator_via or via_ok(), f"lab.coordinator.via={self.lab_coordinator_via!r} must be "
                                                       "host:port"),
        ]
        check_all(checks)

    def as_record(self) -> dict:
        """Kafka-named keys and values, for traces and reports."""
        return {self.key_of(k): v for k, v in asdict(self).items()}
