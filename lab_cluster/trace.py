"""The trace recorder every lab process uses (`docs/metrics.md`, Traces).

One trace file per actor (a consumer, a broker, the producer, the fault
injector) in the trial's directory: `<trial_dir>/traces/<actor>.jsonl`,
append-only, one JSON object per line and per event:

| field       | type   | meaning                                                        |
|-------------|--------|----------------------------------------------------------------|
| `ts_ns`     | long   | CLOCK_MONOTONIC in nanoseconds: one clock for every process of a machine |
| `wall_ms`   | long   | wall-clock milliseconds since the epoch (for people, not for ordering) |
| `trial`     | string | trial id                                                       |
| `design`    | string | the design (`experiments/engine/families.py`) or `cluster`      |
| `actor`     | string | who recorded it (`c3`, `broker-1`, `producer`, `faults`)       |
| `kind`      | string | the event: `processed`, `zk_watch_fired`, `join`, `fault`, ... |
| `topic`, `partition`, `offset` | string, int, long | the message or partition concerned, when there is one |
| `path`      | string | the znode concerned, when there is one                         |
| `generation`, `member` | int, string | the group generation and member id, when there are ones |
| `error`     | string | an error name (`ILLEGAL_GENERATION`, ...), when there is one   |
| `fields`    | string | every other field of the event, as a JSON object               |

The first event of a trace is `trace_open` and the last `trace_close`. A trace
without its close was cut short: by a crash (which the fault injector records
as a `fault` event with action `kill`), or by a bug, which makes the trial
incomplete rather than silently analysed (`trace_reader.check_complete`).

Events are buffered and written by a background thread every
`flush_interval_s`, and on `close()`, which the lab's reaper also calls at exit,
on an exception, Ctrl-C or SIGTERM.

Usage::

    trace = TraceRecorder(trial_dir, trial="herd-7", design="zookeeper", actor="c1")
    trace.record("processed", topic="t", partition=0, offset=41)
    trace.record("view", members=["c1", "c2"], cversion=7)   # extra fields -> `fields`
    trace.close()
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from .cleanup import REAPER
from .events import KINDS

#: The fixed columns of every record; anything else goes into `fields`.
COLUMNS = ("ts_ns", "wall_ms", "trial", "design", "actor", "kind", "topic", "partition", "offset", "path",
           "generation", "member", "error", "fields")
_TOP_LEVEL = frozenset(COLUMNS) - {"ts_ns", "wall_ms", "trial", "design", "actor", "kind", "fields"}

OPEN, CLOSE = "trace_open", "trace_close"


def trace_path(trial_dir: str | Path, actor: str) -> Path:
    return Path(trial_dir) / "traces" / f"{actor}.jsonl"


class TraceRecorder:
    def __init__(self, trial_dir: str | Path, *, trial: str, design: str, actor: str,
                 flush_interval_s: float = 0.2):
        if not actor or "/" in actor:
            raise ValueError(f"an actor name is a plain non-empty word, not {actor!r}")
        self.path = trace_path(trial_dir, actor)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._base = {"trial": trial, "design": design, "actor": actor}
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")
        self._closed = threading.Event()
        self.events_recorded = 0
        self.record(OPEN, pid=os.getpid())
        self._flusher = threading.Thread(target=self._flush_every, args=(flush_interval_s,),
                                         name=f"trace-flush-{actor}", daemon=True)
        self._flusher.start()
        self._token = REAPER.register(f"trace {self.path}", self.close)

    def record(self, kind: str, **fields) -> int:
        """Append one event; returns its `ts_ns`. Its kind must be one of the vocabulary's (`events.py`)."""
        if kind not in KINDS:
            raise ValueError(f"{kind!r} is not an event kind of the lab: add it to lab_cluster/events.py")
        ts_ns = time.monotonic_ns()
        event = {"ts_ns": ts_ns, "wall_ms": time.time_ns() // 1_000_000, **self._base, "kind": kind}
        extra = {}
        for key, value in fields.items():
            if key in _TOP_LEVEL:
                event[key] = value
            else:
                extra[key] = value
        if extra:
            event["fields"] = json.dumps(extra, sort_keys=True, default=str)
        line = json.dumps(event, default=str)
        with self._lock:
            if self._file is None:
                raise RuntimeError(f"trace {self.path} is closed")
            self._buffer.append(line)
            self.events_recorded += 1
        return ts_ns

    def flush(self) -> None:
        with self._lock:
            if self._file is None or not self._buffer:
                return
            self._file.write("\n".join(self._buffer) + "\n")
            self._buffer.clear()
            self._file.flush()

    def close(self) -> None:
        """Record `trace_close`, write everything, close the file. Idempotent."""
        with self._lock:
            if self._file is None:
                return
        self.record(CLOSE, events=self.events_recorded + 1)
        self._closed.set()
        self.flush()
        with self._lock:
            self._file.close()
            self._file = None
        REAPER.unregister(self._token)

    def _flush_every(self, interval_s: float) -> None:
        while not self._closed.wait(interval_s):
            self.flush()

    def __enter__(self) -> TraceRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
