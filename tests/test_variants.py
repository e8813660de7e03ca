"""The coordinator era's variants as families of their own (`modern_coord/variants.py`): what each adds to a member's
config, how the consumer host loads one, and that the registry and the runner see them as designs."""

from __future__ import annotations

import json

import pytest

from experiments.engine.families import FAMILIES
from experiments.engine.group_watch import GroupWatch
from experiments.engine.trial import TrialSpec
from lab_cluster.consumer_host import load_family
from lab_cluster.errors import LabError
from modern_coord import FAMILY as MODERN
from modern_coord.variants import COOP, KIP848, KIP848_BROKER_CONFIG, STATIC, STATIC_COOP, VARIANTS

PROPS = {"group.id": "g", "bootstrap.servers": "127.0.0.1:9092"}


def test_static_gives_each_member_its_actor_name_as_group_instance_id():
    config = STATIC.configure(PROPS, "c3")
    assert config.group_instance_id == "c3" and config.is_static and config.strategies == ["range"]
    assert MODERN.configure(PROPS, "c3").group_instance_id is None  # the classic family stays dynamic


def test_cooperative_variants_use_cooperative_sticky_and_both_combine():
    assert COOP.configure(PROPS, "c1").strategies == ["cooperative-sticky"]
    assert not COOP.configure(PROPS, "c1").is_static
    both = STATIC_COOP.configure(PROPS, "c2")
    assert (both.group_instance_id, both.strategies) == ("c2", ["cooperative-sticky"])


def test_a_given_setting_wins_over_the_variants_default():
    assert STATIC.configure({**PROPS, "group.instance.id": "web-1"}, "c3").group_instance_id == "web-1"
    assert COOP.configure({**PROPS, "partition.assignment.strategy": "range"}, "c1").strategies == ["range"]
    with pytest.raises(LabError, match="group.instance.id"):  # the classic family's validation still applies
        STATIC.configure({**PROPS, "group.instance.id": "a b"}, "c1")


def test_the_host_loads_a_variant_by_module_and_attribute_and_refuses_what_is_not_a_family():
    for variant in VARIANTS:
        assert load_family(variant.package) is variant
        assert FAMILIES[variant.name] is variant
    assert load_family("modern_coord") is MODERN
    with pytest.raises(LabError, match="no consumer family of that name"):
        load_family("modern_coord.variants:NOPE")
    with pytest.raises(LabError, match="no consumer family of that name"):
        load_family("no_such_package")
    with pytest.raises(LabError, match="not a consumer family"):
        load_family("modern_coord.variants:STATIC_PROPS")


def test_a_static_group_converges_on_its_fixpoint_without_a_line_from_every_member():
    """A static member restarted within its session timeout causes no rebalance: the others print nothing new, and
    the runner accepts their old lines once the restarted member is back, every partition held once."""
    watch = GroupWatch(STATIC.name, partitions=4)
    for actor, partitions in (("c1", [0, 1]), ("c2", [2, 3])):
        watch.update(f'{{"actor": "{actor}", "state": "stable", "gave_up": false, "generation": 1, '
                     f'"partitions": {partitions}}}')
    watch.forget("c1")  # the runner stopped it
    assert watch.problem(["c1", "c2"], since_ns=0) == "no rebalance seen yet from c1"
    watch.update('{"actor": "c1", "state": "stable", "gave_up": false, "generation": 1, "partitions": [0, 1]}')
    assert watch.problem(["c1", "c2"], since_ns=10**30) is None  # c2's line is older than any change: fine
    eager = GroupWatch(MODERN.name, partitions=4)
    eager.update('{"actor": "c2", "state": "stable", "gave_up": false, "generation": 1, "partitions": [2, 3]}')
    assert eager.problem(["c2"], since_ns=10**30) == "no rebalance seen yet from c2"


def test_kip848_speaks_the_consumer_protocol_and_the_family_builds_its_consumer(tmp_path):
    from lab_cluster.trace import TraceRecorder
    from modern_coord import Kip848Consumer, ModernConsumer

    config = KIP848.configure(PROPS, "c1")
    assert config.uses_consumer_protocol and config.group_remote_assignor is None and not config.is_static
    assert KIP848.configure({**PROPS, "group.remote.assignor": "range"}, "c1").group_remote_assignor == "range"
    with pytest.raises(LabError, match="group.remote.assignor cannot be set when group.protocol=classic"):
        MODERN.configure({**PROPS, "group.remote.assignor": "range"}, "c1")
    trace = TraceRecorder(tmp_path, trial="t", design=KIP848.name, actor="c1")
    try:
        assert type(KIP848.build(config, ["t"], trace, "c1", None)) is Kip848Consumer  # built, not started
        assert type(MODERN.build(MODERN.configure(PROPS, "c1"), ["t"], trace, "c1", None)) is ModernConsumer
    finally:
        trace.close()
    # its trials' brokers run with Kafka's KIP-848 defaults unless an experiment sets them (broker_overrides)
    assert KIP848.broker_config == KIP848_BROKER_CONFIG == {} and MODERN.broker_config == {}
    spec = TrialSpec("zombie", KIP848.name, 3, 6, broker_overrides=("group.consumer.session.timeout.ms=6000",))
    assert TrialSpec.from_row(json.loads(json.dumps(spec.as_row()))) == spec


def test_a_kip848_group_converges_on_one_epoch_and_even_loads():
    watch = GroupWatch(KIP848.name, partitions=4)
    watch.update('{"actor": "c1", "state": "stable", "gave_up": false, "generation": 3, "partitions": [0, 1, 2]}')
    watch.update('{"actor": "c2", "state": "stable", "gave_up": false, "generation": 3, "partitions": [3]}')
    assert watch.problem(["c1", "c2"], since_ns=10**30).startswith("the loads are not even")
    watch.update('{"actor": "c1", "state": "reconciling", "gave_up": false, "generation": 4, "partitions": [0, 1]}')
    assert watch.problem(["c1", "c2"], since_ns=10**30) == "c1 is reconciling"
    watch.update('{"actor": "c1", "state": "stable", "gave_up": false, "generation": 4, "partitions": [0, 1]}')
    watch.update('{"actor": "c2", "state": "stable", "gave_up": false, "generation": 4, "partitions": [2, 3]}')
    assert watch.problem(["c1", "c2"], since_ns=10**30) is None
