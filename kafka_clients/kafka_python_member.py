"""kafka-python's `KafkaConsumer` (3.x) as a lab group member.

Config: the lab's (Java) names become kafka-python's keyword arguments
(`session.timeout.ms` -> `session_timeout_ms`), with the type of kafka-python's
own default; `partition.assignment.strategy` names kafka-python's assignor
classes. A key kafka-python does not know is a clear error before anything
starts.

The member polls every 100 ms. kafka-python 3.0.12 then sometimes runs a
rebalance round more than it needs: a join that completes between two polls
is thrown away and a new JoinGroup sent (its `join_group_async`), and the
leader's new JoinGroup starts a round; `experiments/catalogue/herd.py`
(`_like_the_labs_consumer`) has what a trace showed of it.

A leader that rejoins because its metadata changed (a topic grew: the growth
experiment) can hang in kafka-python 3.0.12, found there and read in its code,
not yet reproduced on purpose: nothing sets `rejoin_needed` for that rejoin
(Java's client does, KAFKA-9815); `need_rejoin()` is true only while the
leader's `_assignment_snapshot` differs from its `_metadata_snapshot`, and its
own `_perform_assignment` makes them equal. When the 100 ms poll's wait for the
JoinGroup-SyncGroup task runs out between the two answers, the next poll sees
`need_rejoin()` false and never reads the finished task: the member stays
REBALANCING, its heartbeat off, its share unowned, until the coordinator
expires it (seen in 2 of about 7 growth trials on the lab's brokers; none yet on
Kafka 3.9's own, where the same code runs). The lab leaves the library as it is.

    >>> config = configure({"bootstrap.servers": "127.0.0.1:9093", "group.id": "g", "session.timeout.ms": "6000",
    ...                     "partition.assignment.strategy": "cooperative-sticky"}, "c1")
    >>> config["session_timeout_ms"], config["client_id"], [a.name for a in config["partition_assignment_strategy"]]
    (6000, 'c1', ['cooperative-sticky'])
"""

from __future__ import annotations

from lab_cluster.errors import LabError

from .member import PROCESSING_MS, RealClientMember, State, lab_settings


def _assignors():
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    return {a.name: a for a in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor,
                                CooperativeStickyAssignor)}


def configure(props: dict[str, str], actor: str) -> dict:
    """kafka-python's keyword arguments for these (Java-named) properties; LabError for one it does not take."""
    from kafka import KafkaConsumer

    defaults = KafkaConsumer.DEFAULT_CONFIG
    props, processing_ms = lab_settings(props)
    out: dict = {"client_id": actor, PROCESSING_MS: processing_ms}
    for key, value in props.items():
        name = key.replace(".", "_")
        if name not in defaults:
            raise LabError(f"{key}={value}: kafka-python's KafkaConsumer has no such setting.",
                           "Use the Java client's names that kafka-python also takes (session.timeout.ms, "
                           "heartbeat.interval.ms, max.poll.interval.ms, auto.offset.reset, "
                           "partition.assignment.strategy, group.instance.id, ...).")
        if name == "partition_assignment_strategy":
            known = _assignors()
            chosen = [s.strip() for s in str(value).split(",") if s.strip()]
            if not chosen or any(s not in known for s in chosen):
                raise LabError(f"{key}={value}: kafka-python has the assignors {sorted(known)}.",
                               "Name one or more of them, comma-separated.")
            out[name] = [known[s] for s in chosen]
            continue
        default = defaults[name]
        try:
            if isinstance(default, bool):
                if str(value).lower() not in ("true", "false"):
                    raise ValueError(value)
                out[name] = str(value).lower() == "true"
            elif isinstance(default, int):
                out[name] = int(value)
            else:
                out[name] = value
        except ValueError:
            raise LabError(f"{key}={value}: kafka-python wants a {type(default).__name__} there.",
                           "Fix the value.") from None
    return out


