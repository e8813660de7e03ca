"""The conformance experiment end to end: Kafka's consumer checks on the designs whose verdicts the findings state.

`pytest -m conformance` runs the bounce and failure trials of the ZooKeeper
era, the coordinator era's eager, static and static-cooperative designs and
KIP-848, and asserts the findings: the static designs pass Kafka's
`test_static_consumer_bounce`, every coordinator-era design its
`test_broker_rolling_bounce`, and every check that applies got a verdict.
"""

from __future__ import annotations

import pytest
from conftest import run_experiment, vocabulary_problems

from experiments.catalogue import conformance
from experiments.engine.finding import by_id

pytestmark = [pytest.mark.conformance, pytest.mark.long, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.timeout(1800)]

DESIGNS = ("zookeeper", "classic", "classic-static", "classic-static-coop", "consumer-848")


@pytest.fixture(scope="module")
def conformance_run(spark, tmp_path_factory):
    specs = conformance.grid("standard", designs=DESIGNS)
    return run_experiment(spark, tmp_path_factory.mktemp("conformance-run"), specs, trials_per_machine=2)


def test_every_trial_ends_ok_and_every_check_that_applies_has_a_verdict(conformance_run):
    _, specs, summary = conformance_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    verdicts = conformance.verdicts(summary)
    assert len(verdicts) == len(DESIGNS) * len(conformance.CHECKS)
    unjudged = verdicts[verdicts.holds.isna()]
    assert set(unjudged.check) == {"static-bounce-no-revocation"}  # the designs that are not static
    assert set(unjudged.design) == set(DESIGNS) - set(conformance.STATIC)


def test_the_findings_hold(conformance_run):
    _, _, summary = conformance_run
    checked = by_id(conformance.findings(summary))
    for finding in ("all-checks-judged", "classic-static-passes-static-bounce",
                    "classic-static-coop-passes-static-bounce", "all-coordinator-era-pass-broker-bounce"):
        assert checked[finding].holds, checked[finding]


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(conformance_run):
    assert vocabulary_problems(conformance_run[0]) == {}
