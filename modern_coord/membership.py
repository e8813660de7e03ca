"""A member of a KIP-848 consumer group, with no I/O: Kafka's `ConsumerMembershipManager` (the 4.0 line) and the request
side of its `ConsumerHeartbeatRequestManager`.

Under `group.protocol=consumer` (KIP-848) there is no JoinGroup, no SyncGroup
and no group leader. A member sends `ConsumerGroupHeartbeat` every
`heartbeat_interval_ms` *the coordinator* sets; the coordinator computes every
member's target assignment and answers each heartbeat with this member's
epoch and, when it changed, the partitions it may own now (never a partition
before its previous owner has released it). Each member reconciles on its
own: it revokes what it owns and was not given, takes what it was given, and
acknowledges with its next heartbeat, which goes at once.

This module decides; the consumer (`kip848_consumer.py`) does. Every method
takes the time (`now_ms`) and the consumer calls them under its lock, so a
test drives the whole protocol with a fake clock (`tests/test_membership.py`).

States (Kafka's `MemberState`) and every transition::

    UNSUBSCRIBED    --subscribe()--------------------------------------------> JOINING (epoch 0)
    JOINING         --answer with an assignment that differs from the owned--> RECONCILING
                    --answer with the same (empty) assignment----------------> STABLE
    STABLE          --answer with a new assignment--------------------------> RECONCILING
    RECONCILING     --reconciliation_done(): commit, revoke, assign---------> ACKNOWLEDGING
                    --answer: the target is again what it owns--------------> STABLE
    ACKNOWLEDGING   --the acknowledging heartbeat is built: nothing more----> STABLE
                    --... a newer target arrived meanwhile------------------> RECONCILING
    JOINING, RECONCILING,
    ACKNOWLEDGING,
    STABLE          --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID---------------> FENCED (epoch 0)
    FENCED          --released(): every owned partition lost----------------> JOINING (same member id)
    JOINING..STABLE,
    UNSUBSCRIBED    --leave(): the consumer closes------------------------->  PREPARE_LEAVING
    PREPARE_LEAVING --left_prepared(): partitions revoked (or lost)---------> LEAVING (epoch -1, static -2)
    LEAVING         --the leave heartbeat is built (or cannot be sent)------> UNSUBSCRIBED
    JOINING..STABLE --max.poll.interval.ms expired: the leave heartbeat----->
                      PREPARE_LEAVING -> LEAVING (epoch -1/-2) -> STALE
    STALE           --released() and the application polls again----------> JOINING (epoch 0)
    any but FENCED,
    STALE           --a fatal answer (FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID,
                      UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST,
                      any unexpected error)-------------------------------> FATAL (stays)

`VALID_PREVIOUS` holds Kafka's table of allowed transitions; any other raises.

What a heartbeat carries (Kafka's `HeartbeatState`): group id, member id (""
until the coordinator hands one out), member epoch and instance id always;
`rebalance_timeout_ms`, `subscribed_topic_names`, `server_assignor` and
`topic_partitions` (the owned partitions, as last reconciled) only when
JOINING, or when they changed since the last heartbeat sent. After an error
answer (or none) the record of what was sent is forgotten, so the next
heartbeat is full again. Unchanged fields go as null (-1 for the timeout).

When a heartbeat goes (Kafka's `HeartbeatRequestState`): when the interval
the coordinator last gave has passed since the last one was sent, and any
back-off after a failure (`retry.backoff.ms`, doubling up to
`RETRY_BACKOFF_MAX_MS`) is over; at once in JOINING, ACKNOWLEDGING and
LEAVING. The first interval is 0: the join goes at once.

The error policy is one table, `heartbeat_error_action`; `on_heartbeat_response`
is the one handler of an answer.

Departures from Kafka, stated:

- topics are named, not Kafka's TopicIds, so there is no metadata to resolve
  before reconciling (Kafka reconciles only the topics whose ids it resolved);
- the back-off has no jitter, and is honoured in JOINING and ACKNOWLEDGING
  too (Kafka sends those at once even after a retriable error, bounded only
  by one request in flight: against the lab's coordinator that is a busy loop);
- no pattern subscription (`SubscribedTopicRegex`, v1), no rack id, and the
  subscription never changes after `subscribe()`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from lab_cluster.wire import ErrorCode

from .member import TopicPartition

JOIN_EPOCH = 0          # ConsumerGroupHeartbeatRequest.JOIN_GROUP_MEMBER_EPOCH
LEAVE_EPOCH = -1        # LEAVE_GROUP_MEMBER_EPOCH
LEAVE_STATIC_EPOCH = -2  # LEAVE_GROUP_STATIC_MEMBER_EPOCH: a static member leaving for now (it will be back)
RETRY_BACKOFF_MAX_MS = 1000  # Kafka's retry.backoff.max.ms default


class Kip848MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    FENCED = "fenced"
    PREPARE_LEAVING = "prepare_leaving"
    LEAVING = "leaving"
    STALE = "stale"
    FATAL = "fatal"

    def can_handle_new_assignment(self) -> bool:
        """Kafka's `canHandleNewAssignment`: a member in the group that means to stay in it."""
        return self in VALID_PREVIOUS[Kip848MemberState.RECONCILING]


