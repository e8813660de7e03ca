"""Kafka's `CooperativeStickyAssignor` (`cooperative-sticky`, KIP-429): sticky, and never a partition still owned.

Under the cooperative protocol a member keeps consuming what it owns while
the group rebalances, so the leader must never hand a partition to a new
owner in the round in which its old owner still holds it. The assignor
therefore computes the sticky assignment (`sticky.py`) and then *withholds*
every partition changing owner: it leaves it out of its new owner's list.
Its old owner, finding it missing from its own, revokes it and rejoins
(`modern_coord/consumer.py`); in that second round nobody owns it any more,
and the sticky assignment hands it out.

Which partitions are withheld is Kafka's `partitionsTransferringOwnership`:
on the constrained path (all members subscribe alike), the partitions the
builder took from an owner over its quota, or found claimed twice in one
generation, and gave to another member; on the general path, recomputed from
the result: partitions assigned to a member that did not own them and that
some member owned but is not assigned any more (members' raw `owned` lists,
whatever their generation: `computePartitionsTransferringOwnership`).

Worked example: C0 and C1 own six partitions of `t`, three each; C2 joins.
The sticky assignment takes one partition from each old member (over its
quota of two) and gives both to C2, so in the first round C2 gets nothing::

    >>> owned = {"C0": [("t", 0), ("t", 1), ("t", 2)], "C1": [("t", 3), ("t", 4), ("t", 5)], "C2": []}
    >>> subs = {m: Subscription(["t"], tps, generation=1) for m, tps in owned.items()}
    >>> first, withheld = CooperativeStickyAssignor().assign_withholding({"t": 6}, subs)
    >>> first
    {'C0': [('t', 0), ('t', 1)], 'C1': [('t', 3), ('t', 4)], 'C2': []}
    >>> sorted(withheld.items())
    [(('t', 2), 'C2'), (('t', 5), 'C2')]

C0 and C1 revoke `t-2` and `t-5` and rejoin; in generation 2 they report what
they now own, and C2 gets the two partitions nobody holds::

    >>> subs = {m: Subscription(["t"], tps, generation=2) for m, tps in first.items()}
    >>> CooperativeStickyAssignor().assign_withholding({"t": 6}, subs)
    ({'C0': [('t', 0), ('t', 1)], 'C1': [('t', 3), ('t', 4)], 'C2': [('t', 2), ('t', 5)]}, {})

Departure: Kafka's assignor also remembers the generation of its last
assignment in its user data (for clients whose subscription lacks the
generation field); the lab's subscription always carries it (as
ConsumerProtocolSubscription v2 does), so there is nothing to remember.
"""

from __future__ import annotations

from .base import Subscription, TopicPartition
from .sticky import StickyAssignor


class CooperativeStickyAssignor(StickyAssignor):
    name = "cooperative-sticky"
    supported_protocols = ("eager", "cooperative")

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        return self.assign_withholding(partitions_per_topic, subscriptions)[0]

    def assign_withholding(self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
                           ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
        """The first-round assignment, and the partitions withheld from it, each with the member that will get
        it once its owner has revoked it."""
        assignment, transferring = self.sticky_assignment(partitions_per_topic, subscriptions)
        if transferring is None:
            transferring = transferring_ownership(subscriptions, assignment)
        for tp, member in transferring.items():  # Kafka's `adjustAssignment`
            assignment[member].remove(tp)
        return assignment, transferring


def transferring_ownership(subscriptions: dict[str, Subscription],
                           assignment: dict[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    """Kafka's `computePartitionsTransferringOwnership`: partitions added to a member that did not own them and
    revoked from one that did, with the member they are added to.

        >>> subs = {"a": Subscription(["t"], [("t", 0), ("t", 1)]), "b": Subscription(["t"])}
        >>> transferring_ownership(subs, {"a": [("t", 0)], "b": [("t", 1)]})
        {('t', 1): 'b'}
    """
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, assigned in assignment.items():
        owned = {(t, p) for t, p in subscriptions[member].owned_partitions}
        added.update({tp: member for tp in assigned if tp not in owned})
        revoked.update(owned - set(assigned))
    return {tp: member for tp, member in added.items() if tp in revoked}
