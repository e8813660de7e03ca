"""The TubeMQ server-balance consumer's configuration, with TubeMQ's names and defaults.

| key | default | meaning |
|---|---|---|
| `consumerGroup` | (required) | the consumer group |
| `masterHostAndPort` | (required) | `host:port,...` of masters; in the lab every broker hosts one |
| `consumePosition` | `CONSUMER_FROM_LATEST_OFFSET` | a first registration's start (or `..._FROM_FIRST_OFFSET`) |
| `heartbeatPeriodMs` | 13000 | heartbeat the master (carrying events) and every broker holding its partitions |
| `pushListenerWaitPeriodMs` | 3000 | on a DISCONNECT, how long to wait for a batch still being processed |
| `rpcTimeoutMs` | 10000 | how long a request may take (`RpcConstants.CFG_RPC_READ_TIMEOUT_DEFAULT_MS`) |
| `lab.processing.ms` | 0 | lab only: time the application spends on each message |
| `lab.brokers.via` | (none) | lab only: `host:port=proxy host:port,...`, each broker (and master) through its proxy |

No `sourceCount` and no `nodeId`: the master decides who takes what.

    >>> c = ServerBalanceConfig.from_dict({"consumerGroup": "g", "masterHostAndPort": "127.0.0.1:8715"})
    >>> (c.heartbeat_period_ms, c.push_listener_wait_period_ms, c.read_status)
    (13000, 3000, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from lab_cluster.properties import check_all, field_values

from ..config import TubeClientSettings


@dataclass(frozen=True)
class ServerBalanceConfig(TubeClientSettings):
    consumer_group: str
    master_host_and_port: str
    consume_position: str = "CONSUMER_FROM_LATEST_OFFSET"
    heartbeat_period_ms: int = 13000
    push_listener_wait_period_ms: int = 3000
    rpc_timeout_ms: int = 10000
    lab_processing_ms: int = 0
    lab_brokers_via: str = ""

    @classmethod
    def from_dict(cls, props: dict) -> ServerBalanceConfig:
        config = cls(**field_values(cls, props, cls.key_of, required=("consumerGroup", "masterHostAndPort")))
        check_all(config.shared_checks() + [
            (config.push_listener_wait_period_ms >= 0, "pushListenerWaitPeriodMs must be >= 0")])
        return config
