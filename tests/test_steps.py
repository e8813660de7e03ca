"""The step planner without a cluster: each step's membership after, what it is about, and what it does, planned
against a recording stage."""

from __future__ import annotations

import pytest

from experiments.engine.steps import (
    CLUSTER_STEPS,
    FAULT_STEPS,
    MEMBERSHIP_CHANGES,
    SPREAD_STEPS,
    STEPS,
    VICTIM,
    VICTIM_STEPS,
    StepImpossible,
)
from experiments.engine.trial import TrialSpec
from lab_cluster.errors import LabError


class Stage:
    def __init__(self, victim: bool = True):
        self.joins, self.joined, self.victim, self.done = 0, [], victim, []
        self.restarts = 0

    def has_victim(self) -> bool:
        return self.victim

    def join(self) -> str:
        self.joins += 1
        self.joined.append(f"j{self.joins}")
        self.done.append(f"join j{self.joins}")
        return f"j{self.joins}"

    def leave(self, name: str) -> None:
        self.joined.remove(name)
        self.done.append(f"leave {name}")

    def depart(self, name: str) -> None:
        self.done.append(f"depart {name}")

    def churn(self) -> None:
        first = self.join()
        self.join()
        self.leave(first)

    def fault(self, step: str):
        return lambda: self.done.append(f"{step} {VICTIM}")

    def restart(self, name: str) -> None:
        self.restarts += 1
        self.done.append(f"restart {name}")

    killed = None
    zk_stopped = None

    def broker_victim(self, step: str) -> int:
        return 3 if step == "broker_kill" else 1

    def broker_down(self):
        return self.killed

    def kill_broker(self, broker_id: int) -> None:
        self.killed = broker_id
        self.done.append(f"kill broker-{broker_id}")

    def stop_broker(self, broker_id: int) -> None:
        self.killed = broker_id
        self.done.append(f"stop broker-{broker_id}")

    def zk_victim(self) -> int:
        return 2

    def zk_down(self):
        return self.zk_stopped

    def stop_zk(self, sid: int) -> None:
        self.zk_stopped = sid
        self.done.append(f"stop zk{sid}")

    def start_zk(self, sid: int) -> None:
        self.zk_stopped = None
        self.done.append(f"start zk{sid}")

    def restart_broker(self, broker_id: int) -> None:
        self.killed = None
        self.done.append(f"restart broker-{broker_id}")

    topic_partitions = 4
    params: dict[str, float] = {}

    def param(self, name: str) -> float:
        return self.params.get(name, STEPS["grow"].params.get(name, 0.0))

    def partitions(self) -> int:
        return self.topic_partitions

    def grow_topic(self, partitions: int) -> None:
        self.topic_partitions = partitions
        self.done.append(f"grow to {partitions}")


def run(stage: Stage, steps: list[str], members: list[str]) -> list[tuple[list[str], str]]:
    """Plan and act each step in turn, as the runner does: (membership after, about) per step."""
    seen = []
    for step in steps:
        plan = STEPS[step].plan(stage, members)
        plan.act()
        members = plan.after
        seen.append((plan.after, plan.about))
    return seen


def test_join_then_leave_adds_the_next_joiner_and_removes_the_newest():
    stage = Stage()
    assert run(stage, ["join", "join", "leave"], ["c1", "c2"]) == [
        (["c1", "c2", "j1"], "j1"), (["c1", "c2", "j1", "j2"], "j2"), (["c1", "c2", "j1"], "j2")]
    assert stage.done == ["join j1", "join j2", "leave j2"]


def test_churn_ends_with_the_second_joiner_only():
    stage = Stage()
    assert run(stage, ["churn"], ["c1"]) == [(["c1", "j2"], "j1,j2")]
    assert stage.done == ["join j1", "join j2", "leave j1"] and stage.joined == ["j2"]


def test_the_victim_leaves_the_membership_while_paused_or_cut_and_comes_back():
    stage = Stage()
    assert run(stage, ["pause", "resume", "cut", "heal"], ["c1", "c2"]) == [
        (["c2"], "c1"), (["c2", "c1"], "c1"), (["c2"], "c1"), (["c2", "c1"], "c1")]
    assert stage.done == ["pause c1", "resume c1", "cut c1", "heal c1"]
    assert {s for s in STEPS if STEPS[s].holds} == {"pause", "cut", "crash"} | CLUSTER_STEPS - {"zk_start"}


