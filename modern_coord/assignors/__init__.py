"""Partition assignors, one per module behind `base.Assignor`, as Kafka ships them.

- `range`: `RangeAssignor`
- `roundrobin`: `RoundRobinAssignor`
- `sticky`: `StickyAssignor` (eager; the cooperative variant is not built)

`ASSIGNORS` maps each protocol name, as
members vote for it in JoinGroup, to an instance.
"""

from .base import Assignor, Subscription, member_order
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import StickyAssignor

ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor())}

__all__ = ["ASSIGNORS", "Assignor", "RangeAssignor", "RoundRobinAssignor", "StickyAssignor", "Subscription",
           "member_order"]
