"""Claiming and releasing partitions: 0.8.2.2's `reflectPartitionOwnershipDecision` and `releasePartitionOwnership`.

A consumer thread owns a partition while the ephemeral znode
`/consumers/<group>/owners/<topic>/<p>` exists with its thread id as value.

Claiming (`claim_all`, ZookeeperConsumerConnector L769-797) tries *every*
partition of the consumer's share (in sorted order; 0.8 in its decision map's
hash order), each with `createEphemeralPathExpectConflict`
(ZkUtils L235-258):

- created: claimed;
- NodeExists holding *our own* thread id: claimed too ("exists with value ...
  during connection loss; this is ok": a create whose answer was lost, sent
  again by `retryUntilConnected`, or a claim left by an attempt that failed);
- NodeExists holding another thread id: an owner conflict, one `owner_conflict`
  event per refused partition (0.8 logs "waiting for the partition ownership to
  be deleted" for each);
- any other error is thrown at once, and the claims made so far stay (0.8 does
  not clean them up: `case e2: Throwable => throw e2`; the next attempt that
  decides the same partition for the same thread finds its own value and
  succeeds; one that decides otherwise leaves them until the session ends).

If any partition was refused, every claim this attempt made is deleted and the
attempt fails: the claimant backs off and tries again.

Releasing (`release_all`) deletes the owner znodes of the partitions in the
consumer's registry, with no version check (0.8's `deletePath`).

Nothing checks, while a consumer is *fetching*, that it still owns what it
fetches: ownership is only consulted at claim time. A consumer that lost its
session but not its broker connections goes on fetching. That is the
ZooKeeper era's split brain.

Worked example: a share of partitions 0, 1, 2, where another consumer still
holds 1: the consumer creates 0, is refused 1, creates 2, then deletes 0 and 2
and the attempt fails, with one `owner_conflict` (partition 1).
"""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from lab_cluster.trace import TraceRecorder

from . import znodes
from .zkclient import TracedZk


def claim_all(zk: TracedZk, trace: TraceRecorder, group: str, decision: dict[tuple[str, int], str]) -> bool:
    """Claim every (topic, partition) -> thread id of `decision`; True if all are ours, else undo and False."""
    claimed, refused = [], 0
    for (topic, partition), thread_id in sorted(decision.items()):
        path = znodes.owner_path(group, topic, partition)
        if _create_expect_conflict(zk, path, thread_id):
            claimed.append(path)
        else:
            refused += 1
            trace.record("owner_conflict", topic=topic, partition=partition, path=path, member=thread_id)
    if refused:
        for path in claimed:
            _delete_quietly(zk, path)
        return False
    return True


def _create_expect_conflict(zk: TracedZk, path: str, thread_id: str) -> bool:
    """ZkUtils' `createEphemeralPathExpectConflict`: True if the node is ours now, False on a conflict."""
    try:
        zk.create(path, thread_id.encode(), ephemeral=True, makepath=True)
        return True
    except NodeExistsError:
        try:
            stored = zk.get(path)[0].decode()
        except NoNodeError:
            return False  # deleted in between: 0.8 counts it as a conflict too (stored data null)
        return stored == thread_id


def release_all(zk: TracedZk, group: str, owned: set[tuple[str, int]]) -> None:
    for topic, partition in sorted(owned):
        _delete_quietly(zk, znodes.owner_path(group, topic, partition))


def _delete_quietly(zk: TracedZk, path: str) -> None:
    try:
        zk.delete(path)
    except NoNodeError:
        pass
