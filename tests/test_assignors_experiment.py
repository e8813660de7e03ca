"""The assignors experiment: the computed replay's findings (pure, fast) and a real group moving what it computes.

`pytest -m assignors` runs both. The replay tests need no cluster (`pytest --noconftest -m assignors -k "not
real"`); each finding is also shown able to fail, on a replay altered to contradict it. The real test runs the
sequence (join, join, depart, leave, join on 3 consumers, 12 partitions) with range, cooperative-sticky and the
weighted example on the coordinator-era design and asserts that the group moved at every change what the replay
says (range, weighted), or
the fewest its own loads allowed (cooperative-sticky, whose walk follows the random member ids' hash order).
"""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.catalogue import assignors
from experiments.catalogue import assignors_replay as replay
from experiments.engine.finding import by_id

pytestmark = pytest.mark.assignors

#: a summary with one ok trial of the computed scenario (its real finding aside, the findings read the replay)
SUMMARY = pd.DataFrame({"experiment": [assignors.NAME], "design": [assignors.DESIGNS[0]], "status": ["ok"],
                        "consumers": [replay.START], "partitions": [12], "variant": ["range"], "seed": [0],
                        "change_index": [1], "change": ["join"], "members_before": [3], "members_after": [4],
                        "member_partitions": [0], "partitions_moved": [6], "partitions_spread": [0]})


@pytest.fixture(scope="module")
def computed():
    return assignors.compute("standard")


def _checked(computed, summary=SUMMARY):
    return by_id(assignors.findings(summary, computed))


def test_the_sequence_is_the_trials_steps():
    assert [c for c, _ in replay.memberships()] == ["start", "join j1", "join j2", "depart c1", "leave j2",
                                                    "join j3"]
    assert [len(m) for _, m in replay.memberships()] == [3, 4, 5, 4, 3, 4]
    # Kafka's member order (by `client.id-UUID`) is join order
    ids = [replay.member_id(n) for n in ("c1", "c2", "c3", "j1", "j2")]
    assert sorted(ids) == ids


def test_every_strategy_of_the_registries_is_replayed(computed):
    from lab_cluster.assignment import ASSIGNORS
    from lab_cluster.assignment.rocketmq import STRATEGIES

    names = set(computed["changes"].strategy)
    assert set(ASSIGNORS) | set(STRATEGIES) | {"legacy-range", "legacy-roundrobin", "tubemq-modulo",
                                               "tubemq-master", "weighted"} == names
    # 2 scenarios x 6 steps per strategy, and who holds what after each
    assert len(computed["changes"]) == 2 * 6 * len(names)
    assert set(computed["assignments"].strategy) == names


def test_the_computed_findings_hold(computed):
    checked = _checked(computed)
    for finding in ("classic-sticky-moves-fewest", "classic-cooperative-withholds-handed-over",
                    "classic-range-skews-topics", "all-own-shares-move-more", "classic-weighted-keeps-shares"):
        assert checked[finding].holds, checked[finding]


def test_cooperative_sticky_withholds_what_changes_hands_and_gives_it_out_next_round(computed):
    c = computed["changes"]
    c = c[c.scenario == assignors.TRIAL_SCENARIO]
    coop = c[(c.strategy == "cooperative-sticky") & (c.step > 0)].set_index("change")
    # a join takes partitions from staying members: withheld, then a second round
    assert coop.loc["join j1", "withheld"] == coop.loc["join j1", "handed_over"] == 3
    assert coop.loc["join j1", "rounds"] == 2
    # a departure's partitions have no owner left: given at once, one round, nothing revoked
    assert coop.loc["depart c1", "withheld"] == coop.loc["depart c1", "revoked"] == 0
    assert coop.loc["depart c1", "rounds"] == 1 and coop.loc["depart c1", "moved"] == 3
    assert (coop.taken_while_owned == 0).all()
    # the same moves as eager sticky, whose members revoke everything at every change
    sticky = c[(c.strategy == "sticky") & (c.step > 0)].set_index("change")
    assert (sticky.moved == coop.moved).all() and (sticky.revoked >= 9).all()


