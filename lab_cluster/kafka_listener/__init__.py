"""Kafka's binary protocol on every lab broker, so that real Kafka clients join the lab's groups.

    server.py         the listener: framing, the version check, dispatch, what closes a connection
    messages.py       kafka-python's message classes and the versions served (`SERVED`)
    apis.py           each API translated to the broker's own handlers and back
    subscriptions.py  ConsumerProtocol subscriptions and assignments: Kafka's bytes <-> the lab's JSON
    records.py        RecordBatch v2 <-> the lab's log records

A broker starts one beside its JSON listener (`Broker.kafka_listener`) and
registers both (`zk_layout.broker_registration`); `cluster up` prints the
Kafka listeners as `kafka bootstrap: host:port,...`.
"""
