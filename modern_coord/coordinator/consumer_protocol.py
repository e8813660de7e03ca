"""KIP-848's `ConsumerGroupHeartbeat` on the coordinator: Kafka 4.0's consumer protocol, without I/O.

A member of a consumer group (as opposed to a classic group; a group id is one
or the other) sends only heartbeats. There is no barrier: each heartbeat is
answered at once, and the member reconciles towards the target assignment on
its own (`consumer_group.py` holds the group and the reconciliation rules).

One heartbeat (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`)::

    validate the request            INVALID_REQUEST, UNSUPPORTED_ASSIGNOR
    epoch -1 / -2                   leave (below)
    find or create the group        epoch 0 creates it; else GROUP_ID_NOT_FOUND; a classic
                                    group with members: GROUP_ID_NOT_FOUND ("not a consumer group")
    group full                      GROUP_MAX_SIZE_REACHED (a new member only)
    find or create the member       member id "" gets a new id (the coordinator makes it, v0);
                                    epoch 0 creates it; else UNKNOWN_MEMBER_ID
      a static member (instance id) joining with epoch 0 takes over the instance's
        member, keeping its assignment, only if the old one left with epoch -2:
        else UNRELEASED_INSTANCE_ID; with epoch > 0 the instance must be held by
        this member id (FENCED_INSTANCE_ID)
    the epoch rules                 a larger epoch than the member's: FENCED_MEMBER_EPOCH;
                                    a smaller one only if it is the previous epoch and the
                                    owned partitions are a subset of the assignment (the answer
                                    with the bumped epoch may have been lost); else FENCED
    1. update the member            a new member, or a changed subscription, or a changed
                                    partition count of a subscribed topic: group epoch + 1
    2. target assignment            group epoch > assignment epoch: the server assignor runs
                                    over every member (sticky to their current targets)
    3. reconcile this member        `next_assignment`; entering UNREVOKED_PARTITIONS starts its
                                    rebalance timeout (fenced if it has not revoked in time)
    session timeout restarted       `group.consumer.session.timeout.ms`, set by the broker
    answer                          member id, member epoch, `group.consumer.heartbeat.interval.ms`,
                                    and the assignment if it changed or the request was full

Leaving: epoch -1 removes the member (its partitions are free at once) and
bumps the group epoch; epoch -2, from a static member, keeps it and its
partitions (epoch -2) so that the instance may come back with its assignment
and no rebalance; it is removed only if its session expires first. A session
expiry or a rebalance timeout fences the member as a leave does.

Offset commits of a consumer group are fenced by member epoch
(`validate_commit`): an unknown member gets UNKNOWN_MEMBER_ID, an epoch other
than the member's current one STALE_MEMBER_EPOCH; epoch -1 is accepted only
while the group has no member (an admin commit). OffsetFetch with a member id
and epoch is checked the same way.

The group is written to `__consumer_offsets` (one `consumer_group` record with
the whole group, where Kafka writes one record per member and kind) whenever
it changes, and a coordinator that takes the offsets partition over replays
it, restarting every member's session timeout (Kafka's `onLoaded`).

A topic that grows (issue 39). Kafka 4.1's coordinator learns of the new
partition count from the metadata image (`GroupMetadataManager.onNewMetadataImage`,
which calls `requestMetadataRefresh` on every group subscribed to a changed
topic); at the next heartbeat of any member of such a group
(`hasMetadataExpired`), `updateSubscriptionMetadata` computes the group's
metadata hash again, finds it changed, and bumps the group epoch; the new
target assignment has the new partitions, and reaches each member in its
heartbeat answers (`group.consumer.heartbeat.interval.ms` apart). The members
never look for new partitions themselves. The lab's coordinator reads the
partition count from its broker's metadata (`Broker.partition_count`, which the
broker's ZooKeeper watch on the topic's znode keeps current), so the bump comes
at the first heartbeat after the broker learned of the new partitions (or at
a member's leave or fencing, which recompute the metadata too). It records
`partitions_seen` (`group`, `topic`, `partitions`, `before`; the broker adds
`broker`) then, once per group and new count: the subscription metadata it
compares with is the group's, kept with it in `__consumer_offsets`, so a
coordinator that takes the group over does not notice the same growth again
(a heartbeat that fails after noticing it, its assignor failing, leaves the
group unchanged, and the next one notices and records it again, as its
`group_epoch` is). The `group_epoch` event names the topics that grew.

Departures, stated: subscription metadata is recomputed on every heartbeat
(Kafka: when `onNewMetadataImage` asked for a refresh, or the member's
subscription changed; Kafka 4.1 keeps a hash of it, 4.0 the counts, as the lab);
the lab's broker learns of new partitions from ZooKeeper before the controller
has elected their leaders (Kafka's image has each new partition with its
leader), so a member may be assigned one whose leader is not known yet: its
fetcher asks for metadata again until one is;
`assignment` in the answer names topics, not topic ids; no regex
subscription; a classic member cannot join a consumer group (Kafka 4.0's
online migration converts between the two); JoinGroup for a consumer group's
id is answered INCONSISTENT_GROUP_PROTOCOL while the group has members (an
empty one is deleted and the id becomes a classic group, as in Kafka); a
topic deleted and created again with the same partition count does not bump
the group epoch (Kafka sees a new topic id); DescribeGroups describes a
consumer group (`describe`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from lab_cluster.assignment.server import MemberSpec
from lab_cluster.wire import ErrorCode, WireError

from .consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupMemberState,
    Partitions,
    next_assignment,
)

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator


def _partitions(rows) -> Partitions:
    """[{"topic", "partitions"}] -> {(topic, p)}; raises ValueError/TypeError/KeyError on a malformed list."""
    return frozenset((str(r["topic"]), int(p)) for r in rows for p in r["partitions"])


def _rows(parts: Partitions) -> list[dict]:
    topics: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        topics.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]


def _error(code: ErrorCode, message: str = "") -> dict:
    """An error answer with Kafka's defaults for the other fields (member id null, epoch 0, no assignment)."""
    out = {"error_code": int(code), "error": code.name, "member_id": None, "member_epoch": 0,
           "heartbeat_interval_ms": 0, "assignment": None}
    if message:
        out["message"] = message
    return out


