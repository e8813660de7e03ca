"""One consumer group as its coordinator holds it: Kafka's `GroupMetadata` and `MemberMetadata`.

States and the transitions Kafka allows (`GroupState.valid_previous`)::

    Empty               --a member joins--------------------------------> PreparingRebalance
    PreparingRebalance  --every member has (re)joined, or the rebalance
                          timeout expired: generation + 1, leader gets
                          the members' subscriptions--------------------> CompletingRebalance
    PreparingRebalance  --same, but nobody is left: generation + 1-------> Empty
    CompletingRebalance --the leader's SyncGroup: assignment relayed-----> Stable
    CompletingRebalance --a member joins, leaves or expires--------------> PreparingRebalance
    Stable              --a member joins, leaves, expires, or the
                          leader rejoins---------------------------------> PreparingRebalance
    any                 --the coordinator loses the group's partition----> Dead

A member is in the group from its JoinGroup (with the member id the
coordinator gave it) until it leaves, its session times out, or (a dynamic
member) a rebalance completes without it. While a rebalance is prepared, a
member "awaits join" (its JoinGroup is held open); after it, "awaits sync".

A static member (KIP-345) also has a `group.instance.id` that it keeps across
restarts. The group maps each instance id to the member id that holds it now
(`static_members`, Kafka's `staticMembers`). A rebalance that completes
without a static member keeps it, and a restarted instance takes over its
old entry under a new member id (`replace_static_member`): same protocols,
assignment and leadership, while the old member id is fenced.

While the group is PreparingRebalance, its join timer runs, and what that
timer will do when it fires is kept on the group, in `Group.delayed_join`
(a `DelayedJoin`; None when no join timer runs).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous(self) -> frozenset[ClassicGroupState]:
        return _VALID_PREVIOUS[self]


#: Kafka's `GroupState.validPreviousStates`: the states a group may come to each state from
_S = ClassicGroupState
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
}

Respond = Callable[[dict], None]


@dataclass
class ClassicGroupMember:
    member_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, dict]]  # (assignor name, subscription metadata), in preference order
    group_instance_id: str | None = None  # set for a static member (KIP-345)
    assignment: dict = field(default_factory=dict)
    awaiting_join: Respond | None = None
    awaiting_sync: Respond | None = None
    is_new: bool = False  # added by the rebalance in progress (Kafka's `MemberMetadata.isNew`)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> dict:
        return next(meta for name, meta in self.protocols if name == protocol)

    def answer_join(self, result: dict) -> None:
        """Answer the held JoinGroup, if any."""
        respond, self.awaiting_join = self.awaiting_join, None
        if respond is not None:
            respond(result)

    def answer_sync(self, result: dict) -> None:
        """Answer the held SyncGroup, if any."""
        respond, self.awaiting_sync = self.awaiting_sync, None
        if respond is not None:
            respond(result)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names() if name in candidates)


class InvalidTransition(Exception):
    pass


@dataclass
class DelayedJoin:
    """The join timer that is running (`Scheduler` key ``("join", group)``), and what it does when it fires.

    Kafka keeps it in the join purgatory as one of two operations:

    - `DelayedJoin` (``initial=False``): the rebalance timeout of a group that
      had members. It completes the join early as soon as every member has
      rejoined (Kafka's `tryComplete`), else when it fires.
    - `InitialDelayedJoin` (``initial=True``): the group was Empty, so it waits
      `group.initial.rebalance.delay.ms` for more members before the first
      generation, and never completes early. If a member joined during the
      delay (`new_member_added`, Kafka's `GroupMetadata.newMemberAdded`), it
      waits once more, out of what is left of the rebalance timeout
      (`remaining_ms`).

    A rebalance timeout of 8 s and a delay of 3 s leave 5 s for further
    delays; members keep arriving, so each delay is followed by another until
    the budget is spent::

        >>> pending = DelayedJoin(initial=True, remaining_ms=8_000 - 3_000)
        >>> waits = []
        >>> for _ in range(4):
        ...     pending.new_member_added = True
        ...     waits.append(pending.wait_again_ms(3_000))
        >>> waits
        [3000, 2000, None, None]
        >>> DelayedJoin(initial=True, remaining_ms=5_000).wait_again_ms(3_000) is None  # nobody joined: complete
        True
    """

    initial: bool
    remaining_ms: int = 0           # InitialDelayedJoin only: the rebalance timeout's budget for further delays
    new_member_added: bool = False  # InitialDelayedJoin only: a member was added during the current delay

    def may_complete_early(self) -> bool:
        """Kafka's `tryComplete`: a DelayedJoin completes once every member has rejoined; the initial one waits."""
        return not self.initial

    def wait_again_ms(self, configured_delay_ms: int) -> int | None:
        """When the timer fires: how long to wait once more, or None to complete the join now.

        Kafka's `InitialDelayedJoin.onComplete`: another delay (at most what is
        left of the budget) only if a member was added during this one.
        """
        if not (self.initial and self.new_member_added and self.remaining_ms > 0):
            return None
        delay = min(configured_delay_ms, self.remaining_ms)
        self.new_member_added = False
        self.remaining_ms = max(self.remaining_ms - delay, 0)
        return delay


@dataclass
class Group:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)  # given this generation, no SyncGroup yet
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> its current member id
    delayed_join: DelayedJoin | None = None  # the join timer's state while PreparingRebalance

    def transition(self, to: ClassicGroupState) -> ClassicGroupState:
        if self.state not in to.valid_previous:
            raise InvalidTransition(f"group {self.group_id}: {self.state.value} -> {to.value} is not allowed")
        was, self.state = self.state, to
        return was

    def add(self, member: ClassicGroupMember) -> None:
        if member.is_static:
            if member.group_instance_id in self.static_members:  # Kafka throws IllegalStateException
                raise ValueError(f"group {self.group_id}: instance {member.group_instance_id} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = "consumer"
        if self.leader_id is None:
            self.leader_id = member.member_id  # the first joiner leads
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.is_static:
            self.static_members.pop(member.group_instance_id, None)
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def current_static_member_id(self, instance_id: str) -> str | None:
        """The member id that holds this `group.instance.id` now (None: no such static member)."""
        return self.static_members.get(instance_id)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicGroupMember:
        """Kafka's `replaceStaticMember`: a restarted static member takes over its entry under a new member id.

        Everything else stays: protocols, assignment, and leadership (if the
        old id led, the new one does). The caller first answers whatever the
        old id still held open (FENCED_INSTANCE_ID). As in Kafka, the old id's
        place in `pending_sync` is not handed over.
        """
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's `maybeElectNewJoinedLeader`, when a join completes: the leader must be a member that rejoined.

        A static member is kept even if it did not rejoin, so the leader may be
        one that did not: then the first member (in join order) that did
        rejoin leads instead. False if nobody rejoined, or there is no leader
        (the group is empty).
        """
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is None:
            return False
        if leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def rebalance_timeout_ms(self) -> int:
        """Kafka's `GroupMetadata.rebalanceTimeoutMs`: the largest of the members'."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def can_rebalance(self) -> bool:
        return self.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY)

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def supports(self, protocols: list[tuple[str, dict]]) -> bool:
        """Kafka's `supportsProtocols`: an empty group takes anything; otherwise one protocol must be common."""
        if not self.members:
            return bool(protocols)
        return bool(self.candidate_protocols() & {name for name, _ in protocols})

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def select_protocol(self) -> str:
        """The protocol with most votes, each member voting for its favourite among the common ones.

        Kafka breaks a tie by hash-map order; the lab takes the first in name order.
        """
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda name: (-votes[name], name))

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(ClassicGroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(ClassicGroupState.EMPTY)

    def leader_view(self) -> list[dict]:
        """What the leader gets in its JoinGroup answer: every member's subscription for the chosen protocol.

        With each member's `group.instance.id` (None for a dynamic member): the
        assignors order static members by it (`lab_cluster/assignment/base.py`).
        """
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)}
                for m in self.members.values()]
