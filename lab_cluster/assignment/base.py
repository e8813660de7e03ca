"""What every assignor takes and gives, and the member order Kafka's assignors share.

The group leader runs the assignor chosen for the group on every member's
`Subscription` and the partition count of each topic, and returns each
member's list of partitions. `Subscription` is a value object: the topics a
member subscribes to, the partitions it owned before (for sticky
assignment), its generation, and its `group.instance.id` if it is a static
member.

Member order (`member_order`) is Kafka's `MemberInfo.compareTo`: static members
first, by `group.instance.id`, then dynamic members by member id, each in plain
string order. (Java compares UTF-16 code units and Python code points; the two
orders differ only for characters outside the Basic Multilingual Plane.)

    >>> subs = {"m-b": Subscription(["t"]), "m-a": Subscription(["t"]),
    ...         "m-z": Subscription(["t"], group_instance_id="i-1")}
    >>> member_order(subs)
    ['m-z', 'm-a', 'm-b']
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    topics: list[str]
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation: int = -1
    group_instance_id: str | None = None
    #: what the member's own assignor put in its JoinGroup (`Assignor.subscription_user_data`): Kafka's
    #: `Subscription.userData`, bytes only the assignor reads (a weight, a host, a rack)
    user_data: bytes | None = None


@dataclass(frozen=True)
class Assignment:
    """One member's share as an assignor may return it, with bytes for the member's own assignor (Kafka's
    `Assignment(partitions, userData)`); an assignor may also return the bare list of partitions."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


def member_order(subscriptions: dict[str, Subscription]) -> list[str]:
    """Member ids in Kafka's `MemberInfo` order."""
    static = sorted((s.group_instance_id, m) for m, s in subscriptions.items() if s.group_instance_id is not None)
    dynamic = sorted(m for m, s in subscriptions.items() if s.group_instance_id is None)
    return [m for _, m in static] + dynamic


#: Kafka's `RebalanceProtocol`, in its order: a group's members use the last one all their assignors support
PROTOCOLS = ("eager", "cooperative")


def rebalance_protocol(assignors: list[Assignor]) -> str:
    """The Java consumer's choice (`ConsumerCoordinator`'s constructor): the highest protocol every configured
    assignor supports. Kafka 3.x's default strategy, `range,cooperative-sticky`, is therefore eager.

    >>> from lab_cluster.assignment import ASSIGNORS
    >>> rebalance_protocol([ASSIGNORS["range"], ASSIGNORS["cooperative-sticky"]])
    'eager'
    >>> rebalance_protocol([ASSIGNORS["cooperative-sticky"]])
    'cooperative'
    """
    common = set(PROTOCOLS)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        raise ValueError("the configured assignors support no common rebalance protocol")
    return max(common, key=PROTOCOLS.index)


class Assignor(ABC):
    """An assignor: a name (voted on in JoinGroup), the rebalance protocols it supports, and `assign`.

    The shape of Kafka's `ConsumerPartitionAssignor`, which a user's assignor implements too
    (`plugins.py`): `subscription_user_data` (what each member adds to its JoinGroup for this assignor),
    `assign` (run by the group's leader over every member's `Subscription`, user data included) and
    `on_assignment` (each member, with its share and the user data the leader gave it). `configure`, when
    the assignor has it, receives the consumer's config first (Kafka's `Configurable`).
    """

    name: str
    #: Kafka's `supportedProtocols()`: eager alone, unless the assignor withholds partitions still owned by
    #: another member until they are revoked (`cooperative-sticky`)
    supported_protocols: tuple[str, ...] = ("eager",)

    @abstractmethod
    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        """{member id: partitions}, every member listed (possibly with nothing)."""

    def subscription_user_data(self, topics: list[str]) -> bytes | None:
        """Kafka's `subscriptionUserData(topics)`: bytes sent with this member's vote for this assignor; none by
        default."""
        return None

    def on_assignment(self, partitions: list[TopicPartition], user_data: bytes | None) -> None:  # noqa: B027
        """Kafka's `onAssignment`: this member's share from the leader's run of this assignor (nothing to do by
        default: Kafka's default method is empty too)."""