def test_a_crashed_victim_leaves_the_membership_for_good():
    stage = Stage()
    assert run(stage, ["crash"], ["c1", "c2"]) == [(["c2"], "c1")]
    assert stage.done == ["crash c1"] and STEPS["crash"].needs_victim and STEPS["crash"].holds
    with pytest.raises(StepImpossible, match="needs the victim c1"):
        STEPS["crash"].plan(Stage(victim=False), ["c1"])


def test_the_victim_departs_for_good_and_a_replacement_may_join():
    stage = Stage()
    assert run(stage, ["depart", "join"], ["c1", "c2"]) == [(["c2"], "c1"), (["c2", "j1"], "j1")]
    assert stage.done == ["depart c1", "join j1"]
    with pytest.raises(StepImpossible, match="depart needs the victim c1"):
        STEPS["depart"].plan(Stage(victim=False), ["c1"])


def test_grow_doubles_the_topic_or_grows_it_to_grow_to_and_changes_no_membership():
    stage = Stage()
    assert run(stage, ["grow", "grow"], ["c1", "c2"]) == [(["c1", "c2"], "partitions-8"),
                                                          (["c1", "c2"], "partitions-16")]
    stage.params = {"grow_to": 20}
    assert run(stage, ["grow"], ["c1"]) == [(["c1"], "partitions-20")]
    assert stage.done == ["grow to 8", "grow to 16", "grow to 20"] and "grow" in CLUSTER_STEPS
    with pytest.raises(StepImpossible, match="a topic only grows"):
        STEPS["grow"].plan(stage, ["c1"])


def test_a_step_that_cannot_be_taken_says_why():
    with pytest.raises(StepImpossible, match="leave has no joined consumer"):
        STEPS["leave"].plan(Stage(), ["c1"])
    with pytest.raises(StepImpossible, match="needs the victim c1 in a process of its own"):
        STEPS["cut"].plan(Stage(victim=False), ["c1"])


def test_the_registry_is_what_specs_and_the_cross_check_read():
    assert MEMBERSHIP_CHANGES == ("join", "leave", "depart", "churn", "restart")
    assert FAULT_STEPS == {"pause", "resume", "cut", "heal", "crash"}
    assert CLUSTER_STEPS == {"broker_kill", "broker_stop", "broker_restart", "zk_stop", "zk_start", "grow"}
    assert VICTIM_STEPS == FAULT_STEPS | {"depart"}
    assert SPREAD_STEPS == VICTIM_STEPS | {"restart"}
    with pytest.raises(LabError, match="Unknown scenario step"):
        TrialSpec("herd", "zookeeper", 2, 4, steps=("join", "explode"))
    with pytest.raises(LabError, match="act on the victim c1, which needs a process of its own"):
        TrialSpec("zombie", "zookeeper", 2, 4, steps=("pause",))
    with pytest.raises(LabError, match="A member override is ACTOR:KEY=VALUE"):
        TrialSpec("herd", "tubemq", 2, 4, member_overrides=("nodeId=0",))


def test_a_parameter_belongs_to_the_set_up_or_to_a_step_of_the_trial():
    spec = TrialSpec("zombie", "zookeeper", 2, 4, layout="spread", steps=("pause", "resume"), params={"hold_s": 7.5})
    assert spec.param("hold_s") == 7.5 and spec.param("churn_gap_s") == 0.5  # given, and the churn step's default
    with pytest.raises(LabError, match="for the step\\(s\\) churn, and this trial has none"):
        TrialSpec("herd", "zookeeper", 2, 4, steps=("join", "leave"), params={"churn_gap_s": 0.25})
    with pytest.raises(LabError, match="Unknown trial parameter 'hold_ms'"):
        TrialSpec("zombie", "zookeeper", 2, 4, layout="spread", steps=("pause",), params={"hold_ms": 1})
    with pytest.raises(LabError, match="needs an ensemble"):
        TrialSpec("split_brain", "zookeeper", 2, 4, steps=("churn",), params={"follower_delay_ms": 500})


