"""Partition assignors, one per module behind `base.Assignor`, as Kafka ships them.

- `range`: `RangeAssignor`
- `roundrobin`: `RoundRobinAssignor`

(The sticky assignor comes next.) `ASSIGNORS` maps each protocol name, as
members vote for it in JoinGroup, to an instance.
"""

from .base import Assignor, Subscription, member_order
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor

ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor())}

__all__ = ["ASSIGNORS", "Assignor", "RangeAssignor", "RoundRobinAssignor", "Subscription", "member_order"]
