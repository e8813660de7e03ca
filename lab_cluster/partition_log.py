"""A partition's log: an append-only file of records, each identified by its offset.

`<logs_dir>/<topic>-<partition>.log` holds one JSON line per record:
``{"offset": 41, "ts_ms": 1763600000000, "value": "t/0/41"}``. The file lives in
the trial's directory, not in a broker: when the controller moves leadership,
the new leader opens the same file and serves every earlier record.

Departure from Kafka: there is no replication. Replication is not what this
lab studies, and a shared file makes the log outlive any broker, so every
duplicate or gap a consumer shows is the consumers' doing, never the cluster's.
Only the partition's current leader appends; a broker that becomes leader
re-opens the file (`PartitionLog.open`) to see what earlier leaders wrote.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from .wire import ErrorCode, WireError


def log_path(logs_dir: str | Path, topic: str, partition: int) -> Path:
    return Path(logs_dir) / f"{topic}-{partition}.log"


class PartitionLog:
    def __init__(self, path: Path):
        self.path = path
        self._positions: list[int] = []  # byte position of each offset's line
        self._cond = threading.Condition()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch(exist_ok=True)
        self._scan()
        self._append_file = open(self.path, "ab")
        self._read_file = open(self.path, "rb")
        self._closed = False

    @classmethod
    def open(cls, logs_dir: str | Path, topic: str, partition: int) -> PartitionLog:
        return cls(log_path(logs_dir, topic, partition))

    def _scan(self) -> None:
        """Index the file; a torn last line (a crash mid-append) is cut off."""
        positions, pos = [], 0
        with open(self.path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                positions.append(pos)
                pos += len(line)
        with open(self.path, "r+b") as f:
            f.truncate(pos)
        self._positions = positions
        self._end_pos = pos

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written (Kafka's LEO; the high watermark here)."""
        return len(self._positions)

    def append(self, values: list[str]) -> int:
        """Append records; returns the offset of the first. NOT_LEADER_OR_FOLLOWER once closed: this broker
        no longer leads the partition, and another may have opened the file."""
        with self._cond:
            self._check_open()
            base = self.log_end_offset
            pos = self._append_file.tell()
            now = time.time_ns() // 1_000_000
            lines = []
            for i, value in enumerate(values):
                line = (json.dumps({"offset": base + i, "ts_ms": now, "value": value}) + "\n").encode()
                self._positions.append(pos)
                pos += len(line)
                lines.append(line)
            self._append_file.write(b"".join(lines))
            self._append_file.flush()
            self._end_pos = pos
            self._cond.notify_all()
            return base

    def read(self, offset: int, max_records: int) -> list[dict]:
        """Records from `offset`; empty at the end; OFFSET_OUT_OF_RANGE outside [0, end]."""
        with self._cond:
            self._check_open()
            end = self.log_end_offset
            if offset < 0 or offset > end:
                raise WireError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is outside [0, {end}]")
            last = min(end, offset + max(0, max_records))
            if last == offset:
                return []
            start = self._positions[offset]
            stop = self._positions[last] if last < end else self._end_pos
        # pread: many fetch threads read one file at once without sharing a seek position.
        try:
            data = os.pread(self._read_file.fileno(), stop - start, start)
        except (ValueError, OSError):  # closed meanwhile (`close`)
            self._check_open()
            raise
        return [json.loads(line) for line in data.splitlines()]

    def wait_for(self, offset: int, timeout_s: float) -> None:
        """Block until the log holds `offset`, or `timeout_s` passes (Fetch's max wait)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.log_end_offset <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def _check_open(self) -> None:
        if self._closed:
            raise WireError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.path.stem}: this broker no longer leads it")

    def close(self) -> None:
        """Stop appending and reading; an append in progress ends first."""
        with self._cond:
            self._closed = True
            self._append_file.close()
            self._read_file.close()
            self._cond.notify_all()