def test_a_grid_row_carries_every_parameter_and_reads_back_as_the_same_spec():
    spec = TrialSpec("split_brain", "classic", 3, 6, zk_servers=3, layout="spread", steps=("churn",),
                     params={"follower_delay_ms": 1000, "churn_gap_s": 0.25}, member_overrides=("j1:x=y",))
    row = spec.as_row()
    assert (row["follower_delay_ms"], row["churn_gap_s"], row["hold_s"]) == (1000, 0.25, 0.0)
    assert TrialSpec.from_row(row) == spec


def test_a_rolling_restart_restarts_each_of_the_groups_own_consumers_in_turn_and_keeps_the_membership():
    stage = Stage()
    assert run(stage, ["restart"] * 3, ["c1", "c2", "c3"]) == [(["c1", "c2", "c3"], f"c{k}") for k in (1, 2, 3)]
    assert stage.done == ["restart c1", "restart c2", "restart c3"]
    with pytest.raises(StepImpossible, match="restart 4 would restart c4, which is not a member"):
        STEPS["restart"].plan(stage, ["c1", "c2", "c3"])
    # a restart is a leave and a join of one member: the cross-check with ZooKeeper's servers judges it
    assert STEPS["restart"].membership_change and not STEPS["restart"].holds
    assert STEPS["restart"].then_waits == "restart_gap_s"


def test_a_restart_needs_each_consumer_in_its_own_process_and_takes_its_down_time_and_gap():
    with pytest.raises(LabError, match="act on the group's own consumers one at a time"):
        TrialSpec("storm", "zookeeper", 2, 4, steps=("restart", "restart"))
    spec = TrialSpec("storm", "zookeeper", 2, 4, layout="spread", steps=("restart", "restart"),
                     params={"restart_down_s": 0.5})
    assert (spec.param("restart_down_s"), spec.param("restart_gap_s")) == (0.5, 2.0)
    assert TrialSpec.from_row(spec.as_row()) == spec


def test_a_broker_dies_and_comes_back_under_an_unchanged_group():
    stage = Stage()
    seen = run(stage, ["broker_kill", "broker_restart"], ["c1", "c2"])
    assert seen == [(["c1", "c2"], "broker-3"), (["c1", "c2"], "broker-3")]
    assert stage.done == ["kill broker-3", "restart broker-3"]
    assert all(STEPS[s].group_untouched and not STEPS[s].membership_change for s in CLUSTER_STEPS)
    assert STEPS["broker_restart"].hold_param == "return_hold_s"
    with pytest.raises(StepImpossible, match="needs a broker killed or stopped before it"):
        STEPS["broker_restart"].plan(Stage(), ["c1"])
    stage.killed = 2
    for step in ("broker_kill", "broker_stop"):
        with pytest.raises(StepImpossible, match="one broker is down at a time"):
            STEPS[step].plan(stage, ["c1"])


def test_a_coordinator_moves_when_its_broker_shuts_down_and_the_broker_comes_back():
    stage = Stage()
    seen = run(stage, ["broker_stop", "broker_restart"], ["c1", "c2"])
    assert seen == [(["c1", "c2"], "broker-1"), (["c1", "c2"], "broker-1")]
    assert stage.done == ["stop broker-1", "restart broker-1"]
    assert STEPS["broker_stop"].params == {"hold_s": 0.0}


def test_a_zookeeper_server_stops_and_starts_again_under_an_unchanged_group():
    stage = Stage()
    seen = run(stage, ["zk_stop", "zk_start"], ["c1", "c2"])
    assert seen == [(["c1", "c2"], "zk2"), (["c1", "c2"], "zk2")]
    assert stage.done == ["stop zk2", "start zk2"]
    assert STEPS["zk_stop"].hold_param == "zk_down_s" and STEPS["zk_stop"].params["zk_stop_leader"] == 0.0
    with pytest.raises(StepImpossible, match="needs a ZooKeeper server stopped before it"):
        STEPS["zk_start"].plan(Stage(), ["c1"])
    stage.zk_stopped = 3
    with pytest.raises(StepImpossible, match="one is stopped at a time"):
        STEPS["zk_stop"].plan(stage, ["c1"])
