"""The group leader's assignment in a classic rebalance (Java's `ConsumerCoordinator.onLeaderElected`), and the
user data that rides with subscriptions and assignments.

The coordinator answers the leader's JoinGroup with every member's subscription
for the protocol it chose; the leader runs that protocol's assignor over them
(`leader_subscriptions`, `run_assignor`) and sends the result in SyncGroup.
User data (`Subscription.userData`, `Assignment.userData`) is bytes only an
assignor reads; on the lab's JSON wire it is base64 under `user_data`
(`lab_cluster/assignment/user_data.py`), and the Kafka listener turns it into
ConsumerProtocol's bytes field and back (`lab_cluster/kafka_listener/subscriptions.py`).

What Kafka checks of an assignor's result, and what the lab does the same way:

- the assignor raises (or returns something that is not an assignment): Kafka's
  leader fails the join future, sends no SyncGroup, asks to rejoin, and
  `poll()` throws the assignor's exception. The lab's leader records
  `assignor_failed` with the error, sends no SyncGroup and rejoins
  (`AssignorFailed`); the followers wait in SyncGroup until the leader's next
  JoinGroup starts a new rebalance, or the coordinator drops them after the
  rebalance timeout. Its application does not stop: the lab's poll loop is an
  application that logs the exception and polls again (after
  `retry.backoff.ms`).
- a partition given twice, a partition given to nobody, a member id the group
  does not have, a member left out: Kafka's client checks none of these (it
  logs a warning for a subscribed topic nobody got, for its users' assignors
  only), its coordinator ignores unknown members and gives a member left out
  an empty assignment, which that member's client cannot read. The lab changes
  nothing either, and records what it found in the `leader_assignment` event
  (`problems`), so that a trial shows it. One departure: a lab member left out
  reads the coordinator's empty assignment as no partitions and carries on,
  where Java's `onJoinComplete` throws ("insufficient bytes") at every poll
  until its generation is reset (a real client in the group still fails so:
  the Kafka listener hands it empty bytes).
- under the cooperative protocol Kafka validates a user's assignor: a partition
  may not go from one owner straight to another
  (`validateCooperativeAssignment`, "Assignor supporting the COOPERATIVE
  protocol violates its requirements"); the lab raises the same, as a failed
  assignment.

    >>> from lab_cluster.assignment import RangeAssignor
    >>> subs = leader_subscriptions([{"member_id": "a", "metadata": {"topics": ["t"], "user_data": "AAAAAw=="}},
    ...                              {"member_id": "b", "metadata": {"topics": ["t"]}}])
    >>> subs["a"].user_data, subs["b"].user_data
    (b'\\x00\\x00\\x00\\x03', None)
    >>> result = run_assignor(RangeAssignor(), {"t": 3}, subs)
    >>> {m: a.partitions for m, a in result.items()}
    {'a': [('t', 0), ('t', 1)], 'b': [('t', 2)]}
    >>> problems({"t": 3}, subs, {"a": [("t", 0), ("t", 0)], "z": []})
    {'assigned_twice': [['t', 0]], 'unassigned': [['t', 1], ['t', 2]], 'unknown_members': ['z'], 'left_out': ['b']}
"""

from __future__ import annotations

from lab_cluster.assignment import Assignment, Assignor, Subscription
from lab_cluster.assignment.user_data import encode_user_data, user_data_of

__all__ = ["AssignorFailed", "encode_user_data", "leader_subscriptions", "problems", "run_assignor", "user_data_of"]

TopicPartition = tuple[str, int]


class AssignorFailed(Exception):
    """The leader's assignor raised, or returned what is not an assignment: no SyncGroup, a rejoin."""


def leader_subscriptions(members: list[dict]) -> dict[str, Subscription]:
    """The assignor's input, from the member list of the leader's JoinGroup answer.

    Each member's `group.instance.id` goes with its subscription: the assignors
    order static members by it (`lab_cluster/assignment/base.py`), so that a
    restarted static member, back under a new member id, keeps its place.
    """
    return {m["member_id"]: Subscription(m["metadata"]["topics"],
                                         [tuple(tp) for tp in m["metadata"].get("owned", [])],
                                         m["metadata"].get("generation", -1),
                                         m.get("group_instance_id"),
                                         user_data_of(m["metadata"]))
            for m in members}


def run_assignor(assignor: Assignor, partitions_per_topic: dict[str, int],
                 subscriptions: dict[str, Subscription], protocol: str = "eager") -> dict[str, Assignment]:
    """`assignor.assign`, each member's share as an `Assignment`; AssignorFailed if it raised or returned
    something else, or (cooperative, a user's assignor) moved an owned partition straight to another member."""
    try:
        result = assignor.assign(partitions_per_topic, subscriptions)
        shares = {str(m): _as_assignment(share) for m, share in dict(result).items()}
    except Exception as e:
        raise AssignorFailed(f"{type(e).__name__}: {e}") from e
    if protocol == "cooperative" and assignor.name != "cooperative-sticky":
        _validate_cooperative(subscriptions, shares)
    return shares


def _as_assignment(share) -> Assignment:
    partitions, user_data = (share.partitions, share.user_data) if isinstance(share, Assignment) else (share, None)
    checked = [(str(t), int(p)) for t, p in partitions]
    if user_data is not None and not isinstance(user_data, bytes | bytearray):
        raise TypeError(f"user data must be bytes, not {type(user_data).__name__}")
    return Assignment(checked, None if user_data is None else bytes(user_data))


def _validate_cooperative(subscriptions: dict[str, Subscription], shares: dict[str, Assignment]) -> None:
    """Kafka's `validateCooperativeAssignment`: no partition is added to one member while another revokes it."""
    added, revoked = set(), set()
    for member, share in shares.items():
        owned = set(subscriptions[member].owned_partitions) if member in subscriptions else set()
        added |= set(share.partitions) - owned
        revoked |= owned - set(share.partitions)
    moved = sorted(added & revoked)
    if moved:
        raise AssignorFailed("IllegalStateException: Assignor supporting the COOPERATIVE protocol violates its "
                             f"requirements (it reassigned {moved}, still owned by other members)")


def problems(partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription],
             shares: dict[str, list[TopicPartition]]) -> dict[str, list]:
    """What is wrong with an assignment, none of which Kafka's leader refuses: partitions given twice or to
    nobody (of the subscribed topics), member ids not in the group, members left out (empty lists: none)."""
    given = [tp for tps in shares.values() for tp in tps]
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    every = [(t, p) for t in sorted(subscribed) for p in range(partitions_per_topic.get(t, 0))]
    return {"assigned_twice": [list(tp) for tp in sorted({tp for tp in given if given.count(tp) > 1})],
            "unassigned": [list(tp) for tp in every if tp not in set(given)],
            "unknown_members": sorted(set(shares) - set(subscriptions)),
            "left_out": sorted(set(subscriptions) - set(shares))}
