"""TubeMQ's server-side balance, the design its client balance replaced in 0.12: `docs/design.md`, TubeMQ.

The master assigns a group's partitions itself, every `consumerBalancePeriodMs`
(30 s as TubeMQ ships it), and tells each consumer what to drop and what to
take in the answers to its heartbeats (13 s apart), one event at a time, every
DISCONNECT of the group before any CONNECT. Nobody computes a share but the
master; the broker fences as in client balance. The price, which the seed text
gives as the reason for client balance: a consumer waits for the master's next
tick and for a heartbeat per step before it gets anything.

Read in this order:

- `tubemq_client/master/balancer.py`: the master's plan per tick and its
  events (no I/O); `tubemq_client/master/service.py`: the chore, and
  `consumerRegisterC2M` / `consumerHeartbeatC2M` on the wire;
- `config.py`, `consumer.py`: the consumer (its heartbeat carries events, one
  rebalance thread does them) and the lab's member.

The broker side and the master are the TubeMQ plug-in's (`tubemq_client.service`).
"""

from lab_cluster.family import Family

from ..master.balancer import CONSUMER_HEARTBEAT_TIMEOUT_MS
from .config import ServerBalanceConfig
from .consumer import ServerBalanceNode


def _configure(props: dict[str, str], actor: str) -> ServerBalanceConfig:
    """The host gives every family `group.id`: TubeMQ's `consumerGroup`."""
    props = dict(props)
    if "group.id" in props:
        props.setdefault("consumerGroup", props.pop("group.id"))
    return ServerBalanceConfig.from_dict(props)


FAMILY = Family(
    "tubemq-server", "tubemq-server (TubeMQ server balance)", "tab:pink", marker="h",
    package="tubemq_client.server_balance", address="bootstrap", address_config="masterHostAndPort",
    configure=_configure,
    build=lambda config, topics, trace, actor, on_change: ServerBalanceNode(config, topics, trace, name=actor,
                                                                            on_change=on_change),
    # the master alone plans: every member's `view` is "master"
    computes="member", settled_state="STARTED", victim_link="brokers",
    stops_by="every partition unregistered at its broker, then the master told (TubeMQ's shutdown)",
    broker_plugin="tubemq_client.service:install",
    from_beginning={"consumePosition": "CONSUMER_FROM_FIRST_OFFSET"}, via_config="lab.brokers.via",
    # a tick's plan moves only the consumers whose loads are off: the others hear nothing
    every_member_rebalances=False,
    # the master's balancer removes a consumer silent this long
    session_timeout_ms=lambda config: CONSUMER_HEARTBEAT_TIMEOUT_MS)
