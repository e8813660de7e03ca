"""What a coordinator's answer makes a classic member do: the error policy, decided in one place.

Each answer has one handler (kafka-python's `coordinator/base.py`; here
`group_member.py`, `coordinator_link.py` and `consumer.py`), and every handler
asks `error_action(api, error)` what to do; the member's `_act_on` does it::

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
"""

from __future__ import annotations

import enum

from lab_cluster.wire import ErrorCode


class ErrorAction(enum.Enum):
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


def error_action(api: str, error: ErrorCode | None) -> ErrorAction:
    """What the member does after `api` answered `error` (None: no answer); the table in the module docstring.

        >>> error_action("Heartbeat", ErrorCode.REBALANCE_IN_PROGRESS), error_action("OffsetFetch", None)
        (<ErrorAction.REJOIN: 'rejoin'>, <ErrorAction.RETRY: 'retry'>)
        >>> error_action("JoinGroup", ErrorCode.INVALID_SESSION_TIMEOUT), error_action("Heartbeat", None)
        (<ErrorAction.FATAL: 'fatal'>, <ErrorAction.REDISCOVER: 'rediscover'>)
        >>> error_action("Heartbeat", ErrorCode.FENCED_INSTANCE_ID)
        <ErrorAction.FATAL: 'fatal'>
    """
    if error is ErrorCode.NONE or api == "LeaveGroup":
        return ErrorAction.PROCEED
    if api == "FindCoordinator":
        # COORDINATOR_NOT_AVAILABLE here: the offsets topic is being created or has no leader yet
        return ErrorAction.FATAL if error in MISCONFIGURED else ErrorAction.RETRY
    if error is None:
        # `_call_coordinator` has marked the coordinator unknown already; the heartbeat thread has its own connection
        return ErrorAction.REDISCOVER if api == "Heartbeat" else ErrorAction.RETRY
    if error in COORDINATOR_GONE:
        return ErrorAction.REDISCOVER
    if api == "OffsetFetch":
        return ErrorAction.RETRY  # a start position: never a reason to rejoin
    if error is ErrorCode.FENCED_INSTANCE_ID:
        # another process joined under this group.instance.id: this one is the zombie (Java: FencedInstanceIdException)
        return ErrorAction.FATAL if api in INSTANCE_FENCED_APIS else ErrorAction.RETRY
    if error in FENCED:
        return ErrorAction.RESET
    if error is ErrorCode.REBALANCE_IN_PROGRESS:
        return ErrorAction.REJOIN
    if error is ErrorCode.MEMBER_ID_REQUIRED and api in ("JoinGroup", "SyncGroup"):
        return ErrorAction.REJOIN  # JoinGroup v4+: again, with the member id the answer handed out
    if error in MISCONFIGURED and api in ("JoinGroup", "SyncGroup"):
        return ErrorAction.FATAL
    if api == "OffsetCommit" and error not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorAction.FAIL
    return ErrorAction.RETRY


def rejoins_at_once(outcome: str) -> bool:
    """After a failed JoinGroup or SyncGroup, whose outcome is its error's name in lower case (or
    `coordinator_unavailable`): send JoinGroup again at once, or after `retry.backoff.ms`? Java's
    `joinGroupIfNeeded` `continue`s at once after a reset or a rejoin, and sleeps after anything else."""
    error = ErrorCode.__members__.get(outcome.upper())
    return error is not None and error_action("JoinGroup", error) in (ErrorAction.RESET, ErrorAction.REJOIN)


def commit_retriable(error: ErrorCode | None) -> bool:
    """Java's `RetriableCommitFailedException`: the coordinator moved, is loading or did not answer (None: no
    commit was sent)."""
    return error is not None and error_action("OffsetCommit", error) in (ErrorAction.REDISCOVER, ErrorAction.RETRY)
