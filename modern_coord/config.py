"""The coordinator-era consumer's configuration, with the Java client's names and defaults.

| key | default | meaning |
|---|---|---|
| `group.id` | (required) | the consumer group |
| `bootstrap.servers` | (required) | `host:port,...` of brokers to ask for metadata and the coordinator |
| `client.id` | `consumer-<group>-<n>` | prefix of the member id the coordinator hands out (see below) |
| `group.instance.id` | (none) | a static member's id (KIP-345), kept through restarts; none: dynamic |
| `session.timeout.ms` | 45000 | silent this long, the coordinator evicts the member (Kafka 3.0+; 10000 before) |
| `heartbeat.interval.ms` | 3000 | heartbeat period; keep it under a third of the session timeout |
| `max.poll.interval.ms` | 300000 | the rebalance timeout the member announces in JoinGroup |
| `enable.auto.commit` | true | commit positions periodically, and before every rejoin |
| `auto.commit.interval.ms` | 5000 | ... this often |
| `auto.offset.reset` | latest | where to start with no committed offset: `earliest` or `latest` |
| `partition.assignment.strategy` | range | assignors, most preferred first (`range,sticky`; yours: `pkg.mod:Class`) |
| `retry.backoff.ms` | 100 | pause before retrying a failed request (coordinator lookup, heartbeat) |
| `request.timeout.ms` | 30000 | how long to wait for an answer (JoinGroup: rebalance timeout + 5 s, as Kafka) |
| `fetch.max.wait.ms` | 500 | how long one Fetch may wait for data |
| `max.poll.records` | 500 | records per Fetch request |
| `metadata.max.age.ms` | 300000 | refresh the metadata (brokers, leaders, partition counts) at least this often |
| `group.protocol` | classic | `classic` (JoinGroup, `consumer.py`) or `consumer` (KIP-848, `kip848_consumer.py`) |
| `group.remote.assignor` | (none) | `consumer` only: the server-side assignor to ask for (`uniform`, `range`) |
| `lab.processing.ms` | 0 | lab only: time the application spends on each record |
| `lab.coordinator.via` | (none) | lab only, not Kafka: reach the coordinator through this `host:port` (a fault proxy) |

`lab.coordinator.via` exists so that the zombie experiment can cut one
member's link to its coordinator while its links to the partition leaders stay
up: FindCoordinator still answers with the coordinator's own address, and the
member then connects to this address instead (the proxy forwards it there).

The strategies decide the rebalance protocol: the highest one every listed
assignor supports (`lab_cluster/assignment/base.py: rebalance_protocol`), so
`cooperative-sticky` alone is cooperative (KIP-429) and any list with an
eager-only assignor is eager. Kafka 3.x's default list is `range` then
`cooperative-sticky`: eager, and the coordinator's vote picks `range`, the
first preference of every member. The lab's default is `range` alone (Kafka
2.x's), which behaves the same and keeps older runs' JoinGroups comparable.
The Java client refuses a heartbeat interval not lower than the session
timeout; so does the lab.

`metadata.max.age.ms` (Kafka's default, and its `atLeast(0)`) is how late a
classic group learns that a subscribed topic has grown: its leader refreshes
its metadata that often, and rejoins when the partition counts differ from
those it assigned from (`consumer.py`). The KIP-848 consumer does not read it:
its coordinator learns of new partitions itself (`kip848_consumer.py`).

Your own assignor is named in the list as `package.module:Class`
(`lab_cluster/assignment/plugins.py`): each consumer makes an instance and
hands it its config, as Kafka's consumer does for a `Configurable` assignor.
The keys the class lists in `config_keys` are accepted for it here (Kafka's
consumer accepts any key and passes it on; the lab, which refuses unknown keys,
takes only the ones an assignor it was given asks for).

Under `group.protocol=consumer` (KIP-848) the coordinator owns the session
and the heartbeat: it times a member out after its own
`group.consumer.session.timeout.ms` and tells each member how often to
heartbeat (`group.consumer.heartbeat.interval.ms`), and it runs the assignor.
So `session.timeout.ms`, `heartbeat.interval.ms` and
`partition.assignment.strategy` are *ignored* there, as the Kafka snapshot the
lab follows (`AsyncKafkaConsumer`, Oct 2024) ignores them: it never reads them
and only logs them as unused. (Kafka 4.0.0 as released went further and
refuses them when set explicitly with `group.protocol=consumer`; the lab keeps
the snapshot's behaviour so that an experiment's coordinator-era overrides
apply to every coordinator-era design.) Like Kafka's
`ConsumerConfig.checkGroupRemoteAssignor`, the lab refuses
`group.remote.assignor` under `group.protocol=classic`.

`group.instance.id`, if given, must be a non-empty string (Java's
`NonEmptyString`) that `JoinGroupRequest.validateGroupInstanceId` accepts:
the rules of a topic name (`Topic.validate`): not `.` or `..`, at most 249
characters, only ASCII letters and digits, `.`, `_` and `-`. A static
member's default `client.id` is `consumer-<group>-<instance id>`, as Java's.

    >>> c = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092"})
    >>> (c.session_timeout_ms, c.heartbeat_interval_ms, c.strategies)
    (45000, 3000, ['range'])
    >>> s = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "h:1", "group.instance.id": "web-1"})
    >>> (s.group_instance_id, s.client_id)
    ('web-1', 'consumer-g-web-1')
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

from lab_cluster.assignment import ASSIGNORS, Assignor, plugins, rebalance_protocol
from lab_cluster.errors import LabError
from lab_cluster.properties import check_all, field_values, parse_addresses, valid_addresses

_client_numbers = itertools.count(1)

#: Kafka's `Topic.MAX_NAME_LENGTH`, which `JoinGroupRequest.validateGroupInstanceId` applies to an instance id
MAX_INSTANCE_ID_LENGTH = 249


def group_instance_id_problem(instance_id: str) -> str | None:
    """Why Kafka refuses `instance_id` as a `group.instance.id`, or None: Java's `ConfigDef.NonEmptyString`,
    then `JoinGroupRequest.validateGroupInstanceId` (`Topic.validate`'s rules, with its wording).

        >>> group_instance_id_problem("web-1.a_b") is None, group_instance_id_problem("..")
        (True, "Group instance id is invalid: '..' is not allowed")
    """
    if instance_id == "":
        return "must be non-empty (Java's NonEmptyString)"
    if instance_id in (".", ".."):
        reason = f"'{instance_id}' is not allowed"
    elif len(instance_id) > MAX_INSTANCE_ID_LENGTH:
        reason = f"the length of '{instance_id}' is longer than the max allowed length {MAX_INSTANCE_ID_LENGTH}"
    elif not all(c.isascii() and (c.isalnum() or c in "._-") for c in instance_id):
        reason = f"'{instance_id}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Group instance id is invalid: {reason}"


@dataclass(frozen=True)
class ConsumerConfig:
    group_id: str
    bootstrap_servers: str
    client_id: str = ""
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    auto_offset_reset: str = "latest"
    partition_assignment_strategy: str = "range"
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30000
    fetch_max_wait_ms: int = 500
    max_poll_records: int = 500
    metadata_max_age_ms: int = 300000
    lab_processing_ms: int = 0
    lab_coordinator_via: str = ""
    group_instance_id: str | None = None  # None: a dynamic member
    group_protocol: str = "classic"
    group_remote_assignor: str | None = None  # None: the coordinator picks
    #: the settings the user's assignors asked for (their `config_keys`), as sorted (key, value) pairs
    assignor_settings: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def key_of(field_name: str) -> str:
        return field_name.replace("_", ".")

    @classmethod
    def from_dict(cls, props: dict) -> ConsumerConfig:
        # Java's null: the default
        props = {k: v for k, v in props.items() if not (k in ("group.instance.id", "group.remote.assignor")
                                                        and v is None)}
        if "assignor.settings" in props:  # a field, not a key: its entries are the assignors' own keys
            raise LabError("Unknown consumer config key: assignor.settings.", "Give each assignor setting by its key.")
        wanted = assignor_config_keys(str(props.get("partition.assignment.strategy", "")))
        settings = tuple(sorted((k, str(props.pop(k))) for k in list(props) if k in wanted))
        config = cls(**field_values(cls, props, cls.key_of, required=("group.id", "bootstrap.servers")),
                     assignor_settings=settings)
        config._validate()
        if not config.client_id:
            # Java's maybeOverrideClientId: a static member's default client.id ends with its instance id
            suffix = config.group_instance_id if config.group_instance_id is not None else next(_client_numbers)
            config = replace(config, client_id=f"consumer-{config.group_id}-{suffix}")
        return config

    @property
    def is_static(self) -> bool:
        """A static member (KIP-345): `group.instance.id` is set (Java: `!isDynamicMember()`)."""
        return self.group_instance_id is not None

    @property
    def uses_consumer_protocol(self) -> bool:
        """KIP-848's `group.protocol=consumer` (case-insensitive, as Kafka's `GroupProtocol.of`)."""
        return self.group_protocol.lower() == "consumer"

    @property
    def strategies(self) -> list[str]:
        return [s.strip() for s in self.partition_assignment_strategy.split(",") if s.strip()]

    def assignors(self) -> list[Assignor]:
        """This consumer's assignors, most preferred first: a new instance of each user's class, configured."""
        return plugins.assignors(self.strategies, self.as_record())

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return parse_addresses(self.bootstrap_servers)

    @property
    def coordinator_via(self) -> tuple[str, int] | None:
        if not self.lab_coordinator_via:
            return None
        host, _, port = self.lab_coordinator_via.rpartition(":")
        return host, int(port)

    def _validate(self) -> None:
        def via_ok():
            try:
                return self.coordinator_via[1] > 0
            except ValueError:
                return False
        checks = [
            (valid_addresses(self.bootstrap_servers),
             f"bootstrap.servers={self.bootstrap_servers!r} must be host:port[,host:port...]"),
            (self.session_timeout_ms > 0, "session.timeout.ms must be > 0"),
            (0 < self.heartbeat_interval_ms < self.session_timeout_ms,
             "heartbeat.interval.ms must be > 0 and lower than session.timeout.ms"),
            (self.max_poll_interval_ms > 0, "max.poll.interval.ms must be > 0"),
            (self.auto_commit_interval_ms > 0, "auto.commit.interval.ms must be > 0"),
            (self.auto_offset_reset in ("earliest", "latest"), "auto.offset.reset must be earliest or latest"),
            (bool(self.strategies) and all(s in ASSIGNORS or plugins.is_plugin(s) for s in self.strategies),
             f"partition.assignment.strategy must list assignors among {sorted(ASSIGNORS)}, or your own as "
             "package.module:Class"),
            (self.retry_backoff_ms >= 0, "retry.backoff.ms must be >= 0"),
            (self.request_timeout_ms > 0, "request.timeout.ms must be > 0"),
            (self.fetch_max_wait_ms >= 0, "fetch.max.wait.ms must be >= 0"),
            (self.max_poll_records >= 1, "max.poll.records must be >= 1"),
            (self.metadata_max_age_ms >= 0, "metadata.max.age.ms must be >= 0"),
            (self.lab_processing_ms >= 0, "lab.processing.ms must be >= 0"),
            (not self.lab_coordinator_via or via_ok(), f"lab.coordinator.via={self.lab_coordinator_via!r} must be "
                                                       "host:port"),
            (self.group_protocol.lower() in ("classic", "consumer"), f"group.protocol={self.group_protocol!r} "
                                                                     "must be classic or consumer"),
            (not self.group_remote_assignor or self.uses_consumer_protocol,
             "group.remote.assignor cannot be set when group.protocol=classic (Kafka's checkGroupRemoteAssignor)"),
        ]
        instance_problem = None if self.group_instance_id is None else group_instance_id_problem(self.group_instance_id)
        checks.append((instance_problem is None,
                       f"group.instance.id={self.group_instance_id!r}: {instance_problem} (a static member's id: "
                       "ASCII letters, digits, '.', '_' and '-', at most 249; unset for a dynamic member)"))
        check_all(checks)
        if not self.uses_consumer_protocol:  # the user's classes: loaded, made and configured, or a clear error
            chosen = self.assignors()
            try:
                rebalance_protocol(chosen)
            except ValueError:  # Kafka: "Specified assignors ... do not have commonly supported rebalance protocol"
                raise LabError(f"Invalid consumer config: the assignors {', '.join(a.name for a in chosen)} have no "
                               "rebalance protocol in common (eager, cooperative).",
                               "List assignors that all support eager, or all cooperative.") from None

    def as_record(self) -> dict:
        """Kafka-named keys and values, for traces and reports (an assignor's settings under their own keys)."""
        record = {self.key_of(k): v for k, v in asdict(self).items() if k != "assignor_settings"}
        return {**record, **dict(self.assignor_settings)}


def assignor_config_keys(strategy: str) -> set[str]:
    """The settings the user's assignors named in `strategy` read (each class's `config_keys`); a class that
    cannot be loaded asks for none here, and the config's validation says why it cannot."""
    keys: set[str] = set()
    for entry in (e.strip() for e in strategy.split(",")):
        if plugins.is_plugin(entry):
            try:
                keys |= set(getattr(plugins.load_class(entry), "config_keys", ()))
            except LabError:
                pass
    return keys
