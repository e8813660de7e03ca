"""The soak's nemesis without a cluster: a fault sequence is a function of its seed, each fault comes with its
repair, and each design draws only the faults the runner can inflict on it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.catalogue import soak
from experiments.engine.steps import STEPS
from experiments.engine.trial import TrialSpec

REPAIRS = {"pause": "resume", "cut": "heal", "join": "leave", "broker_kill": "broker_restart",
           "broker_stop": "broker_restart", "zk_stop": "zk_start"}


@settings(deadline=None)  # a test asserts no time
@given(st.integers(0, 10_000), st.integers(1, 40), st.sampled_from(soak.DESIGNS))
def test_a_sequence_is_its_seeds_and_every_fault_is_followed_by_its_repair(seed, length, design):
    steps = soak.nemesis(seed, length, design, consumers=3)
    assert steps == soak.nemesis(seed, length, design, consumers=3)
    assert steps.count("restart") <= 3  # each of c1..c3 at most once
    i, faults = 0, 0
    while i < len(steps):
        repair = REPAIRS.get(steps[i])
        if repair is not None:
            assert steps[i + 1] == repair, steps
            i += 2
        else:
            assert steps[i] == "restart", steps
            i += 1
        faults += 1
    assert faults == length
    assert set(steps) <= {s for f in soak.menu(design) for s in soak.FAULTS[f]}


def test_each_design_draws_what_the_runner_can_do_to_it():
    assert "cut" not in soak.menu("classic")  # its link is to the coordinator, which moves
    assert {"cut", "broker", "bounce", "zookeeper"} <= set(soak.menu("zookeeper"))
    assert set(soak.FAULTS) == {"pause", "cut", "restart", "churn", "broker", "bounce", "zookeeper"}
    assert {s for steps in soak.FAULTS.values() for s in steps} <= set(STEPS)


@pytest.mark.parametrize("design", soak.DESIGNS)
def test_every_trial_of_the_grid_is_a_valid_spec_replayed_from_its_seed(design):
    for spec in soak.grid("full", designs=(design,)):
        assert TrialSpec.from_row(spec.as_row()) == spec
        assert spec.steps == soak.nemesis(spec.seed, 30, design, spec.consumers)
        assert spec.zk_servers == 3 and spec.param("follower_delay_ms") > 0
