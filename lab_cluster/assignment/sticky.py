"""Kafka's `StickyAssignor` (`sticky`): balance first, then keep what each member owned.

Each member reports what it owned and in which generation (Kafka carries both
in the subscription's user data). Owned partitions are trusted only from the
highest generation: a partition claimed by two members of the same generation
is taken from both; claimed in different generations, it goes to the newer.

Kafka (3.8 and later, and 3.7.1, without racks) then takes one of two paths:

**Constrained** (every member subscribes to the same topics), with P
partitions and C members, ``minQuota = P // C``, ``maxQuota = ceil(P / C)``
and ``P % C`` members allowed ``maxQuota``:

1. walk the members in Java `HashMap` order; each keeps its owned partitions
   (sorted by partition number, then topic: KAFKA-16277, in 3.8.0 and
   backported to 3.7.1; 3.5.x, 3.6.x and 3.7.0 keep them in the order the
   member's user data lists them) up to ``minQuota``, or up to
   ``maxQuota`` while fewer than ``P % C`` members have done so;
2. deal the partitions nobody kept, sorted by topic and number, round-robin to
   the members below ``minQuota`` (sorted by id), then one each to the
   members at exactly ``minQuota`` until ``P % C`` members are at ``maxQuota``.

**General** (subscriptions differ): keep every valid owned partition, give
each unassigned partition to the member with the fewest partitions that can
take it, then move partitions from members with two or more than another
candidate until balanced, preferring to move a partition back to its previous
owner, and keep the result only if it is better balanced than before.

Worked example (Kafka's documentation's case): consumers C0, C1, C2, topics
t0..t3 with two partitions each, all subscribed to all::

    >>> subs = {c: Subscription(["t0", "t1", "t2", "t3"]) for c in ("C0", "C1", "C2")}
    >>> first = StickyAssignor().assign({"t0": 2, "t1": 2, "t2": 2, "t3": 2}, subs)
    >>> first
    {'C0': [('t0', 0), ('t1', 1), ('t3', 0)], 'C1': [('t0', 1), ('t2', 0), ('t3', 1)], 'C2': [('t1', 0), ('t2', 1)]}

C1 leaves; C0 and C2 report what they own in generation 1. Both keep all of
it and share C1's three partitions (round-robin would have moved five)::

    >>> subs = {c: Subscription(["t0", "t1", "t2", "t3"], first[c], 1) for c in ("C0", "C2")}
    >>> StickyAssignor().assign({"t0": 2, "t1": 2, "t2": 2, "t3": 2}, subs)
    {'C0': [('t0', 0), ('t3', 0), ('t1', 1), ('t0', 1)], 'C2': [('t1', 0), ('t2', 1), ('t2', 0), ('t3', 1)]}

(Kafka's javadoc shows a different second result: it predates the constrained
path, added in 2.8; this one is what Kafka 3.x computes.)

Where Java's hash order decides, the lab reproduces it (`java_hash`): the
member walk of step 1, and which moved partition is moved back in the general
path. Members with the same `HashMap` bucket are taken in the order given
(the JoinGroup response's order, in Kafka). Racks are not modelled.
"""

from __future__ import annotations

import math

from ..java_hash import JavaHashSet, hashmap_order, topic_partition_hash
from .base import Assignor, Subscription, TopicPartition

NO_GENERATION = -1


class StickyAssignor(Assignor):
    name = "sticky"

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        return self.sticky_assignment(partitions_per_topic, subscriptions)[0]

    def sticky_assignment(self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
                          ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str] | None]:
        """The assignment, and (constrained path only, else None) Kafka's `partitionsTransferringOwnership`:
        each partition given to a new member that another member owned and had to give up (over its quota,
        or claimed twice in one generation), with its new owner. The cooperative assignor withholds them."""
        subscribed = {t for s in subscriptions.values() for t in s.topics}
        # Kafka's assignors see only subscribed topics that have metadata.
        topics = {t: n for t, n in partitions_per_topic.items() if t in subscribed}
        if not subscriptions:
            return {}, {}
        owned, doubly_claimed, all_equal = _valid_owned_partitions(topics, subscriptions)
        if all_equal:
            transferring: dict[TopicPartition, str] = {}
            return _constrained(topics, owned, doubly_claimed, transferring), transferring
        return _General(topics, subscriptions, owned).build(), None


def _valid_owned_partitions(topics, subscriptions):
    """Kafka's `allSubscriptionsEqual`: each member's trusted owned partitions, in a HashMap."""
    all_equal = True
    first_topics: set[str] | None = None
    owned: dict[str, list[TopicPartition]] = {}
    owner_of: dict[TopicPartition, str] = {}
    doubly_claimed: set[TopicPartition] = set()
    for member in hashmap_order(subscriptions):
        sub = subscriptions[member]
        if first_topics is None:
            first_topics = set(sub.topics)
        elif set(sub.topics) != first_topics:
            all_equal = False
        generation = sub.generation if sub.generation >= 0 else NO_GENERATION
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in sub.owned_partitions:
            tp = (tp[0], tp[1])
            if tp[0] not in topics or not 0 <= tp[1] < topics[tp[0]]:
                continue
            other = owner_of.get(tp)
            if other is None:
                mine.append(tp)
                owner_of[tp] = member
                continue
            other_generation = max(subscriptions[other].generation, NO_GENERATION)
            if generation == other_generation:
                doubly_claimed.add(tp)  # same generation: neither keeps it
                _remove(owned[other], tp)
                owner_of[tp] = member
            elif generation > other_generation:
                mine.append(tp)
                _remove(owned[other], tp)
                owner_of[tp] = member
    return owned, doubly_claimed, all_equal


