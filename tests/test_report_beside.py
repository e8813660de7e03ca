"""The report's part on the real systems says a difference only where the run's figures show it.

Each sentence of "Where they differ, and why" (`experiments/report/beside.py`) is conditioned on the summary:
these tests give it summaries that show a difference and ones that do not.
"""

import pandas as pd

from experiments.report import beside

REAL = "real-kafka-0.8.2.2"


def _herd(design: str, change: str, n: int, convergence_ms: float, owner_conflicts: int) -> dict:
    return {"experiment": "herd", "design": design, "change": change, "consumers": n, "status": "ok",
            "convergence_ms": convergence_ms, "owner_conflicts": owner_conflicts}


def _storm(design: str, duplicates: int) -> list[dict]:
    return [{"experiment": "storm", "design": design, "change": "restart", "consumers": 4, "status": "ok",
             "trial": f"storm-{design}", "change_index": k, "generations": 2, "members_revoking": 4,
             "partitions_revoked": 12, "rebalance_attempts": 4, "unowned_partition_s": 1.0,
             "double_processed_partition_s": 0.0, "converged": True, "convergence_ms": 500.0,
             "duplicates": duplicates} for k in (1, 2)]


def test_a_conflict_of_the_lab_alone_explains_its_longer_wait():
    ok = pd.DataFrame([_herd("zookeeper", "join", 4, 2500.0, 3), _herd(REAL, "join", 4, 1300.0, 0),
                       _herd("zookeeper", "join", 8, 1000.0, 0), _herd(REAL, "join", 8, 1400.0, 0),
                       _herd("zookeeper", "leave", 8, 600.0, 0), _herd(REAL, "leave", 8, 300.0, 0)])
    conflicted, clean = beside._convergence(ok, REAL)
    assert "join N=4: 2,500 vs 1,300 ms" in conflicted and "`rebalance.backoff.ms`" in conflicted
    assert "(2 of the herd's changes)" in clean and "0.7 to 2.0 times" in clean and "both directions" in clean


def test_no_conflict_no_conflict_sentence():
    ok = pd.DataFrame([_herd("zookeeper", "join", 8, 1000.0, 0), _herd(REAL, "join", 8, 900.0, 0)])
    (clean,) = beside._convergence(ok, REAL)
    assert "owner conflict and" not in clean and "1.1 to 1.1 times" in clean


def test_the_storm_race_is_told_only_where_duplicates_differ():
    differ = pd.DataFrame(_storm("zookeeper", 42) + _storm(REAL, 0))
    (sentence,) = beside._storm_duplicates(differ, REAL)
    assert sentence.startswith("In the storm the lab's consumer processed 42 messages twice, Kafka 0.8.2.2's own 0")
    assert beside._storm_duplicates(pd.DataFrame(_storm("zookeeper", 5) + _storm(REAL, 5)), REAL) == []
    assert beside._storm_duplicates(pd.DataFrame(_storm("zookeeper", 5)), REAL) == []


def _zombie(design: str, duplicates: int) -> dict:
    return {"experiment": "zombie", "variant": "pause", "design": design, "change": "pause", "consumers": 2,
            "status": "ok", "trial": f"zombie-{design}", "double_processed_partition_s": 0.0,
            "double_owned_partition_s": 0.0, "zombie_commits_accepted": 1, "processed_after_loss": 1,
            "duplicates": duplicates, "gaps": 0, "offsets_moved_backwards": 3, "commits_fenced": 0,
            "members_fenced": 0, "requests_fenced": 0, "convergence_ms": 100.0, "first_message_ms": None}


def test_rocketmq_replay_is_told_only_where_the_real_zombie_replays_more():
    real = "real-rocketmq-4.9"
    (sentence,) = beside._rocketmq(pd.DataFrame([_zombie("rocketmq", 2), _zombie(real, 1272)]), real)
    assert "made 1,272 records be processed twice (the lab's 2)" in sentence
    assert beside._rocketmq(pd.DataFrame([_zombie("rocketmq", 2), _zombie(real, 2)]), real) == []
