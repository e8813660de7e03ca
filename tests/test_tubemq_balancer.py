"""TubeMQ's server-side balance without I/O: the master's plan per tick and the events it hands out in heartbeats.

Cases derived from InLong TubeMQ's `DefaultLoadBalancer` and `TMaster` (docs/source-brief-tubemq-server-balance.md).
"""

from __future__ import annotations

import random

import pytest

from tubemq_client.master.balancer import MAX_BALANCE_DELAY_TIME, ServerBalancer, block_assign, even_loads

KEYS = [f"1:t:{p}" for p in range(6)]


def group_of(*consumers: str, held: dict[str, list[str]] | None = None, seed: int = 0) -> ServerBalancer:
    """A balancer whose group `g` has these consumers, each registered and heartbeating what it holds."""
    b = ServerBalancer(rng=random.Random(seed))
    for c in consumers:
        b.register("g", c, now_ms=0)
        b.heartbeat("g", c, held=(held or {}).get(c, []), now_ms=0)
    return b


def settle(b: ServerBalancer, now_ms: int = 1) -> dict[str, list[str]]:
    """Every consumer heartbeats, does the event it got, and reports it, until none is handed out: who holds what."""
    held = {c: set(m.held or ()) for c, m in b.groups["g"].items()}
    done: dict[str, int | None] = dict.fromkeys(held)
    for _ in range(50):
        handed = 0
        for c in sorted(held):
            event = b.heartbeat("g", c, held=sorted(held[c]), now_ms=now_ms, done=done[c])
            done[c] = None
            if event is not None:
                handed += 1
                if "DISCONNECT" in event.kind:
                    held[c] -= set(event.partitions)
                else:
                    held[c] |= set(event.partitions)
                done[c] = event.rebalance_id
        if not handed and all(v is None for v in done.values()):
            break
    return {c: sorted(h) for c, h in held.items()}


def test_the_masters_first_tick_assigns_blocks_of_the_sorted_partitions():
    b = group_of("b", "a", "c")
    b.tick({"g": KEYS}, first=True)
    assert settle(b) == {"a": KEYS[0:2], "b": KEYS[2:4], "c": KEYS[4:6]}
    assert block_assign(KEYS[:5], ["a", "b"]) == {"a": KEYS[0:3], "b": KEYS[3:5]}


def test_a_consumer_gets_nothing_before_its_first_heartbeat_reports_its_holdings():
    b = group_of("a")
    b.register("g", "late", now_ms=0)  # registered, no heartbeat yet: not in `currentSubInfo`
    b.tick({"g": KEYS}, first=True)
    assert settle(b) == {"a": KEYS, "late": []}


def test_a_newcomer_waits_until_the_holders_have_let_go_then_takes_the_balance():
    b = group_of("a", "b", held={"a": KEYS[:3], "b": KEYS[3:]})
    b.register("g", "c", now_ms=0)
    b.heartbeat("g", "c", held=[], now_ms=0)
    b.tick({"g": KEYS})
    # a and b are told to let one go each; c is told nothing while a DISCONNECT is pending anywhere in the group
    first = {c: b.heartbeat("g", c, held=list(b.groups["g"][c].held), now_ms=1) for c in ("c", "a", "b")}
    assert first["c"] is None
    assert first["a"].kind == first["b"].kind == "ONLY_DISCONNECT"
    assert first["a"].partitions == (KEYS[0],) and first["b"].partitions == (KEYS[3],)  # the head of each list
    b.heartbeat("g", "a", held=KEYS[1:3], now_ms=2, done=first["a"].rebalance_id)
    assert b.heartbeat("g", "c", held=[], now_ms=2) is None  # b has not reported yet
    b.heartbeat("g", "b", held=KEYS[4:], now_ms=3, done=first["b"].rebalance_id)
    taken = b.heartbeat("g", "c", held=[], now_ms=3)
    assert taken.kind == "ONLY_CONNECT" and taken.partitions == (KEYS[0], KEYS[3])


def test_one_event_at_a_time_the_next_only_after_the_first_is_reported():
    b = group_of("a", held={"a": KEYS[:2]})
    b.tick({"g": KEYS})  # four new partitions, all to a (the only consumer): one ONLY_CONNECT
    b.groups["g"]["a"].connects.append(b._event("ONLY_CONNECT", ["2:t:9"]))  # and a second event queued behind it
    got = b.heartbeat("g", "a", held=KEYS[:2], now_ms=1)
    assert got.kind == "ONLY_CONNECT" and got.partitions == tuple(KEYS[2:])
    assert b.heartbeat("g", "a", held=KEYS[:2], now_ms=2) is None  # still processing `got`: nothing more
    after = b.heartbeat("g", "a", held=KEYS, now_ms=3, done=got.rebalance_id)  # reported done: the next one
    assert after.partitions == ("2:t:9",)


def test_a_departed_consumers_share_goes_to_random_survivors_and_is_evened_at_the_next_tick():
    b = group_of("a", "b", "c", held={"a": KEYS[:2], "b": KEYS[2:4], "c": KEYS[4:]}, seed=3)
    b.remove("g", "c")
    b.tick({"g": KEYS})
    after_random = settle(b)
    assert sorted(k for share in after_random.values() for k in share) == KEYS  # every partition held again
    b.tick({"g": KEYS})
    assert sorted(len(s) for s in settle(b).values()) == [3, 3]


def test_a_group_with_events_pending_is_skipped_until_they_are_dropped():
    b = group_of("a", "b", held={"a": KEYS, "b": []})
    b.tick({"g": KEYS})
    pending = b.groups["g"]["a"].disconnects[:]
    assert pending  # a must give three up
    for _ in range(MAX_BALANCE_DELAY_TIME - 1):
        b.tick({"g": KEYS})
        assert b.groups["g"]["a"].disconnects == pending  # skipped: nothing planned anew
    b.tick({"g": KEYS})  # the tenth skip: dropped, and planned again
    assert b.groups["g"]["a"].disconnects != pending and b.groups["g"]["a"].disconnects


def test_a_silent_consumer_is_removed_after_the_heartbeat_timeout():
    b = group_of("a", "b")
    b.heartbeat("g", "a", held=[], now_ms=20_000)
    assert b.expire(now_ms=30_001) == [("g", "b")]
    with pytest.raises(KeyError):
        b.heartbeat("g", "b", held=[], now_ms=30_002)  # HB_NO_NODE: it must register again


@pytest.mark.parametrize(("loads", "n", "expected"), [
    ((3, 3, 0), 6, [2, 2, 2]),  # a newcomer takes one from each
    ((4, 3, 0), 7, [3, 2, 2]),  # min 2, max 3: one may keep 3
    ((2, 2, 2, 0), 6, [2, 2, 1, 1]),  # two may keep 2; the third gives one up
])
def test_evening_the_loads_moves_the_fewest_partitions(loads, n, expected):
    names = "abcd"[:len(loads)]
    keys = iter(range(n))
    plan = {c: [str(next(keys)) for _ in range(load)] for c, load in zip(names, loads, strict=True)}
    out = even_loads(plan, n)
    assert [len(out[c]) for c in names] == expected
    moved = sum(len(set(out[c]) - set(plan[c])) for c in names)
    assert moved == sum(max(0, len(out[c]) - len(plan[c])) for c in names)  # only what the idle needed
