"""Every consumer family the lab runs: the one place a family is registered (`lab_cluster/family.py`).

Adding a family: its package (exporting a `FAMILY`), and one line here. A
variant of a family (the coordinator era's static and cooperative designs,
`modern_coord/variants.py`) is a `Family` of its own, exported under another
name: its `package` says `module:ATTRIBUTE`. The real Kafka clients (`kafka_clients/`) are families too: the
libraries themselves, unchanged, on the brokers' Kafka listeners; and so are the real systems
(`real_systems/`): their own consumers and brokers, from their published jars.
"""

from __future__ import annotations

import kafka_clients
import legacy_zk
import modern_coord
import modern_coord.variants
import real_systems.kafka08
import real_systems.kafka3
import real_systems.kafka4
import real_systems.rocketmq49
import rocketmq_client
import tubemq_client
import tubemq_client.server_balance
from lab_cluster.family import Family

FAMILIES: dict[str, Family] = {f.name: f for f in (
    legacy_zk.FAMILY,
    modern_coord.FAMILY,
    *modern_coord.variants.VARIANTS,
    rocketmq_client.FAMILY,
    tubemq_client.FAMILY,
    tubemq_client.server_balance.FAMILY,
    *kafka_clients.FAMILIES,
    real_systems.kafka08.FAMILY,
    real_systems.kafka3.FAMILY,
    real_systems.kafka4.FAMILY,
    real_systems.rocketmq49.FAMILY,
)}

#: each lab design's real counterparts (`Family.counterpart`): {lab design: (real designs beside it, ...)}
REFERENCES: dict[str, tuple[str, ...]] = {
    lab: tuple(name for name, f in FAMILIES.items() if f.counterpart == lab)
    for lab in dict.fromkeys(f.counterpart for f in FAMILIES.values() if f.counterpart)}


def with_references(designs: tuple[str, ...]) -> tuple[str, ...]:
    """`designs`, then the real designs whose counterpart is among them: an experiment's designs, the real
    systems included wherever their lab counterpart runs.

    >>> with_references(("zookeeper", "rocketmq"))
    ('zookeeper', 'rocketmq', 'real-kafka-0.8.2.2', 'real-rocketmq-4.9')
    """
    return (*designs, *(r for d in designs for r in REFERENCES.get(d, ())))


def settings_of(design: str) -> str:
    """The design whose settings (overrides, limits) an experiment gives `design`: its counterpart's for a real
    system, its own for a lab design.

    >>> settings_of("real-kafka-3.9"), settings_of("classic")
    ('kafka-python', 'classic')
    """
    return FAMILIES[design].counterpart or design


def real_designs(designs: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `designs` that are real systems (`Family.counterpart` set)."""
    return tuple(d for d in designs if FAMILIES[d].counterpart)


#: the designs' names before they took Kafka's own (its documentation speaks of *classic* groups and of the
#: *consumer* group protocol, KIP-848): {old name: today's}. Runs stored before keep the old names in their files;
#: whatever reads a stored run reads them as today's (`current_name`), and the CLI takes either
RENAMED: dict[str, str] = {"legacy": "zookeeper", "modern": "classic", "modern-static": "classic-static",
                           "modern-coop": "classic-coop", "modern-static-coop": "classic-static-coop",
                           "modern-kip848": "consumer-848"}


def current_name(design: str) -> str:
    """A design's name today, given its name in a stored run or on the command line.

    >>> current_name("modern-kip848"), current_name("classic"), current_name("rocketmq")
    ('consumer-848', 'classic', 'rocketmq')
    """
    return RENAMED.get(design, design)


#: the real Kafka clients' designs (`kafka_clients/`): the libraries unchanged, on the brokers' Kafka listeners
REAL_CLIENTS: tuple[str, ...] = tuple(f.name for f in kafka_clients.FAMILIES)

#: what every broker hosts besides the ZooKeeper-era broker: each family's plug-in (the coordinator era's
#: group coordinator, as every Kafka 0.9+ broker hosts one whoever its clients are), each once (both TubeMQ
#: designs use one plug-in: its broker side and its master)
BROKER_PLUGINS: tuple[str, ...] = tuple(dict.fromkeys(f.broker_plugin for f in FAMILIES.values() if f.broker_plugin))
