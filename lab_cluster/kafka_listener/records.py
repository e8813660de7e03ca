"""Records between the lab's logs and Kafka's RecordBatch v2 (magic 2), with kafka-python's record builder.

The lab's partition logs hold text values (`partition_log.py`: one JSON line
per record, `{"offset", "ts_ms", "value"}`). A Fetch answer packs a run of
them into one uncompressed RecordBatch v2 whose base offset is the first
record's offset; a Produce request's batches are read back into values.

Departures: a record's key and headers have nowhere to go in the lab's logs,
and a value must be UTF-8 text, so a produced record with a key, a header, a
null value or bytes that are not UTF-8 is refused (INVALID_RECORD) rather
than stored changed. Compressed batches are read (kafka-python decompresses
gzip without extra packages); the lab writes none.
"""

from __future__ import annotations

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

MAGIC = 2
NO_COMPRESSION = 0


class RecordRefused(ValueError):
    """A produced record the lab's logs cannot hold as it is."""


class CorruptBatch(ValueError):
    """A produced batch whose CRC does not match its bytes (Kafka: CORRUPT_MESSAGE)."""


def encode_batch(records: list[dict], max_bytes: int) -> tuple[bytes, int]:
    """(RecordBatch v2 bytes, how many of `records` fit). The first record always goes in, as Kafka returns at
    least one whole batch even when it is larger than the fetch's byte limit (KIP-74)."""
    if not records:
        return b"", 0
    builder = MemoryRecordsBuilder(MAGIC, NO_COMPRESSION, batch_size=max(max_bytes, 1), offset=records[0]["offset"])
    packed = 0
    for record in records:
        if builder.append(record["ts_ms"], None, record["value"].encode(), []) is None:
            break
        packed += 1
    builder.close()
    return bytes(builder.buffer()), packed


def decode_values(data: bytes) -> list[str]:
    """The values of every record in a Produce request's `records`, in order; CorruptBatch if a batch's CRC is
    wrong, RecordRefused if a record cannot be stored as it is."""
    values = []
    batches = MemoryRecords(bytes(data or b""))
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():  # as Kafka's LogValidator does before anything is appended
            raise CorruptBatch("the batch's CRC does not match its bytes")
        for record in batch:
            if record.key is not None:
                raise RecordRefused("the lab's logs hold values only: produce records without a key")
            if record.headers:
                raise RecordRefused("the lab's logs hold values only: produce records without headers")
            if record.value is None:
                raise RecordRefused("a null value (a tombstone) cannot be stored in the lab's logs")
            try:
                values.append(bytes(record.value).decode())
            except UnicodeDecodeError:
                raise RecordRefused("the lab's logs hold text: a value must be UTF-8") from None
    return values
