"""The steps a trial's scenario is made of, each registered once: what it does and the membership after it.

A trial's `TrialSpec.steps` names them in order; the runner (`trial.py:
_Scenario._step`) plans each against the scenario's state (`Stage`), records
the `change` (with the membership the plan says follows), acts, and waits until
the group has converged on that membership.

| step     | what                                                             | members after |
|----------|------------------------------------------------------------------|---------------|
| `join`   | a new consumer `j<k>` starts in its own process                   | + j<k>        |
| `leave`  | the newest joiner stops gracefully                                | - it          |
| `depart` | the victim `c1`, one of the group's own, stops gracefully         | - c1          |
| `churn`  | `j<k>` joins, `j<k+1>` joins, `j<k>` leaves, `churn_gap_s` apart  | + j<k+1>      |
| `pause`  | SIGSTOP the victim `c1` (a GC pause past its session timeout)     | - c1          |
| `resume` | SIGCONT it: it wakes up believing it still owns its partitions    | + c1          |
| `cut`    | blackhole the victim's `Family.victim_link`: to ZooKeeper, to its | - c1          |
|          | coordinator, or to every broker (RocketMQ, TubeMQ)                |               |
| `heal`   | let that link pass again                                          | + c1          |
| `restart`| the next of the group's own consumers, c<k> at the k-th restart,  | the same      |
|          | stops gracefully, and `restart_down_s` later starts again under   |               |
|          | the same name and config (a static member: the same instance id)  |               |
| `broker_kill` | SIGKILL one broker (`kill_coordinator`: the group's coordinator, | the same      |
|          | else the highest-numbered broker that is not), then wait until    |               |
|          | ZooKeeper expired its session and its partitions have new leaders |               |
| `broker_stop` | broker k shuts down cleanly at the k-th `broker_stop` (a rolling | the same      |
|          | bounce with `broker_restart` between: when it is the group's      |               |
|          | coordinator, the coordinator moves), then wait until its          |               |
|          | partitions have new leaders                                       |               |
| `broker_restart` | start the killed or stopped broker again, same id and port,  | the same      |
|          | and wait until every live broker's metadata agrees                |               |
| `crash`  | SIGKILL the victim `c1` (a consumer failure without a clean       | - c1          |
|          | shutdown: no LeaveGroup, no session closed), and it stays dead    |               |
| `zk_stop` | stop a ZooKeeper server: the only one, or an ensemble's follower | the same      |
|          | (`zk_stop_leader`: its leader); `zk_down_s` before the next step  |               |
| `zk_start` | start that server again, with its id, ports and data, and wait  | the same      |
|          | until the ensemble has one leader and every broker's metadata agrees |            |
| `grow`   | add partitions to the topic, to `grow_to` (0: twice as many), as | the same      |
|          | its system's admin tool does; wait until every partition has a   |               |
|          | leader                                                           |               |

`membership_change`: the step changes who is in the group and nothing else
(no session or link is harmed), so the cross-check with the servers judges it
(`metrics.cross_check`). `holds`: after the group converged without the victim,
the scenario waits `hold_s` more, so the survivors process (and commit) what
the victim had; `then_waits`: after that, the scenario waits that parameter's
seconds before the next step (`restart_gap_s`). `needs_victim`: the step acts on `c1` in a process of its own
(`layout="spread"`); `own_processes`: it acts on the group's own consumers
`c1..cN`, each in a process of its own (`layout="spread"` too). `params`: the knobs a step takes from its trial
(`TrialSpec.params`), with their defaults. A new step is one entry in `STEPS`
(`tests/test_steps.py` plans them against a recording stage).

A rolling restart (the storm experiment) is `restart` N times: an operator's
deploy stops each instance and starts it again, one after the other. The
runner waits for the group to converge after each restart, then `settle_s`,
then the step's `restart_gap_s`, before the next: the gap between two restarts
is therefore convergence + settle + `restart_gap_s`, as a careful deploy waits
for each instance to be ready (consuming) before it takes down the next, not a
fixed period. A restart is a leave and a join of the same member: it changes
membership and harms no session or link, so the cross-check with the servers
judges it (`membership_change`).

A broker's death, clean shutdown and return (the broker-churn experiment),
and a ZooKeeper server's stop and start, change no membership:
`group_untouched` tells the runner not to wait for every member to rebalance
(in the coordinator era nobody should), only for the group to be whole (every
member settled, every partition held once), and then to hold `hold_s` (a
broker's return: `return_hold_s`; a stopped ZooKeeper server: `zk_down_s`) so
that the window sees whatever the change sets off later.

A topic's growth (`grow`, the grow experiment) changes no membership either:
the group is whole again once every partition, old and new, is owned once
(and, where a planner moves only some members, the loads are even). How long
that takes is the design's way of learning of new partitions, which is the
question: the runner waits for it up to the trial's `converge_limit_s`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

#: the consumer the fault steps are about (started in its own process: `layout="spread"`)
VICTIM = "c1"


class StepImpossible(Exception):
    """The step cannot be taken in this scenario (the reason is the message)."""


class Stage(Protocol):
    """What a step's plan may read of the scenario, and the actions it may hand back."""

    joins: int  # joiners started so far: the next is j<joins + 1>
    joined: list[str]  # joiners still running, oldest first
    restarts: int  # restarts done so far: the next restarts c<restarts + 1>

    def has_victim(self) -> bool: ...
    def join(self) -> str: ...
    def leave(self, name: str) -> None: ...
    def depart(self, name: str) -> None: ...
    def churn(self) -> None: ...
    def restart(self, name: str) -> None: ...  # stop it, wait restart_down_s, start it again as it was
    def fault(self, step: str) -> Callable[[], object]: ...  # pause, resume, cut or heal the victim
    def broker_victim(self, step: str) -> int: ...  # the broker `broker_kill` or `broker_stop` takes down
    def broker_down(self) -> int | None: ...  # the broker killed or stopped and not yet restarted
    def kill_broker(self, broker_id: int) -> None: ...  # SIGKILL, then wait for its partitions' new leaders
    def stop_broker(self, broker_id: int) -> None: ...  # a clean shutdown, then wait for the same
    def restart_broker(self, broker_id: int) -> None: ...  # start it again, same id and port
    def zk_victim(self) -> int: ...  # the ZooKeeper server a `zk_stop` stops (its sid)
    def zk_down(self) -> int | None: ...  # the ZooKeeper server stopped and not yet started
    def stop_zk(self, sid: int) -> None: ...
    def start_zk(self, sid: int) -> None: ...  # start it again; wait for a leader and the brokers' metadata
    def param(self, name: str) -> float: ...  # one of the trial's parameters (`TrialSpec.param`)
    def partitions(self) -> int: ...  # the topic's partitions now
    def grow_topic(self, partitions: int) -> None: ...  # add partitions up to this count; wait for their leaders


