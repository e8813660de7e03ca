"""The real systems' Kafka-protocol producer (`real_systems/kafka_producer.py`) follows a topic's growth: it starts
with the partitions it is given and writes to those its metadata adds, each numbered from 0, on a fake client (no
broker); and the real designs that keep no topic in ZooKeeper can grow one (`RealBrokers.add_partitions`)."""

from __future__ import annotations

import pytest
from kafka.errors import KafkaTimeoutError

from real_systems.kafka_producer import RealProducer


class FakeFuture:
    def add_callback(self, *_):
        return self

    def add_errback(self, *_):
        return self


class FakeClient:
    """What `RealProducer` uses of kafka-python's `KafkaProducer`: the partitions its metadata knows, and sends."""

    def __init__(self, known: set[int] | None):
        self.known = known
        self.sent: list[tuple[int, str]] = []

    def partitions_for(self, topic: str):
        if self.known is None:
            raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
        return self.known

    def send(self, topic: str, value: bytes, partition: int):
        self.sent.append((partition, value.decode()))
        return FakeFuture()


def producer(client: FakeClient, partitions: int = 2) -> RealProducer:
    return RealProducer("127.0.0.1:1", "t", partitions, 1.0, trace=None, client=client)


def test_it_starts_with_the_partitions_it_is_given():
    client = FakeClient({0, 1})
    p = producer(client)
    p.send_batch(1)
    assert client.sent == [(0, "t/0/0"), (1, "t/1/0")]


def test_it_writes_to_the_partitions_a_growth_adds_numbered_from_zero():
    client = FakeClient({0, 1})
    p = producer(client)
    p.send_batch(1)
    client.known = {0, 1, 2, 3}
    assert p.refresh_partitions() == 4
    client.sent.clear()
    p.send_batch(2)
    assert client.sent == [(0, "t/0/1"), (0, "t/0/2"), (1, "t/1/1"), (1, "t/1/2"),
                           (2, "t/2/0"), (2, "t/2/1"), (3, "t/3/0"), (3, "t/3/1")]


@pytest.mark.parametrize("known", [set(), {0}, None])
def test_metadata_that_names_fewer_or_cannot_be_read_changes_nothing(known, capsys):
    client = FakeClient(known)
    p = producer(client, partitions=3)
    assert p.refresh_partitions() == 3
    p.send_batch(1)
    assert [partition for partition, _ in client.sent] == [0, 1, 2]
    if known is None:
        assert "could not be read" in capsys.readouterr().err


def test_the_designs_without_a_topic_in_zookeeper_can_grow_one():
    from real_systems import kafka4, rocketmq49

    for family in (kafka4.FAMILY, rocketmq49.FAMILY):
        assert family.brokers.create_topic is not None and family.brokers.add_partitions is not None, family.name
