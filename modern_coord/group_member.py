"""A classic group's member, as the Java client's `AbstractCoordinator`: join, sync, heartbeat, leave.

What any member of a classic group does, whatever it consumes (the consumer's
own part, partitions and offsets, is `consumer.py`'s, as Java's
`ConsumerCoordinator`). Two threads: the consumer's poll loop runs the
rebalance (`_rebalance`), and

- the **heartbeat thread** sends Heartbeat every `heartbeat.interval.ms`
  (timing in `heartbeat.py`) while the member has a generation
  (COMPLETING_REBALANCE or STABLE), and turns each answer into a request to
  the poll loop (`_handle_heartbeat_response`, as the Java client's
  `HeartbeatResponseHandler`, by the error policy, `error_policy.py`). An answer that
  belongs to the past is ignored (and counts as answered): a
  REBALANCE_IN_PROGRESS while the member is not STABLE belongs to the
  rebalance already under way, and ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID
  for a generation other than the current one is stale. With no answer for a
  whole session (checked while a heartbeat is in flight too, as Java's
  thread does not wait on its heartbeat) it marks the coordinator unknown and
  finds it again, looking it up itself as Java's heartbeat thread does; the
  session starts again when the coordinator is found. Departure, stated:
  while a heartbeat is in flight the lab's thread waits for its answer
  (no longer than the session has left), so meanwhile it neither checks
  `max.poll.interval.ms` nor sends another heartbeat; Java's thread checks
  both every `retry.backoff.ms`. When the application has not polled for
  `max.poll.interval.ms`, it leaves the group (LeaveGroup, generation and
  member id reset, heartbeats stop) so that the others can go on; a static
  member sends no LeaveGroup (below).

One rebalance, as this member lives it (states in `member.py`)::

    commit positions (if auto-commit; retried until the rebalance timeout),
    revoke everything (eager), rebalance_begin
    JoinGroup(member id or "")  -> MEMBER_ID_REQUIRED: again with the id handed out
                                   (a static member's first JoinGroup is answered with its id at once)
                                -> generation g, leader, members (leader only)
    leader: assignor(members' subscriptions) ; SyncGroup(g, assignments)
    SyncGroup answer            -> this member's partitions, STABLE: assigned, rebalance_end;
                                   the rejoin request is cleared only now (Java: rejoinNeeded = false
                                   on SyncGroup success), so requests made during the rebalance are absorbed
    then, in the poll loop      -> start positions: OffsetFetch, else auto.offset.reset (ListOffsets);
                                   a failure is retried after retry.backoff.ms, never a reason to rejoin

Cooperative rebalancing (KIP-429; `partition.assignment.strategy=cooperative-sticky`,
the protocol being `self.protocol`): a rebalance revokes nothing up front
(only a member whose generation was reset loses everything, Java's
`onPartitionsLost`). Its JoinGroup carries what it owns and its generation;
JoinGroup and SyncGroup are in flight while the poll loop goes on fetching
and processing what it owns (`_call_while_fetching`). The leader's
`cooperative-sticky` assignor withholds every partition changing owner. After
SyncGroup the member revokes owned-minus-assigned, if any, and rejoins at
once; the second round hands the withheld partitions to their new owners.
The coordinator is the same for both protocols. Java does not commit the
revoked partitions' positions for you (the application may, in its
`onPartitionsRevoked`; the lab's members do not): what a member processed of
a revoked partition since its last commit is processed again by the next
owner, as in Kafka::

    commit positions (if auto-commit), keep everything, rebalance_begin
    JoinGroup(owned, generation)  ... fetching meanwhile ...  -> generation g
    leader: cooperative-sticky (moving partitions withheld); SyncGroup
    SyncGroup answer   -> revoke owned - assigned; assigned; STABLE; if it revoked any: rejoin
    (second round: generation g+1, the withheld partitions go to their new owners)

Not modelled, stated: the subscription is fixed (Java's onJoinPrepare also
revokes the partitions of topics no longer subscribed; no pattern
subscriptions); the leader does not validate a custom cooperative assignor's
output (Java's `validateCooperativeAssignment`: `cooperative-sticky` is the
only one, and is exempt); if the heartbeat thread learns during
CompletingRebalance that the generation is gone, the lab still applies the
SyncGroup answer and loses everything at its next rejoin, where Java
discards the answer.

The consumer fills in what is its own (Java's abstract methods):
`_prepare_join` (onJoinPrepare), `_subscription_metadata` (metadata),
`_assign_as_leader` (onLeaderElected), `_on_join_complete` (onJoinComplete),
`_after_join`, and `_fetch_round` (what the poll loop does while a
cooperative JoinGroup or SyncGroup is in flight). What an error makes it do is
`error_policy.py`'s.

Static membership (KIP-345, `group.instance.id` in `config.py`): the member
names its instance id in JoinGroup, SyncGroup, Heartbeat and OffsetCommit
(Java 3.6's requests; its LeaveGroup never does, see below). Its first
JoinGroup, with member id "", is answered with its member id at once (no
MEMBER_ID_REQUIRED round); a restart within the session timeout gets the
instance's old entry under a new member id, and no rebalance if the group is
Stable (the coordinator then names the old leader id, so a restarted leader
syncs as a follower and gets its old assignment). The old process, if still
alive, is answered FENCED_INSTANCE_ID and stops (fatal, above). A static
member never sends LeaveGroup (Java's `maybeLeaveGroup` skips it unless
`isDynamicMember()`): not on `stop()`, which still commits and revokes, and
not on `max.poll.interval.ms`, where it still resets its generation and
member id and rejoins under its instance id. The coordinator keeps it until
its session times out (or an operator removes it by instance id).

It never talks to ZooKeeper. Departure from the Java client, stated: when
the heartbeat thread learns that the generation is gone, the Java client
resets it at once, so a commit that follows fails inside the client
(CommitFailedException). The lab's poll loop commits first with the
generation it consumed under, then resets, so the coordinator's fencing
(ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID) is what the trace shows. Either
way the zombie's offsets are not written. A member that left on
`max.poll.interval.ms` has no generation and sends no commit, as in Java.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lab_cluster.assignment import rebalance_protocol
from lab_cluster.clock import monotonic_ms
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode, WireClient

from .config import ConsumerConfig
from .coordinator_link import SESSION_EXPIRED, ConsumerFailed, CoordinatorLink
from .error_policy import FENCED, ErrorAction, error_action, rejoins_at_once
from .heartbeat import Heartbeat
from .leader_assignment import AssignorFailed, user_data_of
from .member import NO_GENERATION, ClassicMemberState, Generation, TopicPartition


class GroupMember(CoordinatorLink):
    def __init__(self, config: ConsumerConfig, trace: TraceRecorder, *, name: str,
                 on_change: Callable[[GroupMember], None] | None = None):
        self.config = config
        self.trace = trace
        self.name = name
        self.on_change = on_change
        self.state = ClassicMemberState.UNJOINED
        self.generation = NO_GENERATION
        self.member_id = ""           # kept across ILLEGAL_GENERATION, dropped on UNKNOWN_MEMBER_ID
        self.rebalances = 0
        self.error: str | None = None  # a fatal error that stopped the member
        #: its assignors by the protocol name they vote under, most preferred first: the built-in ones and the
        #: user's own (`lab_cluster/assignment/plugins.py`), each of the latter an instance of this member's
        self.assignors = {a.name: a for a in config.assignors()}
        #: "eager" or "cooperative": the highest protocol every configured assignor supports (Java's constructor)
        self.protocol = rebalance_protocol(list(self.assignors.values()))
        self._lock = threading.RLock()
        self._lookup_lock = threading.Lock()  # one coordinator lookup at a time (poll loop or heartbeat thread)
        self._rejoin_reason: str | None = "first join"  # set: a rejoin is needed; cleared on SyncGroup success
        self._reset: ErrorCode | None = None
        # Java's `needsJoinPrepare`: the commit and revocation before a join are done once per rebalance, not again
        # for each JoinGroup or SyncGroup retried; set again by a completed join and by a reset generation
        self._needs_join_prepare = True
        # Java's `HeartbeatThread.failed`: a fatal answer the heartbeat thread got; the poll loop raises it
        self._heartbeat_failure: str | None = None
        self._stop = threading.Event()
        self._coordinator: tuple[str, int] | None = None
        self._coord_client: WireClient | None = None
        self._hb_client: WireClient | None = None
        self.heartbeat = Heartbeat(session_timeout_ms=config.session_timeout_ms,
                                   heartbeat_interval_ms=config.heartbeat_interval_ms,
                                   max_poll_interval_ms=config.max_poll_interval_ms,
                                   retry_backoff_ms=config.retry_backoff_ms, now_ms=monotonic_ms())
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{name}", daemon=True)

    # -- what the consumer fills in (Java's abstract methods) -------------------------------
    def _prepare_join(self) -> None:
        raise NotImplementedError  # onJoinPrepare

    def _subscription_metadata(self, strategy: str) -> dict:
        raise NotImplementedError  # metadata()

    def _assign_as_leader(self, protocol: str, members: list[dict]) -> list[dict]:
        raise NotImplementedError  # onLeaderElected

    def _on_join_complete(self, partitions: list[TopicPartition], user_data: bytes | None) -> None:
        raise NotImplementedError  # onJoinComplete

    def _after_join(self) -> None:
        """After a completed join, once the member is STABLE (the consumer looks its start positions up)."""

    def _fetch_round(self, until: Callable[[], bool] | None = None) -> None:
        raise NotImplementedError

    @property
    def ident(self) -> str:
        """How the trace names it (`GroupMember`): its client.id, which prefixes its member id."""
        return self.name

    # -- state -----------------------------------------------------------------------------
    def _set_state(self, state: ClassicMemberState) -> None:
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
            if code is ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.generation = NO_GENERATION
            self._needs_join_prepare = True  # Java's resetStateAndRejoin
        self.trace.record("generation_reset", error=code.name, member=self.member_id)
        self._set_state(ClassicMemberState.UNJOINED)

    # -- the rebalance, on the poll loop ----------------------------------------------------
    def _poll_heartbeat(self, now: int) -> None:
        """Java's `pollHeartbeat`, at the top of every poll: a fatal error of the heartbeat thread is raised here
        (ConsumerFailed), and the poll is recorded for `max.poll.interval.ms`."""
        with self._lock:
            failure = self._heartbeat_failure
        if failure is not None:
            raise ConsumerFailed(failure)
        self.heartbeat.poll(now)

    def _rebalance(self) -> None:
        with self._lock:
            reason = self._rejoin_reason or "reset"  # cleared only when a SyncGroup succeeds
        if self._needs_join_prepare:
            self._prepare_join()
        self._apply_reset()
        self.rebalances += 1
        self.trace.record("rebalance_begin", member=self.member_id, generation=self.generation.generation_id,
                          reason=reason, rebalance=self.rebalances)
        outcome = self._join_and_sync()
        self.trace.record("rebalance_end", member=self.member_id, generation=self.generation.generation_id,
                          outcome=outcome, rebalance=self.rebalances)
        if outcome != "ok":
            self._set_state(ClassicMemberState.UNJOINED)
            self.request_rejoin(outcome)
            if not rejoins_at_once(outcome):
                self._stop.wait(self.config.retry_backoff_ms / 1000)

    def _join_and_sync(self) -> str:
        """One JoinGroup + SyncGroup round trip; returns `ok`, or why not: an error's name in lower case, or
        `coordinator_unavailable` (no answer). The leader computes the assignment between the two (kafka-python's
        `_on_join_leader`); a follower sends an empty one (`_on_join_follower`)."""
        self._set_state(ClassicMemberState.PREPARING_REBALANCE)
        rebalance_ms = self.config.max_poll_interval_ms
        response = self._call_while_fetching(
            "JoinGroup", timeout_s=(rebalance_ms + 5000) / 1000, member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            client_id=self.config.client_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type="consumer",
            protocols=[{"name": name, "metadata": self._subscription_metadata(name)} for name in self.assignors])
        outcome = self._handle_join_response(response)
        if outcome != "ok":
            return outcome
        assignments = []
        if response["leader"] == self.member_id:
            try:
                assignments = self._assign_as_leader(response["protocol_name"], response["members"])
            except AssignorFailed:  # Java: onLeaderElected's failed future; no SyncGroup, poll() throws
                return "assignor_failed"
        response = self._call_while_fetching("SyncGroup", generation_id=self.generation.generation_id,
                                          member_id=self.member_id, group_instance_id=self.config.group_instance_id,
                                          assignments=assignments)
        outcome = self._handle_sync_response(response)
        if outcome != "ok":
            return outcome
        self._after_join()
        return "ok"

    def _call_while_fetching(self, api: str, **body) -> dict | None:
        """JoinGroup or SyncGroup. Eager: a plain call (the member owns nothing while it rebalances). Cooperative:
        the request is in flight on a thread of its own while the poll loop goes on fetching and processing the
        partitions it owns (Java's `poll` sends JoinGroup without waiting for it, then fetches). No auto-commit
        meanwhile (Java's `ConsumerCoordinator.poll` returns before it while a rejoin is pending). Stopping does
        not wait for the answer, but the leave's own requests queue behind it on the one connection (a broker,
        too, answers one connection's requests in order). The fetch round ends after the partition whose batch
        is being processed when the answer comes (Java: at the next `poll()`, after the application's batch)."""
        if self.protocol == "eager":
            return self._call_coordinator(api, **body)
        answer: dict = {}
        request = threading.Thread(target=lambda: answer.update(response=self._call_coordinator(api, **body)),
                                   name=f"{api}-{self.name}", daemon=True)
        request.start()
        while request.is_alive() and not self._stop.is_set():
            self._poll_heartbeat(monotonic_ms())
            self._fetch_round(until=lambda: not request.is_alive())
            request.join(0.0)
        return answer.get("response")

    def _handle_join_response(self, response: dict | None) -> str:
        """JoinGroup's answer: on success the new generation (COMPLETING_REBALANCE); `ok`, or why not."""
        if response is None:
            return "coordinator_unavailable"
        error = ErrorCode(response["error_code"])
        self.trace.record("join", member=response.get("member_id") or self.member_id,
                          generation=response.get("generation_id"), error=error.name, leader=response.get("leader"),
                          protocol=response.get("protocol_name"), members=len(response.get("members") or []))
        if error is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response["member_id"]  # the id handed out, for the JoinGroup sent again at once
        if error is not ErrorCode.NONE:
            return self._join_or_sync_failed("JoinGroup", error)
        with self._lock:
            self.member_id = response["member_id"]
            self.generation = Generation(response["generation_id"], response["member_id"], response["protocol_name"])
        self.heartbeat.reset_timeouts(monotonic_ms())
        self._set_state(ClassicMemberState.COMPLETING_REBALANCE)
        return "ok"

    def _handle_sync_response(self, response: dict | None) -> str:
        """SyncGroup's answer: on success this member's partitions (STABLE); `ok`, or why not."""
        if response is None:
            return "coordinator_unavailable"
        error = ErrorCode(response["error_code"])
        assignment = response.get("assignment") or {}
        partitions = [(t, p) for t, p in assignment.get("partitions", [])]
        self.trace.record("sync", member=self.member_id, generation=self.generation.generation_id,
                          error=error.name, partitions=[list(tp) for tp in partitions])
        if error is not ErrorCode.NONE:
            return self._join_or_sync_failed("SyncGroup", error)
        with self._lock:
            self._rejoin_reason = None  # Java: rejoinNeeded = false, on SyncGroup success only
        # (no heartbeat timer reset here: Java resets them when JoinGroup succeeds, not SyncGroup)
        self._needs_join_prepare = True
        self._on_join_complete(partitions, user_data_of(assignment))
        self._set_state(ClassicMemberState.STABLE)
        return "ok"

    def _join_or_sync_failed(self, api: str, error: ErrorCode) -> str:
        """The error policy for a failed JoinGroup or SyncGroup; returns the outcome `_rebalance` records, and
        from which it decides whether to send JoinGroup again at once (`rejoins_at_once`)."""
        if self._act_on(api, error) is ErrorAction.RESET:
            self._apply_reset()  # in the rebalance already: the next JoinGroup goes without the old generation
        return error.name.lower()

    def _act_on(self, api: str, error: ErrorCode | None) -> ErrorAction:
        """Do what the error policy (`error_action`) says about `api`'s answer; the caller then retries,
        rejoins or goes on as the action says. A reset or a rejoin is requested here and carried out by the
        poll loop; a handler inside the rebalance (`_join_or_sync_failed`) applies the reset at once."""
        action = error_action(api, error)
        if action is ErrorAction.REDISCOVER:
            self._coordinator_unknown(f"{api}: {error.name if error is not None else 'connection failed'}")
        elif action is ErrorAction.RESET:
            self._request_reset(error, api)
        elif action is ErrorAction.REJOIN:
            self.request_rejoin(f"{api}: {error.name}")
        elif action is ErrorAction.FATAL:
            raise ConsumerFailed(f"{api}: {error.name}")
        return action

    def _is_dynamic_member(self) -> bool:
        """Java's `isDynamicMember()`: no `group.instance.id`. Only a dynamic member sends LeaveGroup."""
        return not self.config.is_static

    # -- the heartbeat thread --------------------------------------------------------------
    def _coordinator_found(self, now_ms: int) -> None:
        """FindCoordinator named the coordinator: the session starts again (Java's `resetSessionTimeout`)."""
        self.heartbeat.reset_session_timeout(now_ms)

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self._heartbeat_step(monotonic_ms()))

    def _heartbeat_step(self, now: int) -> float:
        """One turn of Java's `HeartbeatThread.run`; returns how long to wait before the next one (seconds)."""
        backoff_s = max(self.config.retry_backoff_ms, 10) / 1000
        with self._lock:
            generation, state, client = self.generation, self.state, self._hb_client
            failed = self._heartbeat_failure is not None
        if state.has_not_joined_group() or not generation.is_valid() or failed:
            return backoff_s  # Java: disabled until the member has a generation, and once the thread has failed
        if client is None:
            # Java's heartbeat thread looks the coordinator up itself (the poll loop may be busy), then backs off;
            # a lookup that found none has backed off already
            return backoff_s if self._ensure_coordinator() else 0
        if self.heartbeat.session_timeout_expired(now):
            # No successful heartbeat for a whole session: the coordinator is gone, or has evicted us. Kafka marks
            # the coordinator unknown and looks it up again (the session starts again once it is found)
            self._coordinator_unknown(SESSION_EXPIRED)
            return 0
        if self.heartbeat.poll_timeout_expired(now):
            self.trace.record("poll_timeout", member=generation.member_id)
            self._maybe_leave_group("consumer poll timeout has expired")
            return 0
        if not self.heartbeat.should_heartbeat(now):
            return min(self.heartbeat.time_to_next_heartbeat(now), 100) / 1000
        self.heartbeat.sent_heartbeat(now)
        # Java's heartbeat thread does not wait on its heartbeat: it checks the session while one is in flight.
        # So the answer is waited for no longer than the session has left (nor than request.timeout.ms)
        wait_ms = min(self.config.request_timeout_ms, self.heartbeat.session_time_left(now))
        try:
            response = client.request("Heartbeat", timeout_s=max(wait_ms, 1) / 1000, group_id=self.config.group_id,
                                      member_id=generation.member_id, group_instance_id=self.config.group_instance_id,
                                      generation_id=generation.generation_id)
            error = ErrorCode(response["error_code"])
        except ConnectionError:
            error = None
            if self.heartbeat.session_timeout_expired(monotonic_ms()):
                self._coordinator_unknown(SESSION_EXPIRED)  # Java: the in-flight heartbeat then fails
        self._handle_heartbeat_response(error, generation)
        return 0

    def _handle_heartbeat_response(self, error: ErrorCode | None, sent_under: Generation) -> None:
        """Heartbeat's answer (None: no answer): Java's `HeartbeatResponseHandler`.

        A REBALANCE_IN_PROGRESS that arrives while this member is already
        rebalancing, and a fencing error for a generation it has already left,
        belong to the past: both are ignored, and count as a heartbeat
        answered (FENCED_INSTANCE_ID too, as Java's handler groups it with
        the other two). Otherwise the error policy decides; an answer that lets
        the member go on (NONE, or a rejoin to make) counts as answered, a
        fatal one (FENCED_INSTANCE_ID) fails the heartbeat thread (Java:
        `failed.set`), any other makes the next heartbeat wait for
        `retry.backoff.ms`.
        """
        with self._lock:
            state, current = self.state, self.generation
        ignored = ((error is ErrorCode.REBALANCE_IN_PROGRESS and state is not ClassicMemberState.STABLE)
                   or (error in FENCED + (ErrorCode.FENCED_INSTANCE_ID,) and current != sent_under))
        self.trace.record("heartbeat", member=sent_under.member_id, generation=sent_under.generation_id,
                          error=error.name if error is not None else "NETWORK_EXCEPTION", ignored=ignored)
        if ignored:
            self.heartbeat.received_heartbeat(monotonic_ms())
            return
        action = error_action("Heartbeat", error)
        if action is ErrorAction.FATAL:
            # Java: resetStateOnResponseError (a rejoin requested, so the poll loop stops fetching), then the
            # thread fails; the poll loop raises it at its next turn (`_poll_heartbeat`), as `pollHeartbeat` does
            with self._lock:
                self._heartbeat_failure = f"Heartbeat: {error.name}"
            self.request_rejoin(f"Heartbeat: {error.name}")
            return
        if action in (ErrorAction.PROCEED, ErrorAction.REJOIN):
            self.heartbeat.received_heartbeat(monotonic_ms())
        else:
            self.heartbeat.fail_heartbeat(monotonic_ms())
        self._act_on("Heartbeat", error)

    def _handle_leave_response(self, error: ErrorCode | None, member_id: str, reason: str | None = None) -> None:
        """LeaveGroup's answer (None: no answer), recorded; whatever it says, the member has left (Java logs it).

        A leave on `max.poll.interval.ms` says why (`reason`); the leave of `stop()` records no reason.
        """
        why = {} if reason is None else {"reason": reason}
        self.trace.record("leave", member=member_id, generation=self.generation.generation_id,
                          error=error.name if error is not None else "NETWORK_EXCEPTION", **why)

    def _maybe_leave_group(self, reason: str) -> None:
        """Java's `maybeLeaveGroup`: LeaveGroup if the member is a dynamic one in a group, then, either way,
        generation and member id reset (so heartbeats stop, and no commit is sent) and a rejoin requested for
        the next poll. A static member sends no LeaveGroup: it rejoins with member id "" and its instance id, and
        the coordinator gives its entry a new member id (a rebalance only if the group is not Stable)."""
        with self._lock:
            member_id, client, state = self.generation.member_id, self._hb_client, self.state
        if self._is_dynamic_member() and member_id and client is not None and state is not ClassicMemberState.UNJOINED:
            try:
                response = client.request("LeaveGroup", group_id=self.config.group_id, member_id=member_id)
                error = ErrorCode(response["error_code"])
            except ConnectionError:
                error = None
            self._handle_leave_response(error, member_id, reason=reason)
        with self._lock:
            self.generation, self.member_id = NO_GENERATION, ""
        self.trace.record("generation_reset", error="NONE", member="", reason=reason)
        self._set_state(ClassicMemberState.UNJOINED)
        self.request_rejoin(reason)