S = Kip848MemberState
#: Kafka's `MemberState.previousValidStates`: the states each one may be entered from
VALID_PREVIOUS: dict[Kip848MemberState, frozenset[Kip848MemberState]] = {
    S.STABLE: frozenset({S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.RECONCILING: frozenset({S.STABLE, S.JOINING, S.ACKNOWLEDGING, S.RECONCILING}),
    S.ACKNOWLEDGING: frozenset({S.RECONCILING}),
    S.FATAL: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.PREPARE_LEAVING, S.LEAVING,
                        S.UNSUBSCRIBED}),
    S.FENCED: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.PREPARE_LEAVING, S.LEAVING}),
    S.JOINING: frozenset({S.FENCED, S.UNSUBSCRIBED, S.STALE}),
    S.PREPARE_LEAVING: frozenset({S.JOINING, S.STABLE, S.RECONCILING, S.ACKNOWLEDGING, S.UNSUBSCRIBED}),
    S.LEAVING: frozenset({S.PREPARE_LEAVING}),
    S.UNSUBSCRIBED: frozenset({S.PREPARE_LEAVING, S.LEAVING, S.FENCED}),
    S.STALE: frozenset({S.LEAVING}),
}


class HeartbeatAction(enum.Enum):
    """What the consumer does after a heartbeat's answer (`heartbeat_error_action`)."""

    PROCEED = "proceed"        # the answer was applied
    RETRY = "retry"            # the next heartbeat after the back-off
    REDISCOVER = "rediscover"  # the coordinator moved or is gone: look it up again, then heartbeat at once
    FENCE = "fence"            # out of the group: every owned partition is lost, rejoin with epoch 0
    FATAL = "fatal"            # the consumer stops


FATAL_ERRORS = (ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR,
                ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID)


def heartbeat_error_action(error: ErrorCode | None) -> HeartbeatAction:
    """The error policy for `ConsumerGroupHeartbeat` (None: no answer), as Kafka's
    `AbstractHeartbeatRequestManager.onErrorResponse` and `ConsumerHeartbeatRequestManager.handleSpecificError`::

        NONE                                        proceed
        no answer                                   rediscover (a retriable failure: the connection is gone)
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE  rediscover, and no back-off
        COORDINATOR_LOAD_IN_PROGRESS                retry after the back-off
        FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID      fence, and no back-off
        INVALID_REQUEST, GROUP_MAX_SIZE_REACHED,
          UNSUPPORTED_ASSIGNOR, UNSUPPORTED_VERSION,
          UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID fatal
        any other (GROUP_ID_NOT_FOUND: a classic group of that id)   fatal ("unexpected error")

        >>> heartbeat_error_action(ErrorCode.FENCED_MEMBER_EPOCH), heartbeat_error_action(None)
        (<HeartbeatAction.FENCE: 'fence'>, <HeartbeatAction.REDISCOVER: 'rediscover'>)
        >>> heartbeat_error_action(ErrorCode.GROUP_ID_NOT_FOUND)
        <HeartbeatAction.FATAL: 'fatal'>
    """
    if error is ErrorCode.NONE:
        return HeartbeatAction.PROCEED
    if error is None or error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return HeartbeatAction.REDISCOVER
    if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return HeartbeatAction.RETRY
    if error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
        return HeartbeatAction.FENCE
    return HeartbeatAction.FATAL


