"""RocketMQ 4.x's client-side rebalance (CLUSTERING mode), the next family of the lab: `docs/design.md`, RocketMQ.

As in Kafka 0.8, every consumer computes its own queues, but membership comes
from brokers rather than ZooKeeper: each client heartbeats every broker, each
broker keeps its own consumer table and pushes NOTIFY_CONSUMER_IDS_CHANGED to
the group's clients, and a client allocates from the id list of one broker,
picked at random. Nothing makes the brokers agree, and nothing fences an
offset commit.

The client (start with `consumer.py`):

- `consumer.py`: the push consumer, its service threads (scheduled tasks,
  RebalanceService, pull and consume), start and shutdown;
- `rebalance.py`: one rebalance of a topic, without I/O (`RebalanceImpl`:
  allocate from one broker's id list, update the process-queue table, start
  offsets, orderly locks);
- `instance.py`: what it asks of the brokers (`MQClientInstance`: routes,
  heartbeats to every broker, the id list from one, offsets, locks, pulls);
- `config.py`: RocketMQ's names and defaults.

The broker side, a plug-in every lab broker loads:

- `broker/consumer_manager.py`: the consumer table, its four roads of
  change, and when the broker notifies;
- `broker/offsets.py`: offsets per ``topic@group`` and queue, accepted from anyone;
- `broker/locks.py`: the orderly consumers' queue locks (60 s);
- `broker/service.py`: the plug-in that puts them on a lab broker's wire
  (HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, the offset and
  lock requests), pushes NOTIFY_CONSUMER_IDS_CHANGED and runs the 10 s scan.

The allocation strategies are shared: `lab_cluster/assignment/rocketmq.py`.
The wire has what RocketMQ's remoting needs (`lab_cluster/wire.py`): a
server-side `Channel` per connection, told to listeners when it closes, with
`push` for NOTIFY_CONSUMER_IDS_CHANGED, and a `DuplexClient` that reads its
connection all the time.
"""

from lab_cluster.family import Family

from .broker.consumer_manager import CHANNEL_EXPIRED_TIMEOUT_MS
from .config import ClientConfig
from .consumer import PushConsumer


def _configure(props: dict[str, str], actor: str) -> ClientConfig:
    """The lab's host gives every family `group.id`; RocketMQ calls it `consumerGroup`. The client id's
    instance name is the actor's name unless set (RocketMQ's default is the process id)."""
    props = dict(props)
    if "group.id" in props:
        props.setdefault("consumerGroup", props.pop("group.id"))
    return ClientConfig.from_dict({"instanceName": actor, **props})


FAMILY = Family(
    "rocketmq", "rocketmq (RocketMQ 4.x client rebalance)", "tab:green", marker="P", package="rocketmq_client",
    address="bootstrap", address_config="namesrvAddr",
    configure=_configure,
    build=lambda config, topics, trace, actor, on_change: PushConsumer(config, topics, trace, on_change=on_change),
    computes="member", settled_state="RUNNING", victim_link="brokers",
    stops_by="offsets persisted, UNREGISTER_CLIENT sent to every broker (RocketMQ's shutdown)",
    # every broker hosts the consumer table, offsets and locks (`broker/service.py`)
    broker_plugin="rocketmq_client.broker.service:install",
    from_beginning={"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET"}, via_config="lab.brokers.via",
    # a broker drops a channel silent this long (`ConsumerManager.CHANNEL_EXPIRED_TIMEOUT`)
    session_timeout_ms=lambda config: CHANNEL_EXPIRED_TIMEOUT_MS)
