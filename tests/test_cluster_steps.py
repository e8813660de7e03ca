"""The steps that take part of the cluster away under a stable group and bring it back, each in a real trial.

- `crash`: the victim is SIGKILLed and stays dead; the others take its share.

The rolling bounce of the brokers (`broker_stop`, `broker_restart`), in which
the group's coordinator moves, is the conformance experiment's smoke trial, and
an ensemble's leader stopped and started is the short soak's
(`test_each_experiment.py`).
- `zk_stop` and `zk_start` of a single ZooKeeper server, down for less than
  the sessions' timeout: every client's link breaks, the sessions live on in
  the server's data, so the ZooKeeper era's registrations stay and nobody
  rebalances.
"""

from __future__ import annotations

from conftest import trace_events

from experiments.engine.trial import TrialSpec, run_trial


def _trial(tmp_path, design: str, steps: tuple[str, ...], **kwargs):
    spec = TrialSpec("cluster-steps", design, consumers=2, partitions=4, steps=steps, converge_limit_s=60, **kwargs)
    result = run_trial(spec, tmp_path / "trial")
    assert result.status == "ok", result.reason
    return tmp_path / "trial"


def _faults(trial_dir) -> list[dict]:
    return [e["f"] for e in trace_events(trial_dir, "scenario", "fault")]


def test_a_single_zookeeper_server_stopped_briefly_keeps_every_session_then_a_crash_moves_its_share(tmp_path):
    trial_dir = _trial(tmp_path, "zookeeper", ("zk_stop", "zk_start", "crash"), layout="spread",
                       params={"zk_down_s": 2.0, "hold_s": 1.0})
    assert [f["action"] for f in _faults(trial_dir)] == ["zk_stop", "zk_start", "kill"]
    changes = {c["f"]["change"]: c["ts_ns"] for c in trace_events(trial_dir, "scenario", "change")}
    for member in ("c1", "c2"):  # the server's stop and start: nobody rebalances, no session expires
        between = [e for kind in ("rebalance_begin", "session_expired") for e in trace_events(trial_dir, member, kind)
                   if changes["zk_stop"] < e["ts_ns"] < changes["crash"]]
        assert not between, between
    # the crash: c1 is killed (no clean shutdown, its session expires on the server) and c2 takes its share
    kill = next(e for e in trace_events(trial_dir, "scenario", "fault") if e["f"]["action"] == "kill")
    assert kill["member"] == "c1"  # a column of the trace, not one of the event's fields
    assert trace_events(trial_dir, "scenario", "converged")[-1]["f"]["members"] == ["c2"]
    assert not trace_events(trial_dir, "c1", "consumer_stop")
