"""librdkafka's consumer (confluent-kafka's `Consumer`) as a lab group member.

Config: librdkafka takes the Java client's names for what the lab sets
(`session.timeout.ms`, `heartbeat.interval.ms`, `max.poll.interval.ms`,
`auto.offset.reset`, `partition.assignment.strategy`, `group.instance.id`,
`group.protocol`), so the properties pass as they are; librdkafka itself
refuses one it does not know when the member starts (the member then fails and
says why). Its log goes to the member's host's stderr at warnings and above.

Under `cooperative-sticky`, librdkafka's `on_assign` and `on_revoke` carry only
the partitions that move (KIP-429's incremental callbacks), and the
application must call `incremental_assign`/`incremental_unassign`; under eager
assignors, `assign`/`unassign` with the whole assignment. The wrapper does
what the library's documentation asks of an application in each case.
"""

from __future__ import annotations

from lab_cluster.errors import LabError

from .member import RealClientMember, State

BROKER_SIDE_UNDER_KIP848 = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def configure(props: dict[str, str], actor: str) -> dict:
    """librdkafka's config: the properties as they are, the actor as its client.id; under KIP-848's protocol
    the settings librdkafka would refuse there (the coordinator's, as broker settings) are a clear error first.

    >>> configure({"group.protocol": "consumer", "session.timeout.ms": "6000"}, "c1")
    Traceback (most recent call last):
    ...
    lab_cluster.errors.LabError: session.timeout.ms: librdkafka refuses it with group.protocol=consumer ...
    """
    if props.get("group.protocol") == "consumer":
        for key in BROKER_SIDE_UNDER_KIP848:
            if key in props:
                raise LabError(f"{key}: librdkafka refuses it with group.protocol=consumer (KIP-848), where the "
                               "coordinator decides it.",
                               "Set the brokers' group.consumer.* settings instead, or drop the setting.")
    return {"client.id": actor, "log_level": 4, **props}


class LibrdkafkaMember(RealClientMember):
    library = "librdkafka"

    def _run(self) -> None:
        import confluent_kafka

        def committed(error, partitions):
            name = None if error is None else error.name()
            self._on_committed([(tp.topic, tp.partition, tp.offset) for tp in partitions or []], name)

        consumer = confluent_kafka.Consumer({**self.config, "on_commit": committed})
        cooperative = consumer_protocol_incremental(self.config)

        def on_assign(c, partitions):
            self.member_id = c.memberid() or self.member_id
            if cooperative:
                c.incremental_assign(partitions)
            else:
                c.assign(partitions)
            self._on_assigned([(tp.topic, tp.partition) for tp in c.assignment()])

        def on_revoke(c, partitions):
            self.member_id = c.memberid() or self.member_id
            self._on_revoked([(tp.topic, tp.partition) for tp in partitions])
            if cooperative:
                c.incremental_unassign(partitions)
            else:
                c.unassign()

        try:
            consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
            self._set_state(State.REBALANCING)
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().fatal() or message.error().code() == confluent_kafka.KafkaError._FATAL:
                        self._fail(message.error().str())
                        return
                    continue  # librdkafka reports transient errors and retries them itself
                self._on_processed(message.topic(), message.partition(), message.offset())
        finally:
            consumer.close()  # commit (if auto-commit), then LeaveGroup unless static


def consumer_protocol_incremental(config: dict) -> bool:
    """True where librdkafka's rebalance callbacks are incremental: cooperative-sticky, or KIP-848's protocol."""
    return ("cooperative" in str(config.get("partition.assignment.strategy", ""))
            or str(config.get("group.protocol", "classic")) == "consumer")
