"""The coordinator-era consumer: the Java client's `ConsumerCoordinator` and poll loop, eager or cooperative.

Two threads, as in the Java client since 0.10.1:

- the **poll loop** finds the coordinator, joins the group when it must
  (JoinGroup, then SyncGroup; the leader runs the assignor), fetches from the
  partition leaders, records a `processed` event per message, and
  auto-commits without waiting for the answer (`auto_commit.py`, Java's
  `maybeAutoCommitOffsetsAsync`). Nothing the coordinator does, or fails to
  do, stops it fetching and processing what it owns: a member cut off from its
  coordinator, its leaders still reachable, goes on processing until it learns
  it was fenced;
- the **heartbeat thread** sends Heartbeat every `heartbeat.interval.ms`
  (timing in `heartbeat.py`) while the member has a generation
  (COMPLETING_REBALANCE or STABLE), and turns each answer into a request to
  the poll loop (`_handle_heartbeat_response`, as the Java client's
  `HeartbeatResponseHandler`, by the error policy below). An answer that
  belongs to the past is ignored (and counts as answered): a
  REBALANCE_IN_PROGRESS while the member is not STABLE belongs to the
  rebalance already under way, and ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID
  for a generation other than the current one is stale. With no answer for a
  whole session (checked while a heartbeat is in flight too, as Java's
  thread does not wait on its heartbeat) it marks the coordinator unknown and
  finds it again, looking it up itself as Java's heartbeat thread does; the
  session starts again when the coordinator is found. When the application has not polled for
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

Each answer has one handler (kafka-python's `coordinator/base.py`):
`_handle_find_coordinator_response`, `_handle_join_response`,
`_handle_sync_response`, `_handle_heartbeat_response`,
`_handle_commit_response`, `_handle_leave_response`, and
`_update_fetch_positions` for OffsetFetch. What an error makes the member do
is decided in one place, `error_action(api, error)`; `_act_on` does it::

    answer                        FindCoord.  JoinGroup,SyncGroup  Heartbeat   OffsetCommit  OffsetFetch
    NONE                          proceed     proceed              proceed     proceed       proceed
    NOT_COORDINATOR,
      COORDINATOR_NOT_AVAILABLE   retry       rediscover           rediscover  rediscover *  rediscover
    no answer                     next broker retry **             rediscover  retry * **    retry **
    ILLEGAL_GENERATION,
      UNKNOWN_MEMBER_ID           retry       reset                reset       reset         retry
    REBALANCE_IN_PROGRESS         retry       rejoin               rejoin      rejoin        retry
    MEMBER_ID_REQUIRED            retry       rejoin (its new id)  retry       fail          retry
    FENCED_INSTANCE_ID            retry       fatal                fatal ***   fatal ***     retry
    COORDINATOR_LOAD_IN_PROGRESS  retry       retry                retry       retry *       retry
    INCONSISTENT_GROUP_PROTOCOL,
      INVALID_SESSION_TIMEOUT,
      INVALID_GROUP_ID,
      INVALID_REQUEST             fatal       fatal                retry       fail          retry
    any other                     retry       retry                retry       fail          retry

    LeaveGroup: proceed, whatever the answer (the member has left; Java only logs it).

- *rediscover*: the coordinator is marked unknown (its connections closed);
  the poll loop (or the heartbeat thread) looks it up again, and the request
  is retried after `retry.backoff.ms`;
- *reset*: the generation is forgotten (the member id too, on
  UNKNOWN_MEMBER_ID) and the member rejoins at once. A failed JoinGroup or
  SyncGroup resets at once; after a Heartbeat or a commit the poll loop does
  it before its next JoinGroup (see the departure below);
- *rejoin*: a rejoin is requested; a failed JoinGroup or SyncGroup is sent
  again at once (Java's `joinGroupIfNeeded`: `continue`), any other failure
  after `retry.backoff.ms`;
- *retry*: the same request again after `retry.backoff.ms`;
- *fail*: this commit is not retried; its offsets go with the next one;
- *fatal*: the consumer stops (`consumer_failed`; its snapshot says it gave
  up), and does not commit on its way out;
- ``*``: the commit before a rejoin is retried on these, until the rebalance
  timeout (Java's `RetriableCommitFailedException`);
- ``**``: the poll loop's requests (`_call_coordinator`) mark the coordinator
  unknown themselves when the connection fails; a commit with no answer is
  recorded as REQUEST_TIMED_OUT;
- ``***``: only for the generation the member still holds (Java's
  `generationUnchanged()`): a heartbeat's for an older one is ignored, a
  commit's fails (not retried). The heartbeat thread cannot stop the
  consumer itself: it stops heartbeating and the poll loop raises its
  failure at its next turn (Java's `HeartbeatThread.failed`, raised by
  `pollHeartbeat`). A commit fenced while the consumer stops is not raised
  (Java's `close` logs it).

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

Usage::

    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9092"})
    consumer = ModernConsumer(config, ["t"], trace, name="c1").start()
    consumer.assignment()        # [("t", 0), ("t", 1)]
    consumer.stop()              # commit, revoke, LeaveGroup (a dynamic member only)
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

from lab_cluster.assignment import ASSIGNORS, Subscription, rebalance_protocol
from lab_cluster.clock import monotonic_ms
from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode, WireClient

from .auto_commit import AsyncAutoCommit, AutoCommitTimer
from .config import ConsumerConfig
from .fetcher import Fetcher
from .heartbeat import Heartbeat
from .lookup import find_coordinator
from .member import NO_GENERATION, Generation, MemberState, RebalanceListener, TopicPartition

# -- the error policy (the table in the module docstring) ---------------------------------------

class Action(enum.Enum):
    """What the member does about an answer (the columns' words in the module docstring's table)."""

    PROCEED = "proceed"
    REDISCOVER = "rediscover"  # the coordinator moved or is gone: mark it unknown, look it up again
    RESET = "reset"            # fenced: forget the generation (and the member id on UNKNOWN_MEMBER_ID), rejoin
    REJOIN = "rejoin"          # the group is rebalancing, or handed out a member id: rejoin at once
    RETRY = "retry"            # the same request again after retry.backoff.ms
    FAIL = "fail"              # a commit that retrying will not mend: not retried
    FATAL = "fatal"            # misconfigured, or fenced by another instance of this group.instance.id: it stops


FENCED = (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID)
COORDINATOR_GONE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
MISCONFIGURED = (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.INVALID_SESSION_TIMEOUT,
                 ErrorCode.INVALID_GROUP_ID, ErrorCode.INVALID_REQUEST)
#: the requests a static member names its group.instance.id in, on which the coordinator may answer
#: FENCED_INSTANCE_ID: Java raises FencedInstanceIdException for each (the heartbeat thread's, at the next poll)
INSTANCE_FENCED_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit")


def error_action(api: str, error: ErrorCode | None) -> Action:
    """What the member does after `api` answered `error` (None: no answer); the table in the module docstring.

        >>> error_action("Heartbeat", ErrorCode.REBALANCE_IN_PROGRESS), error_action("OffsetFetch", None)
        (<Action.REJOIN: 'rejoin'>, <Action.RETRY: 'retry'>)
        >>> error_action("JoinGroup", ErrorCode.INVALID_SESSION_TIMEOUT), error_action("Heartbeat", None)
        (<Action.FATAL: 'fatal'>, <Action.REDISCOVER: 'rediscover'>)
        >>> error_action("Heartbeat", ErrorCode.FENCED_INSTANCE_ID)
        <Action.FATAL: 'fatal'>
    """
    if error is ErrorCode.NONE or api == "LeaveGroup":
        return Action.PROCEED
    if api == "FindCoordinator":
        # COORDINATOR_NOT_AVAILABLE here: the offsets topic is being created or has no leader yet
        return Action.FATAL if error in MISCONFIGURED else Action.RETRY
    if error is None:
        # `_call_coordinator` has marked the coordinator unknown already; the heartbeat thread has its own connection
        return Action.REDISCOVER if api == "Heartbeat" else Action.RETRY
    if error in COORDINATOR_GONE:
        return Action.REDISCOVER
    if api == "OffsetFetch":
        return Action.RETRY  # a start position: never a reason to rejoin
    if error is ErrorCode.FENCED_INSTANCE_ID:
        # another process joined under this group.instance.id: this one is the zombie (Java: FencedInstanceIdException)
        return Action.FATAL if api in INSTANCE_FENCED_APIS else Action.RETRY
    if error in FENCED:
        return Action.RESET
    if error is ErrorCode.REBALANCE_IN_PROGRESS:
        return Action.REJOIN
    if error is ErrorCode.MEMBER_ID_REQUIRED and api in ("JoinGroup", "SyncGroup"):
        return Action.REJOIN  # JoinGroup v4+: again, with the member id the answer handed out
    if error in MISCONFIGURED and api in ("JoinGroup", "SyncGroup"):
        return Action.FATAL
    if api == "OffsetCommit" and error not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT):
        return Action.FAIL
    return Action.RETRY


def rejoins_at_once(outcome: str) -> bool:
    """After a failed JoinGroup or SyncGroup, whose outcome is its error's name in lower case (or
    `coordinator_unavailable`): send JoinGroup again at once, or after `retry.backoff.ms`? Java's
    `joinGroupIfNeeded` `continue`s at once after a reset or a rejoin, and sleeps after anything else."""
    error = ErrorCode.__members__.get(outcome.upper())
    return error is not None and error_action("JoinGroup", error) in (Action.RESET, Action.REJOIN)


def commit_retriable(error: ErrorCode | None) -> bool:
    """Java's `RetriableCommitFailedException`: the coordinator moved, is loading or did not answer (None: no
    commit was sent)."""
    return error is not None and error_action("OffsetCommit", error) in (Action.REDISCOVER, Action.RETRY)


def leader_subscriptions(members: list[dict]) -> dict[str, Subscription]:
    """The assignor's input, from the member list of the leader's JoinGroup answer.

    Each member's `group.instance.id` goes with its subscription: the assignors
    order static members by it (`lab_cluster/assignment/base.py`), so that a
    restarted static member, back under a new member id, keeps its place.
    """
    return {m["member_id"]: Subscription(m["metadata"]["topics"],
                                         [tuple(tp) for tp in m["metadata"].get("owned", [])],
                                         m["metadata"].get("generation", -1),
                                         m.get("group_instance_id"))
            for m in members}


class ConsumerFailed(Exception):
    pass


#: why the heartbeat thread marks the coordinator unknown when the session runs out (the `coordinator_lost` reason)
SESSION_EXPIRED = "no heartbeat answered within session.timeout.ms"


class CoordinatorLink:
    """The member's connections to its group's coordinator, shared by both consumers (classic and KIP-848): find
    it, mark it unknown (which fails the requests in flight at once), send a request on the poll loop's
    connection.

    Departure, stated: the poll loop and the heartbeat thread each have their own connection (`_coord_client`,
    `_hb_client`). Java's client has one, shared by both threads, and the broker reads no further request on a
    connection while a JoinGroup or SyncGroup is parked on it; so in Kafka a heartbeat sent while the member's
    SyncGroup waits is answered after it, in the lab at once. It changes when heartbeats are answered during a
    rebalance, not how many are sent.

    A consumer using it has `config`, `trace`, `fetcher`, `_lock`, `_lookup_lock`, `_stop`, `_coordinator`,
    `_coord_client` and `_hb_client`."""

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

    def _ensure_coordinator(self) -> bool:
        """Ask the known brokers, then the bootstrap ones, until one answers; True once a coordinator is known
        (one lookup at a time: the heartbeat thread and the poll loop may both try)."""
        with self._lookup_lock:
            with self._lock:
                if self._coordinator is not None:
                    return True
            for host, port in list(self.fetcher.brokers.values()) + self.config.bootstrap:
                try:
                    response = find_coordinator(host, port, self.config.group_id, self.config.client_id)
                except ConnectionError:
                    continue  # no answer: ask the next broker
                if self._handle_find_coordinator_response(response):
                    return True
                break  # retry, after the back-off
            self._stop.wait(self.config.retry_backoff_ms / 1000)
            return False

    def _handle_find_coordinator_response(self, response: dict) -> bool:
        """FindCoordinator's answer: connect to the coordinator it names (True), or not found (False)."""
        error = ErrorCode(response.get("error_code", 0))
        self.trace.record("find_coordinator", error=error.name, node=response.get("node_id"))
        action = error_action("FindCoordinator", error)
        if action is Action.FATAL:
            raise ConsumerFailed(f"FindCoordinator: {error.name}: {response.get('message', '')}")
        if action is not Action.PROCEED:
            return False
        timeout = self.config.request_timeout_ms / 1000
        # lab only: the route through a fault proxy, if the experiment gave one (see config.py)
        address = self.config.coordinator_via or (response["host"], response["port"])
        with self._lock:
            self._coordinator = address
            self._coord_client = WireClient(*address, client_id=self.config.client_id, timeout_s=timeout)
            self._hb_client = WireClient(*address, client_id=self.config.client_id, timeout_s=timeout)
        self._coordinator_found(monotonic_ms())
        return True

    def _coordinator_found(self, now_ms: int) -> None:
        """Called when FindCoordinator named the coordinator; the classic consumer's session starts again."""

    def _call_coordinator(self, api: str, *, timeout_s: float | None = None, **body) -> dict | None:
        """One request on the poll loop's connection; None if there is none or it failed (the coordinator is then
        marked unknown, and looked up again)."""
        with self._lock:
            client = self._coord_client
        if client is None:
            return None
        try:
            return client.request(api, timeout_s=timeout_s, group_id=self.config.group_id, **body)
        except ConnectionError as exc:
            self._coordinator_unknown(f"{api}: {exc}")
            return None


