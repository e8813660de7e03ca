"""What the lab needs to know of a consumer family to run, watch and report it: its `Family` descriptor.

Each family package exports one (`legacy_zk.FAMILY`, `modern_coord.FAMILY`)
and `experiments/engine/families.py` lists them. The one consumer host
(`lab_cluster/consumer_host.py`) makes a family's members with `configure`
and `build`, telling them where the cluster is under `address_config`; the
trial runner gives that host the `address` the family needs, adds
`from_beginning` to every consumer's config, knows a member has settled when
it reports `settled_state`, and cuts a victim's `victim_link`; the report
draws it in `colour` under `label`. Nothing outside the family package and
that list names a family.

Its consumers are `GroupMember`s: whatever their protocol, they start, stop,
and say where they are in one `MemberSnapshot`, which their host prints as
the state line the trial runner watches (`consumer_host.print_state_line`,
`experiments/engine/group_watch.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class RealBrokers:
    """A real system's brokers, which a family's trials run on instead of the lab's own (`real_systems/`): each
    started as a child process with one Kafka listener, served to the producer and the consumers alike."""

    name: str  # what they are, e.g. "Kafka 0.8.2.2"
    #: (broker_id, zk_connect, trial_dir, session_timeout_ms=, port=, config=) -> a `LabProcess` with
    #: `broker_id`, `port` and `kafka_port` (both its one listener); `port` 0: any free one; `config`: the
    #: trial's broker settings (`TrialSpec.broker_overrides`, the design's `broker_config`), in Kafka's names
    start: Callable[..., Any]
    #: the Kafka protocol version the producer speaks to them (kafka-python's `api_version`, e.g. "0.8.2"); None:
    #: it asks them (`real_systems/kafka_producer.py`)
    api_version: str | None = None
    #: (bootstrap, topic, partitions) -> None: make the topic and wait for its leaders, where the brokers keep no
    #: metadata in ZooKeeper (KRaft); None: the trial writes the topic's znode, which a ZooKeeper-mode
    #: controller reads
    create_topic: Callable[[str, str, int], None] | None = None
    #: (bootstrap, topic, partitions) -> None: grow the topic to `partitions` as the system's admin tool does, and
    #: wait for the new partitions' leaders (Kafka 4's CreatePartitions, RocketMQ's updateTopic), where the
    #: brokers keep no metadata in ZooKeeper; None: the trial rewrites the topic's znode, which a ZooKeeper-mode
    #: controller watches (Kafka 0.8's `AddPartitionsListener`), or, for a system with `create_topic` and no way
    #: to grow a topic here, the `grow` step is refused
    add_partitions: Callable[[str, str, int], None] | None = None
    #: (trial_dir) -> a `LabProcess` with `address` ("host:port"): a name server the brokers register with
    #: (RocketMQ's), started once per trial before them; each broker's `start` then gets its address where a
    #: ZooKeeper connect string goes, and consumers of a family whose `address` is "namesrv" get it as theirs.
    #: None: no name server (the brokers register in the trial's ZooKeeper, or among themselves)
    name_server: Callable[[Any], Any] | None = None
    #: (the producer's arguments) -> the command of a producer of the system's own, taking
    #: `real_systems/kafka_producer.py`'s arguments (`--bootstrap` the name server's address where there is one,
    #: else the brokers' listeners) and writing its trace; None: that Kafka-protocol producer
    producer_command: Callable[[list[str]], list[str]] | None = None


@dataclass(frozen=True)
class Family:
    name: str  # the `design` of traces, specs and summaries, e.g. "zookeeper"
    label: str  # how the report names it: its name, then what it is, e.g. "zookeeper (Kafka 0.8, ZooKeeper era)"
    colour: str  # matplotlib colour of its lines and bars, its own (a test checks no two designs share one)
    marker: str  # matplotlib marker of its points, its own too: the report tells designs apart without colour
    #: what `python -m lab_cluster.consumer_host --family <package>` loads: a package exporting it as `FAMILY`
    #: (`modern_coord`), or `module:ATTRIBUTE` for a variant exported under another name
    #: (`modern_coord.variants:STATIC`)
    package: str
    #: "zk": its consumers are given a ZooKeeper connect string; "bootstrap": the brokers' lab (JSON) listeners;
    #: "kafka_bootstrap": the brokers' Kafka listeners (a real Kafka client's `bootstrap.servers`); "namesrv": the
    #: name server of its real brokers (`RealBrokers.name_server`: RocketMQ's `namesrvAddr`)
    address: str
    address_config: str  # the config key that address goes in, e.g. "zookeeper.connect"
    #: (properties, actor) -> a validated config; raises LabError on a bad one, before anything starts
    configure: Callable[[dict[str, str], str], Any]
    #: (config, topics, trace, actor, on_change) -> a member, not yet started
    build: Callable[..., GroupMember]
    settled_state: str  # the state a member reports once it consumes its share
    #: who computes an assignment, from which view: "member" (each member splits the membership it read;
    #: its `assigned` event carries the view's id, `view`), "leader" (one member per generation, from the
    #: member list the coordinator gave it: `leader_assignment`) or "coordinator" (KIP-848: the coordinator,
    #: once per group epoch, from its own member list: the broker's `target_assignment`);
    #: `experiments/metrics.py: views_in_effect`
    computes: str
    #: the link a `cut` blackholes: "zk" (its own ZooKeeper link), "coordinator" (its link to its coordinator),
    #: "brokers" (its links to every broker: where membership and data share one channel per broker) or "none"
    #: (a client the lab cannot route through a proxy: a real Kafka client; experiments that cut leave it out)
    victim_link: str
    stops_by: str  # what a graceful stop does, as the CLI tells the user
    #: "module:function" every broker loads for this family (its coordinator), or None
    broker_plugin: str | None = None
    #: broker settings a trial of this family starts its brokers with (`--config key=value`), beyond their own
    #: defaults: the KIP-848 design's coordinator timings (`modern_coord/variants.py`)
    broker_config: dict[str, str] = field(default_factory=dict)
    #: (brokers, group) -> (host, port) of the group's coordinator, for a `victim_link` "coordinator";
    #: raises TimeoutError if none answers
    find_coordinator: Callable[[list[tuple[str, int]], str], tuple[str, int]] | None = None
    #: the config that makes a consumer read from the start of the log (every produced record is one to process)
    from_beginning: dict[str, str] = field(default_factory=dict)
    #: the config key that routes the victim through its link when that is not its address: "coordinator" takes
    #: the proxy's `host:port`; "brokers" takes `broker host:port=proxy host:port,...` (`Link.routes`)
    via_config: str | None = None
    #: the config key a consumer is told the group's size in, where every member must know it and nothing else
    #: of the others (TubeMQ's `sourceCount`): the runner gives it the trial's N, newcomers included
    group_size_config: str | None = None
    #: True where every member rebalances on every membership change (the eager protocols: ZooKeeper era,
    #: coordinator era, RocketMQ), so the runner waits to hear from each; False where a planner moves only the
    #: members a change needs (TubeMQ's server balance): the runner then waits for the planner's fixpoint
    #: instead, every partition held once and the loads even (`experiments/engine/group_watch.py`)
    every_member_rebalances: bool = True
    #: config -> how long, in ms, the group waits for a silent member before it declares it gone (its liveness
    #: timeout: a ZooKeeper session's, a coordinator's session, a broker's channel expiry), as this member's
    #: config or the server's default the lab runs with says. Every host judges itself against it
    #: (`lab_cluster/host_health.py`: late by more than a third of it, a host was starved). Required.
    session_timeout_ms: Callable[[Any], float] | None = None
    #: where its consumers run: None, the lab's consumer host (`python -m lab_cluster.consumer_host`); else
    #: (the host's arguments) -> the command of a host of its own that takes the same arguments and prints the
    #: same lines (a real system's consumers in their own runtime: `real_systems/kafka08`)
    host_command: Callable[[list[str]], list[str]] | None = None
    #: the brokers its trials run on: None, the lab's own (`lab_cluster/broker`); else a real system's
    #: (`real_systems/`)
    brokers: RealBrokers | None = None
    #: a real system's design: the lab design it is measured beside (`real-kafka-0.8.2.2` beside `zookeeper`).
    #: Experiments run it wherever they run that design, with that design's settings, and judge it by that
    #: design's findings and by how far it lands from it (`experiments/engine/families.py: REFERENCES`)
    counterpart: str | None = None

    def __post_init__(self):
        if self.address not in ("zk", "bootstrap", "kafka_bootstrap", "namesrv") \
                or self.victim_link not in ("zk", "coordinator", "brokers", "none") \
                or self.computes not in ("member", "leader", "coordinator"):
            raise ValueError(f"family {self.name}: address must be zk, bootstrap, kafka_bootstrap or namesrv, "
                             "victim_link zk, coordinator, brokers or none, computes member, leader or coordinator")
        if self.session_timeout_ms is None:
            raise ValueError(f"family {self.name}: say how long its group waits for a silent member "
                             "(session_timeout_ms)")
        if self.victim_link == "coordinator" and self.find_coordinator is None:
            raise ValueError(f"family {self.name}: a coordinator victim link needs find_coordinator")
        if self.address == "namesrv" and (self.brokers is None or self.brokers.name_server is None):
            raise ValueError(f"family {self.name}: a namesrv address needs real brokers with a name_server")
        if self.victim_link not in ("zk", "none") and not self.via_config:
            raise ValueError(f"family {self.name}: a {self.victim_link} victim link needs via_config")


@dataclass(frozen=True)
class MemberSnapshot:
    """Where one consumer is: its family's state, whether it stopped trying, its generation (coordinator
    era) and the partitions it owns."""

    state: str
    gave_up: bool  # it stopped trying: the runner need not wait for it
    partitions: list[int]
    generation: int | None = None  # None where the family has no generations

    def line(self, actor: str) -> str:
        """The state line a host prints: `{"actor", "state", "gave_up", ["generation",] "partitions"}`.

        >>> MemberSnapshot("consuming", False, [0, 5]).line("c3")
        '{"actor": "c3", "state": "consuming", "gave_up": false, "partitions": [0, 5]}'
        >>> MemberSnapshot("stable", False, [1], generation=4).line("c1")
        '{"actor": "c1", "state": "stable", "gave_up": false, "generation": 4, "partitions": [1]}'
        """
        line = {"actor": actor, "state": self.state, "gave_up": self.gave_up}
        if self.generation is not None:
            line["generation"] = self.generation
        return json.dumps({**line, "partitions": self.partitions})


class GroupMember(Protocol):
    """A consumer of any family, as its host and the runner see it."""

    ident: str  # how its group and its trace name it: 0.8's consumer id, the coordinator era's client.id

    def start(self) -> object: ...
    def stop(self) -> None: ...
    def snapshot(self) -> MemberSnapshot: ...