@dataclass(frozen=True)
class Plan:
    after: list[str]  # the membership once the step is done
    about: str  # the member(s) it is about, as the `change` event records them
    act: Callable[[], object]


@dataclass(frozen=True)
class Step:
    name: str
    what: str
    plan: Callable[[Stage, list[str]], Plan]
    membership_change: bool = False
    holds: bool = False
    needs_victim: bool = False
    own_processes: bool = False
    group_untouched: bool = False  # wait for the group to be whole, not for every member to rebalance
    hold_param: str = "hold_s"  # the parameter `holds` waits (a step held for a time of its own names its own)
    #: it stops or starts a ZooKeeper server, whose counters the servers' sum then leaves out or starts from zero:
    #: the cross-check cannot compare them with the clients' across its window
    moves_zk_counters: bool = False
    then_waits: str = ""  # a parameter: seconds the runner waits after convergence and settle_s, before the next
    params: dict[str, float] = field(default_factory=dict)  # {name: default}


def _joiner(stage: Stage, k: int) -> str:
    return f"j{stage.joins + k}"


def _join(stage: Stage, members: list[str]) -> Plan:
    return Plan(members + [_joiner(stage, 1)], _joiner(stage, 1), stage.join)


def _leave(stage: Stage, members: list[str]) -> Plan:
    if not stage.joined:
        raise StepImpossible("the scenario's leave has no joined consumer to stop")
    newest = stage.joined[-1]
    return Plan([m for m in members if m != newest], newest, lambda: stage.leave(newest))


