"""The group coordinator: Kafka's classic `GroupCoordinator`, without I/O.

A broker hosts it (`service.py` wires it to the wire protocol and the offsets
log); this module is the state machine alone, driven by requests, a clock and
a `Scheduler`, so that every transition can be tested with a fake clock.

Protocol phases, as a member sees them::

    JoinGroup(member_id="")        -> MEMBER_ID_REQUIRED + a member id (JoinGroup v4+)
    JoinGroup(member_id="",        -> a static member (KIP-345): its member id at once
              group_instance_id=i)    ("i-uuid"), and the join goes on as below; if i is
                                      already a member, see "Static members"
    JoinGroup(member_id=id)        -> held open until every member has rejoined or the
                                      rebalance timeout expires; then generation + 1, and
                                      the leader's answer lists every member's subscription
    SyncGroup(generation, id, ...) -> the leader sends the assignment; every member's
                                      SyncGroup is answered with its own share
    Heartbeat(generation, id)      -> NONE while Stable; REBALANCE_IN_PROGRESS once a
                                      rebalance is being prepared (rejoin!)
    OffsetCommit(generation, id)   -> accepted only from a current member of the current
                                      generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID)
    LeaveGroup(id)                 -> the member goes at once; the others rebalance
    LeaveGroup("", instance id)    -> the static member holding that instance id goes

Answers per state (Kafka's `GroupCoordinator.scala`), for a known member:

- JoinGroup: Empty UNKNOWN_MEMBER_ID; PreparingRebalance held until the join
  completes; CompletingRebalance the current result (or a rebalance if its
  protocols changed); Stable a rebalance if it leads or changed protocols,
  else the current result; Dead COORDINATOR_NOT_AVAILABLE.
- SyncGroup: Empty UNKNOWN_MEMBER_ID; PreparingRebalance
  REBALANCE_IN_PROGRESS; CompletingRebalance held, and the leader's completes
  them all; Stable its assignment; Dead COORDINATOR_NOT_AVAILABLE.
- Heartbeat: Empty UNKNOWN_MEMBER_ID; PreparingRebalance
  REBALANCE_IN_PROGRESS; CompletingRebalance and Stable NONE.
- OffsetCommit: Empty accepted only with generation -1 (no group management);
  PreparingRebalance and Stable accepted; CompletingRebalance
  REBALANCE_IN_PROGRESS.

Before any state rule: a member id the group does not know gets
UNKNOWN_MEMBER_ID, and a generation other than the group's gets
ILLEGAL_GENERATION. That is the fencing that stops a zombie. A request that
names a `group.instance.id` is checked first against it (Kafka's
`validateCurrentMember`): an instance the group does not know gets
UNKNOWN_MEMBER_ID, and an instance now held by another member id gets
FENCED_INSTANCE_ID (the old process of a restarted static member).

Static members (`group.instance.id`, KIP-345), Kafka 2.3+: the group keeps a
static member through restarts, so a restart within its session timeout
moves no partition.

- A rebalance that completes without a static member keeps it in the next
  generation (dynamic members that did not rejoin are removed). It goes
  only when its session times out, by LeaveGroup, or, as any member, when it
  has not sent SyncGroup within the rebalance timeout after a join completed.
- A restart is a JoinGroup without a member id and with a known instance id.
  The instance's entry (assignment, leadership) passes to a new member id;
  the old id is fenced, and whatever it held open is answered
  FENCED_INSTANCE_ID. By state: Stable, if the protocol the group would
  select is unchanged, the group is written and the member answered at once
  with the current generation, no member list and the leader id as it was
  (a restarted leader must not take itself for the leader and reassign: a
  Stable group would not hand that assignment out); its SyncGroup then
  gets its old assignment, and nobody rebalances. Stable with a changed
  protocol, and CompletingRebalance, rebalance; PreparingRebalance holds it
  for the join in progress.

Timers (`Scheduler` keys): ``("join", g)`` the rebalance (or initial delay;
what it does when it fires is the group's `DelayedJoin`, `group.py`),
``("sync", g)`` the sync timeout, ``("heartbeat", g, m)`` a member's session,
``("pending", g, m)`` a member id handed out but not yet used. A member whose
JoinGroup or SyncGroup is held open is kept alive by it, except a new member
(added by this rebalance), which is removed if the join has not completed
within `NEW_MEMBER_JOIN_TIMEOUT_MS` (Kafka's `NewMemberJoinTimeoutMs`, 5
minutes, KAFKA-7610); any other member silent for its `session.timeout.ms` is
removed and the group rebalances. Members that are given a generation but do
not send SyncGroup within the rebalance timeout are removed and the group
rebalances (KAFKA-12890's `DelayedSync`, Kafka 2.8.1 and 3.0+).

While the offsets partition is loading, Heartbeat is answered NONE ("respond
blindly", so members keep their session) and SyncGroup REBALANCE_IN_PROGRESS
(so members rejoin without rediscovering the coordinator); every other request
gets COORDINATOR_LOAD_IN_PROGRESS. A LeaveGroup from a member id handed out but
not yet used removes it at once, so the join it held up can complete.

KIP-848's consumer groups (Kafka 4.0's `group.protocol=consumer`) live beside
the classic groups, in `consumer_protocol.py` (`self.consumer`): a member of
one sends only `ConsumerGroupHeartbeat`, its commits are fenced by member
epoch (STALE_MEMBER_EPOCH), and a JoinGroup for its group id is refused.

Departures from Kafka, stated: an OffsetCommit answer carries one error for
all its partitions; a tie in the protocol vote goes to the first name in
order; a LeaveGroup names one member. A restarted static member is answered
as by JoinGroup v5-v8 (the old leader id); Kafka 3.6 answers v9+ clients
otherwise: a restarted leader is told it leads, with the member list and
`skipAssignment`. A failed write of the group is not undone (Kafka reverts a
static member's replacement, and resets a SyncGroup's assignment, when the
write fails).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from lab_cluster.java_hash import group_partition
from lab_cluster.wire import ErrorCode

from .group import ClassicGroupMember, ClassicGroupState, DelayedJoin, Group, Respond
from .scheduler import Scheduler

PROTOCOL_TYPE = "consumer"
#: Kafka's `GroupCoordinator.NewMemberJoinTimeoutMs`: a new member's held JoinGroup keeps it only this long
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker-side settings, with Kafka's names and defaults."""

    offsets_topic_num_partitions: int = 50       # offsets.topic.num.partitions
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000      # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000   # group.max.session.timeout.ms
    # KIP-848's consumer groups: the broker, not the member, sets heartbeat interval and session timeout
    group_consumer_heartbeat_interval_ms: int = 5000      # group.consumer.heartbeat.interval.ms
    group_consumer_min_heartbeat_interval_ms: int = 5000  # group.consumer.min.heartbeat.interval.ms
    group_consumer_max_heartbeat_interval_ms: int = 15000  # group.consumer.max.heartbeat.interval.ms
    group_consumer_session_timeout_ms: int = 45000        # group.consumer.session.timeout.ms
    group_consumer_min_session_timeout_ms: int = 45000    # group.consumer.min.session.timeout.ms
    group_consumer_max_session_timeout_ms: int = 60000    # group.consumer.max.session.timeout.ms
    group_consumer_max_size: int = 2**31 - 1              # group.consumer.max.size
    group_consumer_assignors: str = "uniform,range"       # group.consumer.assignors (the first is the default)

    KEYS = {"offsets.topic.num.partitions": "offsets_topic_num_partitions",
            "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
            "group.min.session.timeout.ms": "group_min_session_timeout_ms",
            "group.max.session.timeout.ms": "group_max_session_timeout_ms",
            "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
            "group.consumer.min.heartbeat.interval.ms": "group_consumer_min_heartbeat_interval_ms",
            "group.consumer.max.heartbeat.interval.ms": "group_consumer_max_heartbeat_interval_ms",
            "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
            "group.consumer.min.session.timeout.ms": "group_consumer_min_session_timeout_ms",
            "group.consumer.max.session.timeout.ms": "group_consumer_max_session_timeout_ms",
            "group.consumer.max.size": "group_consumer_max_size",
            "group.consumer.assignors": "group_consumer_assignors"}
    TEXT = ("group_consumer_assignors",)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> CoordinatorConfig:
        values = {}
        for key, raw in props.items():
            if key not in cls.KEYS:
                continue  # broker settings of other components
            if cls.KEYS[key] in cls.TEXT:
                values[cls.KEYS[key]] = str(raw)
                continue
            try:
                values[cls.KEYS[key]] = int(raw)
            except ValueError:
                raise ValueError(f"{key}={raw!r} is not an integer") from None
        config = cls(**values)
        config.check()
        return config

    def check(self) -> None:
        """Kafka's `GroupCoordinatorConfig` requirements (a broker refuses to start otherwise)."""
        from lab_cluster.assignment import SERVER_ASSIGNORS

        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        c = self
        for name, value, low, high in (
                ("group.consumer.heartbeat.interval.ms", c.group_consumer_heartbeat_interval_ms,
                 c.group_consumer_min_heartbeat_interval_ms, c.group_consumer_max_heartbeat_interval_ms),
                ("group.consumer.session.timeout.ms", c.group_consumer_session_timeout_ms,
                 c.group_consumer_min_session_timeout_ms, c.group_consumer_max_session_timeout_ms)):
            if not low <= value <= high:
                raise ValueError(f"{name}={value} is outside [{low}, {high}], its min and max settings "
                                 "(group.consumer.min.* and group.consumer.max.*)")
        if c.group_consumer_heartbeat_interval_ms >= c.group_consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be lower than "
                             "group.consumer.session.timeout.ms")
        small = [name for name, value in vars(self).items() if name.startswith("group_consumer_")
                 and isinstance(value, int) and value < 1]
        if small:
            raise ValueError(f"{', '.join(small)} must be at least 1")
        unknown = [a for a in self.assignor_names if a not in SERVER_ASSIGNORS]
        if unknown or not self.assignor_names:
            raise ValueError(f"group.consumer.assignors={c.group_consumer_assignors!r}: the lab has "
                             f"{', '.join(SERVER_ASSIGNORS)}")

    @property
    def assignor_names(self) -> list[str]:
        return [a.strip() for a in self.group_consumer_assignors.split(",") if a.strip()]


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup request's fields, parsed: the parameters of Kafka's `handleJoinGroup`."""

    group_id: str
    member_id: str            # "" for a member that has no id yet
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int  # defaults to the session timeout (JoinGroup v0 had none)
    protocol_type: object      # as sent; only "consumer" is served
    protocols: list[tuple[str, dict]]  # (assignor name, subscription metadata), in preference order
    group_instance_id: str | None = None  # a static member's group.instance.id; None for a dynamic member

    @classmethod
    def parse(cls, request: dict) -> JoinRequest:
        """Raises KeyError, TypeError or ValueError when a field is missing or malformed."""
        session_ms = int(request["session_timeout_ms"])
        instance_id = request.get("group_instance_id")
        if instance_id is not None and not isinstance(instance_id, str):
            raise TypeError("group_instance_id must be a string or null")
        return cls(group_id=request.get("group_id"), member_id=request.get("member_id", ""),
                   client_id=str(request.get("client_id", "")), session_timeout_ms=session_ms,
                   rebalance_timeout_ms=int(request.get("rebalance_timeout_ms", session_ms)),
                   protocol_type=request.get("protocol_type", PROTOCOL_TYPE),
                   protocols=[(str(p["name"]), dict(p.get("metadata") or {})) for p in request["protocols"]],
                   group_instance_id=instance_id)


def answer(error: ErrorCode = ErrorCode.NONE, message: str = "", **fields) -> dict:
    out = {"error_code": int(error), "error": error.name, **fields}
    if message:
        out["message"] = message
    return out


class OffsetStore:
    """Where the coordinator writes offset commits and group metadata: one log per offsets partition."""

    def append(self, partition: int, record: dict) -> None:
        raise NotImplementedError


class MemoryStore(OffsetStore):
    """An in-memory store for the pure unit tests: {partition: [records]}."""

    def __init__(self):
        self.records: dict[int, list[dict]] = {}

    def append(self, partition: int, record: dict) -> None:
        self.records.setdefault(partition, []).append(record)


class GroupCoordinator:
    """Classic groups here; KIP-848's consumer groups in `consumer_protocol.py` (`self.consumer`), which
    shares this coordinator's lock, timers, store and config. A group id is one kind or the other.

    `topic_partitions(topic)` is the partition count the broker's metadata gives (0 or None: no such
    topic); the consumer protocol's target assignment needs it (Kafka's metadata image)."""

    def __init__(self, store: OffsetStore, config: CoordinatorConfig = CoordinatorConfig(), *,
                 scheduler: Scheduler | None = None, on_event: Callable[..., None] | None = None,
                 topic_partitions: Callable[[str], int | None] = lambda topic: None):
        from lab_cluster.assignment import SERVER_ASSIGNORS

        from .consumer_protocol import ConsumerGroupHeartbeats

        self.store = store
        self.config = config
        self.timers = scheduler or Scheduler()
        self.on_event = on_event or (lambda kind, **fields: None)
        self.topic_partitions = topic_partitions
        #: group.consumer.assignors, in its order (the first is the default)
        self.server_assignors = {name: SERVER_ASSIGNORS[name] for name in config.assignor_names}
        self.lock = threading.RLock()
        self.groups: dict[str, Group] = {}
        self.consumer = ConsumerGroupHeartbeats(self)
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.offsets_partitions: dict[int, str] = {}  # offsets partition it leads -> "loading" | "active"

    # -- which groups this coordinator serves -------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return group_partition(group_id, self.config.offsets_topic_num_partitions)

    def owner_error(self, group_id) -> ErrorCode | None:
        """Why this coordinator cannot answer for the group (None if it can)."""
        if not isinstance(group_id, str) or not group_id:
            return ErrorCode.INVALID_GROUP_ID
        status = self.offsets_partitions.get(self.partition_for(group_id))
        if status is None:
            return ErrorCode.NOT_COORDINATOR
        if status == "loading":
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def begin_loading(self, partition: int) -> None:
        with self.lock:
            self.offsets_partitions[partition] = "loading"

    def load_partition(self, partition: int, records: list[dict]) -> None:
        """Become coordinator for an offsets partition: replay its log (offsets, then the last group records)."""
        with self.lock:
            latest_group: dict[str, dict] = {}
            for record in records:
                group_id = record.get("group")
                if record.get("type") == "offset":
                    self.offsets.setdefault(group_id, {})[(record["topic"], record["partition"])] = record["offset"]
                elif record.get("type") in ("group", "consumer_group"):
                    latest_group[group_id] = record  # a group id is the kind its last record says
            for record in latest_group.values():
                if record["type"] == "consumer_group":
                    self.consumer.load(record)
                else:
                    self._restore_group(record)
            self.offsets_partitions[partition] = "active"
            self.on_event("offsets_loaded", offsets_partition=partition, records=len(records),
                          groups=sorted(latest_group))

    def _restore_group(self, record: dict) -> None:
        group = Group(record["group"], generation_id=record["generation"], protocol_type=PROTOCOL_TYPE,
                      protocol_name=record.get("protocol"), leader_id=record.get("leader"))
        for m in record.get("members", []):  # Kafka's loadGroup adds each member, static ones by instance id
            group.add(ClassicGroupMember(m["member_id"], m["client_id"], m["session_timeout_ms"],
                                         m["rebalance_timeout_ms"],
                             [(p["name"], p["metadata"]) for p in m["protocols"]],
                             group_instance_id=m.get("group_instance_id"), assignment=m.get("assignment", {})))
        if group.members:
            group.state = ClassicGroupState.STABLE
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._heartbeat_deadline(group, member)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads the partition now: its groups are Dead here, held requests answered NOT_COORDINATOR."""
        with self.lock:
            self.offsets_partitions.pop(partition, None)
            for group_id in [g for g in self.consumer.groups if self.partition_for(g) == partition]:
                self.consumer.unload(group_id)
                self.offsets.pop(group_id, None)
            for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
                group = self.groups.pop(group_id)
                self._set_state(group, ClassicGroupState.DEAD)
                for member in group.members.values():
                    member.answer_join(answer(ErrorCode.NOT_COORDINATOR))
                    member.answer_sync(answer(ErrorCode.NOT_COORDINATOR))
                    self.timers.cancel(("heartbeat", group_id, member.member_id))
                self.timers.cancel(("join", group_id))
                group.delayed_join = None  # the join timer's state goes with the timer
                self.timers.cancel(("sync", group_id))
                self.offsets.pop(group_id, None)

    # -- JoinGroup ------------------------------------------------------------------------
    def join_group(self, request: dict, respond: Respond) -> None:
        """JoinGroup: Kafka's `handleJoinGroup`.

        The checks every JoinGroup goes through come first, in Kafka's order
        (this coordinator serves the group, the request is well formed, the
        protocol type, the session timeout's bounds, the group exists or may
        be created, it is not Dead, it supports one of the member's
        protocols). Then a member without an id is handed one
        (`_join_unknown_member`, or `_join_static_new_member` if it names a
        `group.instance.id`), and a member with an id joins
        (`_join_known_member`).
        """
        with self.lock:
            member_id = request.get("member_id", "")
            err = self.owner_error(request.get("group_id"))  # Kafka's validateGroupStatus
            if err is not None:
                return respond(self._join_error(err, member_id))
            try:
                join = JoinRequest.parse(request)
            except (KeyError, TypeError, ValueError):
                return respond(self._join_error(ErrorCode.INVALID_REQUEST, member_id,
                                                "JoinGroup needs session_timeout_ms and protocols "
                                                "[{name, metadata}]"))
            if join.protocol_type != PROTOCOL_TYPE or not join.protocols:
                return respond(self._join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            if not (self.config.group_min_session_timeout_ms <= join.session_timeout_ms
                    <= self.config.group_max_session_timeout_ms):
                return respond(self._join_error(
                    ErrorCode.INVALID_SESSION_TIMEOUT, member_id,
                    f"session.timeout.ms={join.session_timeout_ms} is outside "
                    f"[{self.config.group_min_session_timeout_ms}, {self.config.group_max_session_timeout_ms}] "
                    f"(group.min/max.session.timeout.ms)"))
            if join.group_id in self.consumer.groups and not self.consumer.groups[join.group_id].members:
                self.consumer.unload(join.group_id)  # Kafka's maybeDeleteEmptyConsumerGroup
            if join.group_id in self.consumer.groups:
                return respond(self._join_error(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id,
                    f"{join.group_id} is a consumer group (KIP-848): its members use ConsumerGroupHeartbeat"))
            group = self.groups.get(join.group_id)
            if group is None:
                # Kafka creates the group only for a member without an id; an id for an unknown group is rejected
                if member_id:
                    return respond(self._join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                group = self.groups[join.group_id] = Group(join.group_id)
            # Kafka makes these two checks first thing in both doUnknownJoinGroup and doJoinGroup
            if group.state is ClassicGroupState.DEAD:
                return respond(self._join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            if not group.supports(join.protocols):
                return respond(self._join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            if member_id:
                self._join_known_member(group, join, respond)
            elif join.group_instance_id is not None:
                self._join_static_new_member(group, join, respond)
            else:
                self._join_unknown_member(group, join, respond)
            # Kafka's handleJoinGroup, after either path: "attempt to complete JoinGroup" (every member may be in now)
            if group.state is ClassicGroupState.PREPARING_REBALANCE:
                self._try_complete_join(group)

    def _join_unknown_member(self, group: Group, join: JoinRequest, respond: Respond) -> None:
        """A JoinGroup without a member id: Kafka's `doUnknownJoinGroup` (`doNewMemberJoinGroup` in Kafka 3.x).

        JoinGroup v4+ (`requireKnownMemberId`): the coordinator hands out an id,
        keeps it pending for one session timeout, and answers MEMBER_ID_REQUIRED
        so that the member comes back with it. The group itself does not change
        yet; a pending id holds up the completion of a join in progress.
        """
        new_id = f"{join.client_id or 'consumer'}-{uuid.uuid4()}"
        group.pending_members.add(new_id)
        self.timers.schedule(("pending", group.group_id, new_id), join.session_timeout_ms,
                             lambda: self._expire_pending(group, new_id))
        respond(self._join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))

    def _join_static_new_member(self, group: Group, join: JoinRequest, respond: Respond) -> None:
        """A JoinGroup without a member id but with a `group.instance.id`: Kafka's `doStaticNewMemberJoinGroup`.

        No MEMBER_ID_REQUIRED round: the instance id already names the member,
        so it is given its member id (``instanceId-uuid``, Kafka's
        `generateMemberId`) in this answer. An instance the group does not know
        is added and the group rebalances, like any new member; a known one is
        a restart of that member (`_update_static_member_and_rebalance`).
        """
        instance_id = join.group_instance_id
        new_id = f"{instance_id}-{uuid.uuid4()}"
        old_id = group.current_static_member_id(instance_id)
        if old_id is None:
            member = ClassicGroupMember(new_id, join.client_id, join.session_timeout_ms, join.rebalance_timeout_ms,
                            join.protocols, group_instance_id=instance_id)
            self._add_member_and_rebalance(group, member, respond)
        else:
            self._update_static_member_and_rebalance(group, old_id, new_id, join, respond)

    def _join_known_member(self, group: Group, join: JoinRequest, respond: Respond) -> None:
        """A JoinGroup with a member id: Kafka's `doJoinGroup` (`doCurrentMemberJoinGroup` in Kafka 3.x).

        A pending id (handed out by `_join_unknown_member`) becomes a member and
        the group rebalances. A current member either gets the current
        generation's result again (nothing changed) or, by state, is held for
        the rebalance it starts or joins. An id the group does not know gets
        UNKNOWN_MEMBER_ID: the member resets it and joins again without one.
        """
        member_id = join.member_id
        if member_id in group.pending_members:
            if join.group_instance_id is not None:
                # Only dynamic members are handed pending ids; Kafka throws IllegalStateException here,
                # which its request handler answers UNKNOWN_SERVER_ERROR
                return respond(self._join_error(ErrorCode.UNKNOWN_SERVER_ERROR, member_id,
                                                "a pending member id cannot join with a group_instance_id"))
            self.timers.cancel(("pending", group.group_id, member_id))
            member = ClassicGroupMember(member_id, join.client_id, join.session_timeout_ms, join.rebalance_timeout_ms,
                            join.protocols)
            self._add_member_and_rebalance(group, member, respond)
        elif (err := self._validate_current_member(group, member_id, join.group_instance_id)) is not None:
            return respond(self._join_error(err, member_id))
        else:
            member = group.members[member_id]
            changed = member.protocols != join.protocols
            member.session_timeout_ms, member.rebalance_timeout_ms = join.session_timeout_ms, join.rebalance_timeout_ms
            if group.state is ClassicGroupState.PREPARING_REBALANCE:
                self._update_member_and_rebalance(group, member, join.protocols, respond)
            elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
                if changed:
                    self._update_member_and_rebalance(group, member, join.protocols, respond)
                else:  # Kafka: it may have missed the JoinGroup answer; give it the current generation again
                    respond(self._join_result(group, member))
            elif group.state is ClassicGroupState.STABLE:
                # Kafka: the leader's JoinGroup forces a rebalance, so it can react to changes its
                # subscription does not show (a topic gained partitions)
                if group.is_leader(member_id) or changed:
                    self._update_member_and_rebalance(group, member, join.protocols, respond)
                else:
                    respond(self._join_result(group, member))
            else:  # Empty (Dead was answered before): unexpected; the member resets and rejoins
                return respond(self._join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _join_error(error: ErrorCode, member_id: str, message: str = "") -> dict:
        return answer(error, message, generation_id=-1, member_id=member_id, leader="", protocol_name=None,
                      members=[])

    def _join_result(self, group: Group, member: ClassicGroupMember) -> dict:
        return answer(generation_id=group.generation_id, protocol_name=group.protocol_name,
                      leader=group.leader_id, member_id=member.member_id,
                      members=group.leader_view() if group.is_leader(member.member_id) else [])

    def _add_member_and_rebalance(self, group: Group, member: ClassicGroupMember, respond: Respond) -> None:
        member.awaiting_join = respond
        member.is_new = True
        if group.state is ClassicGroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.delayed_join.new_member_added = True  # the initial delay will wait once more
        group.add(member)
        self._heartbeat_deadline(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.on_event("member_added", group=group.group_id, member=member.member_id)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} joined")

    def _update_static_member_and_rebalance(self, group: Group, old_id: str, new_id: str, join: JoinRequest,
                                            respond: Respond) -> None:
        """A known static member restarted: Kafka's `updateStaticMemberAndRebalance`.

        Its entry passes to the new member id (`Group.replace_static_member`),
        and whatever the old id still held open is answered
        FENCED_INSTANCE_ID: two processes with one instance id cannot both be
        the member. Then, by state:

        - Stable, and the protocol the group would select is unchanged: no
          rebalance. The group is written with the new member id and the member
          is answered at once with the current generation, no member list and
          the leader as it was *before* the replacement: a restarted leader
          sees another id as leader, so it does not run an assignment that a
          Stable group would never hand out. It then syncs and gets its old
          assignment.
        - Stable with a changed protocol, or CompletingRebalance (the leader may
          be assigning under the old id): rebalance.
        - PreparingRebalance: it is held for the join in progress.
        """
        current_leader = group.leader_id
        old = group.members[old_id]
        old.answer_join(self._join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        old.answer_sync(answer(ErrorCode.FENCED_INSTANCE_ID, assignment={}))
        member = group.replace_static_member(join.group_instance_id, old_id, new_id)
        # the session timer goes on under the new id (Kafka reschedules it before the timeouts are updated)
        self.timers.cancel(("heartbeat", group.group_id, old_id))
        self._heartbeat_deadline(group, member)
        member.protocols = join.protocols
        member.session_timeout_ms, member.rebalance_timeout_ms = join.session_timeout_ms, join.rebalance_timeout_ms
        member.awaiting_join = respond
        self.on_event("member_replaced", group=group.group_id, member=new_id, replaced=old_id,
                      group_instance_id=join.group_instance_id)
        reason = f"static member {new_id} (instance {join.group_instance_id}) rejoined"
        if group.state is ClassicGroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                self._store_group(group)  # so that a new coordinator knows the new member id
                member.answer_join(answer(generation_id=group.generation_id, protocol_name=group.protocol_name,
                                          leader=current_leader, member_id=new_id, members=[]))
            else:
                self._maybe_prepare_rebalance(group, reason + " with a change of protocol")
        elif group.state is ClassicGroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, reason)
        # PreparingRebalance: held, like any member that rejoined (Empty and Dead cannot have a known member)

    def _update_member_and_rebalance(self, group: Group, member: ClassicGroupMember, protocols,
                                     respond: Respond) -> None:
        member.answer_join(self._join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))  # replaced
        member.protocols = protocols
        member.awaiting_join = respond
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        self._clear_pending_sync(group)
        if group.state is ClassicGroupState.COMPLETING_REBALANCE:
            # The generation being synced is abandoned: tell those waiting on SyncGroup to rejoin.
            for m in group.members.values():
                m.assignment = {}
                m.answer_sync(answer(ErrorCode.REBALANCE_IN_PROGRESS, assignment={}))
        rebalance_ms = group.rebalance_timeout_ms()
        if group.state is ClassicGroupState.EMPTY:
            # Kafka's InitialDelayedJoin: wait for more members before the first generation
            delay = self.config.group_initial_rebalance_delay_ms
            group.delayed_join = DelayedJoin(initial=True, remaining_ms=max(rebalance_ms - delay, 0))
        else:
            delay = rebalance_ms  # Kafka's DelayedJoin: the rebalance timeout
            group.delayed_join = DelayedJoin(initial=False)
        self._set_state(group, ClassicGroupState.PREPARING_REBALANCE, reason=reason)
        self.timers.schedule(("join", group.group_id), delay, lambda: self._join_timer_expired(group))

    def _join_timer_expired(self, group: Group) -> None:
        """The join timer fired: Kafka's `DelayedJoin.onComplete` (or `InitialDelayedJoin.onComplete`)."""
        pending = group.delayed_join
        delay = pending.wait_again_ms(self.config.group_initial_rebalance_delay_ms) if pending is not None else None
        if delay is not None:  # a member joined during the initial delay, and the budget allows another
            self.timers.schedule(("join", group.group_id), delay, lambda: self._join_timer_expired(group))
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        """Kafka's `DelayedJoin.tryComplete`: complete early once every member has rejoined.

        Never during the initial delay (`InitialDelayedJoin.tryComplete` is false).
        """
        pending = group.delayed_join
        if pending is not None and pending.may_complete_early() and group.has_all_members_joined():
            self.timers.cancel(("join", group.group_id))
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's `onCompleteJoin`: dynamic members that did not rejoin are removed, the next generation begins.

        Static members that did not rejoin stay: the next generation includes
        them, and the leader assigns them their share as if they were there
        (what KIP-345 is for: a restart within the session timeout moves no
        partition). If the leader is one of them, a member that rejoined leads
        instead; if nobody rejoined (only static members are left, all
        silent), the join waits another rebalance timeout, until their
        sessions run out.

        Reached when the join timer fires (`_join_timer_expired`), or early
        through `_try_complete_join`, which JoinGroup, a member's removal and a
        pending member id's expiry or LeaveGroup call.
        """
        if group.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        group.delayed_join = None
        for member in group.not_yet_rejoined():
            if member.is_static:
                continue
            self.timers.cancel(("heartbeat", group.group_id, member.member_id))
            group.remove(member.member_id)
            self.on_event("member_removed", group=group.group_id, member=member.member_id,
                          reason="did not rejoin within the rebalance timeout")
        if not group.maybe_elect_new_joined_leader() and group.members:
            group.delayed_join = DelayedJoin(initial=False)
            self.timers.schedule(("join", group.group_id), group.rebalance_timeout_ms(),
                                 lambda: self._join_timer_expired(group))
            self.on_event("join_postponed", group=group.group_id, reason="no member rejoined")
            return
        was = group.state
        group.init_next_generation()
        self._state_event(group, was, "join complete")
        if group.state is ClassicGroupState.EMPTY:
            self._store_group(group)
            return
        for member in group.members.values():
            member.is_new = False
            member.answer_join(self._join_result(group, member))
            self._heartbeat_deadline(group, member)
        # KAFKA-12890: every member must now send SyncGroup within the rebalance timeout
        group.pending_sync = set(group.members)
        generation = group.generation_id
        self.timers.schedule(("sync", group.group_id), group.rebalance_timeout_ms(),
                             lambda: self._sync_expired(group, generation))

    def _sync_expired(self, group: Group, generation: int) -> None:
        """Kafka's `onExpirePendingSync`: members that never sent SyncGroup are removed, the group rebalances.

        Static members too: Kafka makes no exception for them here, so a static
        member that missed a join round is removed if it has not synced
        within the rebalance timeout after the join completed.
        """
        if generation != group.generation_id or group.state not in (ClassicGroupState.COMPLETING_REBALANCE,
                                                                    ClassicGroupState.STABLE):
            return
        missing = sorted(group.pending_sync)
        if not missing:
            return
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self.timers.cancel(("heartbeat", group.group_id, member_id))
                group.remove(member_id)
                self.on_event("member_removed", group=group.group_id, member=member_id,
                              reason="no SyncGroup within the rebalance timeout")
        self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _clear_pending_sync(self, group: Group) -> None:
        group.pending_sync.clear()
        self.timers.cancel(("sync", group.group_id))

    # -- SyncGroup ------------------------------------------------------------------------
    def sync_group(self, request: dict, respond: Respond) -> None:
        with self.lock:
            if self.owner_error(request.get("group_id")) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # Kafka: "the consumer will attempt to rejoin without needing to rediscover the coordinator"
                return respond(answer(ErrorCode.REBALANCE_IN_PROGRESS, assignment={}))
            group, err = self._current_member(request)
            if err is not None:
                return respond(answer(err, assignment={}))
            member_id = request["member_id"]
            member = group.members[member_id]
            if group.state is ClassicGroupState.EMPTY:
                return respond(answer(ErrorCode.UNKNOWN_MEMBER_ID, assignment={}))
            if group.state is ClassicGroupState.PREPARING_REBALANCE:
                return respond(answer(ErrorCode.REBALANCE_IN_PROGRESS, assignment={}))
            group.pending_sync.discard(member_id)
            if group.state is ClassicGroupState.STABLE:
                self._heartbeat_deadline(group, member)
                return respond(answer(assignment=member.assignment))
            # CompletingRebalance: wait for the leader's assignment.
            member.awaiting_sync = respond
            self._heartbeat_deadline(group, member)
            if group.is_leader(member_id):
                try:
                    given = {str(a["member_id"]): dict(a["assignment"]) for a in request.get("assignments", [])}
                except (KeyError, TypeError, ValueError):
                    member.awaiting_sync = None
                    return respond(answer(ErrorCode.INVALID_REQUEST, "assignments must be "
                                          "[{member_id, assignment}]", assignment={}))
                for m in group.members.values():
                    m.assignment = given.get(m.member_id, {})
                self._store_group(group)
                self._set_state(group, ClassicGroupState.STABLE, "leader's assignment received")
                for m in group.members.values():
                    m.answer_sync(answer(assignment=m.assignment))

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------
    def heartbeat(self, request: dict) -> dict:
        with self.lock:
            if self.owner_error(request.get("group_id")) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                return answer()  # Kafka: "the group is still loading, so respond just blindly"
            group, err = self._current_member(request)
            if err is not None:
                return answer(err)
            if group.state is ClassicGroupState.EMPTY:
                return answer(ErrorCode.UNKNOWN_MEMBER_ID)
            self._heartbeat_deadline(group, group.members[request["member_id"]])
            if group.state is ClassicGroupState.PREPARING_REBALANCE:
                return answer(ErrorCode.REBALANCE_IN_PROGRESS)
            return answer()

    def leave_group(self, request: dict) -> dict:
        """LeaveGroup: Kafka's `handleLeaveGroup` (one member per request here).

        Without a member id but with a `group.instance.id`, the static member
        holding that instance id is removed (KIP-345's way for an operator to
        take a static member out at once rather than wait for its session timeout).
        """
        with self.lock:
            group_id, member_id = request.get("group_id"), request.get("member_id")
            instance_id = request.get("group_instance_id")
            group = self.groups.get(group_id) if self.owner_error(group_id) is None else None
            if group is not None and group.state is not ClassicGroupState.DEAD and not member_id \
                    and isinstance(instance_id, str):
                current = group.current_static_member_id(instance_id)
                if current is None:
                    return answer(ErrorCode.UNKNOWN_MEMBER_ID)
                self._remove_member_and_update(group, group.members[current], "removed by its group.instance.id")
                return answer()
            if group is not None and group.state is not ClassicGroupState.DEAD and member_id in group.pending_members:
                # Kafka's removePendingMemberAndUpdateGroup: the id was handed out and never used
                group.pending_members.discard(member_id)
                self.timers.cancel(("pending", group_id, member_id))
                self.on_event("member_removed", group=group_id, member=member_id, reason="pending member left")
                if group.state is ClassicGroupState.PREPARING_REBALANCE:
                    self._try_complete_join(group)
                return answer()
            group, err = self._current_member(request, check_generation=False)
            if err is not None:
                return answer(err)
            self._remove_member_and_update(group, group.members[request["member_id"]], "left the group")
            return answer()

    def _current_member(self, request: dict, *, check_generation: bool = True) -> tuple[Group | None, ErrorCode | None]:
        """The request's group, if its member may be answered at all; else why not (the fencing rules)."""
        group_id = request.get("group_id")
        err = self.owner_error(group_id)
        if err is not None:
            return None, err
        group = self.groups.get(group_id)
        if group is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        generation = request.get("generation_id") if check_generation else group.generation_id
        err = self._member_error(group, request.get("member_id"), generation, request.get("group_instance_id"))
        return (group, None) if err is None else (None, err)

    def _member_error(self, group: Group, member_id, generation_id, instance_id=None) -> ErrorCode | None:
        if group.state is ClassicGroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        err = self._validate_current_member(group, member_id, instance_id)
        if err is not None:
            return err
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    @staticmethod
    def _validate_current_member(group: Group, member_id, instance_id) -> ErrorCode | None:
        """Kafka's `validateCurrentMember`: is this the member it claims to be?

        With a `group.instance.id`: the instance must be known
        (UNKNOWN_MEMBER_ID) and held by this member id, else FENCED_INSTANCE_ID
        (the zombie of a restarted static member). In all cases the member id
        must be in the group (UNKNOWN_MEMBER_ID).
        """
        if instance_id is not None:
            if not isinstance(instance_id, str):
                return ErrorCode.INVALID_REQUEST
            current = group.current_static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _heartbeat_deadline(self, group: Group, member: ClassicGroupMember, timeout_ms: int | None = None) -> None:
        self.timers.schedule(("heartbeat", group.group_id, member.member_id),
                             member.session_timeout_ms if timeout_ms is None else timeout_ms,
                             lambda: self._session_expired(group, member.member_id))

    def _session_expired(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or group.state is ClassicGroupState.DEAD:
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            self._heartbeat_deadline(group, member)  # a held request keeps it alive (Kafka: not a new member's)
            return
        self.on_event("member_expired", group=group.group_id, member=member_id,
                      session_timeout_ms=member.session_timeout_ms)
        self._remove_member_and_update(group, member, "session timeout")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.state is ClassicGroupState.PREPARING_REBALANCE:
                self._try_complete_join(group)

    def _remove_member_and_update(self, group: Group, member: ClassicGroupMember, reason: str) -> None:
        gone = answer(ErrorCode.UNKNOWN_MEMBER_ID, generation_id=-1, member_id=member.member_id, members=[],
                      assignment={})
        member.answer_join(gone)
        member.answer_sync(gone)
        self.timers.cancel(("heartbeat", group.group_id, member.member_id))
        group.remove(member.member_id)
        self.on_event("member_removed", group=group.group_id, member=member.member_id, reason=reason)
        if group.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id}: {reason}")
        if group.state is ClassicGroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    # -- offsets --------------------------------------------------------------------------
    def commit_offsets(self, request: dict) -> dict:
        with self.lock:
            group_id, member_id = request.get("group_id"), request.get("member_id", "")
            generation = request.get("generation_id", -1)
            err = self.owner_error(group_id)
            if err is not None:
                return answer(err)
            try:
                offsets = [(str(o["topic"]), int(o["partition"]), int(o["offset"])) for o in request["offsets"]]
            except (KeyError, TypeError, ValueError):
                return answer(ErrorCode.INVALID_REQUEST, "offsets must be [{topic, partition, offset}]")
            group = self.groups.get(group_id)
            consumer_group = self.consumer.groups.get(group_id)
            if consumer_group is not None:
                # KIP-848: the generation field carries the member epoch (Kafka's GenerationIdOrMemberEpoch)
                err = self.consumer.validate_commit(consumer_group, member_id, generation)
                if err is not None:
                    return answer(err)
            elif group is None:
                if generation >= 0:
                    return answer(ErrorCode.ILLEGAL_GENERATION)
                group = self.groups[group_id] = Group(group_id)  # offsets without group management
            elif group.state is ClassicGroupState.DEAD:
                return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            elif not (generation < 0 and group.state is ClassicGroupState.EMPTY):
                err = self._member_error(group, member_id, generation, request.get("group_instance_id"))
                if err is None and group.state is ClassicGroupState.COMPLETING_REBALANCE:
                    err = ErrorCode.REBALANCE_IN_PROGRESS
                if err is not None:
                    return answer(err)
                self._heartbeat_deadline(group, group.members[member_id])
            partition = self.partition_for(group_id)
            for topic, p, offset in offsets:
                self.store.append(partition, {"type": "offset", "group": group_id, "topic": topic, "partition": p,
                                              "offset": offset, "member": member_id, "generation": generation})
                self.offsets.setdefault(group_id, {})[(topic, p)] = offset
            return answer()

    def fetch_offsets(self, request: dict) -> dict:
        with self.lock:
            group_id = request.get("group_id")
            err = self.owner_error(group_id)
            if err is not None:
                return answer(err, offsets=[])
            consumer_group = self.consumer.groups.get(group_id)
            if consumer_group is not None:
                err = self.consumer.validate_fetch(consumer_group, request.get("member_id"),
                                                   request.get("member_epoch"))
                if err is not None:
                    return answer(err, offsets=[])
            committed = self.offsets.get(group_id, {})
            wanted = request.get("partitions")
            keys = [(str(t), int(p)) for t, p in wanted] if wanted is not None else sorted(committed)
            return answer(offsets=[{"topic": t, "partition": p, "offset": committed.get((t, p), -1)}
                                   for t, p in keys])

    # -- bookkeeping --------------------------------------------------------------------
    def _store_group(self, group: Group) -> None:
        self.store.append(self.partition_for(group.group_id), {
            "type": "group", "group": group.group_id, "generation": group.generation_id,
            "protocol": group.protocol_name, "leader": group.leader_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                         "session_timeout_ms": m.session_timeout_ms, "rebalance_timeout_ms": m.rebalance_timeout_ms,
                         "protocols": [{"name": n, "metadata": md} for n, md in m.protocols],
                         "assignment": m.assignment} for m in group.members.values()]})

    def _set_state(self, group: Group, to: ClassicGroupState, reason: str = "") -> None:
        was = group.transition(to)
        self._state_event(group, was, reason)

    def _state_event(self, group: Group, was: ClassicGroupState, reason: str) -> None:
        self.on_event("group_state", group=group.group_id, generation=group.generation_id,
                      **{"from": was.value, "to": group.state.value, "reason": reason,
                         "members": len(group.members), "leader": group.leader_id,
                         "protocol": group.protocol_name})

    def describe(self, group_id: str) -> dict:
        """What `kafka-consumer-groups --describe --state` would say (for tests and the CLI)."""
        with self.lock:
            described = self.consumer.describe(group_id)
            if described is not None:
                return described
            group = self.groups.get(group_id)
            if group is None:  # Kafka describes an unknown group as Dead
                return {"state": "Dead", "generation": -1, "members": [], "leader": None, "protocol": None}
            return {"state": group.state.value, "generation": group.generation_id,
                    "members": sorted(group.members), "leader": group.leader_id, "protocol": group.protocol_name}
