"""What a RocketMQ broker keeps for consumers: the consumer table, offsets and queue locks (no I/O)."""
