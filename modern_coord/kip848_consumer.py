"""The consumer for `group.protocol=consumer` (KIP-848): Kafka's `AsyncKafkaConsumer` (4.0 line), as the lab runs it.

It never sends JoinGroup or SyncGroup and never computes an assignment. What
it knows of the group comes from one request, `ConsumerGroupHeartbeat`; what
it does about it is decided by the membership machine (`membership.py`, every
state and transition there). Two threads, as Kafka's two:

- the **heartbeat thread** (Kafka's background thread) finds the coordinator,
  sends a heartbeat whenever the machine says one is due (every
  `heartbeat_interval_ms` the coordinator set; at once to join, to
  acknowledge a reconciliation, to leave) and hands each answer to the
  machine (`_handle_heartbeat_response`). When the application has not polled
  for `max.poll.interval.ms` it sends the leave heartbeat (the member is then
  STALE);
- the **poll loop** (Kafka's application thread) releases partitions the
  member lost (fenced, stale: `onPartitionsLost`), reconciles a new target
  (`_reconcile`), finds start positions, fetches and processes, and
  auto-commits without waiting for the answer (`auto_commit.py`, Kafka's
  `maybeAutoCommitAsync` on the background thread): a member cut off from
  its coordinator, its leaders still reachable, goes on processing until a
  heartbeat answer tells it that it was fenced (Kafka's client has no session
  timer of its own).

One reconciliation, as this member lives it::

    heartbeat answer: epoch e, assignment A      -> RECONCILING (rebalance_begin)
    poll loop: commit positions (if auto-commit; retried until the rebalance
               timeout, STALE_MEMBER_EPOCH too, with the latest epoch)
               revoked = owned - A: stop fetching them, revoked, onPartitionsRevoked
               added = A - owned: assigned (the whole of A), onPartitionsAssigned
                                                 -> ACKNOWLEDGING (rebalance_end)
    heartbeat thread, at once: topic_partitions = A (the ack)  -> STABLE

The coordinator hands a partition to its new owner only after the old owner
acknowledged it no longer owns it, so a moving partition is never processed by
two members at once, and nobody else stops: a member whose partitions do not
move only sees its epoch go up.

Fencing. A heartbeat answered FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID (the
member was silent past the coordinator's session timeout, or its epoch is
not the coordinator's) makes it FENCED: epoch 0, its partitions lost (no
commit: they may be another's already), then it rejoins with epoch 0 and its
member id. A commit carries the member's latest epoch (Kafka's commit manager
is told every epoch change); the coordinator refuses one from an older epoch
(STALE_MEMBER_EPOCH) or from a member it removed (UNKNOWN_MEMBER_ID).

Commit errors (Kafka's `CommitRequestManager`; only heartbeats change the
membership)::

    NONE                                        accepted
    NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
      no answer                                 failed; rediscover the coordinator; retried before a revocation
    COORDINATOR_LOAD_IN_PROGRESS                failed; retried before a revocation
    STALE_MEMBER_EPOCH                          fenced; retried before a revocation while the member has an epoch
    UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
      ILLEGAL_GENERATION                        fenced; not retried (Kafka's CommitFailedException)
    any other                                   failed; not retried

A topic that grows (issue 39): the member does nothing of its own, as in
Kafka. Its coordinator notices the new partition count at a heartbeat, bumps
the group epoch and hands out the new partitions in heartbeat answers like any
other target (`coordinator/consumer_protocol.py`, which records
`partitions_seen`); the member reconciles, and a partition with no committed
offset starts where `auto.offset.reset` says (OffsetFetch answers -1, then
ListOffsets). Its fetcher, which has not heard of the partition, asks for
metadata again until it knows the leader (a partition just created has none
for a moment). The member records no `partitions_seen`: it learns of new
partitions only as an assignment. It does not read `metadata.max.age.ms`:
Kafka's `AsyncKafkaConsumer` refreshes its metadata that often too, for its
fetches, which changes nothing in the group; the lab's refreshes only when it
needs a leader.

The trace carries what every coordinator-era metric reads, with
`generation` = the member epoch: `consumer_state` (the machine's states),
`rebalance_begin`/`rebalance_end` (entering and leaving RECONCILING, as
Kafka's own rebalance metrics count), `assigned` (the whole new assignment,
after each reconciliation), `revoked` (`lost` true when lost), `processed`,
`commit`, `heartbeat` (each answer; a leave's is `leave`),
`generation_reset` (fenced, or left on the poll timer), `poll_timeout`,
`find_coordinator`, `coordinator_lost`, `positions_unknown`, `offset_reset`, `consumer_failed`.

Departures from Kafka, stated (besides `membership.py`'s): the lab's poll loop
runs the listener callbacks and the reconciliation's commit itself, between
fetch rounds (Kafka's background thread drives them and the application
thread runs the callbacks at its next poll: the same order). With no
rebalance listener registered, as in every experiment, Kafka's background
thread reconciles on its own, without waiting for the application's next
poll; the lab's waits for the fetch round in hand to end (it stops between
partitions), so with `lab.processing.ms` > 0 an acknowledgement may wait up
to one partition's batch (`max.poll.records` x the processing time); no commit is sent
while the member has no epoch (Kafka sends one without a member id and
epoch, which the coordinator refuses for a group with members); a fatal error
stops the consumer (Kafka raises it from `poll()` and leaves closing to the
application). Also, found by an audit against the Kafka snapshot the lab
follows (trunk of October 2024, before 4.0.0): the commit before a revocation
is synchronous in the poll loop, which fetches nothing meanwhile (Kafka
commits asynchronously and goes on fetching the partitions it keeps, pausing
only the revoked ones); a commit sends only the positions that moved since
the last accepted one, as the lab's classic consumer does (Kafka sends every
consumed position); while no coordinator is known a commit before a
revocation is recorded as failed and retried after `retry.backoff.ms` with no growth (Kafka queues it
until a coordinator is found, and backs off exponentially with jitter); the
commit on close is tried once, after the heartbeat thread has stopped (Kafka
retries it until the close times out, heartbeating meanwhile). None of these
changes what the coordinator accepts; they change what a trace shows around a
revocation (fewer records processed during the commit, so fewer duplicates).
The member id is the coordinator's, as in this snapshot's v0 (KIP-1082, in
4.0.0, has the client make it).

Usage::

    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092",
                                       "group.protocol": "consumer"})
    consumer = Kip848Consumer(config, ["t"], trace, name="c1").start()
    consumer.assignment()        # [("t", 0), ("t", 1)]
    consumer.stop()              # commit, revoke, leave heartbeat (epoch -1; -2 for a static member)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lab_cluster.clock import monotonic_ms
from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode, WireClient

from .auto_commit import AsyncAutoCommit, AutoCommitTimer
from .config import ConsumerConfig
from .coordinator_link import ConsumerFailed, CoordinatorLink
from .fetcher import Fetcher, record_resets
from .member import RebalanceListener, TopicPartition
from .membership import HeartbeatAction, Kip848MemberState, Membership, Reconciliation, from_topic_partitions

COORDINATOR_GONE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT)
#: commit answers that say this member may not commit (the `commit` event's outcome `fenced`)
COMMIT_FENCED = (ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID,
                 ErrorCode.ILLEGAL_GENERATION)


def auto_commit_retriable(error: ErrorCode | None) -> bool:
    """Kafka's `RetriableCommitFailedException` for the periodic auto-commit: the next one goes after
    `retry.backoff.ms` (the coordinator moved, is loading, or did not answer), else after the interval."""
    return error in COORDINATOR_GONE or error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def commit_retriable_before_revocation(error: ErrorCode | None, epoch: int) -> bool:
    """Kafka's `maybeAutoCommitSyncBeforeRevocation`: retried on a retriable error (the coordinator moved, is
    loading, or did not answer) and on STALE_MEMBER_EPOCH while the member has an epoch to retry with.

        >>> commit_retriable_before_revocation(ErrorCode.STALE_MEMBER_EPOCH, 3)
        True
        >>> commit_retriable_before_revocation(ErrorCode.STALE_MEMBER_EPOCH, 0)
        False
        >>> commit_retriable_before_revocation(ErrorCode.UNKNOWN_MEMBER_ID, 3)
        False
    """
    if error is ErrorCode.STALE_MEMBER_EPOCH:
        return epoch > 0
    return auto_commit_retriable(error)


class Kip848Consumer(CoordinatorLink):
    def __init__(self, config: ConsumerConfig, topics: list[str], trace: TraceRecorder, *, name: str = "c",
                 listener: RebalanceListener | None = None,
                 on_change: Callable[[Kip848Consumer], None] | None = None):
        if not config.uses_consumer_protocol:
            raise ValueError("Kip848Consumer speaks group.protocol=consumer; use ModernConsumer for classic")
        self.config = config
        self.topics = sorted(topics)
        self.trace = trace
        self.name = name
        self.listener = listener or RebalanceListener()
        self.on_change = on_change
        self.error: str | None = None  # the fatal error that stopped the member
        self.rebalances = 0
        self._lock = threading.RLock()
        self._lookup_lock = threading.Lock()
        self._stop = threading.Event()
        # wakes the heartbeat thread: a state change (an acknowledgement or a leave to send), or stopping. Kafka's
        # heartbeat manager sends an acknowledgement at once (`shouldHeartbeatNow`); without this, it waited for
        # the thread's next tick
        self._wake_heartbeat = threading.Event()
        self._assignment: list[TopicPartition] = []  # what the member owns (Kafka's subscription state)
        self._positions: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._positions_retry_ms = 0
        self._fatal: str | None = None  # a fatal answer the heartbeat thread got; the poll loop raises it
        self._coordinator: tuple[str, int] | None = None
        self._coord_client: WireClient | None = None  # the poll loop's: commits and offset fetches
        self._hb_client: WireClient | None = None     # the heartbeat thread's
        self.membership = Membership(
            group_id=config.group_id, topics=self.topics, rebalance_timeout_ms=config.max_poll_interval_ms,
            max_poll_interval_ms=config.max_poll_interval_ms, now_ms=monotonic_ms(),
            instance_id=config.group_instance_id, server_assignor=config.group_remote_assignor,
            retry_backoff_ms=config.retry_backoff_ms, listener=self)
        self.fetcher = Fetcher(config.bootstrap, config.client_id, max_records=config.max_poll_records,
                               timeout_s=config.request_timeout_ms / 1000, processing_ms=config.lab_processing_ms,
                               offset_reset=config.auto_offset_reset,
                               on_reset=record_resets(
                                   self.trace, config.auto_offset_reset,
                                   lambda: (self.membership.member_id, self.membership.member_epoch)))
        self._commit_lock = threading.Lock()  # one commit at a time, whichever thread sends it
        self.auto_commit = AsyncAutoCommit(
            AutoCommitTimer(interval_ms=config.auto_commit_interval_ms, retry_backoff_ms=config.retry_backoff_ms,
                            now_ms=monotonic_ms()),
            commit=lambda: self._commit_positions("auto-commit"), retriable=auto_commit_retriable, name=name)
        self._poll_thread = threading.Thread(target=self._poll_loop, name=f"poll-{name}", daemon=True)
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{name}", daemon=True)

    # -- public (`lab_cluster.family.GroupMember`) ---------------------------------------------------
    def start(self) -> Kip848Consumer:
        self.trace.record("consumer_start", member=self.name, config=self.config.as_record(), topics=self.topics)
        self._poll_thread.start()
        self._hb_thread.start()
        return self

    @property
    def ident(self) -> str:
        return self.name

    @property
    def state(self) -> Kip848MemberState:
        return self.membership.state

    @property
    def member_epoch(self) -> int:
        return self.membership.member_epoch

    @property
    def member_id(self) -> str:
        return self.membership.member_id

    def snapshot(self) -> MemberSnapshot:
        with self._lock:
            return MemberSnapshot(self.membership.state.value, gave_up=self.error is not None,
                                  partitions=sorted(p for _, p in self._assignment),
                                  generation=self.membership.member_epoch)

    def assignment(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._assignment)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Close as Kafka's `close()`: the poll loop commits, revokes and sends the leave heartbeat (`_leave`)."""
        self._stop.set()
        self._wake_heartbeat.set()
        self._poll_thread.join(timeout_s)
        self._hb_thread.join(timeout_s)

    # -- what the machine tells us (`MembershipListener`, called under the lock) -------------------------
    def transitioned(self, old: Kip848MemberState, new: Kip848MemberState) -> None:
        m = self.membership
        if new is Kip848MemberState.RECONCILING and old is not Kip848MemberState.RECONCILING:
            self.rebalances += 1
            self.trace.record("rebalance_begin", member=m.member_id, generation=m.member_epoch,
                              reason="new target assignment", rebalance=self.rebalances)
        elif old is Kip848MemberState.RECONCILING:
            outcome = "ok" if new in (Kip848MemberState.ACKNOWLEDGING, Kip848MemberState.STABLE) else new.value
            self.trace.record("rebalance_end", member=m.member_id, generation=m.member_epoch, outcome=outcome,
                              rebalance=self.rebalances)
        self.trace.record("consumer_state", member=m.member_id, generation=m.member_epoch, state=new.value)
        self._wake_heartbeat.set()  # an ACKNOWLEDGING or LEAVING member's heartbeat goes at once (shouldHeartbeatNow)
        self._changed()

    def epoch_updated(self, epoch: int, member_id: str) -> None:
        self._changed()  # a new epoch is a new state line (`generation`) for the trial runner

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # -- the coordinator ---------------------------------------------------------------------------
    # -- the heartbeat thread ----------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake_heartbeat.clear()  # a wake-up while this step runs makes the wait below return at once
                self._wake_heartbeat.wait(self._heartbeat_step(monotonic_ms()))
        except ConsumerFailed as exc:
            with self._lock:
                self._fatal = str(exc)

    def _heartbeat_step(self, now: int) -> float:
        """One turn of Kafka's heartbeat request manager; returns how long to wait before the next (seconds)."""
        with self._lock:
            needs_coordinator = not self.membership.should_skip_heartbeat() and self._hb_client is None
        if needs_coordinator and not self._ensure_coordinator():
            return 0  # the lookup has waited retry.backoff.ms
        with self._lock:
            client = self._hb_client
            request, ignore_answer = self.membership.poll_heartbeat(now, coordinator_known=client is not None)
            if request is None:
                return min(self.membership.time_to_next_heartbeat(now), 100) / 1000
            if ignore_answer:
                self.trace.record("poll_timeout", member=self.membership.member_id)
        body = {k: v for k, v in request.items() if k not in ("api", "version")}
        try:
            response = client.request(request["api"], version=request["version"], **body)
        except ConnectionError:
            response = None
        self._handle_heartbeat_response(request, response, ignore_answer)
        return 0

    def _handle_heartbeat_response(self, request: dict, response: dict | None, ignore_answer: bool) -> None:
        """A `ConsumerGroupHeartbeat` answer (None: none came), recorded, then given to the machine; the actions
        that need I/O (rediscover) or the poll loop (fatal) are done here. The answer to a leave heartbeat is only
        recorded (Kafka: the leave is sent once, and its answer changes nothing)."""
        error = None if response is None else ErrorCode(response["error_code"])
        name = error.name if error is not None else "NETWORK_EXCEPTION"
        leaving = request["member_epoch"] < 0
        if leaving or ignore_answer:
            why = {"reason": "consumer poll timeout has expired"} if ignore_answer else {}
            self.trace.record("leave", member=request["member_id"], generation=request["member_epoch"], error=name,
                              **why)
            if ignore_answer:
                self.trace.record("generation_reset", error="NONE", member=request["member_id"],
                                  reason="consumer poll timeout has expired")
                return
        else:
            assignment = (response or {}).get("assignment")
            epoch = response["member_epoch"] if error is ErrorCode.NONE else request["member_epoch"]
            self.trace.record("heartbeat", member=(response or {}).get("member_id") or request["member_id"],
                              generation=epoch, error=name, epoch_sent=request["member_epoch"],
                              full=request["subscribed_topic_names"] is not None,
                              assignment=None if assignment is None else
                              [list(tp) for tp in sorted(from_topic_partitions(assignment["topic_partitions"]))])
        with self._lock:
            member_id = self.membership.member_id
            action = self.membership.on_heartbeat_response(response, monotonic_ms())
        if action is HeartbeatAction.REDISCOVER:
            self._coordinator_unknown(f"ConsumerGroupHeartbeat: {name}")
        elif action is HeartbeatAction.FENCE:
            self.trace.record("generation_reset", error=name, member=member_id)
        elif action is HeartbeatAction.FATAL:
            with self._lock:
                self._fatal = f"ConsumerGroupHeartbeat: {name}: {(response or {}).get('message', '')}".rstrip(": ")

    # -- the poll loop -----------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        try:
            with self._lock:
                self.membership.subscribe()
            while not self._stop.is_set():
                self._poll_once(monotonic_ms())
        except ConsumerFailed as exc:
            self.error = str(exc)
            self.trace.record("consumer_failed", member=self.membership.member_id, reason=self.error)
            self._changed()
        finally:
            self._leave()

    def _poll_once(self, now: int) -> None:
        with self._lock:
            fatal, lost = self._fatal, self.membership.lost_pending
        if fatal is not None:
            raise ConsumerFailed(fatal)
        self.auto_commit.raise_failure()
        if lost:
            self._release_lost()
        with self._lock:
            self.membership.on_poll(now)  # Kafka: each poll() resets the poll timer; a STALE member rejoins
        self._reconcile()
        self._update_fetch_positions()
        self._fetch_round()
        self._maybe_auto_commit()

    def _needs_attention(self) -> bool:
        """Stop fetching (between partitions): stopping, fenced or stale, or a reconciliation to do."""
        with self._lock:
            m = self.membership
            return (self._stop.is_set() or self._fatal is not None or m.lost_pending
                    or (m.state is Kip848MemberState.RECONCILING and m.current != m.target))

    def _release_lost(self) -> None:
        """Kafka's `onPartitionsLost`: every owned partition, with no commit (another member may own it already)."""
        if self.assignment():
            self._revoke(lost=True)
        with self._lock:
            self.membership.released()

    def _reconcile(self) -> None:
        """Kafka's `maybeReconcile` then `revokeAndAssign`: commit, revoke, assign, then the acknowledgement."""
        with self._lock:
            reconciliation = self.membership.next_reconciliation(self._assignment)
        if reconciliation is None:
            return
        self._commit_before_revocation()
        if self._aborted():
            return
        if reconciliation.revoked:
            self._revoke(list(reconciliation.revoked))
        if self._aborted():
            return
        self._assign(reconciliation)
        with self._lock:
            if self.membership.reconciliation_done(reconciliation):
                self.auto_commit.reset(monotonic_ms())  # Kafka's resetAutoCommitTimer on completing

    def _aborted(self) -> bool:
        with self._lock:
            return self.membership.reconciliation_aborted()

    def _assign(self, reconciliation: Reconciliation) -> None:
        assigned = reconciliation.assigned
        with self._lock:
            self._assignment = assigned
            self._positions = {tp: o for tp, o in self._positions.items() if tp in assigned}
            self._positions_retry_ms = 0
            epoch, member_id = self.membership.member_epoch, self.membership.member_id
        self.trace.record("assigned", member=member_id, generation=epoch, partitions=[list(tp) for tp in assigned])
        self.listener.on_partitions_assigned(list(reconciliation.added))  # Kafka: the added ones only
        self._changed()

    def _revoke(self, partitions: list[TopicPartition] | None = None, *, lost: bool = False) -> None:
        """Let go of `partitions` (default: all it owns): no more fetching, a `revoked` event (`lost`: Kafka's
        onPartitionsLost), the listener."""
        with self._lock:
            revoked = list(self._assignment) if partitions is None else list(partitions)
            self._assignment = [tp for tp in self._assignment if tp not in revoked]
            self._positions = {tp: o for tp, o in self._positions.items() if tp not in revoked}
            epoch, member_id = self.membership.member_epoch, self.membership.member_id
        extra = {"lost": True} if lost else {}
        self.trace.record("revoked", member=member_id, generation=epoch, partitions=[list(tp) for tp in revoked],
                          **extra)
        self.listener.on_partitions_revoked(revoked)
        self._changed()

    def _leave(self) -> None:
        """Closing, as Kafka's `close()`: the heartbeat thread stops; lost partitions are released; a member in the
        group commits (auto-commit), revokes (`leaveGroup`: onPartitionsRevoked, or lost if it has no epoch) and
        sends the leave heartbeat at once (epoch -1, a static member -2); the connections close."""
        self._stop.set()
        self._wake_heartbeat.set()
        try:
            if threading.current_thread() is not self._hb_thread:
                self._hb_thread.join(self.config.request_timeout_ms / 1000 + 1)
            with self._lock:
                if self.membership.state is Kip848MemberState.FENCED:
                    # Kafka's leaveGroup: a fenced member clears its assignment (lost, below) and sends nothing;
                    # releasing first would rejoin it (FENCED -> JOINING) and send a leave under its old id
                    self.membership.leave()
                lost = self.membership.lost_pending
                in_group = self.membership.member_epoch > 0 and not self.membership.is_not_in_group()
            if lost:
                self._release_lost()
            if self.error is None and in_group and self.assignment():
                self._commit_positions("stop")
            with self._lock:
                revoke = self.membership.leave()
            if self.assignment():
                self._revoke(lost=not revoke)
            if revoke is not None:
                self._send_leave()
        finally:
            # Java's close waits for the async commits in flight (within its timeout) before it closes
            self.auto_commit.wait(self.config.request_timeout_ms / 1000)
            self._coordinator_unknown("stopped")
            self.fetcher.close()

    def _send_leave(self) -> None:
        with self._lock:
            self.membership.left_prepared()
            client = self._hb_client
            request, _ = self.membership.poll_heartbeat(monotonic_ms(), coordinator_known=client is not None)
        if request is None:
            return  # no coordinator: the leave is given up (Kafka's onHeartbeatRequestSkipped)
        body = {k: v for k, v in request.items() if k not in ("api", "version")}
        try:
            response = client.request(request["api"], version=request["version"], **body)
        except ConnectionError:
            response = None
        self._handle_heartbeat_response(request, response, ignore_answer=False)

    # -- fetching, positions, commits --------------------------------------------------------------
    def _fetch_round(self) -> None:
        """One fetch per owned partition with a position, each batch processed; it stops between partitions when
        the membership needs the poll loop (`_needs_attention`)."""
        got_any = False

        def processed(tp: TopicPartition, offset: int) -> None:
            nonlocal got_any
            got_any = True
            self.trace.record("processed", topic=tp[0], partition=tp[1], offset=offset,
                              member=self.membership.member_id, generation=self.membership.member_epoch)

        for tp in self.assignment():
            if self._needs_attention():
                return
            with self._lock:
                position = self._positions.get(tp)
            if position is None:
                continue
            new_position = self.fetcher.fetch(tp, position, self._stop.is_set, processed)
            with self._lock:
                if tp in self._positions:
                    self._positions[tp] = new_position
        if not got_any:
            self._stop.wait(min(self.config.fetch_max_wait_ms, 50) / 1000)

    def _update_fetch_positions(self) -> None:
        """The committed offset of each owned partition without a position (OffsetFetch with the member's id and
        epoch), else `auto.offset.reset`; what fails is tried again after `retry.backoff.ms`."""
        with self._lock:
            missing = [tp for tp in self._assignment if tp not in self._positions]
            epoch, member_id = self.membership.member_epoch, self.membership.member_id
        if not missing or monotonic_ms() < self._positions_retry_ms:
            return
        response = self._call_coordinator("OffsetFetch", member_id=member_id, member_epoch=epoch,
                                          partitions=[list(tp) for tp in missing])
        error = None if response is None else ErrorCode(response["error_code"])
        found = {}
        if error is ErrorCode.NONE:
            which = "earliest" if self.config.auto_offset_reset == "earliest" else "latest"
            for o in response["offsets"]:
                tp = (o["topic"], o["partition"])
                offset = o["offset"] if o["offset"] >= 0 else self.fetcher.list_offset(tp, which)
                if offset is not None:
                    found[tp] = offset
        elif error in COORDINATOR_GONE:
            self._coordinator_unknown(f"OffsetFetch: {error.name}")
        with self._lock:
            found = {tp: o for tp, o in found.items() if tp in self._assignment}  # still ours
            self._positions.update(found)
            self._committed.update(found)
            still_missing = [tp for tp in self._assignment if tp not in self._positions]
        if still_missing:
            self._positions_retry_ms = monotonic_ms() + self.config.retry_backoff_ms
            self.trace.record("positions_unknown", member=member_id, generation=epoch,
                              partitions=[list(tp) for tp in still_missing],
                              error=error.name if error is not None else "NETWORK_EXCEPTION")

    def _maybe_auto_commit(self) -> None:
        """Kafka's `maybeAutoCommitAsync`: the commit goes on its own thread; the poll loop does not wait. While no
        coordinator is known it waits, due, for one (Kafka's `CommitRequestManager.poll` returns early)."""
        with self._lock:
            coordinator_known = self._coord_client is not None
        if self.config.enable_auto_commit and coordinator_known:
            self.auto_commit.maybe_commit(monotonic_ms())

    def _commit_before_revocation(self) -> None:
        """Kafka's `maybeAutoCommitSyncBeforeRevocation`: every position, retried until the rebalance timeout
        (`commit_retriable_before_revocation`), each retry with the latest positions and epoch."""
        deadline = monotonic_ms() + self.config.max_poll_interval_ms
        while True:
            error = self._commit_positions("before revocation")
            with self._lock:
                epoch = self.membership.member_epoch
            if not commit_retriable_before_revocation(error, epoch) or monotonic_ms() >= deadline \
                    or self._stop.is_set():
                return
            self._stop.wait(self.config.retry_backoff_ms / 1000)

    def _commit_positions(self, why: str) -> ErrorCode | None:
        """Commit every position that moved, with the member's latest id and epoch; the error, or None when nothing
        was sent (auto-commit off, nothing moved, or no epoch). A commit waits for the one in flight."""
        if not self.config.enable_auto_commit:
            return None
        with self._commit_lock:
            with self._lock:
                moved = {tp: o for tp, o in self._positions.items() if self._committed.get(tp) != o}
                epoch, member_id = self.membership.member_epoch, self.membership.member_id
            if not moved or epoch <= 0:
                return None
            response = self._call_coordinator(
                "OffsetCommit", member_id=member_id, generation_id=epoch,
                group_instance_id=self.config.group_instance_id,
                offsets=[{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(moved.items())])
            error = ErrorCode.REQUEST_TIMED_OUT if response is None else ErrorCode(response["error_code"])
            outcome = "accepted" if error is ErrorCode.NONE else "fenced" if error in COMMIT_FENCED else "failed"
            for (t, p), offset in sorted(moved.items()):
                self.trace.record("commit", topic=t, partition=p, offset=offset, member=member_id, generation=epoch,
                                  outcome=outcome, error=error.name, why=why)
            if error is ErrorCode.NONE:
                with self._lock:
                    self._committed.update(moved)
            elif error in COORDINATOR_GONE and response is not None:
                self._coordinator_unknown(f"OffsetCommit: {error.name}")
            return error