class ConsumerGroupHeartbeats:
    """The consumer-protocol part of a `GroupCoordinator`: its lock, timers, store and config are shared."""

    def __init__(self, coordinator: GroupCoordinator):
        self.c = coordinator
        self.groups: dict[str, ConsumerGroup] = {}

    # -- the API --------------------------------------------------------------------------
    def heartbeat(self, request: dict) -> dict:
        with self.c.lock:
            group_id = request.get("group_id")
            if not isinstance(group_id, str) or not group_id:  # Kafka validates the request before routing it
                return _error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
            err = self.c.owner_error(group_id)
            if err is not None:
                return _error(err)
            try:
                return self._heartbeat(request)
            except WireError as exc:
                return _error(exc.code, exc.message)

    def _heartbeat(self, request: dict) -> dict:
        req = self._validated(request)
        epoch = req["member_epoch"]
        if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        group_id, instance_id, owned = req["group_id"], req["instance_id"], req["owned"]
        joining = epoch == JOIN_GROUP_MEMBER_EPOCH
        # a copy: a heartbeat that fails half-way changes nothing (Kafka discards a failed request's records)
        group = self._group(group_id, create=joining).copy()
        member_id = req["member_id"] or str(uuid.uuid4())
        if len(group.members) >= self.c.config.group_consumer_max_size and member_id not in group.members:
            raise WireError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                            f"the group has reached group.consumer.max.size={self.c.config.group_consumer_max_size}")
        member, replaced = self._member(group, member_id, epoch, instance_id, owned, joining)

        # 1. the member, and the group epoch if its subscription (or the topics' partition counts) changed
        updated = self._updated(member, member_id, req, request.get("client_id"))
        changed = updated != member or replaced is not None or group_id not in self.groups
        if replaced is not None:
            group.replace(replaced, updated)
        else:
            group.put(updated)
        metadata = self._subscription_metadata(group)
        if updated.subscribed_topics != member.subscribed_topics or metadata != group.subscription_metadata:
            grew = self._partitions_seen(group, metadata)
            group.subscription_metadata = metadata
            reasons = [f"the partition count of {', '.join(grew)} changed"] if grew else []
            if updated.subscribed_topics != member.subscribed_topics or not grew:
                reasons.insert(0, f"member {member_id} joined or changed its subscription")
            self._bump(group, "; ".join(reasons))
            changed = True

        # 2. the target assignment, if the group epoch moved past it
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
            changed = True

        # 3. this member one step closer to its target
        target = group.target.get(member_id, frozenset())
        if not updated.reconciled_to(group.assignment_epoch):
            reconciled = next_assignment(updated, group.assignment_epoch, target, owned, group.partition_epoch)
            if reconciled != updated:
                group.put(reconciled)
                changed = True
                self._member_event(group, updated, reconciled)
                self._revocation_deadline(group, reconciled)
            updated = reconciled

        self.groups[group_id] = group
        self.c.groups.pop(group_id, None)  # an empty classic group of that id goes (maybeDeleteEmptyClassicGroup)
        self._session_deadline(group, member_id)
        if changed:
            self._store(group)
        response = {"error_code": 0, "error": "NONE", "member_id": member_id, "member_epoch": updated.member_epoch,
                    "heartbeat_interval_ms": self.c.config.group_consumer_heartbeat_interval_ms, "assignment": None}
        full = joining or (req["rebalance_timeout_ms"] != -1 and req["topics"] is not None and owned is not None)
        if full or updated.assigned != member.assigned:
            response["assignment"] = {"topic_partitions": _rows(updated.assigned)}
        return response

    # -- the steps ------------------------------------------------------------------------
    @staticmethod
    def _updated(member: ConsumerGroupMember, member_id: str, req: dict, client_id) -> ConsumerGroupMember:
        """The member with what the heartbeat changed (Kafka's `maybeUpdate...`: a null or -1 field is unchanged)."""
        changes = {"instance_id": req["instance_id"], "rack_id": req["rack_id"], "subscribed_topics": req["topics"],
                   "server_assignor": req["assignor"],
                   "rebalance_timeout_ms": None if req["rebalance_timeout_ms"] == -1 else req["rebalance_timeout_ms"],
                   "client_id": None if client_id is None else str(client_id)}
        return replace(member, member_id=member_id, **{k: v for k, v in changes.items() if v is not None})

    def _validated(self, request: dict) -> dict:
        """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, on the lab's JSON (types checked too)."""
        def bad(why: str):
            raise WireError(ErrorCode.INVALID_REQUEST, why)

        group_id, member_id = request.get("group_id"), request.get("member_id", "")
        epoch, instance_id = request.get("member_epoch"), request.get("instance_id")
        rack_id, timeout = request.get("rack_id"), request.get("rebalance_timeout_ms", -1)
        topics, assignor = request.get("subscribed_topic_names"), request.get("server_assignor")
        if not isinstance(group_id, str) or not group_id:
            bad("GroupId can't be empty.")
        if not isinstance(member_id, str) or not isinstance(epoch, int) or not isinstance(timeout, int):
            bad("member_id must be a string, member_epoch and rebalance_timeout_ms integers")
        for name, value in (("InstanceId", instance_id), ("RackId", rack_id)):
            if value is not None and (not isinstance(value, str) or not value):
                bad(f"{name} can't be empty.")
        # Kafka 3.7-3.9 refused any regex field that was not null; Kafka 4.0, which serves regex subscriptions,
        # takes an empty one as "no regex", and librdkafka (2.12+, KIP-848 GA against Kafka 4.0) always sends ""
        # when it subscribes by name: the lab, with no regex support, refuses a non-empty one only
        if request.get("subscribed_topic_regex"):
            bad("SubscribedTopicRegex is not supported yet.")
        if topics is not None and (not isinstance(topics, list) or not all(isinstance(t, str) for t in topics)):
            bad("subscribed_topic_names must be a list of topic names")
        if assignor is not None and not isinstance(assignor, str):
            bad("server_assignor must be an assignor's name")
        try:
            owned = None if request.get("topic_partitions") is None else _partitions(request["topic_partitions"])
        except (KeyError, TypeError, ValueError):
            bad("topic_partitions must be [{topic, partitions: [int]}]")
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not member_id:
                bad("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if timeout == -1:
                bad("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                bad("TopicPartitions must be empty when (re-)joining.")
            if not topics:
                bad("SubscribedTopicNames must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not member_id:
                bad("MemberId can't be empty.")
            if instance_id is None:
                bad("InstanceId can't be null.")
        else:
            bad("MemberEpoch is invalid.")
        if assignor is not None and assignor not in self.c.server_assignors:
            raise WireError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. "
                            f"Supported assignors: {', '.join(self.c.server_assignors)}.")
        return {"group_id": group_id, "member_id": member_id, "member_epoch": epoch, "instance_id": instance_id,
                "rack_id": rack_id, "rebalance_timeout_ms": timeout,
                "topics": frozenset(topics) if topics is not None else None, "assignor": assignor, "owned": owned}

    def _group(self, group_id: str, *, create: bool) -> ConsumerGroup:
        """Kafka's `getOrMaybeCreateConsumerGroup` (an empty classic group is replaced; a live one is refused)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self.c.groups.get(group_id)
        if classic is not None and classic.members:
            raise WireError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")
        if not create:
            raise WireError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def _member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                owned: Partitions | None, joining: bool) -> tuple[ConsumerGroupMember, str | None]:
        """The member this heartbeat is from, and the member id it replaces (a returning static member), if any."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise WireError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                    f"{group.group_id}.")
                member = ConsumerGroupMember(member_id)
            self._check_epoch(member, epoch, owned)
            return member, None
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:  # a new instance: Kafka checks no epoch here
                return group.members.get(member_id) or ConsumerGroupMember(member_id, instance_id=instance_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise WireError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                f"because the instance id is owned by {existing.member_id} member.")
            # the instance comes back: a copy of its member under the new id, epoch 0, its partitions kept
            return ConsumerGroupMember(member_id, instance_id, existing.rack_id, existing.client_id, 0, 0,
                                       existing.state,
                          existing.rebalance_timeout_ms, existing.subscribed_topics, existing.server_assignor,
                          existing.assigned, existing.pending_revocation), existing.member_id
        if existing is None:
            raise WireError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise WireError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                            f"{instance_id} was fenced by member {existing.member_id}.")
        self._check_epoch(existing, epoch, owned)
        return existing, None

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, received: int, owned: Partitions | None) -> None:
        """Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`."""
        if received > member.member_epoch:
            raise WireError(ErrorCode.FENCED_MEMBER_EPOCH,
                            f"The consumer group member has a greater member epoch ({received}) than the one known "
                            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                            "partitions and rejoin.")
        if received < member.member_epoch and (received != member.previous_member_epoch or owned is None
                                                or not owned <= member.assigned):
            raise WireError(ErrorCode.FENCED_MEMBER_EPOCH,
                            f"The consumer group member has a smaller member epoch ({received}) than the one known "
                            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                            "partitions and rejoin.")

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, int]:
        """{topic: partition count} of every subscribed topic that exists (Kafka's subscription metadata)."""
        counts = {t: self.c.topic_partitions(t) for t in sorted(group.subscribed_topics())}
        return {t: n for t, n in counts.items() if n}

    def _partitions_seen(self, group: ConsumerGroup, metadata: dict[str, int]) -> list[str]:
        """The subscribed topics with more partitions in `metadata` than in the group's subscription metadata, each
        recorded as a `partitions_seen` (the coordinator notices it here, as Kafka's does at the heartbeat after
        `onNewMetadataImage` asked for a refresh); their names."""
        grew = [(t, n) for t, n in sorted(metadata.items())
                if group.subscription_metadata.get(t) and n > group.subscription_metadata[t]]
        for topic, count in grew:
            self.c.on_event("partitions_seen", group=group.group_id, topic=topic, partitions=count,
                            before=group.subscription_metadata[topic], generation=group.group_epoch)
        return [t for t, _ in grew]

    def _bump(self, group: ConsumerGroup, reason: str) -> None:
        group.group_epoch += 1
        self.c.on_event("group_epoch", group=group.group_id, generation=group.group_epoch, reason=reason,
                        members=len(group.members), state=group.state.value)

    def _assign(self, group: ConsumerGroup) -> None:
        """Kafka's `TargetAssignmentBuilder`: the preferred server assignor over every member, at the group epoch."""
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        name = votes.most_common(1)[0][0] if votes else next(iter(self.c.server_assignors))
        specs = {m.member_id: MemberSpec(m.subscribed_topics, group.target.get(m.member_id, frozenset()),
                                         m.instance_id, m.rack_id) for m in group.members.values()}
        try:
            result = self.c.server_assignors[name].assign(specs, group.subscription_metadata)
        except ValueError as exc:
            raise WireError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch "
                            f"{group.group_epoch}: {exc}") from None
        group.target = {m: frozenset(result.get(m, frozenset())) for m in group.members}
        group.assignment_epoch = group.group_epoch
        self.c.on_event("target_assignment", group=group.group_id, generation=group.group_epoch, assignor=name,
                        target={m: sorted(map(list, ps)) for m, ps in group.target.items()})

    def _member_event(self, group: ConsumerGroup, was: ConsumerGroupMember, now: ConsumerGroupMember) -> None:
        self.c.on_event("member_epoch", group=group.group_id, member=now.member_id, generation=now.member_epoch,
                        state=now.state.value, previous_epoch=was.member_epoch,
                        assigned=sorted(map(list, now.assigned)),
                        pending_revocation=sorted(map(list, now.pending_revocation)))

    # -- leaving and fencing --------------------------------------------------------------
    def _leave(self, req: dict) -> dict:
        """Kafka's `consumerGroupLeave`."""
        group = self.groups.get(req["group_id"])
        if group is None:
            raise WireError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req['group_id']} not found.")
        member_id, instance_id, epoch = req["member_id"], req["instance_id"], req["member_epoch"]
        if instance_id is None:
            if member_id not in group.members:
                raise WireError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
            self.fence(group, member_id, "left the group")
            return self._left(member_id, epoch)
        member = group.static_member(instance_id)
        if member is None:
            raise WireError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise WireError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                            f"was fenced by member {member.member_id}.")
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # it keeps its partitions (held at epoch -2, so nobody else is given them) until it is back or expires
            group.put(member.with_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation=frozenset()))
            self.c.timers.cancel(("revocation", group.group_id, member_id))
            self.c.on_event("member_removed", group=group.group_id, member=member_id,
                            reason="static member left temporarily (epoch -2)")
            self._store(group)
        else:
            self.fence(group, member_id, "left the group")
        return self._left(member_id, epoch)

    def _left(self, member_id: str, epoch: int) -> dict:
        return {"error_code": 0, "error": "NONE", "member_id": member_id, "member_epoch": epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    def fence(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        """Kafka's `consumerGroupFenceMember`: the member goes, its partitions are free, the group epoch moves."""
        if group.remove(member_id) is None:
            return
        self.c.timers.cancel(("session", group.group_id, member_id))
        self.c.timers.cancel(("revocation", group.group_id, member_id))
        self.c.on_event("member_removed", group=group.group_id, member=member_id, reason=reason)
        metadata = self._subscription_metadata(group)
        self._partitions_seen(group, metadata)
        group.subscription_metadata = metadata
        self._bump(group, f"member {member_id}: {reason}")
        self._store(group)

    def _session_deadline(self, group: ConsumerGroup, member_id: str) -> None:
        group_id = group.group_id

        def expired() -> None:
            current = self.groups.get(group_id)
            if current is not None and member_id in current.members:
                self.c.on_event("member_expired", group=group_id, member=member_id,
                                session_timeout_ms=self.c.config.group_consumer_session_timeout_ms)
                self.fence(current, member_id, "the member session expired")
        self.c.timers.schedule(("session", group_id, member_id), self.c.config.group_consumer_session_timeout_ms,
                               expired)

    def _revocation_deadline(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """In UNREVOKED_PARTITIONS the member has its rebalance timeout to revoke, else it is fenced."""
        group_id, member_id, epoch = group.group_id, member.member_id, member.member_epoch
        key = ("revocation", group_id, member_id)
        if member.state is not ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
            self.c.timers.cancel(key)
            return

        def expired() -> None:
            current = self.groups.get(group_id)
            m = current.members.get(member_id) if current is not None else None
            if m is not None and m.member_epoch == epoch:
                self.fence(current, member_id, f"it failed to transition from epoch {epoch} within "
                                               f"{member.rebalance_timeout_ms}ms")
        self.c.timers.schedule(key, max(member.rebalance_timeout_ms, 0), expired)

    # -- offsets --------------------------------------------------------------------------
    def validate_commit(self, group: ConsumerGroup, member_id, member_epoch) -> ErrorCode | None:
        """Kafka's `ConsumerGroup.validateOffsetCommit`: the member's current epoch, or an admin commit to an
        empty group."""
        if isinstance(member_epoch, int) and member_epoch < 0 and not group.members:
            return None
        return self._epoch_error(group, member_id, member_epoch)

    def validate_fetch(self, group: ConsumerGroup, member_id, member_epoch) -> ErrorCode | None:
        """Kafka's `validateOffsetFetch`: without a member id and epoch, anyone may read."""
        if member_id is None and (member_epoch is None or member_epoch < 0):
            return None
        return self._epoch_error(group, member_id, member_epoch)

    @staticmethod
    def _epoch_error(group: ConsumerGroup, member_id, member_epoch) -> ErrorCode | None:
        """Kafka's `validateMemberEpoch` for a consumer-protocol member: known, and at its current epoch."""
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.STALE_MEMBER_EPOCH if member_epoch != member.member_epoch else None

    # -- __consumer_offsets ---------------------------------------------------------------
    def _store(self, group: ConsumerGroup) -> None:
        self.c.store.append(self.c.partition_for(group.group_id), group.to_record())

    def load(self, record: dict) -> None:
        """Replay the group's last record; every member's session starts again (Kafka's `onLoaded`)."""
        group = ConsumerGroup.from_record(record)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._session_deadline(group, member.member_id)
            self._revocation_deadline(group, member)

    def unload(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for member_id in group.members:
            self.c.timers.cancel(("session", group_id, member_id))
            self.c.timers.cancel(("revocation", group_id, member_id))

    def describe(self, group_id: str) -> dict | None:
        """The lab's DescribeGroups for a consumer group: what Kafka's ConsumerGroupDescribe (API 69) tells
        (state, group epoch, members and their epochs). Kafka's DescribeGroups describes only classic groups
        and says Dead for a consumer group: a stated departure, so that one tool describes both kinds."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        return {"state": group.state.value, "generation": group.group_epoch, "members": sorted(group.members),
                "leader": None, "protocol": "consumer", "assignment_epoch": group.assignment_epoch,
                "member_epochs": {m.member_id: m.member_epoch for m in group.members.values()}}
