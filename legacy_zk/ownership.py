"""Claiming and releasing partitions: `reflectPartitionOwnershipDecision` and `releasePartitionOwnership`.

A consumer thread owns a partition while the ephemeral znode
`/consumers/<group>/owners/<topic>/<p>` exists with its thread id as value.
Claiming is a `create`: if the node still exists (its previous owner has not
released it yet, or computed a different assignment from a different view),
ZooKeeper refuses with NodeExists. That is an owner conflict: the claimant
undoes every claim it made in this attempt, backs off and tries again.

Nothing checks, while a consumer is *fetching*, that it still owns what it
fetches: ownership is only consulted at claim time. A consumer that lost its
session but not its broker connections goes on fetching. That is the
ZooKeeper era's split brain.
"""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from lab_cluster.trace import TraceRecorder

from . import znodes
from .zkclient import TracedZk


def claim_all(zk: TracedZk, trace: TraceRecorder, group: str,
              decision: dict[tuple[str, int], str]) -> bool:
    """Create an owner znode per (topic, partition) -> thread id; all or nothing."""
    created = []
    for (topic, partition), thread_id in sorted(decision.items()):
        path = znodes.owner_path(group, topic, partition)
        try:
            zk.create(path, thread_id.encode(), ephemeral=True, makepath=True)
            created.append(path)
        except NodeExistsError:
            trace.record("owner_conflict", topic=topic, partition=partition, path=path, member=thread_id)
            for done in created:
                _delete_quietly(zk, done)
            return False
    return True


def release_all(zk: TracedZk, group: str, owned: set[tuple[str, int]]) -> None:
    for topic, partition in sorted(owned):
        _delete_quietly(zk, znodes.owner_path(group, topic, partition))


def _delete_quietly(zk: TracedZk, path: str) -> None:
    try:
        zk.delete(path)
    except NoNodeError:
        pass
