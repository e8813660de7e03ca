"""The growth experiment end to end: a topic grown under a stable group, for every design.

`pytest -m growth` runs every design once (one seed) and asserts what a single
seed can: every design's group came to own and process every new partition, and
each design learnt of them its own way (`partitions_seen`, where the lab traces
it), and the experiment's findings on that run. The default run has one trial of
it in `test_each_experiment.py`; each design's way of learning is tested against
a real cluster in its own package's tests (`test_legacy_growth.py`,
`test_modern_partitions_grow.py`, `test_rocketmq_consumer.py`, `test_tubemq_growth.py`).
"""

from __future__ import annotations

import pytest
from conftest import run_experiment, vocabulary_problems

from experiments.catalogue import growth
from experiments.engine.finding import by_id

pytestmark = [pytest.mark.growth, pytest.mark.long, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def growth_run(spark, tmp_path_factory):
    return run_experiment(spark, tmp_path_factory.mktemp("growth-run"), growth.grid("standard", seeds=1),
                          trials_per_machine=3)


def test_every_design_owned_and_processed_every_new_partition(growth_run):
    _, specs, summary = growth_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    grows = summary[summary.change == "grow"]
    assert len(grows) == len(specs) and set(grows.design) == set(growth.DESIGNS)
    assert grows.converged.all() and grows.new_processing_ms.notna().all(), grows[["design", "new_processing_ms"]]
    # the real clients are not traced inside: the lab knows when they owned a new partition, not when they learnt
    traced = grows[~grows.design.isin(["kafka-python", "librdkafka"]) & ~grows.design.str.startswith("real-")]
    assert traced.learnt_ms.notna().all(), traced[["design", "learnt_ms"]]
    assert (grows.first_new_owned_ms <= grows.new_processing_ms).all()
    checked = by_id(growth.findings(summary))
    assert not [f for f in checked.values() if not f.holds], [f for f in checked.values() if not f.holds]


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(growth_run):
    assert vocabulary_problems(growth_run[0]) == {}
