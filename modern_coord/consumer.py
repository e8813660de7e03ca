"""The coordinator-era consumer: the Java client's `ConsumerCoordinator` and poll loop, eager protocol.

Two threads, as in the Java client since 0.10.1:

- the **poll loop** finds the coordinator, joins the group when it must
  (JoinGroup, then SyncGroup; the leader runs the assignor), fetches from the
  partition leaders, records a `processed` event per message, and commits;
- the **heartbeat thread** sends Heartbeat every `heartbeat.interval.ms`
  (timing in `heartbeat.py`) while the member has a generation
  (COMPLETING_REBALANCE or STABLE), and turns each answer into a request to
  the poll loop (`_on_heartbeat_answer`, as the Java client's
  `HeartbeatResponseHandler`): rejoin on REBALANCE_IN_PROGRESS, but only when
  STABLE (one that arrives mid-rebalance belongs to the rebalance already
  under way); reset and rejoin on ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, but
  only if the generation the heartbeat was sent under is still the current one
  (else the answer is stale and ignored); find the coordinator again on
  NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or no answer for a whole session,
  looking it up itself as Java's heartbeat thread does. When the application
  has not polled for `max.poll.interval.ms`, it leaves the group (LeaveGroup,
  generation and member id reset, heartbeats stop) so that the others can go on.

One rebalance, as this member lives it (states in `member.py`)::

    commit positions (if auto-commit; retried until the rebalance timeout),
    revoke everything (eager), rebalance_begin
    JoinGroup(member id or "")  -> MEMBER_ID_REQUIRED: again with the id handed out
                                -> generation g, leader, members (leader only)
    leader: assignor(members' subscriptions) ; SyncGroup(g, assignments)
    SyncGroup answer            -> this member's partitions, STABLE: assigned, rebalance_end;
                                   the rejoin request is cleared only now (Java: rejoinNeeded = false
                                   on SyncGroup success), so requests made during the rebalance are absorbed
    then, in the poll loop      -> start positions: OffsetFetch, else auto.offset.reset (ListOffsets);
                                   a failure is retried after retry.backoff.ms, never a reason to rejoin

It never talks to ZooKeeper. Departure from the Java client, stated: when
the heartbeat thread learns that the generation is gone, the Java client
resets it at once, so a commit that follows fails inside the client
(CommitFailedException). The lab's poll loop commits first with the
generation it consumed under, then resets, so the coordinator's fencing
(ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID) is what the trace shows. Either
way the zombie's offsets are not written. A member that left on
`max.poll.interval.ms` has no generation and sends no commit, as in Java.

Usage::

    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092"})
    consumer = ModernConsumer(config, ["t"], trace, name="c1").start()
    consumer.assignment()        # [("t", 0), ("t", 1)]
    consumer.stop()              # commit, revoke, LeaveGroup
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode, WireClient

from lab_cluster.assignment import ASSIGNORS, Subscription
from .config import ConsumerConfig
from .fetcher import Fetcher
from .heartbeat import Heartbeat
from .lookup import find_coordinator
from .member import NO_GENERATION, Generation, MemberState, RebalanceListener, TopicPartition

E = ErrorCode
FIND_AGAIN = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE}
FENCED = {E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID}
FATAL = {E.INCONSISTENT_GROUP_PROTOCOL, E.INVALID_SESSION_TIMEOUT, E.INVALID_GROUP_ID, E.INVALID_REQUEST}
#: errors after which a JoinGroup/SyncGroup is sent again at once (Java's joinGroupIfNeeded: `continue`)
REJOIN_AT_ONCE = {"rebalance_in_progress", "member_id_required", "unknown_member_id", "illegal_generation"}
#: commit errors Java retries (RetriableCommitFailedException): the coordinator moved, is loading or did not answer
RETRIABLE_COMMIT = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                    E.REQUEST_TIMED_OUT}


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ConsumerFailed(Exception):
    pass


class ModernConsumer:
    def __init__(self, config: ConsumerConfig, topics: list[str], trace: TraceRecorder, *, name: str = "c",
                 listener: RebalanceListener | None = None,
                 on_change: Callable[[ModernConsumer], None] | None = None):
        self.config = config
        self.topics = sorted(topics)
        self.trace = trace
        self.name = name
        self.listener = listener or RebalanceListener()
        self.on_change = on_change
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.member_id = ""           # kept across ILLEGAL_GENERATION, dropped on UNKNOWN_MEMBER_ID
        self.rebalances = 0
        self.error: str | None = None  # a fatal error that stopped the member
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        # What the sticky assignor is told: the partitions of the last generation this member synced.
        self._last_owned: list[TopicPartition] = []
        self._last_owned_generation = -1
        self._lock = threading.RLock()
        self._lookup_lock = threading.Lock()  # one coordinator lookup at a time (poll loop or heartbeat thread)
        self._rejoin_reason: str | None = "first join"  # set: a rejoin is needed; cleared on SyncGroup success
        self._reset: ErrorCode | None = None
        self._positions_retry_ms = 0  # when the poll loop may look its start positions up again
        self._stop = threading.Event()
        self._coordinator: tuple[str, int] | None = None
        self._coord_client: WireClient | None = None
        self._hb_client: WireClient | None = None
        self.heartbeat = Heartbeat(session_timeout_ms=config.session_timeout_ms,
                                   heartbeat_interval_ms=config.heartbeat_interval_ms,
                                   max_poll_interval_ms=config.max_poll_interval_ms,
                                   retry_backoff_ms=config.retry_backoff_ms, now_ms=now_ms())
        self.fetcher = Fetcher(config.bootstrap, config.client_id, max_records=config.max_poll_records,
                               timeout_s=config.request_timeout_ms / 1000, processing_ms=config.lab_processing_ms)
        self._last_commit_ms = now_ms()
        self._poll_thread = threading.Thread(target=self._poll_loop, name=f"poll-{name}", daemon=True)
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{name}", daemon=True)

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
        """Leave gracefully: the poll loop commits, revokes and sends LeaveGroup before it ends."""
        self._stop.set()
        self._poll_thread.join(timeout_s)
        self._hb_thread.join(timeout_s)

    # -- state -----------------------------------------------------------------------------
    def _set_state(self, state: MemberState) -> None:
        with self._lock:
            changed = state is not self.state
            self.state = state
        if changed:
            self.trace.record("consumer_state", member=self.generation.member_id or self.member_id,
                              generation=self.generation.generation_id, state=state.value)
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def request_rejoin(self, reason: str) -> None:
        """Java's `requestRejoin`: a rejoin is needed, for this reason (the latest one given is kept)."""
        with self._lock:
            self._rejoin_reason = reason

    def _request_reset(self, code: ErrorCode, source: str) -> None:
        with self._lock:
            self._reset = code
        self.request_rejoin(f"{source}: {code.name}")

    def _apply_reset(self) -> None:
        with self._lock:
            code, self._reset = self._reset, None
            if code is None:
                return
            if code is E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.generation = NO_GENERATION
        self.trace.record("generation_reset", error=code.name, member=self.member_id)
        self._set_state(MemberState.UNJOINED)

    def _coordinator_unknown(self, why: str) -> None:
        with self._lock:
            if self._coordinator is None:
                return
            self._coordinator = None
            for client in (self._coord_client, self._hb_client):
                if client is not None:
                    client.close()
            self._coord_client = self._hb_client = None
        self.trace.record("coordinator_lost", reason=why)

    # -- coordinator discovery ---------------------------------------------------------
    def _ensure_coordinator(self) -> bool:
        with self._lookup_lock:
            return self._lookup_coordinator()

    def _lookup_coordinator(self) -> bool:
        with self._lock:
            if self._coordinator is not None:
                return True
        candidates = list(self.fetcher.brokers.values()) + self.config.bootstrap
        for host, port in candidates:
            try:
                answer = find_coordinator(host, port, self.config.group_id, self.config.client_id)
            except ConnectionError:
                continue
            error = ErrorCode(answer.get("error_code", 0))
            self.trace.record("find_coordinator", error=error.name, node=answer.get("node_id"))
            if error is E.NONE:
                timeout = self.config.request_timeout_ms / 1000
                # lab only: the route through a fault proxy, if the experiment gave one (see config.py)
                address = self.config.coordinator_via or (answer["host"], answer["port"])
                with self._lock:
                    self._coordinator = address
                    self._coord_client = WireClient(*address, client_id=self.config.client_id, timeout_s=timeout)
                    self._hb_client = WireClient(*address, client_id=self.config.client_id, timeout_s=timeout)
                return True
            if error in FATAL:
                raise ConsumerFailed(f"FindCoordinator: {error.name}: {answer.get('message', '')}")
            break  # COORDINATOR_NOT_AVAILABLE: the offsets topic is being created or has no leader yet
        self._stop.wait(self.config.retry_backoff_ms / 1000)
        return False

    def _call_coordinator(self, api: str, *, timeout_s: float | None = None, **body) -> dict | None:
        """One request on the poll loop's connection; None if the connection failed."""
        with self._lock:
            client = self._coord_client
        if client is None:
            return None
        try:
            return client.request(api, timeout_s=timeout_s, group_id=self.config.group_id, **body)
        except ConnectionError as exc:
            self._coordinator_unknown(f"{api}: {exc}")
            return None

    # -- the poll loop -------------------------------------------------------------------
    def _poll_loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.heartbeat.poll(now_ms())
                if not self._ensure_coordinator():
                    if self.state is MemberState.STABLE:
                        self._fetch_round()  # Kafka keeps fetching while it looks for the coordinator
                    continue
                with self._lock:
                    must_join = self._rejoin_reason is not None or self._reset is not None
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

    def _rebalance(self) -> None:
        with self._lock:
            reason = self._rejoin_reason or "reset"  # cleared only when a SyncGroup succeeds
        if self._assignment:
            self._commit_before_rejoining()
            self._revoke()
        self._apply_reset()
        self.rebalances += 1
        self.trace.record("rebalance_begin", member=self.member_id, generation=self.generation.generation_id,
                          reason=reason, rebalance=self.rebalances)
        outcome = self._join_and_sync()
        self.trace.record("rebalance_end", member=self.member_id, generation=self.generation.generation_id,
                          outcome=outcome, rebalance=self.rebalances)
        if outcome != "ok":
            self._set_state(MemberState.UNJOINED)
            self.request_rejoin(outcome)
            if outcome not in REJOIN_AT_ONCE:
                self._stop.wait(self.config.retry_backoff_ms / 1000)

    def _commit_before_rejoining(self) -> None:
        """Java's onJoinPrepare: the auto-commit, retried while its error is retriable, until the rebalance
        timeout (`max.poll.interval.ms`) has passed."""
        deadline = now_ms() + self.config.max_poll_interval_ms
        while True:
            error = self._commit_positions("before rejoining")
            if error not in RETRIABLE_COMMIT or now_ms() >= deadline or self._stop.is_set():
                return
            self._stop.wait(self.config.retry_backoff_ms / 1000)
            self._ensure_coordinator()

    def _subscription_metadata(self) -> dict:
        return {"topics": self.topics, "owned": [list(tp) for tp in self._last_owned],
                "generation": self._last_owned_generation}

    def _join_and_sync(self) -> str:
        """One JoinGroup + SyncGroup round trip; returns `ok` or why not."""
        self._set_state(MemberState.PREPARING_REBALANCE)
        rebalance_ms = self.config.max_poll_interval_ms
        answer = self._call_coordinator(
            "JoinGroup", timeout_s=(rebalance_ms + 5000) / 1000, member_id=self.member_id,
            client_id=self.config.client_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type="consumer",
            protocols=[{"name": s, "metadata": self._subscription_metadata()} for s in self.config.strategies])
        if answer is None:
            return "coordinator_unavailable"
        error = ErrorCode(answer["error_code"])
        self.trace.record("join", member=answer.get("member_id") or self.member_id,
                          generation=answer.get("generation_id"), error=error.name, leader=answer.get("leader"),
                          protocol=answer.get("protocol_name"), members=len(answer.get("members") or []))
        if error is E.MEMBER_ID_REQUIRED:
            self.member_id = answer["member_id"]
            return "member_id_required"
        if error is not E.NONE:
            return self._handle_error("JoinGroup", error)
        with self._lock:
            self.member_id = answer["member_id"]
            self.generation = Generation(answer["generation_id"], answer["member_id"], answer["protocol_name"])
        self.heartbeat.reset_timeouts(now_ms())
        self._set_state(MemberState.COMPLETING_REBALANCE)
        assignments = []
        if answer["leader"] == self.member_id:
            assignments = self._assign_as_leader(answer["protocol_name"], answer["members"])
        answer = self._call_coordinator("SyncGroup", generation_id=self.generation.generation_id,
                                        member_id=self.member_id, assignments=assignments)
        if answer is None:
            return "coordinator_unavailable"
        error = ErrorCode(answer["error_code"])
        partitions = [(t, p) for t, p in (answer.get("assignment") or {}).get("partitions", [])]
        self.trace.record("sync", member=self.member_id, generation=self.generation.generation_id,
                          error=error.name, partitions=[list(tp) for tp in partitions])
        if error is not E.NONE:
            return self._handle_error("SyncGroup", error)
        with self._lock:
            self._rejoin_reason = None  # Java: rejoinNeeded = false, on SyncGroup success only
            self._assignment = sorted(partitions)
            self._positions = {}
            self._positions_retry_ms = 0
            self._last_owned, self._last_owned_generation = list(self._assignment), self.generation.generation_id
        self.heartbeat.reset_timeouts(now_ms())
        self.trace.record("assigned", member=self.member_id, generation=self.generation.generation_id,
                          partitions=[list(tp) for tp in self._assignment])
        self.listener.on_partitions_assigned(list(self._assignment))
        self._set_state(MemberState.STABLE)
        self._update_fetch_positions()
        return "ok"

    def _handle_error(self, api: str, error: ErrorCode) -> str:
        if error in FENCED:
            self._request_reset(error, api)
            self._apply_reset()
        elif error in FIND_AGAIN:
            self._coordinator_unknown(f"{api}: {error.name}")
        elif error in FATAL:
            raise ConsumerFailed(f"{api}: {error.name}")
        return error.name.lower()

    def _assign_as_leader(self, protocol: str, members: list[dict]) -> list[dict]:
        subscriptions = {m["member_id"]: Subscription(m["metadata"]["topics"],
                                                      [tuple(tp) for tp in m["metadata"].get("owned", [])],
                                                      m["metadata"].get("generation", -1))
                         for m in members}
        topics = {t for s in subscriptions.values() for t in s.topics}
        if not all(t in self.fetcher.partition_counts for t in topics):
            self.fetcher.refresh_metadata()
        counts = {t: n for t, n in self.fetcher.partition_counts.items() if t in topics}
        result = ASSIGNORS[protocol].assign(counts, subscriptions)
        self.trace.record("leader_assignment", member=self.member_id, generation=self.generation.generation_id,
                          protocol=protocol, assignment={m: [list(tp) for tp in tps] for m, tps in result.items()})
        return [{"member_id": m, "assignment": {"partitions": [list(tp) for tp in tps]}} for m, tps in result.items()]

    def _update_fetch_positions(self) -> None:
        """Java's `updateFetchPositions`: the committed offset of each assigned partition without a position,
        else `auto.offset.reset`. What fails is tried again after `retry.backoff.ms`; it never causes a rejoin."""
        with self._lock:
            missing = [tp for tp in self._assignment if tp not in self._positions]
        if not missing or now_ms() < self._positions_retry_ms:
            return
        found = {}
        answer = self._call_coordinator("OffsetFetch", partitions=[list(tp) for tp in missing])
        error = None if answer is None else ErrorCode(answer["error_code"])
        if error is E.NONE:
            for o in answer["offsets"]:
                tp = (o["topic"], o["partition"])
                if o["offset"] >= 0:
                    found[tp] = o["offset"]
                else:
                    which = "earliest" if self.config.auto_offset_reset == "earliest" else "latest"
                    offset = self.fetcher.list_offset(tp, which)
                    if offset is not None:
                        found[tp] = offset
        elif error in FIND_AGAIN:
            self._coordinator_unknown(f"OffsetFetch: {error.name}")
        with self._lock:
            found = {tp: o for tp, o in found.items() if tp in self._assignment}  # still ours
            self._positions.update(found)
            self._committed.update(found)
            still_missing = [tp for tp in self._assignment if tp not in self._positions]
        if still_missing:
            self._positions_retry_ms = now_ms() + self.config.retry_backoff_ms
            self.trace.record("positions_unknown", member=self.member_id, generation=self.generation.generation_id,
                              partitions=[list(tp) for tp in still_missing],
                              error=error.name if error is not None else "NETWORK_EXCEPTION")

    def _revoke(self) -> None:
        with self._lock:
            revoked, self._assignment, self._positions = self._assignment, [], {}
        self.trace.record("revoked", member=self.member_id, generation=self.generation.generation_id,
                          partitions=[list(tp) for tp in revoked])
        self.listener.on_partitions_revoked(revoked)
        self._changed()

    # -- fetching and committing -----------------------------------------------------------
    def _fetch_round(self) -> None:
        got_any = False

        def processed(tp: TopicPartition, offset: int) -> None:
            nonlocal got_any
            got_any = True
            self.trace.record("processed", topic=tp[0], partition=tp[1], offset=offset,
                              member=self.member_id, generation=self.generation.generation_id)

        for tp in self.assignment():
            if self._stop.is_set() or self._rejoin_reason is not None:
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

    def _maybe_auto_commit(self) -> None:
        if self.config.enable_auto_commit and now_ms() - self._last_commit_ms >= self.config.auto_commit_interval_ms:
            self._commit_positions("auto-commit")

    def _commit_positions(self, why: str) -> ErrorCode | None:
        """Commit every position that moved, with the generation this member consumed under; the error, or
        None when nothing was sent (nothing moved, auto-commit off, or no generation: Java sends no commit
        without one)."""
        self._last_commit_ms = now_ms()
        if not self.config.enable_auto_commit:
            return None
        with self._lock:
            moved = {tp: o for tp, o in self._positions.items() if self._committed.get(tp) != o}
            generation = self.generation
        if not moved or not generation.is_valid():
            return None
        answer = self._call_coordinator(
            "OffsetCommit", member_id=generation.member_id, generation_id=generation.generation_id,
            offsets=[{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(moved.items())])
        error = E.REQUEST_TIMED_OUT if answer is None else ErrorCode(answer["error_code"])
        outcome = "accepted" if error is E.NONE else ("fenced" if error in FENCED else "failed")
        for (t, p), offset in sorted(moved.items()):
            self.trace.record("commit", topic=t, partition=p, offset=offset, member=generation.member_id,
                              generation=generation.generation_id, outcome=outcome, error=error.name, why=why)
        if error is E.NONE:
            with self._lock:
                self._committed.update(moved)
        elif error in FENCED:
            self._request_reset(error, "OffsetCommit")
        elif error is E.REBALANCE_IN_PROGRESS:
            self.request_rejoin("OffsetCommit: REBALANCE_IN_PROGRESS")
        elif error in FIND_AGAIN:
            self._coordinator_unknown(f"OffsetCommit: {error.name}")
        return error

    def _leave(self) -> None:
        """Stopping: commit, revoke, LeaveGroup, close connections."""
        try:
            if self.error is None and self._assignment:
                self._commit_positions("stop")
            if self._assignment:
                self._revoke()
            if self.member_id and self._coordinator is not None:
                answer = self._call_coordinator("LeaveGroup", member_id=self.member_id)
                self.trace.record("leave", member=self.member_id, generation=self.generation.generation_id,
                                  error=ErrorCode(answer["error_code"]).name if answer else "NETWORK_EXCEPTION")
        finally:
            with self._lock:
                self.generation = NO_GENERATION
            self._set_state(MemberState.UNJOINED)
            self._coordinator_unknown("stopped")
            self.fetcher.close()
            self._stop.set()

    # -- the heartbeat thread --------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self._heartbeat_step(now_ms()))

    def _heartbeat_step(self, now: int) -> float:
        """One turn of Java's `HeartbeatThread.run`; returns how long to wait before the next one (seconds)."""
        backoff_s = max(self.config.retry_backoff_ms, 10) / 1000
        with self._lock:
            generation, state, client = self.generation, self.state, self._hb_client
        if state.has_not_joined_group() or not generation.is_valid():
            return backoff_s  # Java: disabled until the member has a generation
        if client is None:
            # Java's heartbeat thread looks the coordinator up itself (the poll loop may be busy), then backs off;
            # a lookup that found none has backed off already
            return backoff_s if self._ensure_coordinator() else 0
        if self.heartbeat.session_timeout_expired(now):
            # No successful heartbeat for a whole session: the coordinator is gone, or has
            # evicted us. Kafka marks the coordinator unknown and looks it up again.
            self._coordinator_unknown("no heartbeat answered within session.timeout.ms")
            self.heartbeat.reset_timeouts(now)
            return 0
        if self.heartbeat.poll_timeout_expired(now):
            self.trace.record("poll_timeout", member=generation.member_id)
            self._maybe_leave_group("consumer poll timeout has expired")
            return 0
        if not self.heartbeat.should_heartbeat(now):
            return min(self.heartbeat.time_to_next_heartbeat(now), 100) / 1000
        self.heartbeat.sent_heartbeat(now)
        try:
            answer = client.request("Heartbeat", group_id=self.config.group_id, member_id=generation.member_id,
                                    generation_id=generation.generation_id)
            error = ErrorCode(answer["error_code"])
        except ConnectionError:
            error = None
        self._on_heartbeat_answer(error, generation)
        return 0

    def _on_heartbeat_answer(self, error: ErrorCode | None, sent_under: Generation) -> None:
        """Java's `HeartbeatResponseHandler` (None: no answer). A REBALANCE_IN_PROGRESS that arrives while
        this member is already rebalancing, and a fencing error for a generation it has already left, belong
        to the past: both are ignored, and count as a heartbeat answered."""
        with self._lock:
            state, current = self.state, self.generation
        ignored = ((error is E.REBALANCE_IN_PROGRESS and state is not MemberState.STABLE)
                   or (error in FENCED and current != sent_under))
        self.trace.record("heartbeat", member=sent_under.member_id, generation=sent_under.generation_id,
                          error=error.name if error is not None else "NETWORK_EXCEPTION", ignored=ignored)
        if error is E.NONE or error is E.REBALANCE_IN_PROGRESS or ignored:
            self.heartbeat.received_heartbeat(now_ms())
            if error is E.REBALANCE_IN_PROGRESS and not ignored:
                self.request_rejoin("Heartbeat: REBALANCE_IN_PROGRESS")
        elif error in FENCED:
            self.heartbeat.fail_heartbeat(now_ms())
            self._request_reset(error, "Heartbeat")
        elif error is None or error in FIND_AGAIN:
            self.heartbeat.fail_heartbeat(now_ms())
            self._coordinator_unknown(f"Heartbeat: {error.name if error else 'connection failed'}")
        else:
            self.heartbeat.fail_heartbeat(now_ms())

    def _maybe_leave_group(self, reason: str) -> None:
        """Java's `maybeLeaveGroup`: LeaveGroup if the member is in a group, then generation and member id
        reset (so heartbeats stop, and no commit is sent) and a rejoin requested for the next poll."""
        with self._lock:
            member_id, client, state = self.generation.member_id, self._hb_client, self.state
        if member_id and client is not None and state is not MemberState.UNJOINED:
            try:
                answer = client.request("LeaveGroup", group_id=self.config.group_id, member_id=member_id)
                error = ErrorCode(answer["error_code"]).name
            except ConnectionError:
                error = "NETWORK_EXCEPTION"
            self.trace.record("leave", member=member_id, generation=self.generation.generation_id, error=error,
                              reason=reason)
        with self._lock:
            self.generation, self.member_id = NO_GENERATION, ""
        self.trace.record("generation_reset", error="NONE", member="", reason=reason)
        self._set_state(MemberState.UNJOINED)
        self.request_rejoin(reason)
