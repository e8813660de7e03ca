"""The assignors experiment's computed part: every assignment strategy replayed over one sequence of changes.

No cluster: the strategies are pure functions (`lab_cluster/assignment/`,
`legacy_zk/partition_assignor.py`, `tubemq_client/master/balancer.py`), so
each is run over the same membership changes, and what it does at each change
is counted. `replay(profile)` returns the tables the experiment stores in its
run (`Experiment.compute`).

**The sequence.** A group starts as `c1`, `c2`, `c3` and goes through the
steps trials are made of (`engine/steps.py`): `join` (a new `j<k>`), `leave`
(the newest joiner goes) and `depart` (`c1`, the oldest member, goes).
`SEQUENCE` is join, join, depart, leave, join: 3, 4, 5, 4, 3, 4 members. The
departure of `c1`, first in every member order, is what shifts the ranges of
everyone after it.

**The topics** (`SCENARIOS`), 12 partitions either way: `one-topic` (`t` with
12, what the real trials run, so that each change compares one to one with a
trial's) and `three-topics` (`t0`, `t1`, `t2` with 4 each: a strategy that
splits each topic on its own gives the remainder of every topic to the same
first members).

**Member ids.** Kafka's coordinator names a member `client.id-UUID`; the lab's
consumers' client.id is their actor name, and Kafka's assignors order members
by id, so members sort in join order (`c1 < c2 < c3 < j1 < j2 ...`, up to nine
of each). The UUID decides only Java `HashMap` orders (the sticky assignors'
walk over members): here a fixed `uuid5` of the name, in a trial a random one.
Kafka 0.8's consumer ids (`group_host-time-uuid`) and RocketMQ's client ids
(`ip@pid`) of consumers started one after another on one host sort in start
order too: the client-side strategies get the same ids.

**Leader side** (every assignor of `lab_cluster.assignment.ASSIGNORS`): at each
change each member reports what the lab's consumer sends
(`modern_coord/consumer.py: _subscription_metadata`, after Kafka 3.6): under
the eager protocol nothing, having revoked everything, except under `sticky`,
whose user data carries the partitions of the last generation and that
generation; under the cooperative protocol what it owns now, and its
generation. A joiner reports nothing (generation -1). The leader runs the
assignor.
Each runs under the protocol it supports best (`base.rebalance_protocol`).
Eager (`range`, `roundrobin`, `sticky`): every member revokes everything
before its JoinGroup (Kafka's `onJoinPrepare`), and one round is the change.
Cooperative (`cooperative-sticky`): members keep their partitions through the
rebalance; the first round's assignment leaves out every partition changing
owner while a member of the group still owns it (its `assign_withholding`:
Kafka's `partitionsTransferringOwnership` and `adjustAssignment`); their
owners revoke them and rejoin, reporting the first round's result with its
generation, and the next round gives them out. Rounds repeat until one
withholds nothing (`MAX_ROUNDS` at most).

**A user's assignor** (`PLUG_INS`, the plug-in point of
`lab_cluster/assignment/plugins.py`): replayed as the leader side is, each
member with an instance of its own, configured with its own settings, whose
`subscription_user_data` is what the member sends. The example
(`examples/weighted_assignor.py`, `weighted`) gets `WEIGHTS`: `c2` weighs 3,
every other member 1, so the leader must give `c2` three shares. Its target
is each member's weighted share of the partitions (`share`); every other
strategy's is an even share.

**Client side** (no leader): each member computes its own share from the
sorted membership, and all read the same one here (what happens when they do
not is the split-brain experiment's). Kafka 0.8's `range` and `roundrobin`
(`legacy_zk/partition_assignor.py`, one thread per consumer) and RocketMQ's
`STRATEGIES` (`lab_cluster/assignment/rocketmq.py`, partition p of a topic
being queue p of one broker). Kafka 0.8 releases everything at every
rebalance; a RocketMQ consumer drops only the queues no longer in its share.

**TubeMQ.** Client balance has no membership to change: every node is started
with the group's size (`sourceCount`) and its `nodeId`, and a node that stops
leaves its share to nobody (`lab_cluster/assignment/tubemq.py`). A join or a
leave is therefore an operator's act: every node restarted with `sourceCount`
= the new size and `nodeId`s 0.. in join order (`tubemq-modulo`; partition
keys `1:<topic>:<p>`, one broker). The master's older server balance
(`tubemq-master`) is replayed through its own `ServerBalancer`: the new
members register and every member heartbeats what it holds; each balance tick
plans, and the heartbeats carry its events, one at a time, until a tick plans
nothing (a departed member's partitions go to members picked at random, seeded,
and a later tick evens the loads).

**Per change** (`changes`, with the scenario's `topics` as `name:count`):
`moved`, partitions whose owner after the change did not own them before (a
leaver's count: they must move), of which `handed_over` came from a member
that stays; `fewest`, the fewest any assignment with loads at most one apart
could move (12 minus the most the members can keep; with weights, loads within
one of each member's weighted share); `spread`, the most minus the fewest
partitions a member holds after; `off_share`, the most any member's
load is off its share (its weight over the members' total, times the
partitions: a strategy that keeps every load as near its share as whole
partitions allow has it below 1); `revoked`, partitions members
stopped consuming in the change; `withheld`, partitions the rounds left
unassigned (cooperative); `rounds`; `taken_while_owned`, partitions given to a
member while another member still held them (the safety of the cooperative
protocol and of TubeMQ's master; eager members hold nothing during a round;
empty for client-side shares, which nobody coordinates). `assignments`: who
holds what after each change.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

import pandas as pd

from lab_cluster.assignment import ASSIGNORS, Assignor, Subscription, member_order, rebalance_protocol
from lab_cluster.assignment.plugins import assignors as configured

TopicPartition = tuple[str, int]

START = 3
SEQUENCE = ("join", "join", "depart", "leave", "join")
SCENARIOS: dict[str, dict[str, int]] = {"one-topic": {"t": 12}, "three-topics": {"t0": 4, "t1": 4, "t2": 4}}
#: a cooperative change's rounds stop here even if one still withholds (the sticky assignment's second round
#: withholds nothing: the partitions it gives are held by nobody; the limit keeps a bug from looping)
MAX_ROUNDS = 4
TUBEMQ_BROKER = 1
TUBEMQ_SEED = 0
#: the weighted example's setting, and the members' weights (the others weigh 1): `c2` a machine three times
#: the others' size, in the whole sequence
WEIGHT_KEY = "weighted.assignor.weight"
WEIGHTS = {"c2": 3}
#: users' assignors replayed beside the built-in ones: {strategy: (`module:Class`, {member name: its settings})}
PLUG_INS: dict[str, tuple[str, dict[str, dict[str, str]]]] = {
    "weighted": ("examples.weighted_assignor:WeightedAssignor",
                 {name: {WEIGHT_KEY: str(weight)} for name, weight in WEIGHTS.items()}),
}


def weights(strategy: str, names: list[str]) -> list[int]:
    """Each member's weight under `strategy`: `WEIGHTS` for the weighted example, 1 for every other strategy."""
    return [WEIGHTS.get(n, 1) if strategy == "weighted" else 1 for n in names]


