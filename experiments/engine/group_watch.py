"""What the trial runner knows about a group while it runs: the consumer hosts' state lines.

Every consumer host prints one JSON line per state change of one of its
consumers (`{"actor": "c3", "state": "consuming", "gave_up": false,
"partitions": [0, 5]}`, plus `generation` for the coordinator era; `gave_up`:
the consumer stopped trying, a ZooKeeper-era one after
`rebalance.max.retries`, a coordinator-era one on a fatal error). `GroupWatch.update` takes those
lines as they arrive; `wait_converged(members, since_ns, limit_s)` waits until
the group has converged on `members`:

- every member's latest line came after `since_ns` (it went through a
  rebalance after the change: in the eager protocols every member
  rebalances on every membership change); where a planner moves only some
  members (`Family.every_member_rebalances` False: TubeMQ's server balance,
  whose master leaves the members a tick does not move untouched, so the old
  members still cover every partition when a newcomer has nothing yet),
  every member has said something, and the planner's fixpoint is reached
  instead: the loads are even (they differ by at most one, as
  `tubemq_client/master/balancer.py: even_loads` leaves them);
- every member is in its family's settled state (`Family.settled_state`:
  `consuming`, `stable`), all in one generation (coordinator era);
- their partitions are disjoint and cover all P;
- and that has held for `quiet_s`.

It returns None, or why not: at once when a member gave up or the watch was
told the group is broken (`broken`: a host of it was lost; waiting longer
cannot help), else what was still missing at the limit. The runner only uses this to know when to take the next step;
the reported convergence time is computed from the traces by the analysis.
"""

from __future__ import annotations

import json
import threading
import time

from experiments.engine.families import FAMILIES
from lab_cluster.wire import Fields, ListOf, Maybe

#: a state line, as `lab_cluster/family.py: MemberSnapshot.line` writes it
STATE_LINE = Fields({"actor": str, "state": str, "gave_up": bool, "generation": Maybe(int), "partitions": ListOf(int)})


class GroupWatch:
    def __init__(self, design: str, partitions: int, quiet_s: float = 0.5):
        self.design = design
        self.settled = FAMILIES[design].settled_state
        self.every_member_rebalances = FAMILIES[design].every_member_rebalances
        self.partitions = partitions
        self.quiet_s = quiet_s
        self._latest: dict[str, tuple[int, dict]] = {}  # actor -> (received ns, line)
        self.broken_by: str | None = None  # why the group can no longer converge (`broken`)
        self._changed = threading.Condition()

    def update(self, line: str) -> None:
        try:
            state = json.loads(line)
        except ValueError:
            return  # not a state line (a host may log other things)
        if STATE_LINE.check(state, "") is not None:
            return  # nor is a JSON line of another shape: the watch reads only what it can judge
        with self._changed:
            self._latest[state["actor"]] = (time.monotonic_ns(), state)
            self._changed.notify_all()

    def broken(self, reason: str) -> None:
        """The group can no longer converge (a host of its members is gone): every wait ends with `reason`."""
        with self._changed:
            self.broken_by = self.broken_by or reason
            self._changed.notify_all()

    def forget(self, actor: str) -> None:
        with self._changed:
            self._latest.pop(actor, None)

    def problem(self, members: list[str], since_ns: int) -> str | None:
        """Why the group has not converged on `members` (None if it has)."""
        with self._changed:
            latest = {m: self._latest.get(m) for m in members}
            if self.broken_by:
                return self.broken_by
        # first: it decides the outcome whatever the others say (from the same copy as the rest)
        gave_up = [m for m, v in latest.items() if v is not None and v[1].get("gave_up")]
        if gave_up:
            said = "; ".join(f"{m} is {latest[m][1].get('state')}" for m in gave_up)
            return f"{', '.join(gave_up)} gave up rebalancing ({said})"
        heard_since = since_ns if self.every_member_rebalances else 0
        missing = [m for m, v in latest.items() if v is None or v[0] < heard_since]
        if missing:
            return f"no rebalance seen yet from {', '.join(missing)}"
        states = {m: v[1] for m, v in latest.items()}
        unsettled = [f"{m} is {s.get('state')}" for m, s in states.items() if s.get("state") != self.settled]
        if unsettled:
            return "; ".join(unsettled)
        generations = {s.get("generation") for s in states.values()}
        if len(generations) > 1:
            return f"members are in different generations {sorted(generations, key=str)}"
        owned = [p for s in states.values() for p in s.get("partitions", [])]
        if len(owned) != len(set(owned)):
            return "a partition is assigned to two members"
        if set(owned) != set(range(self.partitions)):
            return f"partitions {sorted(set(range(self.partitions)) - set(owned))} are not assigned"
        if not self.every_member_rebalances:
            loads = {m: len(s.get("partitions", [])) for m, s in states.items()}
            if max(loads.values()) - min(loads.values()) > 1:
                return f"the loads are not even yet ({', '.join(f'{m} {n}' for m, n in sorted(loads.items()))})"
        return None

    def gave_up(self, members: list[str]) -> list[str]:
        """The members whose latest line says they stopped trying."""
        with self._changed:
            return [m for m in members if m in self._latest and self._latest[m][1].get("gave_up")]

    def wait_converged(self, members: list[str], since_ns: int, limit_s: float) -> str | None:
        deadline = time.monotonic() + limit_s
        held_since = None
        while True:
            problem = self.problem(members, since_ns)
            now = time.monotonic()
            if problem is None:
                held_since = held_since or now
                if now - held_since >= self.quiet_s:
                    return None
            else:
                held_since = None
                if self.gave_up(members) or self.broken_by or now > deadline:
                    return problem
            with self._changed:
                self._changed.wait(0.05)
