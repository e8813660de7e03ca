"""Who gets which partitions: every assignment strategy the lab's families use, in one place.

Three kinds, because the designs differ in *who* computes an assignment:

- **Group-wide, by one member** (Kafka's coordinator era): the group leader runs
  one `Assignor` over every member's `Subscription` and hands each member its
  list. One module per assignor, as Kafka ships them, behind `base.Assignor`:
  `range` (`RangeAssignor`), `roundrobin` (`RoundRobinAssignor`), `sticky`
  (`StickyAssignor`) and `cooperative-sticky` (`CooperativeStickyAssignor`,
  KIP-429: sticky, withholding every partition that changes owner until its
  old owner has revoked it; the one assignor of the cooperative protocol,
  `base.rebalance_protocol`).
  `ASSIGNORS` maps each protocol name, as members vote for it in JoinGroup, to
  an instance.
- **Group-wide, by the coordinator** (Kafka 4.0's consumer group protocol,
  KIP-848): no member runs an assignor; the coordinator computes each
  member's target assignment from its subscription and its current target
  assignment, behind `server.ServerAssignor` (`server.MemberSpec` per
  member). `uniform` (`UniformAssignor`, the default: balance, then
  stickiness; `uniform_heterogeneous` holds its builder for differing
  subscriptions) and `range` (`ServerRangeAssignor`, contiguous ranges in
  static-first member order). `SERVER_ASSIGNORS` maps each name, as
  `group.consumer.assignors` lists them, default first, to an instance.
- **Each client its own share** (the ZooKeeper era, RocketMQ, TubeMQ): every
  consumer runs a deterministic function of what it read and keeps its own
  part. `shares` holds the range arithmetic (`range_split`, which Kafka 0.8's
  range share uses through `legacy_zk/partition_assignor.py`, over 0.8's
  thread ids); `rocketmq` RocketMQ's `AllocateMessageQueueAveragely` and
  `...AveragelyByCircle` (`STRATEGIES`); `tubemq` the modulo of TubeMQ's
  client-balance example, which needs no membership at all.

A user's own assignor of the first kind is a class named in the consumer's
`partition.assignment.strategy` as `package.module:Class` (`plugins.py`).

Where Java's hash order decides a result, `lab_cluster/java_hash.py` reproduces it.
"""

from . import plugins
from .base import Assignment, Assignor, Subscription, member_order, rebalance_protocol
from .cooperative_sticky import CooperativeStickyAssignor
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .server import MemberSpec, ServerAssignor
from .server_range import ServerRangeAssignor
from .shares import range_split
from .sticky import StickyAssignor
from .uniform import UniformAssignor

ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(),
                                                       CooperativeStickyAssignor())}

#: Kafka's `group.consumer.assignors` default order: `uniform` first, the default
SERVER_ASSIGNORS: dict[str, ServerAssignor] = {a.name: a for a in (UniformAssignor(), ServerRangeAssignor())}

__all__ = ["ASSIGNORS", "Assignment", "Assignor", "CooperativeStickyAssignor", "MemberSpec", "RangeAssignor",
           "RoundRobinAssignor", "SERVER_ASSIGNORS", "ServerAssignor", "ServerRangeAssignor", "StickyAssignor",
           "Subscription", "UniformAssignor", "member_order", "plugins", "range_split", "rebalance_protocol"]