def member_assignor(strategy: str, name: str) -> Assignor:
    """Member `name`'s assignor: the built-in instance, or a user's class configured with the member's settings
    (as `ConsumerConfig` builds it in a consumer)."""
    if strategy in ASSIGNORS:
        return ASSIGNORS[strategy]
    entry, settings = PLUG_INS[strategy]
    return configured([entry], settings.get(name, {}))[0]


def member_id(name: str) -> str:
    """A member's id as Kafka's coordinator forms it, `client.id-UUID`, with a fixed UUID (see above)."""
    return f"{name}-{uuid.uuid5(uuid.NAMESPACE_OID, name)}"


def memberships(start: int = START, steps: tuple[str, ...] = SEQUENCE) -> list[tuple[str, list[str]]]:
    """[(change, members after it)], the first `("start", c1..cN)`; steps as `engine/steps.py` plans them."""
    members = [f"c{i}" for i in range(1, start + 1)]
    joined: list[str] = []
    out = [("start", list(members))]
    for step in steps:
        if step == "join":
            name = f"j{sum(1 for c, _ in out if c.startswith('join')) + 1}"
            members, joined = [*members, name], [*joined, name]
        elif step == "leave":
            name = joined[-1]
            members, joined = [m for m in members if m != name], joined[:-1]
        elif step == "depart":
            name = "c1"
            members = [m for m in members if m != name]
        else:
            raise ValueError(f"the replay knows join, leave and depart, not {step!r}")
        out.append((f"{step} {name}", list(members)))
    return out


