"""What a member knows about itself: its state, its `Generation`, and the rebalance listener it calls.

States and transitions (the Java client's `MemberState`)::

    UNJOINED     --JoinGroup sent-------------------------------------------> REBALANCING
    REBALANCING  --SyncGroup answered with this member's assignment---------> STABLE
    STABLE       --Heartbeat/commit says REBALANCE_IN_PROGRESS, or the
                   member's own subscription changed: revoke, commit, rejoin--> REBALANCING
    any          --ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: generation reset---> UNJOINED
    any          --stop(): commit, revoke, LeaveGroup------------------------> UNJOINED (stopped)

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


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"


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
