"""Real Kafka clients as lab designs: kafka-python and librdkafka, against the brokers' Kafka listeners.

The lab's own coordinator-era consumer (`modern_coord/`) is written after
Kafka's Java client; these are the clients people run. Each is the library
itself, unchanged, in a lab consumer host: `member.py` runs its poll loop and
writes what its callbacks report to the trace (`processed`, `assigned`,
`revoked`, `commit`), so the experiments measure it as they measure the lab's
consumer, and the brokers' traces show the coordinator's side.

- `kafka-python` (`kafka_python_member.py`): `KafkaConsumer` 3.x, pure Python;
- `librdkafka` (`librdkafka_member.py`): confluent-kafka's `Consumer`, the C library.

Both run Kafka's classic protocol with the range assignor by default, as the
lab's `classic` design does; their configs take the Java client's names. They
connect where the brokers' metadata says, so a fault proxy cannot be put in
their way (`victim_link="none"`): experiments that cut a link leave them out.

    python -m lab_cluster.consumer_host --family kafka_clients:KAFKA_PYTHON \\
        --address 127.0.0.1:K1,127.0.0.1:K2 --group g --topic t --count 2 --trial-dir DIR
"""

from lab_cluster.family import Family

from . import kafka_python_member, librdkafka_member

_COMMON = dict(address="kafka_bootstrap", address_config="bootstrap.servers", computes="leader",
               settled_state="stable", victim_link="none",
               broker_plugin="modern_coord.coordinator.service:install",
               from_beginning={"auto.offset.reset": "earliest"})

KAFKA_PYTHON = Family(
    "kafka-python", "kafka-python (real client, 3.x)", "black", marker="*",
    package="kafka_clients:KAFKA_PYTHON",
    configure=kafka_python_member.configure, build=kafka_python_member.KafkaPythonMember,
    session_timeout_ms=kafka_python_member.session_timeout_ms,
    stops_by="KafkaConsumer.close(): an auto-commit if enabled, then LeaveGroup (none for a static member)",
    **_COMMON)

LIBRDKAFKA = Family(
    "librdkafka", "librdkafka (real client, confluent-kafka)", "tab:gray", marker=">",
    package="kafka_clients:LIBRDKAFKA",
    configure=librdkafka_member.configure, build=librdkafka_member.LibrdkafkaMember,
    session_timeout_ms=librdkafka_member.session_timeout_ms,
    stops_by="Consumer.close(): a commit if auto-commit is on, then LeaveGroup (none for a static member)",
    **_COMMON)

FAMILIES = (KAFKA_PYTHON, LIBRDKAFKA)
