"""Java's `String.hashCode`, which Kafka's behaviour depends on in both eras.

``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in 32-bit two's
complement (values checked against a JVM). Kafka 0.8's round-robin assignor
sorts partitions by the hash of ``"[topic,partition]"``; the coordinator era
places a group by its id's hash (`modern_coord/java_hash.py`)::

    >>> java_string_hash("C0"), java_string_hash("hello-group"), java_string_hash("[t,0]")
    (2125, -2143371836, 87540032)
"""

from __future__ import annotations


def int32(x: int) -> int:
    """`x` as a Java `int` (wrapped to 32-bit two's complement)."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return int32(h)
