"""How starved a consumer host was: the lab's own overhead, measured inside every host and kept in its trace.

A trial runs a whole group on one machine, so a design's cost and the lab's
own cost share two cores. When a host process cannot get the CPU, its
members' pings and heartbeats go out late, and a session may expire for the
lab's sake, not the design's. So every host measures itself, and a trial
whose hosts were starved is marked invalid instead of reported
(`experiments/overhead.py`).

Each host process runs one `HealthProbe` thread. It asks to wake every
`tick_s` (0.1 s) and notes how late it woke: a thread of a starved process
(the GIL held by others, the CPU taken by other processes) wakes late, and so
do the threads that send its members' pings. Every `window_s` (1 s) it
records one `host_health` event in the host's own trace (actor `<name>.host`)::

    late_ms_max, late_ms_mean   how late its wake-ups were in the window
    cpu_share                   the process's CPU seconds (user + system) per second of the window
    threads                     the process's live threads
    session_timeout_ms          the shortest liveness timeout among the host's members (`Family.session_timeout_ms`)
    pid                         the host's process, as a fault that pauses it names it
    window_s                    the window's length

and, where its members talk to ZooKeeper through kazoo (`kazoo_logger`), how
their sessions' pings went, as the client saw them (`PingMeter`)::

    pings                       pings answered in the window
    ping_rtt_ms_max             the slowest answer: the server's queue and the client's own delay
    ping_late_ms_max            how much later than kazoo meant to a ping (or any request) went out

kazoo pings when a connection has been quiet for half its read timeout (read
timeout = 2/3 of the negotiated session timeout, `ConnectionHandler._connect`),
and any request counts as a ping: a gap between two sends on one connection
longer than that half is a late send, by at least the difference.

A host is **starved** in a window when it woke, or sent, later than
`STARVED_FRACTION` (a third) of its session timeout. Members ping every third
of the timeout (kazoo above; Kafka's heartbeat.interval.ms is a third of
session.timeout.ms by default), so a host late by at most another third still
reaches the server a third of the timeout before it gives up; late by more,
an expiry may be the lab's doing. Windows in which a fault paused the host
are not judged: being late is then the experiment (`experiments/overhead.py`).

The probe's arithmetic (`Window`, `PingMeter`) is I/O-free and takes its
clock as an argument, so `tests/test_host_health.py` drives it with a fake one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from .trace import TraceRecorder

#: a host late by more than this fraction of its session timeout was starved (see above)
STARVED_FRACTION = 1 / 3
HEALTH = "host_health"


def host_actor(name: str) -> str:
    """The actor a host named `name` records its health as: `c3.host`, beside its members' `c3` (or `c1..cN`)."""
    return f"{name}.host"


def process_cpu_s() -> float:
    """This process's CPU time so far, user and system, in seconds."""
    times = os.times()
    return times.user + times.system


@dataclass
class Window:
    """One window's wake-ups: fed `tick(late_s)`, closed with `fields(now, cpu_now)`."""

    started: float
    cpu_started: float
    late_max_s: float = 0.0
    late_sum_s: float = 0.0
    ticks: int = 0

    def tick(self, late_s: float) -> None:
        late_s = max(late_s, 0.0)
        self.late_max_s = max(self.late_max_s, late_s)
        self.late_sum_s += late_s
        self.ticks += 1

    def fields(self, now: float, cpu_now: float) -> dict:
        """The window's figures, as its `host_health` event carries them.

        >>> w = Window(started=10.0, cpu_started=1.0); w.tick(0.002); w.tick(0.250); w.tick(-0.001)
        >>> w.fields(now=12.0, cpu_now=1.5)
        {'window_s': 2.0, 'late_ms_max': 250.0, 'late_ms_mean': 84.0, 'cpu_share': 0.25}
        """
        length = max(now - self.started, 1e-9)
        return {"window_s": round(length, 3), "late_ms_max": round(self.late_max_s * 1000, 1),
                "late_ms_mean": round(self.late_sum_s * 1000 / max(self.ticks, 1), 1),
                "cpu_share": round((cpu_now - self.cpu_started) / length, 3)}