def session_timeout_ms(config: dict) -> int:
    """The session timeout a kafka-python member asks for: its setting, or KafkaConsumer's default."""
    from kafka import KafkaConsumer

    return config.get("session_timeout_ms", KafkaConsumer.DEFAULT_CONFIG["session_timeout_ms"])


class KafkaPythonMember(RealClientMember):
    library = "kafka-python"

    def _run(self) -> None:
        import kafka
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._learn_member_id(consumer)
                member._on_revoked([(tp.topic, tp.partition) for tp in revoked])

            def on_partitions_assigned(self, assigned):  # under cooperative: the added ones only
                generation = member._learn_member_id(consumer)
                member._on_assigned([(tp.topic, tp.partition) for tp in consumer.assignment()], generation)

        def committed(offsets, result):
            self._on_commit_answered([(tp.topic, tp.partition, meta.offset) for tp, meta in offsets.items()],
                                     kafka_error_name(result))

        consumer = KafkaConsumer(**{**self.config, "default_offset_commit_callback": committed})
        self._trace_synchronous_commits(consumer._coordinator)
        try:
            consumer.subscribe(self.topics, listener=Listener())
            self._set_state(State.REBALANCING)
            while not self._stop.is_set():
                for tp, records in consumer.poll(timeout_ms=100).items():
                    for record in records:
                        self._on_processed(tp.topic, tp.partition, record.offset)
        except kafka.errors.KafkaError as exc:
            self._fail(f"{exc.__class__.__name__}: {exc}")
        finally:
            consumer.close()  # auto-commit (if on), then LeaveGroup unless static: the Java client's close()

    def _trace_synchronous_commits(self, coordinator) -> None:
        """Record kafka-python's synchronous commits, which call no callback: the auto-commit before a rebalance
        (`_on_join_prepare_async`) and in `close()` both await the coordinator's `_commit_offsets_sync_async`
        (kafka-python 3.0.12), which the member wraps: the same call with the same arguments, its answer
        recorded, its result or error passed on unchanged."""
        library = coordinator._commit_offsets_sync_async

        async def commit_offsets_sync(offsets, timeout_ms=None):
            answered = [(tp.topic, tp.partition, meta.offset) for tp, meta in (offsets or {}).items()]
            try:
                result = await library(offsets, timeout_ms=timeout_ms)
            except Exception as exc:
                self._on_committed(answered, kafka_error_name(exc))
                raise
            self._on_committed(answered, None)
            return result

        coordinator._commit_offsets_sync_async = commit_offsets_sync

    def _learn_member_id(self, consumer) -> int | None:
        """The generation kafka-python holds, and its member id: kafka-python keeps both in its coordinator's
        `_generation` (no public accessor); None if it has none."""
        generation = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
        if generation is None:
            return None
        if generation.member_id:
            self.member_id = generation.member_id
        return generation.generation_id if generation.generation_id >= 0 else None


def kafka_error_name(result) -> str | None:
    """The Kafka name of the error a commit callback got (None: it succeeded).

    kafka-python raises a fenced commit as `CommitFailedError(IllegalGenerationError())` (or
    UnknownMemberIdError, RebalanceInProgressError): the coordinator's error is the one inside.

    >>> import kafka.errors as e
    >>> kafka_error_name({}), kafka_error_name(e.CommitFailedError(e.IllegalGenerationError()))
    (None, 'ILLEGAL_GENERATION')
    >>> kafka_error_name(e.UnknownMemberIdError()), kafka_error_name(e.KafkaTimeoutError())
    ('UNKNOWN_MEMBER_ID', 'KafkaTimeoutError')
    """
    if not isinstance(result, Exception):
        return None
    import kafka.errors

    if isinstance(result, kafka.errors.CommitFailedError) and result.args and isinstance(result.args[0], Exception):
        result = result.args[0]
    if isinstance(result, kafka.errors.BrokerResponseError):
        return result.message
    return type(result).__name__
