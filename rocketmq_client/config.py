"""The RocketMQ push consumer's configuration, with RocketMQ 4.9.8's names and defaults.

| key | default | meaning |
|---|---|---|
| `consumerGroup` | (required) | the consumer group |
| `namesrvAddr` | (required) | lab: `host:port,...` of brokers to ask for routes (see below) |
| `instanceName` | the actor | the client id is `clientIP@instanceName` |
| `clientIP` | `127.0.0.1` | |
| `consumeFromWhere` | `CONSUME_FROM_LAST_OFFSET` | where a queue with no stored offset starts |
| `allocateMessageQueueStrategy` | `AllocateMessageQueueAveragely` | or `AllocateMessageQueueAveragelyByCircle` |
| `messageListener` | `concurrently` | `orderly`: a `MessageListenerOrderly` (queues locked at the broker) |
| `heartbeatBrokerInterval` | 30000 | heartbeat every broker this often |
| `pollNameServerInterval` | 30000 | refresh the topic's route this often (new queues wait for a rebalance) |
| `persistConsumerOffsetInterval` | 5000 | send every owned queue's offset to its broker this often |
| `rocketmq.client.rebalance.waitInterval` | 20000 | rebalance this often (and at once on a push) |
| `pullBatchSize` | 32 | messages per pull |
| `mqClientApiTimeout` | 3000 | how long a request to a broker may take |
| `lab.processing.ms` | 0 | lab only: time the application spends on each message |
| `lab.brokers.via` | (none) | lab only: `broker host:port=proxy host:port,...`, each broker through its proxy |

The keys are the fields of RocketMQ's `ClientConfig` and `DefaultMQPushConsumer`
(the wait interval is a system property of `RebalanceService`; the listener is
the interface the application's listener implements).

`lab.brokers.via` exists so that the zombie experiment can cut one consumer
off every broker (a RocketMQ client has one channel per broker, for
membership and messages alike) while the routes still name the brokers'
own addresses.

Departure, stated: the lab has no name server. `namesrvAddr` lists brokers,
and a route is what a broker's `Metadata` says: every partition of the topic
is a queue ``(topic, "broker-<leader id>", partition)`` of the broker that
leads it (RocketMQ numbers queues 0..n-1 on each broker; the lab keeps the
partition's number, so a queue maps to one partition).

    >>> c = ClientConfig.from_dict({"consumerGroup": "g", "namesrvAddr": "127.0.0.1:9876", "instanceName": "c1"})
    >>> (c.client_id, c.heartbeat_broker_interval, c.rebalance_wait_interval)
    ('127.0.0.1@c1', 30000, 20000)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from lab_cluster.assignment.rocketmq import averagely, averagely_by_circle
from lab_cluster.properties import (
    camel_key,
    check_all,
    field_values,
    parse_addresses,
    parse_routes,
    valid_addresses,
    valid_routes,
)

from .rebalance import CONSUME_FROM_FIRST_OFFSET, CONSUME_FROM_LAST_OFFSET

#: `allocateMessageQueueStrategy` names -> the shared strategies (`lab_cluster/assignment/rocketmq.py`)
ALLOCATE_STRATEGIES = {"AllocateMessageQueueAveragely": averagely,
                       "AllocateMessageQueueAveragelyByCircle": averagely_by_circle}
_KEYS = {"rebalance_wait_interval": "rocketmq.client.rebalance.waitInterval", "lab_processing_ms": "lab.processing.ms",
         "client_ip": "clientIP", "lab_brokers_via": "lab.brokers.via"}


@dataclass(frozen=True)
class ClientConfig:
    consumer_group: str
    namesrv_addr: str
    instance_name: str = ""
    client_ip: str = "127.0.0.1"
    consume_from_where: str = CONSUME_FROM_LAST_OFFSET
    allocate_message_queue_strategy: str = "AllocateMessageQueueAveragely"
    message_listener: str = "concurrently"
    heartbeat_broker_interval: int = 30000
    poll_name_server_interval: int = 30000
    persist_consumer_offset_interval: int = 5000
    rebalance_wait_interval: int = 20000
    pull_batch_size: int = 32
    mq_client_api_timeout: int = 3000
    lab_processing_ms: int = 0
    lab_brokers_via: str = ""

    @staticmethod
    def key_of(field_name: str) -> str:
        """RocketMQ's camelCase name of a field (`heartbeat_broker_interval` -> `heartbeatBrokerInterval`)."""
        return camel_key(field_name, _KEYS)

    @classmethod
    def from_dict(cls, props: dict) -> ClientConfig:
        config = cls(**field_values(cls, props, cls.key_of, required=("consumerGroup", "namesrvAddr")))
        config._validate()
        return config

    @property
    def client_id(self) -> str:
        """`buildMQClientId`: `clientIP@instanceName`; RocketMQ's default instance name is `pid#nanotime`."""
        return f"{self.client_ip}@{self.instance_name or f'{os.getpid()}#{time.monotonic_ns()}'}"

    @property
    def brokers(self) -> list[tuple[str, int]]:
        return parse_addresses(self.namesrv_addr)

    @property
    def via(self) -> dict[tuple[str, int], tuple[str, int]]:
        """`lab.brokers.via` as {broker address: proxy address}."""
        return parse_routes(self.lab_brokers_via)

    @property
    def strategy(self):
        return ALLOCATE_STRATEGIES[self.allocate_message_queue_strategy]

    @property
    def orderly(self) -> bool:
        return self.message_listener == "orderly"

    def _validate(self) -> None:
        check_all([
            (valid_routes(self.lab_brokers_via),
             f"lab.brokers.via={self.lab_brokers_via!r} must be host:port=host:port[,...]"),
            (valid_addresses(self.namesrv_addr), f"namesrvAddr={self.namesrv_addr!r} must be host:port[,host:port...]"),
            (self.consume_from_where in (CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET),
             f"consumeFromWhere must be {CONSUME_FROM_LAST_OFFSET} or {CONSUME_FROM_FIRST_OFFSET}"),
            (self.allocate_message_queue_strategy in ALLOCATE_STRATEGIES,
             f"allocateMessageQueueStrategy must be one of {', '.join(ALLOCATE_STRATEGIES)}"),
            (self.message_listener in ("concurrently", "orderly"), "messageListener must be concurrently or orderly"),
            (self.heartbeat_broker_interval > 0, "heartbeatBrokerInterval must be > 0"),
            (self.poll_name_server_interval > 0, "pollNameServerInterval must be > 0"),
            (self.persist_consumer_offset_interval > 0, "persistConsumerOffsetInterval must be > 0"),
            (self.rebalance_wait_interval > 0, "rocketmq.client.rebalance.waitInterval must be > 0"),
            (self.pull_batch_size >= 1, "pullBatchSize must be >= 1"),
            (self.mq_client_api_timeout > 0, "mqClientApiTimeout must be > 0"),
            (self.lab_processing_ms >= 0, "lab.processing.ms must be >= 0"),
        ])

    def as_record(self) -> dict:
        """RocketMQ-named keys and values, for traces and reports."""
        return {self.key_of(k): v for k, v in asdict(self).items()}