class ModernConsumer(CoordinatorLink):
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
        #: "eager" or "cooperative": the highest protocol every configured assignor supports (Java's constructor)
        self.protocol = rebalance_protocol([ASSIGNORS[s] for s in config.strategies])
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
        # Java's `needsJoinPrepare`: the commit and revocation before a join are done once per rebalance, not again
        # for each JoinGroup or SyncGroup retried; set again by a completed join and by a reset generation
        self._needs_join_prepare = True
        # Java's `HeartbeatThread.failed`: a fatal answer the heartbeat thread got; the poll loop raises it
        self._heartbeat_failure: str | None = None
        self._positions_retry_ms = 0  # when the poll loop may look its start positions up again
        self._stop = threading.Event()
        self._coordinator: tuple[str, int] | None = None
        self._coord_client: WireClient | None = None
        self._hb_client: WireClient | None = None
        self.heartbeat = Heartbeat(session_timeout_ms=config.session_timeout_ms,
                                   heartbeat_interval_ms=config.heartbeat_interval_ms,
                                   max_poll_interval_ms=config.max_poll_interval_ms,
                                   retry_backoff_ms=config.retry_backoff_ms, now_ms=monotonic_ms())
        self.fetcher = Fetcher(config.bootstrap, config.client_id, max_records=config.max_poll_records,
                               timeout_s=config.request_timeout_ms / 1000, processing_ms=config.lab_processing_ms)
        # the periodic auto-commit goes on a thread of its own (Java's maybeAutoCommitOffsetsAsync); one commit at a
        # time is sent, whichever thread sends it, so each carries the positions the last one did not
        self._commit_lock = threading.Lock()
        self.auto_commit = AsyncAutoCommit(
            AutoCommitTimer(interval_ms=config.auto_commit_interval_ms, retry_backoff_ms=config.retry_backoff_ms,
                            now_ms=monotonic_ms()),
            commit=lambda: self._commit_positions("auto-commit"), retriable=commit_retriable, name=name)
        self._poll_thread = threading.Thread(target=self._poll_loop, name=f"poll-{name}", daemon=True)
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"heartbeat-{name}", daemon=True)

    # -- public ------------------------------------------------------------------------
    def start(self) -> ModernConsumer:
        self.trace.record("consumer_start", member=self.name, config=self.config.as_record(), topics=self.topics)
        self._poll_thread.start()
        self._hb_thread.start()
        return self

    @property
    def ident(self) -> str:
        """How the trace names it (`GroupMember`): its client.id, which prefixes its member id."""
        return self.name

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
            if code is ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.generation = NO_GENERATION
            self._needs_join_prepare = True  # Java's resetStateAndRejoin
        self.trace.record("generation_reset", error=code.name, member=self.member_id)
        self._set_state(MemberState.UNJOINED)

    # -- the poll loop -------------------------------------------------------------------
    def _poll_loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._poll_heartbeat(monotonic_ms())
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

    def _poll_heartbeat(self, now: int) -> None:
        """Java's `pollHeartbeat`, at the top of every poll: a fatal error of the heartbeat thread is raised here
        (ConsumerFailed), and the poll is recorded for `max.poll.interval.ms`. So is an auto-commit's (Java's
        `invokeCompletedOffsetCommitCallbacks`, also at each poll)."""
        with self._lock:
            failure = self._heartbeat_failure
        if failure is not None:
            raise ConsumerFailed(failure)
        self.auto_commit.raise_failure()
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
            self._set_state(MemberState.UNJOINED)
            self.request_rejoin(outcome)
            if not rejoins_at_once(outcome):
                self._stop.wait(self.config.retry_backoff_ms / 1000)

    def _prepare_join(self) -> None:
        """Java's `onJoinPrepare`, once per rebalance: commit (if auto-commit), then, if the generation was reset,
        lose everything (`onPartitionsLost`, either protocol); else eager revokes everything and cooperative
        nothing (its partitions are fetched through the rebalance)."""
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
            return {"topics": self.topics, "owned": [list(tp) for tp in self._last_owned],
                    "generation": self._last_owned_generation}
        with self._lock:
            return {"topics": self.topics, "owned": [list(tp) for tp in self._assignment],
                    "generation": self.generation.generation_id}

    def _join_and_sync(self) -> str:
        """One JoinGroup + SyncGroup round trip; returns `ok`, or why not: an error's name in lower case, or
        `coordinator_unavailable` (no answer). The leader computes the assignment between the two (kafka-python's
        `_on_join_leader`); a follower sends an empty one (`_on_join_follower`)."""
        self._set_state(MemberState.PREPARING_REBALANCE)
        rebalance_ms = self.config.max_poll_interval_ms
        response = self._call_while_fetching(
            "JoinGroup", timeout_s=(rebalance_ms + 5000) / 1000, member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            client_id=self.config.client_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type="consumer",
            protocols=[{"name": s, "metadata": self._subscription_metadata(s)} for s in self.config.strategies])
        outcome = self._handle_join_response(response)
        if outcome != "ok":
            return outcome
        assignments = []
        if response["leader"] == self.member_id:
            assignments = self._assign_as_leader(response["protocol_name"], response["members"])
        response = self._call_while_fetching("SyncGroup", generation_id=self.generation.generation_id,
                                          member_id=self.member_id, group_instance_id=self.config.group_instance_id,
                                          assignments=assignments)
        outcome = self._handle_sync_response(response)
        if outcome != "ok":
            return outcome
        self._update_fetch_positions()
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
        self._set_state(MemberState.COMPLETING_REBALANCE)
        return "ok"

    def _handle_sync_response(self, response: dict | None) -> str:
        """SyncGroup's answer: on success this member's partitions (STABLE); `ok`, or why not."""
        if response is None:
            return "coordinator_unavailable"
        error = ErrorCode(response["error_code"])
        partitions = [(t, p) for t, p in (response.get("assignment") or {}).get("partitions", [])]
        self.trace.record("sync", member=self.member_id, generation=self.generation.generation_id,
                          error=error.name, partitions=[list(tp) for tp in partitions])
        if error is not ErrorCode.NONE:
            return self._join_or_sync_failed("SyncGroup", error)
        with self._lock:
            self._rejoin_reason = None  # Java: rejoinNeeded = false, on SyncGroup success only
            owned = list(self._assignment)  # empty under eager: it revoked everything before joining
        revoked = sorted(set(owned) - set(partitions))
        if revoked:
            # cooperative only (Java's onJoinComplete): revoke owned-minus-assigned, then rejoin, so that the
            # partitions withheld from their new owners go out in the next round
            self._revoke(revoked)
            self.request_rejoin("need to revoke partitions and re-join")
        with self._lock:
            self._assignment = sorted(partitions)
            # the partitions it keeps go on from where they are (nothing but them, under cooperative)
            self._positions = {tp: o for tp, o in self._positions.items() if tp in partitions}
            self._positions_retry_ms = 0
            self._last_owned, self._last_owned_generation = list(self._assignment), self.generation.generation_id
        # (no heartbeat timer reset here: Java resets them when JoinGroup succeeds, not SyncGroup)
        self.auto_commit.reset(monotonic_ms())  # Java's onJoinComplete: the auto-commit interval starts again
        self._needs_join_prepare = True
        self.trace.record("assigned", member=self.member_id, generation=self.generation.generation_id,
                          partitions=[list(tp) for tp in self._assignment])
        self.listener.on_partitions_assigned(sorted(set(partitions) - set(owned)))  # Java: the added ones only
        self._set_state(MemberState.STABLE)
        return "ok"

    def _join_or_sync_failed(self, api: str, error: ErrorCode) -> str:
        """The error policy for a failed JoinGroup or SyncGroup; returns the outcome `_rebalance` records, and
        from which it decides whether to send JoinGroup again at once (`rejoins_at_once`)."""
        if self._act_on(api, error) is Action.RESET:
            self._apply_reset()  # in the rebalance already: the next JoinGroup goes without the old generation
        return error.name.lower()

    def _act_on(self, api: str, error: ErrorCode | None) -> Action:
        """Do what the error policy (`error_action`) says about `api`'s answer; the caller then retries,
        rejoins or goes on as the action says. A reset or a rejoin is requested here and carried out by the
        poll loop; a handler inside the rebalance (`_join_or_sync_failed`) applies the reset at once."""
        action = error_action(api, error)
        if action is Action.REDISCOVER:
            self._coordinator_unknown(f"{api}: {error.name if error is not None else 'connection failed'}")
        elif action is Action.RESET:
            self._request_reset(error, api)
        elif action is Action.REJOIN:
            self.request_rejoin(f"{api}: {error.name}")
        elif action is Action.FATAL:
            raise ConsumerFailed(f"{api}: {error.name}")
        return action

    def _assign_as_leader(self, protocol: str, members: list[dict]) -> list[dict]:
        subscriptions = leader_subscriptions(members)
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
                    action = Action.FAIL
        outcome = ("accepted" if action is Action.PROCEED
                   else "fenced" if action is Action.RESET or instance_fenced else "failed")
        for (t, p), offset in sorted(moved.items()):
            self.trace.record("commit", topic=t, partition=p, offset=offset, member=generation.member_id,
                              generation=generation.generation_id, outcome=outcome, error=error.name, why=why)
        if error is ErrorCode.NONE:
            with self._lock:
                self._committed.update(moved)
        elif action is not Action.FAIL:
            self._act_on("OffsetCommit", error)
        return error

    def _is_dynamic_member(self) -> bool:
        """Java's `isDynamicMember()`: no `group.instance.id`. Only a dynamic member sends LeaveGroup."""
        return not self.config.is_static

    def _leave(self) -> None:
        """Stopping, as Java's `close()`: commit (its failure is not raised: Java's close logs it), revoke
        (`onLeavePrepare`), LeaveGroup if a dynamic member (`maybeLeaveGroup`), close connections.

        A static member sends no LeaveGroup: the coordinator keeps it, and its
        partitions, until its session times out, so that it can come back
        under the same `group.instance.id` without a rebalance.
        """
        try:
            with self._lock:
                stable = self.state is MemberState.STABLE and self.generation.is_valid()
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
            self._set_state(MemberState.UNJOINED)
            # Java's close waits for the async commits in flight (within its timeout) before it closes
            self.auto_commit.wait(self.config.request_timeout_ms / 1000)
            self._coordinator_unknown("stopped")
            self.fetcher.close()
            self._stop.set()

    # -- the heartbeat thread --------------------------------------------------------------
    def _coordinator_found(self, now_ms: int) -> None:
        self.heartbeat.reset_session_timeout(now_ms)  # Java's FindCoordinator handler: resetSessionTimeout

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
        ignored = ((error is ErrorCode.REBALANCE_IN_PROGRESS and state is not MemberState.STABLE)
                   or (error in FENCED + (ErrorCode.FENCED_INSTANCE_ID,) and current != sent_under))
        self.trace.record("heartbeat", member=sent_under.member_id, generation=sent_under.generation_id,
                          error=error.name if error is not None else "NETWORK_EXCEPTION", ignored=ignored)
        if ignored:
            self.heartbeat.received_heartbeat(monotonic_ms())
            return
        action = error_action("Heartbeat", error)
        if action is Action.FATAL:
            # Java: resetStateOnResponseError (a rejoin requested, so the poll loop stops fetching), then the
            # thread fails; the poll loop raises it at its next turn (`_poll_heartbeat`), as `pollHeartbeat` does
            with self._lock:
                self._heartbeat_failure = f"Heartbeat: {error.name}"
            self.request_rejoin(f"Heartbeat: {error.name}")
            return
        if action in (Action.PROCEED, Action.REJOIN):
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
        if self._is_dynamic_member() and member_id and client is not None and state is not MemberState.UNJOINED:
            try:
                response = client.request("LeaveGroup", group_id=self.config.group_id, member_id=member_id)
                error = ErrorCode(response["error_code"])
            except ConnectionError:
                error = None
            self._handle_leave_response(error, member_id, reason=reason)
        with self._lock:
            self.generation, self.member_id = NO_GENERATION, ""
        self.trace.record("generation_reset", error="NONE", member="", reason=reason)
        self._set_state(MemberState.UNJOINED)
        self.request_rejoin(reason)