Holdings = dict[str, list[TopicPartition]]  # member id -> partitions


# -- leader side ---------------------------------------------------------------------------------------------
def _leader_rounds(name: str, topics: dict[str, int], members: dict[str, Assignor], owned: Holdings,
                   generation: int) -> tuple[Holdings, int, dict]:
    """One change under a leader-side assignor, `members` each member id's own instance of it (the first's
    runs as the leader): (holdings after, generation after, counts)."""
    ids = list(members)
    assignor = members[ids[0]]
    cooperative = rebalance_protocol([assignor]) == "cooperative"
    held = {m: list(owned.get(m, [])) for m in ids}  # what each member reports, and (cooperative) still holds
    revoked = 0 if cooperative else sum(len(p) for p in held.values())  # eager: everything, before JoinGroup
    withheld = taken_while_owned = rounds = 0
    while True:
        rounds += 1
        reports = cooperative or name == "sticky"  # `_subscription_metadata`: else nothing, all being revoked
        subs = {m: Subscription(sorted(topics), held[m] if reports else [], generation if m in owned else -1,
                                user_data=members[m].subscription_user_data(sorted(topics)))
                for m in member_order({m: Subscription([]) for m in ids})}
        if cooperative:
            result, kept_back = assignor.assign_withholding(topics, subs)
        else:
            result, kept_back = assignor.assign(topics, subs), {}
        generation += 1
        if cooperative:  # the protocol's safety, checked: nothing given while another member still holds it
            holder = {tp: m for m, tps in held.items() for tp in tps}
            taken_while_owned += sum(1 for m, tps in result.items() for tp in tps if holder.get(tp, m) != m)
            revoked += sum(len(set(held[m]) - set(result[m])) for m in ids)
        withheld += len(kept_back)
        held, owned = {m: list(result[m]) for m in ids}, {m: result[m] for m in ids}
        if not kept_back or rounds == MAX_ROUNDS:
            break
    return held, generation, {"revoked": revoked, "withheld": withheld, "rounds": rounds,
                              "taken_while_owned": taken_while_owned}


def replay_leader(name: str, topics: dict[str, int], changes: list[tuple[str, list[str]]]) -> list[Holdings]:
    """The holdings after each change under leader-side assignor `name`, with each change's counts."""
    owned: Holdings = {}
    generation, out = 0, []
    for _, names in changes:
        members = {member_id(n): member_assignor(name, n) for n in names}
        owned = {m: tps for m, tps in owned.items() if m in members}
        owned, generation, counts = _leader_rounds(name, topics, members, owned, generation)
        out.append((owned, counts))
    return out


# -- client side ---------------------------------------------------------------------------------------------
def _legacy(name: str) -> Callable[[dict[str, int], list[str]], Holdings]:
    def shares(topics: dict[str, int], ids: list[str]) -> Holdings:
        from legacy_zk.partition_assignor import ASSIGNORS as LEGACY
        from legacy_zk.view import View

        threads = sorted(f"{m}-0" for m in ids)  # one thread per consumer: `<consumer id>-0`
        view = View(members=sorted(ids), thread_ids={t: threads for t in topics},
                    partitions={t: list(range(n)) for t, n in topics.items()}, brokers={}, cversion=0, pzxid=0)
        return {m: sorted(LEGACY[name].assign(view, m, [f"{m}-0"])) for m in ids}
    return shares


def _rocketmq(name: str) -> Callable[[dict[str, int], list[str]], Holdings]:
    def shares(topics: dict[str, int], ids: list[str]) -> Holdings:
        from lab_cluster.assignment.rocketmq import STRATEGIES

        out: Holdings = {m: [] for m in ids}
        for topic, n in topics.items():  # per subscribed topic, over every client id of the group, sorted
            queues = sorted((topic, "broker-a", q) for q in range(n))
            for m in ids:
                out[m] += [(t, q) for t, _, q in STRATEGIES[name](m, queues, sorted(ids))]
        return out
    return shares


