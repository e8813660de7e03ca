"""The TubeMQ server-balance consumer's configuration, with TubeMQ's names and defaults.

| key | default | meaning |
|---|---|---|
| `consumerGroup` | (required) | the consumer group |
| `masterHostAndPort` | (required) | `host:port,...` of masters; in the lab every broker hosts one |
| `consumePosition` | `CONSUMER_FROM_LATEST_OFFSET` | a first registration's start (or `..._FROM_FIRST_OFFSET`) |
| `heartbeatPeriodMs` | 13000 | heartbeat the master (carrying events) and every broker holding its partitions |
| `pushListenerWaitPeriodMs` | 3000 | on a DISCONNECT, how long to wait for a batch still being processed |
| `rpcTimeoutMs` | 15000 | how long a request may take |
| `lab.processing.ms` | 0 | lab only: time the application spends on each message |
| `lab.brokers.via` | (none) | lab only: `host:port=proxy host:port,...`, each broker (and master) through its proxy |

No `sourceCount` and no `nodeId`: the master decides who takes what.

    >>> c = ServerBalanceConfig.from_dict({"consumerGroup": "g", "masterHostAndPort": "127.0.0.1:8715"})
    >>> (c.heartbeat_period_ms, c.push_listener_wait_period_ms, c.read_status)
    (13000, 3000, 1)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lab_cluster.properties import (
    camel_key,
    check_all,
    field_values,
    parse_addresses,
    parse_routes,
    valid_addresses,
    valid_routes,
)

from ..config import CONSUME_POSITIONS, LAB_KEYS


@dataclass(frozen=True)
class ServerBalanceConfig:
    consumer_group: str
    master_host_and_port: str
    consume_position: str = "CONSUMER_FROM_LATEST_OFFSET"
    heartbeat_period_ms: int = 13000
    push_listener_wait_period_ms: int = 3000
    rpc_timeout_ms: int = 15000
    lab_processing_ms: int = 0
    lab_brokers_via: str = ""

    @staticmethod
    def key_of(field_name: str) -> str:
        return camel_key(field_name, LAB_KEYS)

    @classmethod
    def from_dict(cls, props: dict) -> ServerBalanceConfig:
        config = cls(**field_values(cls, props, cls.key_of, required=("consumerGroup", "masterHostAndPort")))
        check_all([
            (valid_routes(config.lab_brokers_via),
             f"lab.brokers.via={config.lab_brokers_via!r} must be host:port=host:port[,...]"),
            (valid_addresses(config.master_host_and_port),
             f"masterHostAndPort={config.master_host_and_port!r} must be host:port[,host:port...]"),
            (config.consume_position in CONSUME_POSITIONS,
             f"consumePosition must be one of {', '.join(CONSUME_POSITIONS)}"),
            (config.heartbeat_period_ms > 0, "heartbeatPeriodMs must be > 0"),
            (config.push_listener_wait_period_ms >= 0, "pushListenerWaitPeriodMs must be >= 0"),
            (config.rpc_timeout_ms > 0, "rpcTimeoutMs must be > 0"),
            (config.lab_processing_ms >= 0, "lab.processing.ms must be >= 0"),
        ])
        return config

    @property
    def masters(self) -> list[tuple[str, int]]:
        return parse_addresses(self.master_host_and_port)

    @property
    def via(self) -> dict[tuple[str, int], tuple[str, int]]:
        return parse_routes(self.lab_brokers_via)

    @property
    def read_status(self) -> int:
        return CONSUME_POSITIONS[self.consume_position]

    def as_record(self) -> dict:
        return {self.key_of(k): v for k, v in asdict(self).items()}