@dataclass(eq=False)  # one meter per client, known by identity (kept in a WeakSet)
class PingMeter:
    """One kazoo client's pings, read off what its connection thread logs (`kazoo_logger`).

    kazoo's `ConnectionHandler` logs, on its own thread: "Session created" (with the negotiated timeout) when a
    connection is up, "Sending request(xid=...)" for every send (xid -2: a ping), "Received Ping" for a ping's
    answer, and "Connection dropped" or "Connection time-out" when it gives a connection up. A new connection
    starts the gaps afresh: the time it took to connect is not a late ping.

    >>> m = PingMeter(); m.session_created(0.0, 6000)   # read timeout 4 s: a ping after 2 s quiet
    >>> m.sent(2.0, -2); m.ping_answered(2.004)
    >>> m.sent(5.5, -2); m.ping_answered(5.9)           # 1.5 s late, answered in 400 ms
    >>> m.drain()
    {'pings': 2, 'ping_rtt_ms_max': 400.0, 'ping_late_ms_max': 1500.0}
    >>> m.drain()
    {'pings': 0, 'ping_rtt_ms_max': None, 'ping_late_ms_max': 0.0}
    """

    ping_interval_s: float | None = None  # half the read timeout of the connection up now; None while there is none
    last_send: float | None = None
    ping_sent: float | None = None
    pings: int = 0
    rtt_max_s: float | None = None
    late_max_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def session_created(self, now: float, negotiated_timeout_ms: float) -> None:
        with self.lock:
            self.ping_interval_s = negotiated_timeout_ms * 2 / 3 / 2 / 1000
            self.last_send, self.ping_sent = now, None

    def sent(self, now: float, xid) -> None:
        with self.lock:
            if self.ping_interval_s is None:
                return  # the connect request itself, or a send on no connection: no gap to judge
            if self.last_send is not None:
                self.late_max_s = max(self.late_max_s, now - self.last_send - self.ping_interval_s)
            self.last_send = now
            if xid == -2:
                self.ping_sent = now

    def ping_answered(self, now: float) -> None:
        with self.lock:
            if self.ping_sent is not None:
                rtt = now - self.ping_sent
                self.rtt_max_s = rtt if self.rtt_max_s is None else max(self.rtt_max_s, rtt)
                self.pings += 1
                self.ping_sent = None

    def dropped(self) -> None:
        with self.lock:
            self.ping_interval_s = self.last_send = self.ping_sent = None

    def drain(self) -> dict:
        """The figures since the last drain, and start again."""
        with self.lock:
            figures = {"pings": self.pings,
                       "ping_rtt_ms_max": None if self.rtt_max_s is None else round(self.rtt_max_s * 1000, 1),
                       "ping_late_ms_max": round(max(self.late_max_s, 0.0) * 1000, 1)}
            self.pings, self.rtt_max_s, self.late_max_s = 0, None, 0.0
            return figures


class _MeteringLogger(logging.LoggerAdapter):
    """kazoo's logger, passed on as it is, that also feeds a `PingMeter` what the connection thread says."""

    def __init__(self, logger: logging.Logger, meter: PingMeter, clock: Callable[[], float]):
        super().__init__(logger, {})
        self.meter, self.clock = meter, clock

    def log(self, level, msg, *args, **kwargs):
        if isinstance(msg, str):
            if msg.startswith("Sending request"):
                self.meter.sent(self.clock(), args[0] if args else None)
            elif msg == "Received Ping":
                self.meter.ping_answered(self.clock())
            elif msg.startswith("Session created") and len(args) > 2:
                self.meter.session_created(self.clock(), float(args[2]))
            elif msg.startswith(("Connection dropped", "Connection time-out")):
                self.meter.dropped()
        super().log(level, msg, *args, **kwargs)


#: the meters of this process's live kazoo clients: one probe per process reads them all
_METERS: weakref.WeakSet[PingMeter] = weakref.WeakSet()
_METERS_LOCK = threading.Lock()


def kazoo_logger(clock: Callable[[], float] = time.monotonic) -> logging.LoggerAdapter:
    """A logger to give a `KazooClient` (`logger=`): kazoo's own, whose pings this process's probe reports."""
    meter = PingMeter()
    with _METERS_LOCK:
        _METERS.add(meter)
    return _MeteringLogger(logging.getLogger("kazoo.client"), meter, clock)


def _drain_meters() -> dict:
    with _METERS_LOCK:
        meters = list(_METERS)
    if not meters:
        return {}
    drained = [m.drain() for m in meters]
    rtts = [d["ping_rtt_ms_max"] for d in drained if d["ping_rtt_ms_max"] is not None]
    return {"pings": sum(d["pings"] for d in drained), "ping_rtt_ms_max": max(rtts) if rtts else None,
            "ping_late_ms_max": max(d["ping_late_ms_max"] for d in drained)}


class HealthProbe:
    """The thread that measures its host process and records a `host_health` event every window."""

    def __init__(self, trace: TraceRecorder, host: str, session_timeout_ms: float, *,
                 tick_s: float = 0.1, window_s: float = 1.0):
        self.trace, self.host, self.session_timeout_ms = trace, host, session_timeout_ms
        self.tick_s, self.window_s = tick_s, window_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"health-{host}", daemon=True)

    def start(self) -> HealthProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, recording the last (partial) window."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        window = Window(*_clocks())
        due = window.started + self.tick_s
        while not self._stop.wait(max(due - time.monotonic(), 0.0)):
            now = time.monotonic()
            window.tick(now - due)
            due = now + self.tick_s
            if now - window.started >= self.window_s:
                closed = _clocks()
                self._record(window, *closed)
                window = Window(*closed)
        self._record(window, *_clocks())

    def _record(self, window: Window, now: float, cpu_now: float) -> None:
        self.trace.record(HEALTH, host=self.host, pid=os.getpid(), session_timeout_ms=self.session_timeout_ms,
                          threads=threading.active_count(), **window.fields(now, cpu_now), **_drain_meters())


def _clocks() -> tuple[float, float]:
    """(monotonic time, this process's CPU seconds), read together: a window closed and the next opened with the
    same pair have lengths and CPU that cover the same spans, and tile the host's life.

    Read apart, a starved probe thread (waiting for the GIL among hundreds of member threads) can read the CPU
    well after the window's end, counting CPU a second window's length does not: the likely cause of the 2.44
    CPU seconds per second one host showed on a two-core machine (N=1,024, `benchmarks/group_size.json`)."""
    return time.monotonic(), process_cpu_s()