def _tubemq_modulo(topics: dict[str, int], ids: list[str]) -> Holdings:
    """Every node restarted with sourceCount = len(ids) and nodeIds in join order (see above)."""
    from lab_cluster.assignment.tubemq import modulo

    keys = [f"{TUBEMQ_BROKER}:{t}:{p}" for t, n in topics.items() for p in range(n)]
    out = {}
    for node, m in enumerate(ids):
        out[m] = sorted((k.split(":")[1], int(k.split(":")[2])) for k in modulo(keys, len(ids), node))
    return out


#: {strategy: (its share function, whether every member releases everything at every change)}
CLIENT_SIDE: dict[str, tuple[Callable[[dict[str, int], list[str]], Holdings], bool]] = {
    "legacy-range": (_legacy("range"), True),
    "legacy-roundrobin": (_legacy("roundrobin"), True),
    "rocketmq-averagely": (_rocketmq("rocketmq-averagely"), False),
    "rocketmq-averagely-by-circle": (_rocketmq("rocketmq-averagely-by-circle"), False),
    "tubemq-modulo": (_tubemq_modulo, True),
}


def replay_client(name: str, topics: dict[str, int], changes: list[tuple[str, list[str]]]):
    shares, releases_all = CLIENT_SIDE[name]
    out, before = [], {}
    for _, names in changes:
        ids = [member_id(n) for n in names]
        after = shares(topics, ids)
        revoked = sum(len(before.get(m, [])) for m in ids) if releases_all else \
            sum(len(set(before.get(m, [])) - set(after[m])) for m in ids)
        out.append((after, {"revoked": revoked, "withheld": 0, "rounds": 1, "taken_while_owned": None}))
        before = after
    return out


# -- TubeMQ's master -----------------------------------------------------------------------------------------
def replay_tubemq_server(topics: dict[str, int], changes: list[tuple[str, list[str]]]):
    """The master's `ServerBalancer` over the changes: ticks, and per tick the heartbeats carrying its events."""
    from tubemq_client.master.balancer import ServerBalancer

    balancer, group = ServerBalancer(rng=random.Random(TUBEMQ_SEED)), "g"
    keys = sorted(f"{TUBEMQ_BROKER}:{t}:{p}" for t, n in topics.items() for p in range(n))
    held: dict[str, set[str]] = {}
    out = []
    for index, (_, names) in enumerate(changes):
        ids = [member_id(n) for n in names]
        for m in set(held) - set(ids):
            balancer.remove(group, m)
            del held[m]
        for m in ids:
            if m not in held:
                balancer.register(group, m, now_ms=0)
                held[m] = set()
        counts = {"revoked": 0, "withheld": 0, "rounds": 0, "taken_while_owned": 0}
        for tick in range(20):
            for m in ids:  # every member's holdings known before the tick
                balancer.heartbeat(group, m, sorted(held[m]), now_ms=0)
            balancer.tick({group: keys}, first=index == 0 and tick == 0)
            done: dict[str, int | None] = dict.fromkeys(ids)
            events, quiet = 0, 0
            while quiet < 2:  # heartbeat rounds, until two hand nothing (a CONNECT waits for a round of reports)
                handed = False
                for m in ids:
                    event = balancer.heartbeat(group, m, sorted(held[m]), now_ms=0, done=done[m])
                    if event is None or event.rebalance_id == done[m]:
                        continue
                    handed, events, done[m] = True, events + 1, event.rebalance_id
                    if "DISCONNECT" in event.kind:
                        held[m] -= set(event.partitions)
                        counts["revoked"] += len(event.partitions)
                    else:
                        counts["taken_while_owned"] += sum(1 for k in event.partitions
                                                           for o in ids if o != m and k in held[o])
                        held[m] |= set(event.partitions)
                quiet = 0 if handed else quiet + 1
            if not events:
                break
            counts["rounds"] += 1
        owned = {m: sorted((k.split(":")[1], int(k.split(":")[2])) for k in held[m]) for m in ids}
        out.append((owned, counts))
    return out