def _depart(stage: Stage, members: list[str]) -> Plan:
    _need_victim(stage, "depart")
    return Plan([m for m in members if m != VICTIM], VICTIM, lambda: stage.depart(VICTIM))


def _churn(stage: Stage, members: list[str]) -> Plan:
    return Plan(members + [_joiner(stage, 2)], f"{_joiner(stage, 1)},{_joiner(stage, 2)}", stage.churn)


def _victim_away(step: str) -> Callable[[Stage, list[str]], Plan]:
    def plan(stage: Stage, members: list[str]) -> Plan:
        _need_victim(stage, step)
        return Plan([m for m in members if m != VICTIM], VICTIM, stage.fault(step))
    return plan


def _victim_back(step: str) -> Callable[[Stage, list[str]], Plan]:
    def plan(stage: Stage, members: list[str]) -> Plan:
        _need_victim(stage, step)
        return Plan(members if VICTIM in members else members + [VICTIM], VICTIM, stage.fault(step))
    return plan


def _restart(stage: Stage, members: list[str]) -> Plan:
    name = f"c{stage.restarts + 1}"
    if name not in members:
        raise StepImpossible(f"restart {stage.restarts + 1} would restart {name}, which is not a member "
                             f"({', '.join(members)}): a rolling restart restarts each of c1..cN once")
    return Plan(list(members), name, lambda: stage.restart(name))


def _broker_down(step: str) -> Callable[[Stage, list[str]], Plan]:
    def plan(stage: Stage, members: list[str]) -> Plan:
        if stage.broker_down() is not None:
            raise StepImpossible(f"broker {stage.broker_down()} is down already: one broker is down at a time")
        victim = stage.broker_victim(step)
        act = stage.kill_broker if step == "broker_kill" else stage.stop_broker
        return Plan(list(members), f"broker-{victim}", lambda: act(victim))
    return plan


def _broker_restart(stage: Stage, members: list[str]) -> Plan:
    victim = stage.broker_down()
    if victim is None:
        raise StepImpossible("broker_restart needs a broker killed or stopped before it (broker_kill, broker_stop)")
    return Plan(list(members), f"broker-{victim}", lambda: stage.restart_broker(victim))


def _zk_stop(stage: Stage, members: list[str]) -> Plan:
    if stage.zk_down() is not None:
        raise StepImpossible(f"ZooKeeper server {stage.zk_down()} is stopped already: one is stopped at a time")
    sid = stage.zk_victim()
    return Plan(list(members), f"zk{sid}", lambda: stage.stop_zk(sid))


def _zk_start(stage: Stage, members: list[str]) -> Plan:
    sid = stage.zk_down()
    if sid is None:
        raise StepImpossible("zk_start needs a ZooKeeper server stopped before it (zk_stop)")
    return Plan(list(members), f"zk{sid}", lambda: stage.start_zk(sid))


def _grow(stage: Stage, members: list[str]) -> Plan:
    now = stage.partitions()
    target = int(stage.param("grow_to")) or 2 * now
    if target <= now:
        raise StepImpossible(f"grow to {target} partitions: the topic has {now} already, and a topic only grows")
    return Plan(list(members), f"partitions-{target}", lambda: stage.grow_topic(target))


def _need_victim(stage: Stage, step: str) -> None:
    if not stage.has_victim():
        raise StepImpossible(f"the step {step} needs the victim {VICTIM} in a process of its own")


