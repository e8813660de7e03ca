"""The storm experiment end to end: a rolling restart of a group of three, in the designs whose contrast is the finding.

`pytest -m storm` restarts c1, c2 and c3 in turn (each stopped gracefully,
started again a second later under the same name and config) in the ZooKeeper
era, the coordinator era's eager protocol, static membership and cooperative
rebalancing, and asserts the finding: with static membership no live member
revokes anything and no rebalance round begins (Kafka's
`test_static_consumer_bounce`); in the eager designs every restart makes every
other member revoke, in more rounds than static; with cooperative rebalancing
the live members revoke only the partitions that move, in more rounds than eager.
"""

from __future__ import annotations

import pytest
from conftest import run_experiment, vocabulary_problems

from experiments.catalogue import storm
from experiments.engine.finding import by_id

pytestmark = [pytest.mark.storm, pytest.mark.long, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

DESIGNS = ("zookeeper", "classic", "classic-static", "classic-coop", "consumer-848", "kafka-python", "librdkafka")


@pytest.fixture(scope="module")
def storm_run(spark, tmp_path_factory):
    specs = storm.grid("standard", designs=DESIGNS, consumers=[3], partitions=6)
    return run_experiment(spark, tmp_path_factory.mktemp("storm-run"), specs)


def test_a_rolling_restart_converges_in_every_design_and_each_restart_is_a_window(storm_run):
    _, specs, summary = storm_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert set(summary.design) == set(DESIGNS)
    restarts = storm.per_restart(summary)
    assert len(restarts) == 3 * len(specs) and restarts.converged.all()
    # the restarted member's own partitions are idle while it is down, in every design
    assert (restarts.unowned_partition_s > 0).all(), restarts[["design", "restarted", "unowned_partition_s"]]


def test_static_members_bounce_without_a_rebalance_and_eager_ones_stop_the_group(storm_run):
    _, _, summary = storm_run
    checked = by_id(storm.findings(summary))
    for finding in ("classic-static-bounce-no-rebalance", "zookeeper-restart-stops-everyone",
                    "classic-restart-stops-everyone", "zookeeper-more-rounds-than-static",
                    "classic-more-rounds-than-static", "classic-coop-revokes-only-moving", "classic-coop-more-rounds",
                    "consumer-848-revokes-only-moving",
                    # the real clients, eager (range) on the same coordinator: a group-wide stop per restart
                    "kafka-python-restart-stops-everyone", "librdkafka-restart-stops-everyone",
                    "kafka-python-more-rounds-than-static", "librdkafka-more-rounds-than-static",
                    "all-stable-after-storm"):
        assert checked[finding].holds, checked[finding]


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(storm_run):
    assert vocabulary_problems(storm_run[0]) == {}
