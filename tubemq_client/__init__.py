"""Apache InLong TubeMQ's client balance (`ClientBalanceConsumer`): `docs/design.md`, TubeMQ.

Each node is started with the group's node count (`sourceCount`) and its own
`nodeId`, and takes the partitions whose key hashes to its id: no membership
at all (`lab_cluster/assignment/tubemq.py`). The broker fences: one holder
per group and partition, and only the holder may fetch or commit.

Read in this order:

- `broker/registrations.py`: the broker's registrations, its refusals
  (PARTITION_OCCUPIED, HB_NO_NODE, DUPLICATE_PARTITION, UNAUTHORIZED) and the
  30 s release of a silent holder; `broker/offsets.py`: offsets the broker
  moves itself (a batch in flight until confirmed); `broker/service.py`: both
  on a lab broker's wire;
- `master/groups.py`: what the master checks (one `sourceCount` per group,
  unique `nodeId`s) and its 30 s timeout; `master/service.py`: registration,
  heartbeats and partition metadata on the wire; `service.py`: the plug-in
  that loads both;
- `config.py`, `consumer.py`: the SDK (`ClientBalanceConsumer`) and the
  application that balances it (`BalancingNode`, TubeMQ's example).

In the experiments, every node is told the trial's N as its `sourceCount`
(`Family.group_size_config`), and its `nodeId` comes from its name (below).
"""

from lab_cluster.family import Family

from .config import ConsumerConfig
from .consumer import BalancingNode
from .master.groups import CONSUMER_HEARTBEAT_TIMEOUT_MS


def _configure(props: dict[str, str], actor: str) -> ConsumerConfig:
    """The host gives every family `group.id` (TubeMQ's `consumerGroup`). Unless `nodeId` is set, a node's id
    comes from its actor's name: `c3` is node 2 (the group's own nodes, 0 to sourceCount - 1), and another
    name (`j1`, a newcomer) takes the next id past them, sourceCount + 0, which TubeMQ's `start` refuses:
    a client-balance group does not grow without every node restarting with a new sourceCount."""
    props = dict(props)
    if "group.id" in props:
        props.setdefault("consumerGroup", props.pop("group.id"))
    digits = "".join(ch for ch in actor if ch.isdigit())
    if digits and "nodeId" not in props:
        past = 0 if actor.startswith("c") else int(props.get("sourceCount", 0))
        props["nodeId"] = str(past + int(digits) - 1)
    return ConsumerConfig.from_dict(props)


FAMILY = Family(
    "tubemq", "tubemq (TubeMQ client balance)", "tab:purple", marker="X", package="tubemq_client",
    address="bootstrap", address_config="masterHostAndPort", configure=_configure,
    build=lambda config, topics, trace, actor, on_change: BalancingNode(config, topics, trace, name=actor,
                                                                        on_change=on_change),
    computes="member", settled_state="STARTED", victim_link="brokers",
    stops_by="every partition unregistered at its broker, then the master told (TubeMQ's shutdown)",
    broker_plugin="tubemq_client.service:install",
    from_beginning={"consumePosition": "CONSUMER_FROM_FIRST_OFFSET"}, via_config="lab.brokers.via",
    group_size_config="sourceCount",
    # the master removes a node silent this long, and a broker releases its registrations
    session_timeout_ms=lambda config: CONSUMER_HEARTBEAT_TIMEOUT_MS)