STEPS: dict[str, Step] = {s.name: s for s in (
    Step("join", "a new consumer starts in its own process", _join, membership_change=True),
    Step("leave", "the newest joiner stops gracefully", _leave, membership_change=True),
    # where members are not told of each other (TubeMQ's client balance), the group cannot converge without it:
    # its share stays unowned until every node restarts with a new sourceCount
    Step("depart", "the victim, one of the group's own consumers, stops gracefully", _depart,
         membership_change=True, needs_victim=True),
    Step("churn", "one joins, another joins, the first leaves, churn_gap_s apart", _churn, membership_change=True,
         params={"churn_gap_s": 0.5}),
    Step("pause", "SIGSTOP the victim past its session timeout", _victim_away("pause"), holds=True,
         needs_victim=True, params={"hold_s": 0.0}),
    Step("resume", "SIGCONT the victim", _victim_back("resume"), needs_victim=True),
    Step("cut", "blackhole the victim's link to ZooKeeper or to its coordinator", _victim_away("cut"), holds=True,
         needs_victim=True, params={"hold_s": 0.0}),
    Step("heal", "let the victim's link pass again", _victim_back("heal"), needs_victim=True),
    Step("crash", "SIGKILL the victim; it stays dead", _victim_away("crash"), holds=True, needs_victim=True,
         params={"hold_s": 0.0}),
    # restart_down_s: the deploy's time between stopping an instance and starting it; restart_gap_s: what it waits
    # after the group converged (and settle_s) before the next step
    Step("restart", "the next of c1..cN stops gracefully and starts again as it was, restart_down_s later",
         _restart, membership_change=True, own_processes=True, then_waits="restart_gap_s",
         params={"restart_down_s": 1.0, "restart_gap_s": 2.0}),
    # kill_coordinator: 1 kills the group's coordinator (a family with one), 0 the highest-numbered other broker
    Step("broker_kill", "SIGKILL one broker; wait until its partitions have new leaders", _broker_down("broker_kill"),
         group_untouched=True, holds=True, params={"kill_coordinator": 0.0, "hold_s": 0.0}),
    Step("broker_stop", "the next broker in turn shuts down cleanly; wait until its partitions have new leaders",
         _broker_down("broker_stop"), group_untouched=True, holds=True, params={"hold_s": 0.0}),
    Step("broker_restart", "start the killed or stopped broker again under its id and port", _broker_restart,
         group_untouched=True, holds=True, hold_param="return_hold_s", params={"return_hold_s": 0.0}),
    # zk_stop_leader: 1 stops an ensemble's leader, 0 a follower (a single server is stopped either way)
    Step("zk_stop", "stop a ZooKeeper server; zk_down_s before the next step", _zk_stop, group_untouched=True,
         holds=True, hold_param="zk_down_s", moves_zk_counters=True, params={"zk_stop_leader": 0.0, "zk_down_s": 2.0}),
    Step("zk_start", "start the stopped ZooKeeper server again, with its id, ports and data", _zk_start,
         group_untouched=True, moves_zk_counters=True),
    # the fifth trigger of the Kafka source text: a subscribed topic's partition count changes. No member changes,
    # but every design must hand the new partitions out: the runner waits until they are owned, each once
    Step("grow", "add partitions to the topic (grow_to; 0: twice as many), as its system's admin tool does",
         _grow, group_untouched=True, holds=True, params={"grow_to": 0.0, "hold_s": 0.0}),
)}

#: the steps that change membership alone, without a fault on anyone's session or link
MEMBERSHIP_CHANGES: tuple[str, ...] = tuple(name for name, step in STEPS.items() if step.membership_change)
#: the steps that harm the victim's session or link
FAULT_STEPS: frozenset[str] = frozenset(name for name, step in STEPS.items()
                                        if not step.membership_change and not step.group_untouched)
#: the steps that change the cluster under the group, no member: a broker's or a ZooKeeper server's going and
#: return, the topic's growth
CLUSTER_STEPS: frozenset[str] = frozenset(name for name, step in STEPS.items() if step.group_untouched)

#: the steps across which ZooKeeper's own counters cannot be compared with the clients' (`moves_zk_counters`):
#: the cross-check leaves their windows alone
ZK_SERVER_STEPS: frozenset[str] = frozenset(name for name, step in STEPS.items() if step.moves_zk_counters)

#: the steps that need the victim in a process of its own
VICTIM_STEPS: frozenset[str] = frozenset(name for name, step in STEPS.items() if step.needs_victim)
#: the steps that need every consumer of the group in a process of its own (`layout="spread"`)
SPREAD_STEPS: frozenset[str] = VICTIM_STEPS | {name for name, step in STEPS.items() if step.own_processes}
