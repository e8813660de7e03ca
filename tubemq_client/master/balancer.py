"""The TubeMQ master's server-side balance, the design client balance replaced: the plan and the events, no I/O.

Before 0.12's `ClientBalanceConsumer`, a TubeMQ master assigned a group's
partitions itself, on a timer, and told each consumer what to drop and what to
take in the answers to its heartbeats. After InLong TubeMQ's
`tubemq-server/.../master/TMaster.java` (`BalancerChore`, `processRebalance`,
the heartbeat's event hand-out), `balance/DefaultLoadBalancer.java` and
`nodemanage/nodeconsumer/ConsumerEventManager.java`; the citations are in
`docs/source-brief-tubemq-server-balance.md`.

**When.** A chore runs `tick()` every `consumerBalancePeriodMs` (60 000 ms in
`MasterConfig`; the shipped `master.ini` sets 30 000), the first one a period
after the master starts. There is no trigger: every tick looks at every group,
and a group already balanced produces no event. A group with events still in
flight is skipped; after `MAX_BALANCE_DELAY_TIME` (10) skipped ticks its
pending events are dropped and it is balanced again.

**What.** The master's first tick assigns each group in blocks
(`bukAssign`): consumers sorted by id, partitions by key, consumer i gets
``n // k`` (+1 for the first ``n % k``). Every later tick
(`balanceCluster`) starts from what each consumer *reported* holding:

1. partitions nobody holds (a new group, a departed consumer's share, the
   topic's new partitions after it grew) go to consumers picked at random
   (`randomAssign`), and that is all for the tick;
2. otherwise loads are evened (`balance`): with ``min = n // k`` and
   ``max = min + (1 if n % k else 0)``, a consumer below min (or with none)
   asks for ``max - load``; one at or above max gives up ``load - max`` while
   ``n % k`` such consumers remain, then ``load - min``, from the head of its
   list; the given-up partitions go to the askers in order, leftovers one each.

**How it reaches consumers.** The difference between the plan and what a
consumer holds becomes its events: DISCONNECT (or ONLY_DISCONNECT, if it
gains nothing) and CONNECT (or ONLY_CONNECT). A consumer gets one event at a
time, in the answer to a heartbeat, and the next only after its next heartbeat
reports the first done; no consumer of a group gets a CONNECT while any of them
still has a DISCONNECT pending, so nobody takes a partition before its holder
let it go. A consumer is given partitions only once its first heartbeat has
reported its holdings.

    >>> b = ServerBalancer(rng=random.Random(0))
    >>> for c in ("a", "b"):
    ...     b.register("g", c, now_ms=0)
    ...     b.heartbeat("g", c, held=[], now_ms=0)
    >>> b.tick({"g": ["1:t:0", "1:t:1", "1:t:2", "1:t:3"]}, first=True)
    ['g']
    >>> b.heartbeat("g", "a", held=[], now_ms=1)
    Event(kind='ONLY_CONNECT', partitions=('1:t:0', '1:t:1'), rebalance_id=1)

Departures, stated: consumers and partitions are taken in sorted order where
TubeMQ iterates hash maps; the master learns holdings from every heartbeat
(TubeMQ: with each report, else every 6th heartbeat); bound consumers
(`requireBound`, the reset-offset path) are not modelled.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

#: `TMaster.MAX_BALANCE_DELAY_TIME`: ticks a group with pending events is skipped before they are dropped
MAX_BALANCE_DELAY_TIME = 10
#: `MasterConfig.consumerHeartbeatTimeoutMs`
CONSUMER_HEARTBEAT_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Event:
    kind: str  # DISCONNECT, ONLY_DISCONNECT, CONNECT, ONLY_CONNECT
    partitions: tuple[str, ...]
    rebalance_id: int


@dataclass
class _Consumer:
    last_heartbeat_ms: int
    topics: tuple[str, ...] = ()
    held: set[str] | None = None  # None until its first heartbeat reports (`currentSubInfo`)
    disconnects: list[Event] = field(default_factory=list)
    connects: list[Event] = field(default_factory=list)
    processing: Event | None = None  # handed out, not yet reported done


class ServerBalancer:
    """Server-balance groups: their consumers, the tick's plan and the events it hands out; thread-safe."""

    def __init__(self, *, rng: random.Random | None = None,
                 heartbeat_timeout_ms: int = CONSUMER_HEARTBEAT_TIMEOUT_MS):
        self.rng = rng or random.Random()
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.groups: dict[str, dict[str, _Consumer]] = {}
        self._skipped: dict[str, int] = {}
        self._next_id = 0
        self._lock = threading.Lock()

    # -- what consumers say ----------------------------------------------------------------
    def register(self, group: str, consumer: str, now_ms: int, topics: list[str] = ()) -> None:
        with self._lock:
            self.groups.setdefault(group, {}).setdefault(consumer, _Consumer(now_ms, tuple(sorted(topics))))

    def topics(self) -> dict[str, set[str]]:
        """{group: the topics its consumers subscribe}."""
        with self._lock:
            return {g: {t for m in members.values() for t in m.topics} for g, members in self.groups.items()}

    def heartbeat(self, group: str, consumer: str, held: list[str], now_ms: int,
                  done: int | None = None) -> Event | None:
        """A heartbeat: `done` reports the event it finished, `held` what it holds now; the answer is its next
        event, or None. Raises KeyError if the master does not know it (HB_NO_NODE: it registers again)."""
        with self._lock:
            me = self.groups[group][consumer]
            me.last_heartbeat_ms, me.held = now_ms, set(held)
            if me.processing is not None and done == me.processing.rebalance_id:
                queue = me.disconnects if "DISCONNECT" in me.processing.kind else me.connects
                queue.remove(me.processing)
                me.processing = None
            if me.processing is not None:
                return None
            if me.disconnects:
                me.processing = me.disconnects[0]
            elif me.connects and not any(c.disconnects for c in self.groups[group].values()):
                me.processing = me.connects[0]
            return me.processing

    def remove(self, group: str, consumer: str) -> None:
        """A close, or a heartbeat timeout (`ReleaseConsumer`): the consumer and its events are gone."""
        with self._lock:
            self.groups.get(group, {}).pop(consumer, None)
            if group in self.groups and not self.groups[group]:
                del self.groups[group]

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove the consumers silent for more than the heartbeat timeout; returns them."""
        with self._lock:
            gone = [(g, c) for g, members in self.groups.items() for c, m in members.items()
                    if now_ms - m.last_heartbeat_ms > self.heartbeat_timeout_ms]
        for group, consumer in gone:
            self.remove(group, consumer)
        return gone

    # -- the chore -------------------------------------------------------------------------
    def tick(self, partitions: dict[str, list[str]], first: bool = False,
             on_balance: Callable[[str], None] | None = None) -> list[str]:
        """One run of the balancer over every group: {group: its subscribable partition keys}; the groups it
        balanced (not skipped for pending events, and with a consumer that has reported). `on_balance(group)` is
        called for each of them before its plan is made, so before any consumer can hear of it."""
        balanced = []
        with self._lock:
            for group, members in self.groups.items():
                pending = any(m.disconnects or m.connects for m in members.values())
                if pending:
                    self._skipped[group] = self._skipped.get(group, 0) + 1
                    if self._skipped[group] < MAX_BALANCE_DELAY_TIME:
                        continue
                    for m in members.values():
                        m.disconnects, m.connects, m.processing = [], [], None
                self._skipped[group] = 0
                eligible = {c: m for c, m in members.items() if m.held is not None}
                if not eligible:
                    continue
                if on_balance is not None:
                    on_balance(group)
                keys = sorted(set(partitions.get(group, [])))
                plan = (block_assign(keys, sorted(eligible)) if first
                        else self._balance_cluster(keys, {c: m.held for c, m in eligible.items()}))
                for consumer, m in sorted(eligible.items()):
                    self._events(m, m.held, plan.get(consumer, []))
                balanced.append(group)
        return sorted(balanced)

    def _balance_cluster(self, keys: list[str], held: dict[str, set[str]]) -> dict[str, list[str]]:
        existing = set(keys)
        plan = {c: sorted(h & existing) for c, h in held.items()}
        taken = {k for share in plan.values() for k in share}
        unheld = [k for k in keys if k not in taken]
        if unheld:  # `randomAssign`, and no load balancing this tick
            consumers = sorted(plan)
            for key in unheld:
                plan[self.rng.choice(consumers)].append(key)
            return plan
        return even_loads(plan, len(keys))

    def _events(self, m: _Consumer, held: set[str], planned: list[str]) -> None:
        lose = sorted(held - set(planned))
        gain = sorted(set(planned) - held)
        if lose:
            m.disconnects.append(self._event("DISCONNECT" if gain else "ONLY_DISCONNECT", lose))
        if gain:
            m.connects.append(self._event("CONNECT" if lose else "ONLY_CONNECT", gain))

    def _event(self, kind: str, partitions: list[str]) -> Event:
        self._next_id += 1
        return Event(kind, tuple(partitions), self._next_id)


def block_assign(keys: list[str], consumers: list[str]) -> dict[str, list[str]]:
    """`bukAssign`: contiguous blocks of the sorted keys, n // k each, one more for the first n % k.

    >>> block_assign(["1:t:0", "1:t:1", "1:t:2", "2:t:3", "2:t:4"], ["a", "b"])
    {'a': ['1:t:0', '1:t:1', '1:t:2'], 'b': ['2:t:3', '2:t:4']}
    """
    n, k, out, start = len(keys), len(consumers), {}, 0
    for i, consumer in enumerate(consumers):
        size = n // k + (1 if i < n % k else 0)
        out[consumer] = keys[start:start + size]
        start += size
    return out


def even_loads(plan: dict[str, list[str]], n: int) -> dict[str, list[str]]:
    """`DefaultLoadBalancer.balance`: move partitions from the loaded to the idle, the fewest moves.

    Three hold six, then a fourth with none: min 1, max 2, and 6 % 4 = 2 of them may keep 2, so the first two
    keep theirs, the third gives up its head, and the newcomer, which asked for 2, gets the one there is:

    >>> even_loads({"a": ["1", "2"], "b": ["3", "4"], "c": ["5", "6"], "d": []}, 6)
    {'a': ['1', '2'], 'b': ['3', '4'], 'c': ['6'], 'd': ['5']}
    """
    plan = {c: list(share) for c, share in sorted(plan.items())}
    k = len(plan)
    low = n // k
    high = low + (1 if n % k else 0)
    may_keep_high = n % k
    to_move: list[str] = []
    wants: dict[str, int] = {}
    for consumer, share in plan.items():
        load = len(share)
        if load < high:
            if load == 0 or load < low:
                wants[consumer] = high - load
            continue
        if may_keep_high > 0:
            may_keep_high -= 1
            give = load - high
        else:
            give = load - low
        to_move += share[:give]
        del share[:give]
    for consumer, want in wants.items():
        while want > 0 and to_move:
            plan[consumer].append(to_move.pop(0))
            want -= 1
    for consumer in wants:  # leftovers, one each
        if not to_move:
            break
        plan[consumer].append(to_move.pop(0))
    return plan
