"""The coordinator-era consumer: the Java client's `ConsumerCoordinator` and poll loop, eager or cooperative.

A classic group's member (`group_member.py`: join, sync, heartbeat, leave, as
Java's `AbstractCoordinator`) that consumes: what it owns, where it is in
each partition, what it commits. Its threads, as the Java client's since
0.10.1, are the heartbeat thread (`group_member.py`) and

- the **poll loop** finds the coordinator, joins the group when it must
  (JoinGroup, then SyncGroup; the leader runs the assignor), fetches from the
  partition leaders, records a `processed` event per message, and
  auto-commits without waiting for the answer (`auto_commit.py`, Java's
  `maybeAutoCommitOffsetsAsync`). Nothing the coordinator does, or fails to
  do, stops it fetching and processing what it owns: a member cut off from its
  coordinator, its leaders still reachable, goes on processing until it learns
  it was fenced. At the top of each turn it refreshes its metadata if
  `metadata.max.age.ms` has passed since the last refresh (`_maybe_refresh_metadata`,
  below).

Its part of a rebalance, as Java's `ConsumerCoordinator`: before a join,
commit (if auto-commit; retried until the rebalance timeout) and revoke
(`_prepare_join`); the subscription it sends (`_subscription_metadata`);
the leader's assignment (`_assign_as_leader`); after SyncGroup, the new
assignment (`_on_join_complete`) and its start positions (OffsetFetch, else
`auto.offset.reset`; a failure is retried after `retry.backoff.ms`, never a
reason to rejoin). Its answers' handlers are `_handle_commit_response` and
`_update_fetch_positions` (OffsetFetch); what an error makes it do is
`error_policy.py`'s.

A topic that grows (issue 39), as Java's `ConsumerCoordinator` (3.9): only
the group leader watches for it. Every member's metadata is refreshed every
`metadata.max.age.ms` (Java's `NetworkClient` metadata updater), and at each
poll the member takes a new snapshot of its topics' partition counts when the
metadata moved on (`maybeUpdateSubscriptionMetadata`; the topics are its
subscription, the leader's the whole group's: `updateGroupSubscription`).
The leader keeps the snapshot it assigned from (`assignmentSnapshot`, set in
`onLeaderElected`; a member that is not the leader of the generation drops it
in `onJoinComplete`), and when its current snapshot no longer matches it
(`rejoinNeededOrPending`) it asks to rejoin ("cached metadata has changed
from ... at the beginning of the rebalance to ..."). Its JoinGroup makes the
coordinator start a rebalance (the leader's JoinGroup always does); the
followers learn of it from REBALANCE_IN_PROGRESS on their heartbeat, and the
leader assigns every partition, the new ones too, from the metadata it has
just refreshed. A follower's refreshes change nothing but what it fetches. The
lab records when each member learns of the growth: `partitions_seen`
(`member`, `topic`, `partitions` the new count, `before` the one it knew,
`leader` whether it led then), once per count, whichever refresh brought it
(a periodic one, or the fetcher's own for a leader it did not know).
Departures, stated: the refresh is a blocking Metadata request on the poll
loop (Java's network client sends it alongside the fetches, from either
thread), and none is made while a JoinGroup or SyncGroup is in flight (under
cooperative, the fetcher still refreshes meanwhile for a leader it does not
know); a topic deleted, or created after the subscription, also changes the
snapshot, as in Java, but is not a `partitions_seen`.

Cooperative rebalancing (KIP-429; the rounds are `group_member.py`'s): the
member keeps fetching what it owns through JoinGroup and SyncGroup, and after
SyncGroup revokes only owned-minus-assigned (`_on_join_complete`). Java does
not commit the revoked partitions' positions for you (the application may, in
its `onPartitionsRevoked`; the lab's members do not): what a member processed
of a revoked partition since its last commit is processed again by the next
owner, as in Kafka. What is not modelled is stated in `group_member.py`.

Usage::

    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092"})
    consumer = ModernConsumer(config, ["t"], trace, name="c1").start()
    consumer.assignment()        # [("t", 0), ("t", 1)]
    consumer.stop()              # commit, revoke, LeaveGroup (a dynamic member only)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lab_cluster.clock import monotonic_ms
from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode

from .auto_commit import AsyncAutoCommit, AutoCommitTimer
from .config import ConsumerConfig
from .coordinator_link import ConsumerFailed
from .error_policy import ErrorAction, commit_retriable, error_action
from .fetcher import Fetcher, record_resets
from .group_member import GroupMember
from .leader_assignment import AssignorFailed, encode_user_data, leader_subscriptions, problems, run_assignor
from .member import NO_GENERATION, ClassicMemberState, Generation, RebalanceListener, TopicPartition
from .metadata import grown, snapshot


class ModernConsumer(GroupMember):
    def __init__(self, config: ConsumerConfig, topics: list[str], trace: TraceRecorder, *, name: str = "c",
                 listener: RebalanceListener | None = None,
                 on_change: Callable[[ModernConsumer], None] | None = None):
        super().__init__(config, trace, name=name, on_change=on_change)
        self.topics = sorted(topics)
        self.listener = listener or RebalanceListener()
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        # What the sticky assignor is told: the partitions of the last generation this member synced.
        self._last_owned: list[TopicPartition] = []
        self._last_owned_generation = -1
        self._positions_retry_ms = 0  # when the poll loop may look its start positions up again
        # Java's metadata snapshots (`metadata.py`), all the poll loop's: the topics it follows (its subscription;
        # the leader's, the group's), their partition counts at the metadata version last looked at, the counts the
        # leader assigned from (None: not the leader), and the most partitions each topic was seen with
        self._metadata_topics: set[str] = set(self.topics)
        self._metadata_snapshot: dict[str, int] = {}
        self._metadata_version = 0
        self._assignment_snapshot: dict[str, int] | None = None
        self._is_leader = False
        self._partitions_known: dict[str, int] = {}
        self.fetcher = Fetcher(config.bootstrap, config.client_id, max_records=config.max_poll_records,
                               timeout_s=config.request_timeout_ms / 1000, processing_ms=config.lab_processing_ms,
                               offset_reset=config.auto_offset_reset,
                               on_reset=record_resets(self.trace, config.auto_offset_reset,
                                                      lambda: (self.member_id, self.generation.generation_id)),
                               metadata_max_age_ms=config.metadata_max_age_ms,
                               retry_backoff_ms=config.retry_backoff_ms)
        # the periodic auto-commit goes on a thread of its own (Java's maybeAutoCommitOffsetsAsync); one commit at a
        # time is sent, whichever thread sends it, so each carries the positions the last one did not
        self._commit_lock = threading.Lock()
        self.auto_commit = AsyncAutoCommit(
            AutoCommitTimer(interval_ms=config.auto_commit_interval_ms, retry_backoff_ms=config.retry_backoff_ms,
                            now_ms=monotonic_ms()),
            commit=lambda: self._commit_positions("auto-commit"), retriable=commit_retriable, name=name)
        self._poll_thread = threading.Thread(target=self._poll_loop, name=f"poll-{name}", daemon=True)

    # -- public ------------------------------------------------------------------------
    def start(self) -> ModernConsumer:
        self.trace.record("consumer_start", member=self.name, config=self.config.as_record(), topics=self.topics)
        self._poll_thread.start()
        self._hb_thread.start()
        return self

    def snapshot(self) -> MemberSnapshot:
        """Where this member is (`lab_cluster.family.GroupMember`): it gives up on a fatal error."""
        return MemberSnapshot(self.state.value, gave_up=self.error is not None,
                              partitions=sorted(p for _, p in self.assignment()),
                              generation=self.generation.generation_id)

    def assignment(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._assignment)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Leave gracefully: the poll loop commits, revokes and, if a dynamic member, sends LeaveGroup before it
        ends (`_leave`)."""
        self._stop.set()
        self._poll_thread.join(timeout_s)
        self._hb_thread.join(timeout_s)

    # -- the poll loop -------------------------------------------------------------------
    def _poll_loop(self) -> None:
        try:
            while not self._stop.is_set():
                now = monotonic_ms()
                self._poll_heartbeat(now)
                self._maybe_refresh_metadata(now)
                if not self._ensure_coordinator():
                    if self.state is ClassicMemberState.STABLE:
                        self._fetch_round()  # Kafka keeps fetching while it looks for the coordinator
                    continue
                must_join = self._rejoin_needed_or_pending()
                if must_join:
                    self._rebalance()
                    continue
                self._update_fetch_positions()
                self._fetch_round()
                self._maybe_auto_commit()
        except ConsumerFailed as exc:
            self.error = str(exc)
            self.trace.record("consumer_failed", member=self.member_id, reason=self.error)
            self._changed()
        finally:
            self._leave()

    def _poll_heartbeat(self, now: int) -> None:
        """A failure an auto-commit left is raised first (Java's `invokeCompletedOffsetCommitCallbacks`, at each
        poll), then the group's (`GroupMember._poll_heartbeat`)."""
        self.auto_commit.raise_failure()
        super()._poll_heartbeat(now)

    # -- metadata: the leader's watch on partition counts (Java's ConsumerCoordinator) -------------------
    def _maybe_refresh_metadata(self, now: int) -> None:
        """A refresh if `metadata.max.age.ms` has passed (the fetcher's `MetadataTimer`), then Java's
        `maybeUpdateSubscriptionMetadata`: a new snapshot if the metadata moved on since the last one."""
        self.fetcher.maybe_refresh_metadata(now)
        self._maybe_update_subscription_metadata()

    def _maybe_update_subscription_metadata(self, *, force: bool = False) -> None:
        """Java's `maybeUpdateSubscriptionMetadata`: the snapshot of the followed topics' partition counts, taken
        again when the fetcher's metadata is newer than it (or `force`: the topics followed changed). A topic with
        more partitions than this member has ever seen is a `partitions_seen`."""
        version = self.fetcher.metadata_version
        if version == self._metadata_version and not force:
            return
        self._metadata_version = version
        self._metadata_snapshot = snapshot(self.fetcher.partition_counts, self._metadata_topics)
        for topic, before, now in grown(self._partitions_known, self._metadata_snapshot):
            self.trace.record("partitions_seen", member=self.member_id or self.name,
                              generation=self.generation.generation_id, topic=topic, partitions=now, before=before,
                              leader=self._is_leader)
        for topic, count in self._metadata_snapshot.items():
            self._partitions_known[topic] = max(count, self._partitions_known.get(topic, 0))

    def _rejoin_needed_or_pending(self) -> bool:
        """Java's `rejoinNeededOrPending`: a rejoin requested or a reset to apply (`GroupMember`), or, for the
        leader, metadata that no longer matches the snapshot it assigned from (then a rejoin is requested, unless
        one is already: Java's `requestRejoinIfNecessary`)."""
        snapshot_then = self._assignment_snapshot
        if snapshot_then is not None and snapshot_then != self._metadata_snapshot:
            with self._lock:
                if self._rejoin_reason is None:
                    self.request_rejoin(f"cached metadata has changed from {snapshot_then} at the beginning of the "
                                        f"rebalance to {self._metadata_snapshot}")
            return True
        with self._lock:
            return self._rejoin_reason is not None or self._reset is not None

    # -- its part of a rebalance (Java's ConsumerCoordinator) ---------------------------------
    def _prepare_join(self) -> None:
        """Java's `onJoinPrepare`, once per rebalance: commit (if auto-commit), then, if the generation was reset,
        lose everything (`onPartitionsLost`, either protocol); else eager revokes everything and cooperative
        nothing (its partitions are fetched through the rebalance). It is no longer the leader, and follows only
        its own topics again (`isLeader = false`, `resetGroupSubscription`)."""
        self._is_leader = False
        if self._metadata_topics != set(self.topics):
            self._metadata_topics = set(self.topics)
            self._maybe_update_subscription_metadata(force=True)
        if self._assignment:
            self._commit_before_rejoining()
            with self._lock:
                lost = self._reset is not None or not self.generation.is_valid()
            if lost:
                self._revoke(lost=True)
            elif self.protocol == "eager":
                self._revoke()
        self._needs_join_prepare = False

    def _commit_before_rejoining(self) -> None:
        """Java's onJoinPrepare: the auto-commit, retried while its error is retriable, until the rebalance
        timeout (`max.poll.interval.ms`) has passed."""
        deadline = monotonic_ms() + self.config.max_poll_interval_ms
        while True:
            error = self._commit_positions("before rejoining", call=self._call_while_fetching)
            if not commit_retriable(error) or monotonic_ms() >= deadline or self._stop.is_set():
                return
            self._stop.wait(self.config.retry_backoff_ms / 1000)
            self._ensure_coordinator()

    def _subscription_metadata(self, strategy: str) -> dict:
        """What this member tells the leader's assignor, for one strategy it votes for: what it owns now, and
        its generation (ConsumerProtocolSubscription v2's `ownedPartitions` and `generationId`): under eager
        nothing, having revoked everything, except for `sticky`, whose user data carries the partitions of the
        last generation it synced (Java's `StickyAssignor.subscriptionUserData`)."""
        if self.protocol == "eager" and strategy == "sticky":
            metadata = {"topics": self.topics, "owned": [list(tp) for tp in self._last_owned],
                        "generation": self._last_owned_generation}
        else:
            with self._lock:
                metadata = {"topics": self.topics, "owned": [list(tp) for tp in self._assignment],
                            "generation": self.generation.generation_id}
        user_data = self.assignors[strategy].subscription_user_data(list(self.topics))  # a user's assignor's
        if user_data is not None:
            metadata["user_data"] = encode_user_data(user_data)
        return metadata

    def _assign_as_leader(self, protocol: str, members: list[dict]) -> list[dict]:
        """Java's `onLeaderElected`: follow the whole group's topics (`updateGroupSubscription`; metadata
        refreshed if one is not known), assign from this member's latest metadata snapshot, and keep that
        snapshot (`assignmentSnapshot`), to rejoin when the partition counts change."""
        subscriptions = leader_subscriptions(members)
        topics = {t for s in subscriptions.values() for t in s.topics}
        self._is_leader = True
        self._metadata_topics = set(self.topics) | topics
        if not all(t in self.fetcher.partition_counts for t in topics):
            self.fetcher.refresh_metadata()
        self._maybe_update_subscription_metadata(force=True)
        counts = {t: n for t, n in self._metadata_snapshot.items() if t in topics}
        assignor = self.assignors.get(protocol)
        try:
            if assignor is None:  # Java: "Coordinator selected invalid assignment protocol"
                raise AssignorFailed(f"IllegalStateException: the coordinator chose {protocol!r}, not one of "
                                     f"this member's assignors ({', '.join(self.assignors)})")
            result = run_assignor(assignor, counts, subscriptions, self.protocol)
        except AssignorFailed as e:
            self.trace.record("assignor_failed", member=self.member_id, generation=self.generation.generation_id,
                              protocol=protocol, error=str(e))
            raise
        self._assignment_snapshot = dict(self._metadata_snapshot)
        shares = {m: a.partitions for m, a in result.items()}
        self.trace.record("leader_assignment", member=self.member_id, generation=self.generation.generation_id,
                          protocol=protocol, assignment={m: [list(tp) for tp in tps] for m, tps in shares.items()},
                          problems=problems(counts, subscriptions, shares))
        return [{"member_id": m, "assignment": {"partitions": [list(tp) for tp in a.partitions],
                                                **({"user_data": encode_user_data(a.user_data)}
                                                   if a.user_data is not None else {})}}
                for m, a in result.items()]

    def _on_join_complete(self, partitions: list[TopicPartition], user_data: bytes | None = None) -> None:
        """Java's `onJoinComplete`: the new assignment. Cooperative: revoke owned-minus-assigned first, then rejoin,
        so that the partitions withheld from their new owners go out in the next round (under eager it owns
        nothing now: it revoked everything before joining). A member that did not lead this generation drops the
        leader's snapshot (only the leader watches the partition counts)."""
        if not self._is_leader:
            self._assignment_snapshot = None
        with self._lock:
            owned = list(self._assignment)
        revoked = sorted(set(owned) - set(partitions))
        if revoked:
            self._revoke(revoked)
            self.request_rejoin("need to revoke partitions and re-join")
        with self._lock:
            self._assignment = sorted(partitions)
            # the partitions it keeps go on from where they are (nothing but them, under cooperative)
            self._positions = {tp: o for tp, o in self._positions.items() if tp in partitions}
            self._positions_retry_ms = 0
            self._last_owned, self._last_owned_generation = list(self._assignment), self.generation.generation_id
        assignor = self.assignors.get(self.generation.protocol_name or "")
        if assignor is not None:  # Java: the chosen assignor's onAssignment, before the listener hears of it
            try:
                assignor.on_assignment(list(partitions), user_data)
            except Exception as e:  # Java collects it and throws it from poll() once the join is complete
                self.trace.record("assignor_failed", member=self.member_id, generation=self.generation.generation_id,
                                  protocol=assignor.name, error=f"{type(e).__name__}: {e}", at="on_assignment")
        self.auto_commit.reset(monotonic_ms())  # Java's onJoinComplete: the auto-commit interval starts again
        self.trace.record("assigned", member=self.member_id, generation=self.generation.generation_id,
                          partitions=[list(tp) for tp in self._assignment])
        self.listener.on_partitions_assigned(sorted(set(partitions) - set(owned)))  # Java: the added ones only

    def _after_join(self) -> None:
        self._update_fetch_positions()

    def _update_fetch_positions(self) -> None:
        """Java's `updateFetchPositions`: the committed offset of each assigned partition without a position,
        else `auto.offset.reset`. What fails is tried again after `retry.backoff.ms`; it never causes a rejoin."""
        with self._lock:
            missing = [tp for tp in self._assignment if tp not in self._positions]
        if not missing or monotonic_ms() < self._positions_retry_ms:
            return
        found = {}
        response = self._call_coordinator("OffsetFetch", partitions=[list(tp) for tp in missing])
        error = None if response is None else ErrorCode(response["error_code"])
        if error is ErrorCode.NONE:
            for o in response["offsets"]:
                tp = (o["topic"], o["partition"])
                if o["offset"] >= 0:
                    found[tp] = o["offset"]
                else:
                    which = "earliest" if self.config.auto_offset_reset == "earliest" else "latest"
                    offset = self.fetcher.list_offset(tp, which)
                    if offset is not None:
                        found[tp] = offset
        else:
            self._act_on("OffsetFetch", error)  # rediscover, or retry: below, after retry.backoff.ms
        with self._lock:
            found = {tp: o for tp, o in found.items() if tp in self._assignment}  # still ours
            self._positions.update(found)
            self._committed.update(found)
            still_missing = [tp for tp in self._assignment if tp not in self._positions]
        if still_missing:
            self._positions_retry_ms = monotonic_ms() + self.config.retry_backoff_ms
            self.trace.record("positions_unknown", member=self.member_id, generation=self.generation.generation_id,
                              partitions=[list(tp) for tp in still_missing],
                              error=error.name if error is not None else "NETWORK_EXCEPTION")

    def _revoke(self, partitions: list[TopicPartition] | None = None, *, lost: bool = False) -> None:
        """Let go of `partitions` (default: all it owns); `lost`: the generation is gone, so they may already be
        another member's (Java's `onPartitionsLost`, recorded as a `revoked` event with `lost` true)."""
        with self._lock:
            revoked = list(self._assignment) if partitions is None else list(partitions)
        extra = {"lost": True} if lost else {}
        self.trace.record("revoked", member=self.member_id, generation=self.generation.generation_id,
                          partitions=[list(tp) for tp in revoked], **extra)
        self.listener.on_partitions_revoked(revoked)  # Java: before the partitions go, so a listener may commit
        with self._lock:
            self._assignment = [tp for tp in self._assignment if tp not in revoked]
            self._positions = {tp: o for tp, o in self._positions.items() if tp not in revoked}
        self._changed()

    # -- fetching and committing -----------------------------------------------------------
    def _fetch_round(self, until: Callable[[], bool] | None = None) -> None:
        """One fetch per owned partition with a position, each batch processed; `until`: stop between partitions
        once it is true."""
        got_any = False

        def processed(tp: TopicPartition, offset: int) -> None:
            nonlocal got_any
            got_any = True
            self.trace.record("processed", topic=tp[0], partition=tp[1], offset=offset,
                              member=self.member_id, generation=self.generation.generation_id)

        for tp in self.assignment():
            # eager: a rejoin requested (by the heartbeat thread) stops the fetching at once, everything is about
            # to be revoked; cooperative: what the member owns is fetched until it is revoked
            if self._stop.is_set() or (self._rejoin_reason is not None and self.protocol == "eager") \
                    or (until is not None and until()):
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
            # Departure: Java's poll blocks in the network client and wakes as soon as any answer arrives; here a
            # member that fetched nothing sleeps up to 50 ms, so during a cooperative rebalance
            # (`_call_while_fetching`) it notices JoinGroup's or SyncGroup's answer up to 50 ms late. That widens
            # the window in which another member's rejoin overtakes its SyncGroup (REBALANCE_IN_PROGRESS, as in
            # Kafka): the same outcomes as Kafka, more often.
            self._stop.wait(min(self.config.fetch_max_wait_ms, 50) / 1000)

    def _maybe_auto_commit(self) -> None:
        """Java's `maybeAutoCommitOffsetsAsync`: the commit goes on its own thread; the poll loop does not wait."""
        if self.config.enable_auto_commit:
            self.auto_commit.maybe_commit(monotonic_ms())

    def _commit_positions(self, why: str, call: Callable[..., dict | None] | None = None) -> ErrorCode | None:
        """Commit every position that moved, with the generation this member consumed under; the error, or
        None when nothing was sent (nothing moved, auto-commit off, or no generation: Java sends no commit
        without one). A commit waits for the one in flight (the auto-commit's, on its thread)."""
        if not self.config.enable_auto_commit:
            return None
        with self._commit_lock:
            with self._lock:
                moved = {tp: o for tp, o in self._positions.items() if self._committed.get(tp) != o}
                generation = self.generation
            if not moved or not generation.is_valid():
                return None
            response = (call or self._call_coordinator)(
                "OffsetCommit", member_id=generation.member_id, generation_id=generation.generation_id,
                group_instance_id=self.config.group_instance_id,
                offsets=[{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(moved.items())])
            return self._handle_commit_response(response, moved, generation, why)

    def _handle_commit_response(self, response: dict | None, moved: dict[TopicPartition, int],
                                generation: Generation, why: str) -> ErrorCode:
        """OffsetCommit's answer: a `commit` event per offset (`accepted`, `fenced` or `failed`), then the
        error policy; returns the error (REQUEST_TIMED_OUT for no answer).

        FENCED_INSTANCE_ID is fatal only for the generation the member still
        holds (Java's `generationUnchanged()`); for one it has already left,
        the commit fails and is not retried (Java: CommitFailedException, or
        RebalanceInProgressException). Either way the commit was `fenced`.
        """
        error = ErrorCode.REQUEST_TIMED_OUT if response is None else ErrorCode(response["error_code"])
        action = error_action("OffsetCommit", error)
        instance_fenced = error is ErrorCode.FENCED_INSTANCE_ID
        if instance_fenced:
            with self._lock:
                if self.generation != generation:
                    action = ErrorAction.FAIL
        outcome = ("accepted" if action is ErrorAction.PROCEED
                   else "fenced" if action is ErrorAction.RESET or instance_fenced else "failed")
        for (t, p), offset in sorted(moved.items()):
            self.trace.record("commit", topic=t, partition=p, offset=offset, member=generation.member_id,
                              generation=generation.generation_id, outcome=outcome, error=error.name, why=why)
        if error is ErrorCode.NONE:
            with self._lock:
                self._committed.update(moved)
        elif action is not ErrorAction.FAIL:
            self._act_on("OffsetCommit", error)
        return error

    def _leave(self) -> None:
        """Stopping, as Java's `close()`: commit (its failure is not raised: Java's close logs it), revoke
        (`onLeavePrepare`), LeaveGroup if a dynamic member (`maybeLeaveGroup`), close connections.

        A static member sends no LeaveGroup: the coordinator keeps it, and its
        partitions, until its session times out, so that it can come back
        under the same `group.instance.id` without a rebalance.
        """
        try:
            with self._lock:
                stable = self.state is ClassicMemberState.STABLE and self.generation.is_valid()
            if self.error is None and self._assignment and stable:
                try:
                    self._commit_positions("stop")
                except ConsumerFailed:
                    pass  # FENCED_INSTANCE_ID: Java's maybeAutoCommitOffsetsSync logs it; the `commit` event says it
            if self._assignment:
                # Java's onLeavePrepare: lost if the generation is gone or a rebalance is under way (a
                # cooperative member stopped mid-rebalance; Java sends no commit then: `generationIfStable`)
                self._revoke(lost=not stable)
            if self._is_dynamic_member() and self.member_id and self._coordinator is not None:
                response = self._call_coordinator("LeaveGroup", member_id=self.member_id)
                self._handle_leave_response(None if response is None else ErrorCode(response["error_code"]),
                                            self.member_id)
        finally:
            with self._lock:
                self.generation = NO_GENERATION
            self._set_state(ClassicMemberState.UNJOINED)
            # Java's close waits for the async commits in flight (within its timeout) before it closes
            self.auto_commit.wait(self.config.request_timeout_ms / 1000)
            self._coordinator_unknown("stopped")
            self.fetcher.close()
            self._stop.set()