def _remove(items: list, item) -> None:
    if item in items:
        items.remove(item)


def _all_partitions(topics: dict[str, int], topic_order: list[str]) -> list[TopicPartition]:
    return [(t, p) for t in topic_order for p in range(topics[t])]


def _constrained(topics, owned, doubly_claimed, transferring):
    """Kafka's `ConstrainedAssignmentBuilder` (no racks); fills `transferring` (`partitionsTransferringOwnership`)."""
    total = sum(topics.values())
    members = len(owned)
    min_quota, max_quota = total // members, math.ceil(total / members)
    expected_over_min = total % members
    over_min = 0
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in owned}
    assigned: set[TopicPartition] = set()
    under_min: list[str] = []
    exactly_min: list[str] = []
    revoked: set[TopicPartition] = set()

    for member in owned:  # HashMap order, as _valid_owned_partitions built it
        mine = sorted((tp for tp in owned[member] if tp not in doubly_claimed), key=lambda tp: (tp[1], tp[0]))
        if len(mine) < min_quota:
            keep = mine
            under_min.append(member)
        elif len(mine) >= max_quota and over_min < expected_over_min:
            over_min += 1
            if over_min == expected_over_min:
                exactly_min.clear()
            keep = mine[:max_quota]
        else:
            keep = mine[:min_quota]
            if over_min < expected_over_min:
                exactly_min.append(member)
        assignment[member].extend(keep)
        assigned.update(keep)
        revoked.update(mine[len(keep):])  # Kafka's `allRevokedPartitions`: owned, over the quota

    unassigned = [tp for tp in _all_partitions(topics, sorted(topics)) if tp not in assigned]
    under_min.sort()
    exactly_min.sort()
    # Round-robin over under_min with a Java-style iterator: `cursor` is the next index.
    cursor = 0
    for tp in unassigned:
        from_iterator = True
        if cursor < len(under_min):
            member = under_min[cursor]
            cursor += 1
        elif under_min:
            member, cursor = under_min[0], 1
        elif exactly_min:
            member, from_iterator = exactly_min.pop(0), False
        else:
            raise AssertionError("no unfilled member left (Kafka throws IllegalStateException here)")
        assignment[member].append(tp)
        if tp in revoked or tp in doubly_claimed:  # Kafka's `assignNewPartition`
            transferring[tp] = member
        count = len(assignment[member])
        if count == min_quota and from_iterator:
            cursor -= 1
            del under_min[cursor]
            exactly_min.append(member)
        elif count == max_quota:
            over_min += 1
    return assignment


