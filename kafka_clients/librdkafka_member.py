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

Before it lets partitions go in a rebalance (`on_revoke`, and in `close()`),
the wrapper commits what it processed, synchronously, when auto-commit is on:
what Java's consumer does itself (`ConsumerCoordinator.onJoinPrepare`:
`maybeAutoCommitOffsetsSync`) and kafka-python too, and what confluent-kafka's
documentation leaves to the application's rebalance callback. librdkafka
would otherwise commit them itself as it unassigns, asynchronously, and its
commit callback would report, after the partitions were revoked, a commit the
coordinator accepted under the old generation: the trace would show a member
committing partitions it no longer owns. librdkafka still commits them as it
unassigns, the very offsets the wrapper has just committed: those repeats move
no committed offset, and the wrapper does not record them; nor an
asynchronous commit whose answer librdkafka hands over after a later commit's:
the coordinator answered it first (`kafka_clients/member.py: LastAccepted`).
Partitions *lost* (`on_lost`: the coordinator no longer knows the member) are
not committed: their generation is gone.
"""

from __future__ import annotations

import sys

from lab_cluster.errors import LabError

from .member import PROCESSING_MS, RealClientMember, State, lab_settings

BROKER_SIDE_UNDER_KIP848 = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def configure(props: dict[str, str], actor: str) -> dict:
    """librdkafka's config: the properties as they are, the actor as its client.id; under KIP-848's protocol
    the settings librdkafka would refuse there (the coordinator's, as broker settings) are a clear error first.

    >>> configure({"group.protocol": "consumer", "session.timeout.ms": "6000"}, "c1")
    Traceback (most recent call last):
    ...
    lab_cluster.errors.LabError: session.timeout.ms: librdkafka refuses it with group.protocol=consumer ...
    """
    props, processing_ms = lab_settings(props)
    if props.get("group.protocol") == "consumer":
        for key in BROKER_SIDE_UNDER_KIP848:
            if key in props:
                raise LabError(f"{key}: librdkafka refuses it with group.protocol=consumer (KIP-848), where the "
                               "coordinator decides it.",
                               "Set the brokers' group.consumer.* settings instead, or drop the setting.")
    return {"client.id": actor, "log_level": 4, **props, PROCESSING_MS: processing_ms}


#: librdkafka's `session.timeout.ms` default (CONFIGURATION.md, since 1.9)
DEFAULT_SESSION_TIMEOUT_MS = 45000


def session_timeout_ms(config: dict) -> int:
    """The member's session timeout: its setting or librdkafka's default; under KIP-848 the coordinator's default
    (a member does not know the brokers' settings).

    >>> session_timeout_ms({"session.timeout.ms": "6000"}), session_timeout_ms({"group.protocol": "consumer"})
    (6000, 45000)
    """
    if config.get("group.protocol") == "consumer":
        from modern_coord.coordinator.coordinator import CoordinatorConfig

        return CoordinatorConfig.group_consumer_session_timeout_ms
    return int(config.get("session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS))


class LibrdkafkaMember(RealClientMember):
    library = "librdkafka"

    def _run(self) -> None:
        import confluent_kafka

        def committed(error, partitions):
            name = None if error is None else error.name()
            # a partition's own error, where the request as a whole succeeded (OffsetCommit answers per partition);
            # librdkafka lists every assigned partition, those it had nothing to commit for with a negative offset
            # (RD_KAFKA_OFFSET_INVALID, -1001): no commit was made for them
            for tp in (tp for tp in partitions or [] if tp.offset >= 0):
                error = name or (tp.error.name() if tp.error is not None else None)
                self._on_commit_answered([(tp.topic, tp.partition, tp.offset)], error)

        consumer = confluent_kafka.Consumer({**self.config, "on_commit": committed})
        cooperative = consumer_protocol_incremental(self.config)

        def on_assign(c, partitions):
            self.member_id = c.memberid() or self.member_id
            if cooperative:
                c.incremental_assign(partitions)
            else:
                c.assign(partitions)
            self._on_assigned([(tp.topic, tp.partition) for tp in c.assignment()], generation_of(c))

        def on_lost(c, partitions):
            self.member_id = c.memberid() or self.member_id
            self._on_revoked([(tp.topic, tp.partition) for tp in partitions])
            if cooperative:
                c.incremental_unassign(partitions)
            else:
                c.unassign()

        def on_revoke(c, partitions):
            if auto_commit:
                self._commit_before_revoking(c, confluent_kafka)
            on_lost(c, partitions)

        auto_commit = str(self.config.get("enable.auto.commit", "true")).lower() == "true"
        kip848 = str(self.config.get("group.protocol", "classic")) == "consumer"
        try:
            consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
            self._set_state(State.REBALANCING)
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is None:
                    if kip848 and self.state is State.REBALANCING:
                        self._assigned_nothing(consumer)
                    continue
                if message.error() is not None:
                    if message.error().fatal() or message.error().code() == confluent_kafka.KafkaError._FATAL:
                        self._fail(message.error().str())
                        return
                    continue  # librdkafka reports transient errors and retries them itself
                self._on_processed(message.topic(), message.partition(), message.offset())
        finally:
            consumer.close()  # commit (if auto-commit), then LeaveGroup unless static


    def _assigned_nothing(self, consumer) -> None:
        """Under KIP-848 librdkafka calls no assign callback when a member's assignment is empty and stays so
        (nothing to reconcile: a newcomer to a group with fewer partitions than members). A member that holds a
        member epoch and owns nothing is then assigned nothing, as the lab's KIP-848 member says it."""
        with self._lock:
            if self._owned:
                return
        epoch = generation_of(consumer)
        if epoch is not None and epoch >= 1:
            self.member_id = consumer.memberid() or self.member_id
            self._on_assigned([], epoch)

    def _commit_before_revoking(self, consumer, confluent_kafka) -> None:
        """A synchronous commit of the positions it processed (confluent-kafka reports a synchronous commit's
        outcome to the caller, not to `on_commit`)."""
        try:
            result = consumer.commit(asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0]
            if error.code() != confluent_kafka.KafkaError._NO_OFFSET:  # _NO_OFFSET: nothing new to commit
                self.trace.record("commit_error", member=self.member_id, error=error.name())
            return
        for tp in (tp for tp in result or [] if tp.offset >= 0):
            error = tp.error.name() if tp.error else None
            self._on_committed([(tp.topic, tp.partition, tp.offset)], error)


def generation_of(consumer) -> int | None:
    """The generation (KIP-848: the member epoch) librdkafka holds, or None.

    confluent-kafka has no accessor for it; the one place it shows is the consumer's group metadata, which
    librdkafka serialises for transactions (`rd_kafka_consumer_group_metadata_write`: the magic `CGMDv2:`, then
    the generation as a 4-byte integer in the machine's byte order, then the group and member ids). The lab
    reads it there; a library whose bytes do not start so gives None (the metrics then have no round for it).

    >>> class Consumer:
    ...     def consumer_group_metadata(self):
    ...         return b"CGMDv2:" + (7).to_bytes(4, sys.byteorder) + b"g\\0m\\0"
    >>> generation_of(Consumer())
    7
    """
    try:
        data = consumer.consumer_group_metadata()
    except Exception:  # noqa: BLE001 - a library without it: no generation, as documented
        return None
    magic = b"CGMDv2:"
    if not isinstance(data, bytes) or not data.startswith(magic) or len(data) < len(magic) + 4:
        return None
    generation = int.from_bytes(data[len(magic):len(magic) + 4], sys.byteorder, signed=True)
    return generation if generation >= 0 else None


def consumer_protocol_incremental(config: dict) -> bool:
    """True where librdkafka's rebalance callbacks are incremental: cooperative-sticky, or KIP-848's protocol."""
    return ("cooperative" in str(config.get("partition.assignment.strategy", ""))
            or str(config.get("group.protocol", "classic")) == "consumer")
