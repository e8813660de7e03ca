"""The coordinator-era consumer and group coordinator, after Kafka's classic protocol.

A broker-hosted coordinator owns membership and generations; one member
computes the assignment: `docs/design.md`, the coordinator era.

- `coordinator/`: the group coordinator (`group.py` states, `coordinator.py`
  the state machine, `scheduler.py` its timers, `service.py` the broker plug-in);
- the classic client, along Java's seams: `consumer.py` (ConsumerCoordinator and the
  poll loop: partitions, positions, commits; `auto_commit.py`), `group_member.py`
  (AbstractCoordinator: join, sync, heartbeat thread, leave; `heartbeat.py` its
  timers, `member.py` its states), `error_policy.py` (what each error answer makes
  it do), `coordinator_link.py` (finding and reaching the coordinator, shared with
  KIP-848's client), `fetcher.py`, `config.py`;
- `kip848_consumer.py`, `membership.py`: the client of KIP-848's consumer protocol
  (`group.protocol=consumer`), which the family builds instead when a member's config says so;
- its assignors (range, round-robin, sticky) are shared: `lab_cluster/assignment/`.
"""

from lab_cluster.family import Family

from .config import ConsumerConfig
from .consumer import ModernConsumer
from .coordinator.coordinator import CoordinatorConfig
from .kip848_consumer import Kip848Consumer
from .lookup import wait_for_coordinator


def build_consumer(config: ConsumerConfig, topics, trace, actor, on_change):
    """The consumer `config.group_protocol` asks for: classic (`ModernConsumer`) or KIP-848's (`Kip848Consumer`)."""
    consumer_class = Kip848Consumer if config.uses_consumer_protocol else ModernConsumer
    return consumer_class(config, topics, trace, name=actor, on_change=on_change)


def session_timeout_ms(config: ConsumerConfig) -> int:
    """The classic protocol's session.timeout.ms, the member's own; KIP-848's is the coordinator's
    (`group.consumer.session.timeout.ms`), which the lab's brokers keep at Kafka's default unless a trial's
    broker settings change it, and a member does not know them: the default is what a host is judged by."""
    return CoordinatorConfig.group_consumer_session_timeout_ms if config.uses_consumer_protocol \
        else config.session_timeout_ms


FAMILY = Family(
    "classic", "classic (coordinator, eager)", "tab:blue", marker="s", package="modern_coord",
    address="bootstrap", address_config="bootstrap.servers",
    # each member's client.id (its member id's prefix) is its actor name unless set
    configure=lambda props, actor: ConsumerConfig.from_dict({"client.id": actor, **props}),
    build=build_consumer,
    computes="leader", settled_state="stable", victim_link="coordinator",
    stops_by="committed, revoked and left the group (the Java client's close); a static member "
             "(group.instance.id) sends no LeaveGroup: the coordinator keeps it until its session times out",
    # every broker hosts a coordinator, with Kafka's own defaults (`coordinator/service.py`)
    broker_plugin="modern_coord.coordinator.service:install",
    find_coordinator=lambda brokers, group: wait_for_coordinator(brokers, group, client_id="scenario")[1:],
    from_beginning={"auto.offset.reset": "earliest"}, via_config="lab.coordinator.via",
    session_timeout_ms=session_timeout_ms)