class _General:
    """Kafka's `GeneralAssignmentBuilder` (no racks): subscriptions differ between members."""

    def __init__(self, topics, subscriptions, owned):
        self.topics = topics
        self.total = sum(topics.values())
        self.subscriptions = subscriptions
        self.consumers_of = {t: [] for t in topics}
        self.topics_of: dict[str, list[str]] = {}
        for member in hashmap_order(subscriptions):
            mine = [t for t in subscriptions[member].topics if t in topics]
            self.topics_of[member] = mine
            for t in mine:
                self.consumers_of[t].append(member)
        self.current = {m: list(owned.get(m, [])) for m in subscriptions}
        self.owner = {tp: m for m, tps in self.current.items() for tp in tps}
        topic_order = sorted(topics, key=lambda t: (len(self.consumers_of[t]), t))
        self.sorted_all = _all_partitions(topics, topic_order)
        self.in_sorted: set[str] = set()
        self.revocation_required = False
        self.movements = _PartitionMovements()
        self.max_generation = max((max(s.generation, NO_GENERATION) for s in subscriptions.values()),
                                  default=NO_GENERATION)

    def sorted_members(self) -> list[str]:
        """Kafka's `sortedCurrentSubscriptions`: fewest partitions first, then member id."""
        return sorted(self.in_sorted, key=lambda m: (len(self.current[m]), m))

    def build(self):
        previous = self._previous_owners()
        assigned = self._keep_owned()
        assigned_set = set(assigned)
        unassigned = [tp for tp in self.sorted_all if tp not in assigned_set]
        self.in_sorted.update(self.current)
        self._balance(previous, unassigned)
        return self.current

    def _previous_owners(self) -> dict[TopicPartition, tuple[str, int]]:
        """Owners from older generations (`prevAssignment`): where a partition may move back to."""
        previous: dict[TopicPartition, tuple[str, int]] = {}
        for member in hashmap_order(self.subscriptions):
            sub = self.subscriptions[member]
            generation = max(sub.generation, NO_GENERATION)
            if generation < self.max_generation:
                for tp in sub.owned_partitions:
                    tp = (tp[0], tp[1])
                    if tp not in previous or generation > previous[tp][1]:
                        previous[tp] = (member, generation)
        return previous

    def _keep_owned(self) -> list[TopicPartition]:
        assigned = []
        for member, tps in self.current.items():
            for tp in list(tps):
                if tp[0] not in self.topics_of[member]:
                    tps.remove(tp)  # no longer subscribed: it must move
                    self.revocation_required = True
                else:
                    assigned.append(tp)
        return assigned

    def _max_size(self, member: str) -> int:
        return sum(self.topics[t] for t in self.topics_of[member])

    def _is_balanced(self) -> bool:
        members = self.sorted_members()
        if len(self.current[members[0]]) >= len(self.current[members[-1]]) - 1:
            return True
        for member in members:
            count = len(self.current[member])
            if count == self._max_size(member):
                continue
            for topic in self.topics_of[member]:
                for p in range(self.topics[topic]):
                    tp = (topic, p)
                    if tp not in self.current[member] and count + 1 < len(self.current[self.owner[tp]]):
                        return False
        return True

    def _balance_score(self, assignment) -> int:
        sizes = [len(v) for v in assignment.values()]
        return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1:])

    def _assign_to_fewest(self, tp: TopicPartition) -> None:
        for member in self.sorted_members():
            if tp[0] in self.topics_of[member]:
                self.current[member].append(tp)
                self.owner[tp] = member
                return

    def _balance(self, previous, unassigned) -> None:
        initializing = not self.current[self.sorted_members()[-1]]
        for tp in unassigned:
            if self.consumers_of[tp[0]]:
                self._assign_to_fewest(tp)
        fixed_topics = {t for t, cs in self.consumers_of.items() if len(cs) < 2}
        self.sorted_all = [tp for tp in self.sorted_all if tp[0] not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp[0] not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for member in list(self.topics_of):
            mine = self.current[member]
            movable = len(mine) < self._max_size(member) or any(t not in fixed_topics for t, _ in mine)
            if not movable:
                self.in_sorted.discard(member)
                fixed[member] = self.current.pop(member)
        before = {m: list(v) for m, v in self.current.items()}
        before_owner = dict(self.owner)
        if not self.revocation_required:
            self._reassign(unassigned, previous)
        moved = self._reassign(self.sorted_all, previous)
        if not initializing and moved and self._balance_score(self.current) >= self._balance_score(before):
            self.current = before
            self.owner = before_owner
        for member, mine in fixed.items():
            self.current[member] = mine
            self.in_sorted.add(member)

    def _reassign(self, partitions, previous) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                owner = self.owner[tp]
                prev = previous.get(tp)
                # (Kafka would fail with a NullPointerException if the previous owner's
                # assignment were fixed; the lab skips that rule instead.)
                if prev and prev[0] in self.current and \
                        len(self.current[owner]) > len(self.current[prev[0]]) + 1:
                    self._move(tp, prev[0])
                    performed = modified = True
                    continue
                if any(len(self.current[owner]) > len(self.current[o]) + 1
                       for o in self.consumers_of[tp[0]] if o in self.current):
                    target = next(m for m in self.sorted_members() if tp[0] in self.topics_of[m])
                    self._move(tp, target)
                    performed = modified = True
        return performed

    def _move(self, tp: TopicPartition, new_owner: str) -> None:
        tp = self.movements.partition_to_move(tp, self.owner[tp], new_owner)
        old_owner = self.owner[tp]
        self.movements.record(tp, old_owner, new_owner)
        self.current[old_owner].remove(tp)
        self.current[new_owner].append(tp)
        self.owner[tp] = new_owner


class _PartitionMovements:
    """Kafka's `PartitionMovements`: moves made so far, so that a move can undo an earlier one."""

    def __init__(self):
        self.moves: dict[TopicPartition, tuple[str, str]] = {}
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet]] = {}

    def _remove(self, tp) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        pairs = self.by_topic[tp[0]]
        pairs[pair].remove(tp)
        if not len(pairs[pair]):
            del pairs[pair]
        if not pairs:
            del self.by_topic[tp[0]]
        return pair

    def _add(self, tp, pair) -> None:
        self.moves[tp] = pair
        pairs = self.by_topic.setdefault(tp[0], {})
        pairs.setdefault(pair, JavaHashSet(lambda x: topic_partition_hash(*x))).add(tp)

    def record(self, tp, old_owner: str, new_owner: str) -> None:
        if tp in self.moves:
            source, _ = self._remove(tp)
            if source != new_owner:  # not moving back where it came from
                self._add(tp, (source, new_owner))
        else:
            self._add(tp, (old_owner, new_owner))

    def partition_to_move(self, tp, old_owner: str, new_owner: str):
        """Rather than moving another partition of the topic back and forth, move back one already moved."""
        pairs = self.by_topic.get(tp[0])
        if pairs is None:
            return tp
        if tp in self.moves:
            old_owner = self.moves[tp][0]
        reverse = pairs.get((new_owner, old_owner))
        return tp if reverse is None else reverse.first()
