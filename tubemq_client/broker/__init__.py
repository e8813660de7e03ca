"""What a TubeMQ broker keeps for client-balance consumers: one registration per group and partition (no I/O)."""