def test_the_weighted_example_gives_the_heavy_member_its_three_shares(computed):
    """`c2` weighs 3, the others 1 (`WEIGHTS`): of 12 partitions it holds 12 * 3 / (members + 2), within one."""
    a = computed["assignments"]
    heavy = a[(a.strategy == "weighted") & (a.member == "c2")]
    members = [len(m) for _, m in replay.memberships()]
    for row in heavy.itertuples():
        share = 12 * 3 / (members[row.step] + 2)
        assert abs(len(row.partitions.split()) - share) < 1, (row, share)
    # the same bytes as the real members send (their user data), so the same split in a trial
    assert set(a[a.strategy == "weighted"].weight) == {1, 3}


def test_the_fewest_with_weights_keeps_each_member_within_one_of_its_share():
    # shares 2, 6, 2, 2 (whole): the joiner needs 2, c1 and c2 each give one
    assert replay.fewest_moves([3, 7, 2, 0], 12, [1, 3, 1, 1]) == 2
    # shares 2.4, 7.2, 2.4: floors 2, 7, 2 and one left over, kept by a member holding more than its floor
    assert replay.fewest_moves([3, 7, 2], 12, [1, 3, 1]) == 0
    assert replay.fewest_moves([4, 4, 4], 12, [1, 3, 1]) == 3


@pytest.mark.parametrize("finding, alter", [
    ("classic-sticky-moves-fewest", lambda c: c.assign(moved=c.moved.where(c.strategy != "sticky", c.moved + 1))),
    ("classic-cooperative-withholds-handed-over",
     lambda c: c.assign(withheld=c.withheld.where(c.strategy != "cooperative-sticky", 0))),
    ("classic-range-skews-topics", lambda c: c.assign(spread=c.spread.where(c.strategy != "range", 0))),
    ("all-own-shares-move-more", lambda c: c.assign(moved=c.moved.where(c.side == "leader", 0))),
    ("classic-weighted-keeps-shares", lambda c: c.assign(off_share=c.off_share.where(c.strategy != "weighted", 1))),
    ("classic-weighted-keeps-shares", lambda c: c.assign(moved=c.moved.where(c.strategy != "weighted", c.fewest))),
])
def test_each_computed_finding_can_fail(computed, finding, alter):
    altered = {**computed, "changes": alter(computed["changes"].copy())}
    assert not _checked(altered)[finding].holds


def test_a_run_without_the_replay_holds_nothing():
    checked = assignors.findings(SUMMARY, {})
    assert [f.holds for f in checked] == [False]


def test_the_fewest_a_real_change_can_move_follows_the_leavers_load():
    # 12 over 5 members is 3, 3, 2, 2, 2: a departing member that held 3 frees 3 to move, one that held 2 frees 2
    assert assignors.fewest_for(12, 5, 4, 3) == 3
    assert assignors.fewest_for(12, 5, 4, 2) == 2
    assert assignors.fewest_for(12, 5, 4, 7) is None  # not a load of an even split
    assert assignors.fewest_for(12, 3, 4, None) == 3  # a join


def test_the_real_finding_fails_when_a_trial_moved_otherwise(computed):
    assert _checked(computed)["classic-real-moves-as-computed"].holds  # range moved 6 at `join j1`, as computed
    wrong = SUMMARY.assign(partitions_moved=[3])
    assert not _checked(computed, wrong)["classic-real-moves-as-computed"].holds


@pytest.mark.long
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_real_group_moves_what_the_replay_computes(spark, tmp_path, computed):
    from conftest import run_experiment, vocabulary_problems

    specs = assignors.grid("standard", assignors=("range", "cooperative-sticky", "weighted"))
    run_dir, specs, summary = run_experiment(spark, tmp_path, specs)
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    both = assignors.real_vs_computed(summary, computed["changes"])
    assert len(both) == 3 * len(replay.SEQUENCE), both
    # range and the weighted example: what the replay computes (the member order decides it, and c2's weight
    # crossed the wire); cooperative-sticky: the fewest its own loads allowed, and never a partition with two
    # owners at once (it withholds what another member still holds)
    ranged = both[both.strategy.isin(["range", "weighted"])]
    sticky = both[both.strategy == "cooperative-sticky"]
    cooperative = summary[summary.variant == "cooperative-sticky"]
    assert (cooperative.double_owned_partition_s == 0).all(), cooperative.to_string()
    assert (ranged.partitions_moved == ranged.moved).all(), both.to_string()
    assert (sticky.partitions_moved == sticky.real_fewest).all(), both.to_string()
    assert (both.partitions_spread == both.spread).all(), both.to_string()
    assert by_id(assignors.findings(summary, computed))["classic-real-moves-as-computed"].holds
    assert vocabulary_problems(run_dir) == {}