# -- value objects ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class LocalAssignment:
    """Kafka's `LocalAssignment`: partitions with a local epoch, bumped whenever they change, so that an
    assignment reconciled again (the same partitions after a different one) is reported again.

        >>> NO_ASSIGNMENT.update_with(frozenset())          # even an empty target is news to a joiner
        LocalAssignment(local_epoch=0, partitions=frozenset())
        >>> LocalAssignment(0, frozenset()).update_with(frozenset()) is None
        True
    """

    local_epoch: int
    partitions: frozenset[TopicPartition]

    def is_none(self) -> bool:
        return self.local_epoch == -1

    def update_with(self, partitions: frozenset[TopicPartition]) -> LocalAssignment | None:
        """The next local assignment, or None if `partitions` are what it holds already."""
        if not self.is_none() and partitions == self.partitions:
            return None
        return LocalAssignment(self.local_epoch + 1, partitions)


NO_ASSIGNMENT = LocalAssignment(-1, frozenset())


@dataclass(frozen=True)
class Reconciliation:
    """One reconciliation (Kafka's `maybeReconcile`): the target to make effective, and what that means
    against what the member owns: `revoked` = owned - target, `added` = target - owned (sorted)."""

    target: LocalAssignment
    revoked: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...]

    @property
    def assigned(self) -> list[TopicPartition]:
        return sorted(self.target.partitions)


def topic_partitions(partitions: frozenset[TopicPartition]) -> list[dict]:
    """The wire's `[{"topic", "partitions"}]`, sorted.

        >>> topic_partitions(frozenset({("t", 2), ("t", 0), ("u", 1)}))
        [{'topic': 't', 'partitions': [0, 2]}, {'topic': 'u', 'partitions': [1]}]
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def from_topic_partitions(entries: list[dict]) -> frozenset[TopicPartition]:
    return frozenset((e["topic"], int(p)) for e in entries for p in e["partitions"])


class MembershipListener:
    """What the consumer hears of the machine: override either; both default to nothing."""

    def transitioned(self, old: Kip848MemberState, new: Kip848MemberState) -> None:
        pass

    def epoch_updated(self, epoch: int, member_id: str) -> None:
        pass


class _SentFields:
    """Kafka's `HeartbeatState.SentFields`: what the last heartbeat carried, so the next sends only changes."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.rebalance_timeout_ms = -1
        self.topics: tuple[str, ...] | None = None
        self.server_assignor: str | None = None
        self.assignment: LocalAssignment | None = None


# -- the machine -----------------------------------------------------------------------------------

