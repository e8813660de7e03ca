"""Java's String.hashCode and HashMap iteration order, where Kafka's behaviour depends on them.

Two places in Kafka give results that follow Java's hashing rather than any
documented rule, and the lab reproduces both:

- `partitionFor(groupId)`: a group's coordinator is the leader of partition
  ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` of
  `__consumer_offsets` (`Utils.abs` is `Math.abs`, except that
  `Integer.MIN_VALUE`, which has no positive counterpart, gives 0);
- the sticky assignor walks members in `HashMap` order, so which members keep
  one partition more than the others depends on that order.

Java's `String.hashCode`: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code
units, in 32-bit two's complement (values checked against a JVM); the
ZooKeeper era's round-robin assignor sorts partitions by the hash of
``"[topic,partition]"``::

    >>> java_string_hash("C0"), java_string_hash("hello-group"), java_string_hash("[t,0]")
    (2125, -2143371836, 87540032)
    >>> group_partition("hello-group", 50)
    36

A `java.util.HashMap` made with `new HashMap<>()` starts with 16 buckets,
doubles whenever it holds more than 3/4 of its bucket count, puts a key in
bucket ``(h ^ (h >>> 16)) & (buckets - 1)``, and iterates bucket by bucket,
each bucket in insertion order::

    >>> hashmap_order(["C2", "C0", "C1"])
    ['C0', 'C1', 'C2']

(Buckets holding 8 or more keys become trees in Java; the lab does not model
that, which only matters for thousands of members.)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

__all__ = ["java_string_hash", "int32", "group_partition", "hashmap_order", "topic_partition_hash", "JavaHashSet"]


def int32(x: int) -> int:
    """`x` as a Java `int` (wrapped to 32-bit two's complement)."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def java_string_hash(s: str) -> int:
    h = 0
    # surrogatepass: a Java String may hold a lone surrogate (a JSON "\\udcff" decodes to one), and its hashCode
    # is over that code unit as over any other
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return int32(h)


def topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's `TopicPartition.hashCode`: 31 * (31 + partition) + topic.hashCode()."""
    return int32(31 * (31 + partition) + java_string_hash(topic))


def java_utils_abs(n: int) -> int:
    """Kafka's `Utils.abs(int)`: `Math.abs`, with 0 for `Integer.MIN_VALUE`.

    Not a sign mask: `-5 & 0x7FFFFFFF` is 2147483643, `Utils.abs(-5)` is 5.

    >>> java_utils_abs(-5), java_utils_abs(-2**31), java_utils_abs(7)
    (5, 0, 7)
    """
    return 0 if n == -(1 << 31) else abs(n)


def group_partition(group_id: str, partitions: int) -> int:
    """Kafka's `GroupMetadataManager.partitionFor`: `Utils.abs(groupId.hashCode) % partitions`."""
    return java_utils_abs(java_string_hash(group_id)) % partitions


def _bucket(h: int, buckets: int) -> int:
    h &= 0xFFFFFFFF
    return (h ^ (h >> 16)) & (buckets - 1)


def buckets_for(size: int, buckets: int = 16) -> int:
    """Bucket count of a default HashMap that has held `size` keys at most."""
    while size > buckets * 3 // 4:
        buckets *= 2
    return buckets


def hashmap_order(keys: Iterable[str], hash_of=java_string_hash) -> list:
    """Iteration order of a default `HashMap` into which `keys` were put in this order."""
    keys = list(dict.fromkeys(keys))
    buckets = buckets_for(len(keys))
    return [k for _, _, k in sorted((_bucket(hash_of(k), buckets), i, k) for i, k in enumerate(keys))]


class JavaHashSet:
    """Just enough of a `java.util.HashSet` to know which element its iterator yields first.

    The bucket count only grows, as in Java, so removing elements does not
    change the order of those that stay.
    """

    def __init__(self, hash_of):
        self._hash_of = hash_of
        self._items: dict[Hashable, int] = {}
        self._seq = 0
        self._buckets = 16

    def add(self, item) -> None:
        if item not in self._items:
            self._seq += 1
            self._items[item] = self._seq
            self._buckets = buckets_for(len(self._items), self._buckets)

    def remove(self, item) -> None:
        self._items.pop(item, None)

    def __contains__(self, item) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def first(self):
        return min(self._items, key=lambda i: (_bucket(self._hash_of(i), self._buckets), self._items[i]))
