"""RocketMQ 4.9.7 itself: its own name server, brokers and push consumer (`DefaultMQPushConsumer`, CLUSTERING).

The design `real-rocketmq-4.9` is what the lab's `rocketmq` design reconstructs (`rocketmq_client/`), run from
the jars RocketMQ published (`org.apache.rocketmq:rocketmq-namesrv`, `-broker`, `-client` 4.9.7; 4.9.8's broker
is not on Maven Central). Its servers are RocketMQ's own (`broker.py`): a name server per trial, started before
the brokers, and one master per broker id; the producer is RocketMQ's `DefaultMQProducer`
(`Producer.java`). Its consumers are RocketMQ's code unchanged; the driver
(`real_systems/rocketmq49/src/main/java/lab/real/rocketmq49/`) starts them (`ConsumerHost`), wraps their
allocation strategy (RocketMQ's own `AllocateMessageQueueAveragely`) in a delegate that records each
allocation, and listens through RocketMQ's `RPCHook` to what each client sends and receives (`Observer`), so
the lab's metrics apply.

How it departs from the lab's `rocketmq` design, by being the real thing (`docs/real-systems.md`):

- it has a name server: routes come from it, where the lab's consumers read the brokers' metadata;
- it subscribes the `%RETRY%<group>` topic as RocketMQ does (never traced: nothing is ever retried);
- a rebalance is traced from its allocation (`rebalance_begin` when the strategy is called, after the route
  and the id list were read), and `assigned` is the allocation itself, just before RocketMQ updates its
  process-queue table (a queue whose offset could not be read would be skipped there, unseen);
- commits are traced when sent (UPDATE_CONSUMER_OFFSET is oneway: it has no answer);
- its brokers write no lab trace, so `broker_requests_per_change` is 0.
"""

from lab_cluster.errors import LabError
from lab_cluster.family import Family, RealBrokers

from ..jars import java_command
from . import broker

NAME = "real-rocketmq-4.9"
#: `ConsumerManager.CHANNEL_EXPIRED_TIMEOUT` (4.9.7): a broker drops a channel silent this long
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


def _configure(props: dict[str, str], actor: str) -> dict[str, str]:
    return dict(props)


def _build(*_):
    raise LabError(f"{NAME}'s consumers are RocketMQ's own, in a JVM: they run only as a host of their own.",
                   "Run them through a trial (python -m experiments run ...), not in the Python consumer host.")


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def _host(args: list[str]) -> list[str]:
    """The command of a host of real RocketMQ consumers, with the lab's host arguments (`consumer_host.py`)."""
    name = _arg(args, "--name")
    return java_command(broker.SYSTEM, "lab.real.rocketmq49.ConsumerHost", [*args, "--design", NAME],
                        heap_mb=256, jvm_args=broker.JVM_ARGS,
                        properties=broker.properties(_arg(args, "--trial-dir"), f"consumers-{name}"))


def _producer(args: list[str]) -> list[str]:
    """The command of the trial's producer on RocketMQ's own client (`real_systems/kafka_producer.py`'s job)."""
    return java_command(broker.SYSTEM, "lab.real.rocketmq49.Producer", args, heap_mb=128, jvm_args=broker.JVM_ARGS,
                        properties=broker.properties(_arg(args, "--trial-dir"), "producer"))


FAMILY = Family(
    NAME, f"{NAME} (RocketMQ 4.9.7's own client, name server and brokers)", "darkgreen", marker="8",
    package="real_systems.rocketmq49", address="namesrv", address_config="namesrvAddr",
    configure=_configure, build=_build, computes="member", settled_state="RUNNING", victim_link="none",
    stops_by="DefaultMQPushConsumer.shutdown(): offsets persisted, UNREGISTER_CLIENT sent to every broker",
    from_beginning={"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET"},
    session_timeout_ms=lambda config: CHANNEL_EXPIRED_TIMEOUT_MS,
    host_command=_host,
    brokers=RealBrokers("RocketMQ 4.9.7", broker.start, create_topic=broker.create_topic,
                        add_partitions=broker.add_partitions, name_server=broker.name_server,
                        producer_command=_producer),
    counterpart="rocketmq")
