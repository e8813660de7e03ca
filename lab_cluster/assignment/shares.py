"""The range split both consumer families use: contiguous runs, the first members one longer.

Kafka 0.8's `RangeAssignor` (per topic, over sorted consumer *thread ids*) and
Kafka's modern `RangeAssignor` (per topic, over sorted *member ids*) share this
arithmetic: with P partitions and C members, each member gets P // C
partitions, and the first P % C members one more, in order.

Worked example: partitions 0..6 of a topic, members a, b, c (sorted)::

    >>> range_split(list(range(7)), ["a", "b", "c"])
    {'a': [0, 1, 2], 'b': [3, 4], 'c': [5, 6]}

A member beyond the partition count gets nothing::

    >>> range_split([0, 1], ["a", "b", "c"])
    {'a': [0], 'b': [1], 'c': []}
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def range_split(items: list[T], members: list[str]) -> dict[str, list[T]]:
    """Split `items` (already in order) among `members` (already in order)."""
    if not members:
        return {}
    per_member, extra = divmod(len(items), len(members))
    out, start = {}, 0
    for position, member in enumerate(members):
        count = per_member + (1 if position < extra else 0)
        out[member] = items[start:start + count]
        start += count
    return out
