"""The TubeMQ client-balance consumer's configuration, with TubeMQ's names and defaults.

| key | default | meaning |
|---|---|---|
| `consumerGroup` | (required) | the consumer group |
| `masterHostAndPort` | (required) | `host:port,...` of masters; in the lab every broker hosts one |
| `sourceCount` | (required) | how many nodes the group has (`start(topics, sourceCount, nodeId)`) |
| `nodeId` | from the actor | this node's id; `start` refuses one outside `[0, sourceCount)`; lab: `c<k>` is k - 1 |
| `consumePosition` | `CONSUMER_FROM_LATEST_OFFSET` | a first registration's start (or `..._FROM_FIRST_OFFSET`) |
| `heartbeatPeriodMs` | 13000 | heartbeat the master, and every broker holding its partitions, this often |
| `partMetaInfoCheckPeriodMs` | 10000 | ask the master for partition metadata at most this often (and balance) |
| `rpcTimeoutMs` | 10000 | how long a request may take (`RpcConstants.CFG_RPC_READ_TIMEOUT_DEFAULT_MS`) |
| `lab.processing.ms` | 0 | lab only: time the application spends on each message |
| `lab.brokers.via` | (none) | lab only: `host:port=proxy host:port,...`, each broker (and master) through its proxy |

The defaults are `TClientConstants`' and `ConsumerConfig`'s. The balancing
itself is the application's, as in TubeMQ's `ClientBalanceConsumerExample`
(`consumer.py: BalancingNode`).

    >>> c = ConsumerConfig.from_dict({"consumerGroup": "g", "masterHostAndPort": "127.0.0.1:8715", "sourceCount": "3",
    ...                               "nodeId": "2"})
    >>> (c.heartbeat_period_ms, c.part_meta_info_check_period_ms, c.read_status)
    (13000, 10000, 1)
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

from .broker.offsets import READ_FROM_MAX, READ_NORMAL

CONSUME_POSITIONS = {"CONSUMER_FROM_LATEST_OFFSET": READ_FROM_MAX, "CONSUMER_FROM_FIRST_OFFSET": READ_NORMAL}
LAB_KEYS = {"lab_processing_ms": "lab.processing.ms", "lab_brokers_via": "lab.brokers.via"}


class TubeClientSettings:
    """What both TubeMQ consumers' configs share (this one and `server_balance/config.py`): key names, the
    addresses, the first registration's `readStatus`, and the checks of the keys they have in common."""

    @staticmethod
    def key_of(field_name: str) -> str:
        return camel_key(field_name, LAB_KEYS)

    @property
    def masters(self) -> list[tuple[str, int]]:
        return parse_addresses(self.master_host_and_port)

    @property
    def via(self) -> dict[tuple[str, int], tuple[str, int]]:
        """`lab.brokers.via` as {address: proxy address}."""
        return parse_routes(self.lab_brokers_via)

    @property
    def read_status(self) -> int:
        """The `readStatus` of a first registration (`CONSUME_MODEL_READ_FROM_MAX` from the latest offset)."""
        return CONSUME_POSITIONS[self.consume_position]

    def shared_checks(self) -> list[tuple[bool, str]]:
        return [
            (valid_routes(self.lab_brokers_via),
             f"lab.brokers.via={self.lab_brokers_via!r} must be host:port=host:port[,...]"),
            (valid_addresses(self.master_host_and_port),
             f"masterHostAndPort={self.master_host_and_port!r} must be host:port[,host:port...]"),
            (self.consume_position in CONSUME_POSITIONS,
             f"consumePosition must be one of {', '.join(CONSUME_POSITIONS)}"),
            (self.heartbeat_period_ms > 0, "heartbeatPeriodMs must be > 0"),
            (self.rpc_timeout_ms > 0, "rpcTimeoutMs must be > 0"),
            (self.lab_processing_ms >= 0, "lab.processing.ms must be >= 0"),
        ]

    def as_record(self) -> dict:
        return {self.key_of(k): v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class ConsumerConfig(TubeClientSettings):
    consumer_group: str
    master_host_and_port: str
    source_count: int
    node_id: int = -2  # TubeMQ's META_VALUE_UNDEFINED: not set, which `start` refuses like any id out of range
    consume_position: str = "CONSUMER_FROM_LATEST_OFFSET"
    heartbeat_period_ms: int = 13000
    part_meta_info_check_period_ms: int = 10000
    rpc_timeout_ms: int = 10000
    lab_processing_ms: int = 0
    lab_brokers_via: str = ""

    @classmethod
    def from_dict(cls, props: dict) -> ConsumerConfig:
        config = cls(**field_values(cls, props, cls.key_of,
                                    required=("consumerGroup", "masterHostAndPort", "sourceCount")))
        check_all(config.shared_checks() + [
            (config.source_count > 0, "sourceCount must be > 0 (a client-balance group's node count)"),
            (config.part_meta_info_check_period_ms > 0, "partMetaInfoCheckPeriodMs must be > 0"),
        ])
        return config
