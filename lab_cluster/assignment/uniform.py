"""Kafka's server-side `UniformAssignor` (`uniform`, KIP-848's default): balance first, then stickiness.

The coordinator runs it over every member's subscription and *current target
assignment* (`server.MemberSpec.assigned`). Kafka picks one of two builders
by the group's subscription type (`server.subscription_type`):

**Homogeneous** (`UniformHomogeneousAssignmentBuilder`; Kafka 3.7/3.8 called
it `OptimizedUniformAssignmentBuilder`), every member subscribing to the same
topics. With P partitions and M members, ``minQuota = P // M`` and the first
``P % M`` members *in member order* get one more:

1. list the partitions no member is assigned (topic by topic, ascending);
2. walk the members in order; each keeps its assigned partitions up to its
   quota and gives up the rest, which join the end of that list (and drops
   partitions of topics it no longer subscribes to);
3. walk the members below quota in the same order, each taking the next
   partitions from the list until it reaches its quota.

The extra partitions go by member order, not to the members that already
hold one more, so a member at the higher count may lose one to make room for
another's: a member that stays gives up at most ``held - P // M``
partitions, where a minimal move would give up ``held - ceil(P / M)``.

**Heterogeneous** (`UniformHeterogeneousAssignmentBuilder` as KAFKA-17710
rewrote it for Kafka 4.0; 3.7 and 3.8 had a different, rack-aware algorithm,
`GeneralUniformAssignmentBuilder`), subscriptions differing: keep every
assigned partition still subscribed, deal the unassigned ones topic by topic
to the least loaded subscribers, then move partitions from the most to the
least loaded subscribers of each topic until balanced
(`uniform_heterogeneous.py`).

Worked example (Kafka's `testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics`):
A and B share topics `x` and `y` of 3 partitions each; C joins. Six
partitions over three members is two each: A keeps its first two, B its
first two, and C takes the two they gave up::

    >>> from lab_cluster.assignment.server import MemberSpec
    >>> both = frozenset({"x", "y"})
    >>> members = {"A": MemberSpec(both, frozenset({("x", 0), ("x", 2), ("y", 0)})),
    ...            "B": MemberSpec(both, frozenset({("x", 1), ("y", 1), ("y", 2)})),
    ...            "C": MemberSpec(both)}
    >>> out = UniformAssignor().assign(members, {"x": 3, "y": 3})
    >>> {m: sorted(p) for m, p in out.items()}
    {'A': [('x', 0), ('x', 2)], 'B': [('x', 1), ('y', 1)], 'C': [('y', 0), ('y', 2)]}

Departures from Kafka, all about order, none about the rules:

- Member order is Java `HashMap` order of the member ids (the coordinator's
  `memberSpecs` is a `HashMap`), which `java_hash.hashmap_order` reproduces,
  taking the order of the `members` dict as the insertion order.
- Kafka walks topics in `HashSet<Uuid>` order of their topic ids and breaks
  the heterogeneous builder's last tie by topic id; the lab has no topic ids
  and uses topic names, ascending, for both.
- Kafka walks a member's partitions of a topic in `HashSet<Integer>` order:
  ascending while the numbers are below the set's bucket count (16 at
  least), as the lab always does.
- Racks are not used: this version of Kafka's uniform assignor does not read
  them either (`rack_id` is carried for the coordinator).
"""

from __future__ import annotations

from ..java_hash import hashmap_order
from .server import HOMOGENEOUS, MemberSpec, ServerAssignor, TopicPartition, resolve, subscription_type
from .uniform_heterogeneous import HeterogeneousBuilder


class UniformAssignor(ServerAssignor):
    name = "uniform"

    def assign(self, members: dict[str, MemberSpec],
               partitions_per_topic: dict[str, int]) -> dict[str, frozenset[TopicPartition]]:
        if not members:
            return {}
        kind = subscription_type(members)  # by topic names, before unknown topics are left out
        resolved = resolve(members, partitions_per_topic)
        order = hashmap_order(resolved)
        if kind == HOMOGENEOUS:
            target = _homogeneous(resolved, partitions_per_topic, order)
        else:
            target = HeterogeneousBuilder(resolved, partitions_per_topic, order).build()
        return {m: frozenset(target.get(m, ())) for m in members}


def _homogeneous(members: dict[str, MemberSpec], partitions_per_topic: dict[str, int],
                 order: list[str]) -> dict[str, list[TopicPartition]]:
    """`UniformHomogeneousAssignmentBuilder.build`: quotas in member order, keep up to quota, fill the rest."""
    topics = sorted(members[order[0]].topics)
    if not topics:
        return {}
    assigned_somewhere = {tp for spec in members.values() for tp in spec.assigned}
    unassigned = [(t, p) for t in topics for p in range(partitions_per_topic[t]) if (t, p) not in assigned_somewhere]
    total = sum(partitions_per_topic[t] for t in topics)
    min_quota, extra = divmod(total, len(members))

    # maybeRevokePartitions: each member keeps its partitions up to its quota.
    target: dict[str, list[TopicPartition]] = {}
    unfilled: list[tuple[str, int]] = []
    for member in order:
        quota = min_quota
        if extra > 0:
            quota += 1
            extra -= 1
        kept = []
        for tp in sorted(members[member].assigned):
            if tp[0] not in topics:
                continue  # no longer subscribed: dropped
            if quota > 0:
                kept.append(tp)
                quota -= 1
            else:
                unassigned.append(tp)  # over quota: given up, to be handed out below
        if quota > 0:
            unfilled.append((member, quota))
        target[member] = kept

    # assignRemainingPartitions: the members below quota, in order, take from the list.
    taken = 0
    for member, remaining in unfilled:
        target[member].extend(unassigned[taken:taken + remaining])
        taken += remaining
    if taken < len(unassigned):
        raise ValueError("Partitions were left unassigned")  # Kafka's PartitionAssignorException
    return target