# -- the tables ----------------------------------------------------------------------------------------------
def fewest_moves(held: list[int], total: int, weights: list[int] | None = None) -> int:
    """The fewest partitions any assignment keeping each member within one partition of its share moves:
    `total` minus the most the members can keep. `held[i]` is what the change's i-th member held before it (0 for
    a joiner), `weights[i]` its weight (even shares if None). A member's share is `total * w / sum(weights)`;
    each gets its share's floor, and the partitions left over go one each to members whose share is not whole,
    those holding more than their floor first (each keeps one more).

    >>> fewest_moves([4, 4, 4, 0], 12)  # a fourth member joins three holding four each
    3
    >>> fewest_moves([3, 7, 2, 0], 12, [1, 3, 1, 1])  # weighted: shares 2, 6, 2, 2; c1 and c2 give one each
    2
    """
    weights = weights or [1] * len(held)
    whole = sum(weights)
    floors = [total * w // whole for w in weights]
    left_over = total - sum(floors)
    above = sum(1 for c, f, w in zip(held, floors, weights, strict=True) if total * w % whole and c > f)
    return total - sum(min(c, f) for c, f in zip(held, floors, strict=True)) - min(left_over, above)


def strategies() -> dict[str, tuple[str, str]]:
    """{strategy: (side, protocol)}: every leader-side assignor registered, the users' (`PLUG_INS`), then the
    client-side ones, then the TubeMQ master's."""
    out = {n: ("leader", rebalance_protocol([a])) for n, a in ASSIGNORS.items()}
    out.update({n: ("leader", rebalance_protocol([member_assignor(n, "c1")])) for n in PLUG_INS})
    out.update({n: ("client", "releases all" if all_ else "keeps its own") for n, (_, all_) in CLIENT_SIDE.items()})
    out["tubemq-master"] = ("master", "one event per heartbeat")
    return out


def _replay(name: str, topics: dict[str, int], changes):
    if name in ASSIGNORS or name in PLUG_INS:
        return replay_leader(name, topics, changes)
    if name in CLIENT_SIDE:
        return replay_client(name, topics, changes)
    return replay_tubemq_server(topics, changes)


def replay(profile: str = "standard", start: int = START, steps: tuple[str, ...] = SEQUENCE) -> dict[str, pd.DataFrame]:
    """The computed tables, `changes` and `assignments` (the same for every profile: no cluster, no timing)."""
    changes = memberships(start, steps)
    rows, held_rows = [], []
    for scenario, topics in SCENARIOS.items():
        total = sum(topics.values())
        for name, (side, protocol) in strategies().items():
            before: Holdings = {}
            for step, ((change, names), (after, counts)) in enumerate(zip(changes, _replay(name, topics, changes),
                                                                            strict=True)):
                held = sorted(tp for tps in after.values() for tp in tps)
                if held != sorted((t, p) for t, n in topics.items() for p in range(n)):
                    raise AssertionError(f"{name} after {change} ({scenario}) does not hold every partition once")
                owner_before = {tp: m for m, tps in before.items() for tp in tps}
                moved = [tp for m, tps in after.items() for tp in tps if owner_before.get(tp) != m]
                sizes = [len(after[member_id(n)]) for n in names]
                own = weights(name, names)
                shares = [total * w / sum(own) for w in own]
                rows.append({"scenario": scenario, "topics": " ".join(f"{t}:{n}" for t, n in topics.items()),
                             "strategy": name, "side": side, "protocol": protocol,
                             "step": step, "change": change, "members": len(names),
                             "moved": len(moved) if step else None,
                             "handed_over": sum(1 for tp in moved if owner_before.get(tp) in after) if step else None,
                             "fewest": fewest_moves([len(before.get(member_id(n), [])) for n in names], total,
                                                    own) if step else None,
                             "spread": max(sizes) - min(sizes),
                             "off_share": round(max(abs(n - share) for n, share in zip(sizes, shares, strict=True)),
                                                3), **counts})
                held_rows += [{"scenario": scenario, "strategy": name, "step": step, "member": n, "weight": w,
                               "partitions": " ".join(f"{t}-{p}" for t, p in sorted(after[member_id(n)]))}
                              for n, w in zip(names, own, strict=True)]
                before = after
    return {"changes": pd.DataFrame(rows), "assignments": pd.DataFrame(held_rows)}
