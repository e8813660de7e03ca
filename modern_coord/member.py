"""What a member knows about itself: its state, its `Generation`, and the rebalance listener it calls.

States and transitions (the Java client's `AbstractCoordinator.MemberState`)::

    UNJOINED             --JoinGroup sent-----------------------------------> PREPARING_REBALANCE
    PREPARING_REBALANCE  --JoinGroup answered: a generation------------------> COMPLETING_REBALANCE
    COMPLETING_REBALANCE --SyncGroup answered with this member's assignment--> STABLE
    PREPARING_REBALANCE,
    COMPLETING_REBALANCE --JoinGroup or SyncGroup failed---------------------> UNJOINED (and rejoin)
    STABLE               --Heartbeat/commit says REBALANCE_IN_PROGRESS: a
                           rejoin is requested; the poll loop commits,
                           revokes and sends JoinGroup-----------------------> PREPARING_REBALANCE
    any                  --ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID for the
                           current generation: generation reset-------------> UNJOINED
    any                  --FENCED_INSTANCE_ID (a static member whose
                           group.instance.id another process took): fatal---> UNJOINED (stopped)
    any                  --max.poll.interval.ms expired: LeaveGroup (a
                           dynamic member only), generation and member id
                           reset-------------------------------------------> UNJOINED
    any                  --stop(): commit, revoke, LeaveGroup (a dynamic
                           member only)-------------------------------------> UNJOINED (stopped)

The heartbeat thread runs only in COMPLETING_REBALANCE and STABLE (Java's
`hasNotJoinedGroup()` disables it in the other two).

A `Generation` is what the coordinator said in the last completed JoinGroup:
its id, this member's id and the chosen assignor. Commits and heartbeats carry
it; the coordinator fences any that is not current.

    >>> Generation(3, "consumer-g-1-5f0c", "range").is_valid()
    True
    >>> NO_GENERATION.is_valid(), NO_GENERATION.generation_id, NO_GENERATION.member_id
    (False, -1, '')
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

TopicPartition = tuple[str, int]


class ClassicMemberState(enum.Enum):
    UNJOINED = "unjoined"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    STABLE = "stable"

    def has_not_joined_group(self) -> bool:
        """Java's `MemberState.hasNotJoinedGroup`: no generation to heartbeat for."""
        return self in (ClassicMemberState.UNJOINED, ClassicMemberState.PREPARING_REBALANCE)


@dataclass(frozen=True)
class Generation:
    generation_id: int
    member_id: str
    protocol_name: str | None

    def is_valid(self) -> bool:
        return self.generation_id >= 0 and bool(self.member_id)


NO_GENERATION = Generation(-1, "", None)


class RebalanceListener:
    """Kafka's `ConsumerRebalanceListener`: subclass and override; both default to doing nothing."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        pass