class Membership:
    def __init__(self, *, group_id: str, topics: list[str], rebalance_timeout_ms: int, max_poll_interval_ms: int,
                 now_ms: int, instance_id: str | None = None, server_assignor: str | None = None,
                 retry_backoff_ms: int = 100, listener: MembershipListener | None = None):
        self.group_id = group_id
        self.topics = tuple(sorted(topics))
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.instance_id = instance_id
        self.server_assignor = server_assignor
        self.listener = listener or MembershipListener()
        self.state = Kip848MemberState.UNSUBSCRIBED
        self.member_id = ""
        self.member_epoch = JOIN_EPOCH
        #: the assignment reconciled last (what heartbeats report), and the latest the coordinator sent
        self.current = NO_ASSIGNMENT
        self.target = NO_ASSIGNMENT
        self._reconciling = False             # Kafka's reconciliationInProgress
        self._rejoined_while_reconciling = False
        self._poll_timer_expired = False      # Kafka's isPollTimerExpired: LEAVING ends in STALE, not UNSUBSCRIBED
        self._lost_pending = False            # FENCED or STALE: the owned partitions are to be released as lost
        self._sent = _SentFields()
        # Kafka's HeartbeatRequestState: the interval the coordinator gave (0 until it does), the timer, the back-off
        self.heartbeat_interval_ms = 0
        self._next_heartbeat_ms = now_ms
        self._backoff_until_ms = now_ms
        self._failed_attempts = 0
        self.retry_backoff_ms = retry_backoff_ms
        # the poll timer (max.poll.interval.ms)
        self.max_poll_interval_ms = max_poll_interval_ms
        self._last_poll_ms = now_ms

    # -- states ------------------------------------------------------------------------------------
    def _transition_to(self, new: Kip848MemberState) -> None:
        """Kafka's `transitionTo`: only along `VALID_PREVIOUS`."""
        old = self.state
        if new is not old and old not in VALID_PREVIOUS[new]:
            raise ValueError(f"invalid transition from {old.name} to {new.name}")
        self.state = new
        if new is not old:
            self.listener.transitioned(old, new)

    def _update_epoch(self, epoch: int) -> None:
        changed = epoch != self.member_epoch
        self.member_epoch = epoch
        if changed:
            self.listener.epoch_updated(epoch, self.member_id)

    def is_not_in_group(self) -> bool:
        return self.state in (S.UNSUBSCRIBED, S.FENCED, S.FATAL, S.STALE)

    def is_leaving(self) -> bool:
        return self.state in (S.PREPARE_LEAVING, S.LEAVING)

    def should_skip_heartbeat(self) -> bool:
        return self.state in (S.UNSUBSCRIBED, S.FATAL, S.STALE, S.FENCED)

    def should_heartbeat_now(self) -> bool:
        return self.state in (S.ACKNOWLEDGING, S.LEAVING, S.JOINING)

    # -- the application's side --------------------------------------------------------------------
    def subscribe(self) -> None:
        """`subscribe()` then the first `poll()`: UNSUBSCRIBED -> JOINING."""
        if self.state is S.UNSUBSCRIBED:
            self._transition_to_joining()

    def _transition_to_joining(self) -> None:
        if self.state is S.FATAL:
            return
        if self._reconciling:
            self._rejoined_while_reconciling = True
        self._update_epoch(JOIN_EPOCH)
        self._transition_to(S.JOINING)
        self.target = NO_ASSIGNMENT  # Kafka's clearPendingAssignmentsAndLocalNamesCache

    def on_poll(self, now_ms: int) -> None:
        """The application polled (Kafka's `resetPollTimer`): a STALE member that has released its partitions
        rejoins (`maybeRejoinStaleMember`); the poll timer starts again."""
        if self.poll_timer_expired(now_ms) or self.state is S.STALE:
            self._poll_timer_expired = False
            if self.state is S.STALE and not self._lost_pending:
                self._transition_to_joining()
        self._last_poll_ms = now_ms

    def poll_timer_expired(self, now_ms: int) -> bool:
        return now_ms - self._last_poll_ms >= self.max_poll_interval_ms

    # -- heartbeats --------------------------------------------------------------------------------
    def time_to_next_heartbeat(self, now_ms: int) -> int:
        """How long the heartbeat thread may sleep (ms); 0: a heartbeat is due now."""
        due = max(self._backoff_until_ms, now_ms if self.should_heartbeat_now() else self._next_heartbeat_ms)
        if self.state is S.LEAVING:
            due = now_ms
        return max(0, due - now_ms)

    def poll_heartbeat(self, now_ms: int, coordinator_known: bool) -> tuple[dict | None, bool]:
        """Kafka's `AbstractHeartbeatRequestManager.poll`: the heartbeat to send now, if any, and whether its
        answer is to be ignored (the leave on an expired poll timer: the member rejoins whatever it says)."""
        if not coordinator_known or self.should_skip_heartbeat():
            self.on_heartbeat_skipped()
            return None, False
        if self.poll_timer_expired(now_ms) and not self.is_leaving():
            self.transition_to_sending_leave(due_to_poll_timer=True)
            request = self._make_request(now_ms)
            self._reset_backoff()
            self._sent.reset()
            return request, True
        if self.time_to_next_heartbeat(now_ms) > 0:
            return None, False
        return self._make_request(now_ms), False

    def _make_request(self, now_ms: int) -> dict:
        request = self.build_request()
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        self.on_request_generated()
        return request

    def build_request(self) -> dict:
        """Kafka's `HeartbeatState.buildRequestData`: always the ids and the epoch; the rest when JOINING, or when
        it changed since the last heartbeat sent."""
        full = self.state is S.JOINING
        sent = self._sent
        request = {"api": "ConsumerGroupHeartbeat", "version": 0, "group_id": self.group_id,
                   "member_id": self.member_id, "member_epoch": self.member_epoch, "instance_id": self.instance_id,
                   "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                   "server_assignor": None, "topic_partitions": None}
        if full or sent.rebalance_timeout_ms != self.rebalance_timeout_ms:
            request["rebalance_timeout_ms"] = sent.rebalance_timeout_ms = self.rebalance_timeout_ms
        if full or sent.topics != self.topics:
            sent.topics = self.topics
            request["subscribed_topic_names"] = list(self.topics)
        if self.server_assignor is not None and (full or sent.server_assignor != self.server_assignor):
            request["server_assignor"] = sent.server_assignor = self.server_assignor
        if full or sent.assignment != self.current:
            sent.assignment = self.current
            request["topic_partitions"] = topic_partitions(self.current.partitions)
        return request

    def on_request_generated(self) -> None:
        """Kafka's `onHeartbeatRequestGenerated`: the states that end once a heartbeat is on its way."""
        if self.state is S.ACKNOWLEDGING:
            self._transition_to(S.STABLE if self.current == self.target else S.RECONCILING)
        elif self.state is S.LEAVING:
            if self._poll_timer_expired:
                self._transition_to(S.STALE)
                self._lost_pending = True  # Kafka's transitionToStale: onPartitionsLost, then clear
            else:
                self._transition_to(S.UNSUBSCRIBED)

    def on_heartbeat_skipped(self) -> None:
        """Kafka's `onHeartbeatRequestSkipped`: a leave that cannot be sent (no coordinator) is given up."""
        if self.state is S.LEAVING:
            self._transition_to(S.UNSUBSCRIBED)

    def on_heartbeat_response(self, response: dict | None, now_ms: int) -> HeartbeatAction:
        """The one handler of a `ConsumerGroupHeartbeat` answer (None: none came); returns what the consumer does
        about it (`heartbeat_error_action`)."""
        error = None if response is None else ErrorCode(response["error_code"])
        action = heartbeat_error_action(error)
        if action is HeartbeatAction.PROCEED:
            self._on_success(response, now_ms)
            return action
        # any failure: the next heartbeat is full, and goes after the back-off (Kafka's onFailedAttempt)
        self._sent.reset()
        self._failed_attempts += 1
        self._next_heartbeat_ms = now_ms
        backoff = min(self.retry_backoff_ms * 2 ** (self._failed_attempts - 1), RETRY_BACKOFF_MAX_MS)
        self._backoff_until_ms = now_ms + backoff
        if action in (HeartbeatAction.REDISCOVER, HeartbeatAction.FENCE) and response is not None:
            self._reset_backoff()  # Kafka: heartbeatRequestState.reset(), to heartbeat as soon as it can
        if action is HeartbeatAction.FENCE:
            self.transition_to_fenced()
        elif action is HeartbeatAction.FATAL:
            self.transition_to_fatal()
        return action

    def _reset_backoff(self) -> None:
        self._failed_attempts = 0
        self._backoff_until_ms = 0

    def _on_success(self, response: dict, now_ms: int) -> None:
        """Kafka's `onResponse` + `ConsumerMembershipManager.onHeartbeatSuccess`."""
        self._failed_attempts, self._backoff_until_ms = 0, now_ms
        interval = int(response["heartbeat_interval_ms"])
        if interval != self.heartbeat_interval_ms:
            self.heartbeat_interval_ms = interval  # Kafka's updateAndReset: the timer starts again from now
            self._next_heartbeat_ms = now_ms + interval
        if self.state is S.LEAVING or self.is_not_in_group():
            return  # leaving already, or out of the group: the answer is of no use
        if response.get("member_id"):
            self.member_id = response["member_id"]
        self._update_epoch(int(response["member_epoch"]))
        assignment = response.get("assignment")
        if assignment is None or not self.state.can_handle_new_assignment():
            return
        self._process_assignment(from_topic_partitions(assignment["topic_partitions"]))

    def _process_assignment(self, partitions: frozenset[TopicPartition]) -> None:
        """Kafka's `processAssignmentReceived`: a new target to reconcile, or, if it is what the member has
        reconciled already, back to STABLE."""
        updated = self.target.update_with(partitions)
        if updated is not None:
            self.target = updated
        if self.current != self.target:
            self._transition_to(S.RECONCILING)
        elif self.state in (S.RECONCILING, S.JOINING):
            self._transition_to(S.STABLE)

    # -- reconciliation (the consumer's poll loop does the work between these calls) -----------------
    def next_reconciliation(self, owned: list[TopicPartition]) -> Reconciliation | None:
        """Kafka's `maybeReconcile`: the reconciliation to do now, given what the member `owned` (none if the target
        is reconciled, one is under way, or the member is not RECONCILING). The consumer then commits (if
        auto-commit), stops fetching the revoked partitions and calls onPartitionsRevoked, then
        onPartitionsAssigned, checking `reconciliation_aborted()` between the steps, and ends with
        `reconciliation_done`."""
        if self.state is not S.RECONCILING or self.current == self.target or self._reconciling:
            return None
        target = self.target
        if not self.current.is_none() and target.partitions == self.current.partitions:
            self.current = target  # only the local epoch moved: acknowledge, nothing to do
            self._transition_to(S.ACKNOWLEDGING)
            return None
        self._reconciling, self._rejoined_while_reconciling = True, False
        owned_set = frozenset(owned)
        return Reconciliation(target, tuple(sorted(owned_set - target.partitions)),
                              tuple(sorted(target.partitions - owned_set)))

    def reconciliation_aborted(self) -> bool:
        """Kafka's `maybeAbortReconciliation`: the member left RECONCILING (fenced, leaving, fatal) or rejoined
        since the reconciliation began: it must not go on."""
        abort = self.state is not S.RECONCILING or self._rejoined_while_reconciling
        if abort:
            self._reconciling = self._rejoined_while_reconciling = False
        return abort

    def reconciliation_done(self, reconciliation: Reconciliation) -> bool:
        """The callbacks ran: the target is effective, and the next heartbeat acknowledges it at once
        (ACKNOWLEDGING). False if it was aborted instead."""
        if not self._reconciling or self.reconciliation_aborted():
            return False
        self.current = reconciliation.target
        self._transition_to(S.ACKNOWLEDGING)
        self._reconciling = False
        return True

    # -- losing everything: fenced, fatal, stale ------------------------------------------------------
    def transition_to_fenced(self) -> None:
        """Kafka's `transitionToFenced` (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): epoch 0, the member id kept,
        every owned partition to be released as lost (`lost_pending`), then JOINING (`released`)."""
        if self.state is S.PREPARE_LEAVING:
            self.transition_to_sending_leave(due_to_poll_timer=False)  # clears the epoch; no leave is sent
            self._transition_to(S.UNSUBSCRIBED)
            return
        if self.state is S.LEAVING:
            self._transition_to(S.UNSUBSCRIBED)
            return
        if self.state is S.UNSUBSCRIBED:
            return
        self._transition_to(S.FENCED)
        self._update_epoch(JOIN_EPOCH)
        self._lost_pending = True

    def transition_to_fatal(self) -> None:
        previous = self.state
        self._transition_to(S.FATAL)
        self._lost_pending = previous not in (S.UNSUBSCRIBED, S.LEAVING, S.PREPARE_LEAVING)

    @property
    def lost_pending(self) -> bool:
        """The owned partitions must be released as lost (onPartitionsLost) before anything else."""
        return self._lost_pending

    def released(self) -> None:
        """The consumer dropped every owned partition as lost (Kafka's `clearAssignment` after onPartitionsLost);
        a FENCED member rejoins at once, a STALE one at the application's next poll."""
        self._lost_pending = False
        self.current = NO_ASSIGNMENT
        self.target = NO_ASSIGNMENT
        if self.state is S.FENCED:
            self._transition_to_joining()

    # -- leaving -----------------------------------------------------------------------------------
    def leave(self) -> bool | None:
        """Kafka's `leaveGroup` (the consumer closes): PREPARE_LEAVING. Returns whether the owned partitions are
        revoked (True: the member is in the group, epoch > 0) or lost (False), or None when there is no leave
        heartbeat to send (not in the group)."""
        if self.is_not_in_group():
            if self.state is S.FENCED:
                self._lost_pending = False
                self.current = NO_ASSIGNMENT
                self._transition_to(S.UNSUBSCRIBED)
            return None
        if self.is_leaving():
            return None
        self._transition_to(S.PREPARE_LEAVING)
        return self.member_epoch > 0

    def left_prepared(self) -> None:
        """The callbacks ran: the next heartbeat leaves the group (LEAVING, epoch -1, or -2 if static)."""
        if self.state is S.PREPARE_LEAVING:
            self.current = NO_ASSIGNMENT
            self.target = NO_ASSIGNMENT
            self.transition_to_sending_leave(due_to_poll_timer=False)

    def transition_to_sending_leave(self, due_to_poll_timer: bool) -> None:
        """Kafka's `transitionToSendingLeaveGroup`: the leave epoch, no assignment, LEAVING; on an expired poll
        timer the member passes through PREPARE_LEAVING without releasing anything first (it loses everything
        once STALE)."""
        if self.state in (S.FATAL, S.UNSUBSCRIBED):
            return
        if due_to_poll_timer:
            self._poll_timer_expired = True
            self._transition_to(S.PREPARE_LEAVING)
        self._update_epoch(LEAVE_STATIC_EPOCH if self.instance_id is not None else LEAVE_EPOCH)
        self.current = NO_ASSIGNMENT
        self._transition_to(S.LEAVING)
