"""A trial's consumer hosts on a Spark cluster's executors: one barrier stage, its tasks started together.

Why: a trial's group ran on the trial's own machine, every member a thread of a
host there, so one machine's cores bounded the group. Real consumers ran on
many machines. With `TrialSpec.host_tasks` = K the group `c1..cN` is cut into
K slices (`slices`), and each slice's host runs in one task of a barrier stage
(Spark's barrier execution mode: the stage's tasks are launched together or not
at all, and can meet at a barrier), on whichever executors the cluster gives
it. The trial itself (ZooKeeper, brokers, producer, the steps, the joiners)
runs on the driver, which submits the stage (`HostTasks`).

One TCP connection per task to the trial, one JSON object per line:

1. the task connects and says `hello` (its partition, machine, boot id,
   working dir); the trial answers with its monotonic clock (`clock`), from
   which the task estimates how far apart the two clocks are (to within half
   the round trip);
2. every task meets the others at `BarrierTaskContext.allGather`, so that no
   host starts its members before every task has reached the trial: the group
   forms as one, as it does in a trial's one local host;
3. past the barrier, the task says so (`gathered`, with its work dir), starts
   its host (`python -m lab_cluster.consumer_host --first F --count C`, a
   process of its own, its traces in that temp dir of the executor's) and says
   `ready`, or `failed` with why (each a `task_event`);
4. every state line the host prints goes to the trial as it is
   (`GroupWatch.update`); a host that exits before it is told to stop makes
   the task say `lost`;
5. the trial says `stop`: the task stops its host gracefully (SIGTERM, as for
   a local host) and returns the host's trace files and log as its result; the
   trial writes them into its own directory, every `ts_ns` moved onto the
   trial's clock if the task ran under another boot (CLOCK_MONOTONIC is one
   clock per boot; on the trial's own machine nothing moves).

What goes wrong fails the trial, with its reason: a task that cannot start its
host, a host that dies, a connection that drops, a stage that never starts (a
barrier stage needs K free task slots at once; Spark refuses it otherwise), a
stage that fails or does not hand every task's traces back. Spark never runs a
second group beside the first: a barrier stage whose results go to the driver
is not retried (one task's failure aborts the job: "Could not recover from a
failed barrier ResultStage", Spark's DAGScheduler), and no task fails on its
own account (each reports what went wrong and returns). When the trial ends,
on success or failure, every task is told to stop and given `STOP_S` to return;
then (or at once, if no task got past the barrier: one never came to it) the
stage is cancelled: its tasks' Python workers are killed, their hosts die with
them (`cleanup.child_preexec`, SIGKILL rather than a graceful stop), and the
trial removes the work dirs they left on its machine. Ctrl-C on the driver
stops the trial first, then the stage, as above (`harness._run_on_driver`).

Departures, stated: the trial's servers and its socket listen on loopback (the
lab's rule: no traffic leaves 127.0.0.0/8), so the executors must share the
driver's machine, as the standalone cluster of `spark up` does; on machines of
their own they would need those bound to the driver's address. Between boots
the clocks are only estimated, once, at the hello (to within half a round
trip; drift over the trial is not corrected), where one machine's traces share
one clock exactly; an executor in a container with a time namespace of its own
shares the boot id but not the clock, and is not detected.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab_cluster.cleanup import make_temp_dir, remove_temp_dir
from lab_cluster.errors import LabError, tail
from lab_cluster.ports import LOOPBACK

#: how long the trial waits for every task to connect and start its host, beyond the host's own start
CONNECT_S = 120.0
#: how long stopping may take (a host stops its members at once; a ZooKeeper-era one waits for its sessions)
STOP_S = 120.0


@dataclass(frozen=True)
class Slice:
    """One host's share of the group: members `c<first>..c<first + count - 1>`."""
    first: int
    count: int

    @property
    def name(self) -> str:
        return f"c{self.first}-{self.first + self.count - 1}"


def slices(consumers: int, tasks: int) -> list[Slice]:
    """The group cut into `tasks` slices as even as can be, the larger first.

    >>> slices(10, 3)
    [Slice(first=1, count=4), Slice(first=5, count=3), Slice(first=8, count=3)]
    """
    size, extra = divmod(consumers, tasks)
    out, first = [], 1
    for k in range(tasks):
        count = size + (k < extra)
        out.append(Slice(first, count))
        first += count
    return out


def local_slots(master: str, task_cpus: int = 1) -> int | None:
    """The task slots of a `local[...]` master, each task taking `task_cpus` cores (None for a cluster's, which
    only the cluster knows).

    >>> local_slots("local[2]"), local_slots("local"), local_slots("local[4, 3]"), local_slots("spark://h:7077")
    (2, 1, 4, None)
    >>> local_slots("local[4]", task_cpus=2)
    2
    """
    if master == "local":
        cores = 1
    elif master.startswith("local["):
        given = master[len("local["):].split(",")[0].rstrip("]").strip()
        cores = os.cpu_count() or 1 if given == "*" else int(given)
    else:
        return None
    return cores // task_cpus


def slots_problem(master: str, tasks: int, task_cpus: int = 1) -> LabError | None:
    """Why a local `master` cannot run a barrier stage of `tasks` tasks (None if it can, or if only the cluster
    knows): Spark would retry its own check for minutes before it refused."""
    slots = local_slots(master, task_cpus)
    if slots is None or slots >= tasks:
        return None
    return LabError(f"A group spread over {tasks} host tasks is one barrier stage, which needs {tasks} task slots "
                    f"at once, and Spark's {master} has {slots}.",
                    f"Use --master local[{tasks * task_cpus}] or more, or fewer host tasks.")


def boot_id() -> str:
    """This boot's id (Linux): two processes with the same one read the same CLOCK_MONOTONIC."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return f"unknown-{socket.gethostname()}"


def moved(trace: bytes, offset_ns: int) -> bytes:
    """A JSON-lines trace with every `ts_ns` moved by `offset_ns` (onto another machine's clock).

    >>> moved(b'{"ts_ns": 10, "kind": "x"}\\n', 5)
    b'{"ts_ns": 15, "kind": "x"}\\n'
    """
    lines = []
    for line in trace.splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a blank or cut line (a host killed mid-write) stays as it is, for the checks to see
            lines.append(line)
            continue
        record["ts_ns"] += offset_ns
        lines.append(json.dumps(record).encode())
    return b"".join(line + b"\n" for line in lines)


def spark_error(exc: BaseException | None) -> str:
    """A failed job's error in a line or two: Spark's first line and the Python error a task raised, if any.

    >>> spark_error(Exception("Job aborted.\\n  File x\\nValueError: no\\n\\tat org.apache.X"))
    'Job aborted. (ValueError: no)'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return repr(exc)
    python = [line for line in lines if line.split(":")[0].endswith(("Error", "Exception")) and " " not in
              line.split(":")[0]]
    return lines[0][:300] + (f" ({python[-1][:300]})" if python and python[-1] != lines[0] else "")


#: how a task's own messages begin (`_Channel.send` writes its keys in order), apart from its host's lines
TASK_EVENT = '{"task_event": '


class _Channel:
    """One end of a task's connection: whole JSON lines out (from any thread), lines in."""

    def __init__(self, conn: socket.socket):
        self.conn = conn
        self.reader = conn.makefile("r", encoding="utf-8", newline="\n")
        self._lock = threading.Lock()

    def send_line(self, line: str) -> None:
        with self._lock:
            self.conn.sendall(line.encode() + b"\n")

    def send(self, message: dict) -> None:
        self.send_line(json.dumps(message))

    def receive(self) -> dict | None:
        """The next message, or None when the other end closed."""
        line = self.reader.readline()
        return json.loads(line) if line else None

    def close(self) -> None:
        """Close both ways at once: a thread blocked reading wakes to the end (a socket whose file object is
        still open would not close on `conn.close()` alone)."""
        for step in (lambda: self.conn.shutdown(socket.SHUT_RDWR), self.reader.close, self.conn.close):
            try:
                step()
            except OSError:
                pass


# -- the task's side (runs in an executor's Python worker) ------------------------------------------------------

def host_task(trial_address: tuple[str, int], host_args: list[str], parts: list[Slice], ready_timeout_s: float,
              _rows) -> object:
    """The barrier stage's task: run this partition's slice of the group until the trial says stop."""
    from pyspark import BarrierTaskContext

    from lab_cluster.processes import LabProcess

    context = BarrierTaskContext.get()
    index = context.partitionId()
    part = parts[index]
    channel = _Channel(socket.create_connection(trial_address, timeout=30))
    sent_ns = time.monotonic_ns()
    channel.send({"hello": index, "machine": socket.gethostname(), "boot_id": boot_id(), "dir": os.getcwd()})
    reply = channel.receive()  # within the connection's 30 s: the trial answers at once
    channel.conn.settimeout(None)
    if reply is None:  # the trial is gone: nothing to start
        channel.close()
        return []
    # the trial read its clock between our send and its reply: our midpoint is its reading, within half the trip
    offset_ns = int(reply["clock"]) - (sent_ns + time.monotonic_ns()) // 2
    stop = threading.Event()

    def listen():
        try:
            while (message := channel.receive()) is not None and message.get("stop") is None:
                pass
        except (OSError, ValueError):
            pass
        finally:
            stop.set()  # told to stop, or the trial is gone

    threading.Thread(target=listen, name="host-task-listen", daemon=True).start()

    def tell(event: str, **fields) -> None:  # the task's own word to the trial: ready, failed, lost
        channel.send({"task_event": event, **fields})

    def forward(line: str) -> None:  # the host's reader thread: a line after the trial has gone is dropped
        try:
            channel.send_line(line)
        except OSError:
            pass

    context.allGather(part.name)  # every task has reached the trial: the hosts start together
    work = make_temp_dir(f"host-{part.name}")
    host = None
    try:
        tell("gathered", work=str(work))  # past the barrier: from here on it hears `stop`
        try:
            host = LabProcess(f"consumers-{part.name}", "lab_cluster.consumer_host",
                              [*host_args, "--first", str(part.first), "--count", str(part.count),
                               "--trial-dir", str(work)], work / "host.log", on_line=forward,
                              ready_timeout_s=ready_timeout_s)
            tell("ready", pid=host.pid)
        except LabError as exc:
            tell("failed", why=f"{exc.paragraph()} {tail(exc.details or '', 20)}".strip())
        while not stop.wait(0.5):
            if host is not None and not host.alive():
                tell("lost", why=f"host {part.name} exited with status {host.proc.returncode}")
                host = None
        if host is not None:
            host.stop()
            host = None
        files = {p.name: p.read_bytes() for p in sorted((work / "traces").glob("*.jsonl"))}
        log = (work / "host.log").read_bytes() if (work / "host.log").exists() else b""
        return [{"task": index, "slice": part.name, "boot_id": boot_id(), "offset_ns": offset_ns,
                 "files": files, "log": log}]
    finally:
        if host is not None:
            host.kill()
        remove_temp_dir(work)
        channel.close()


# -- the trial's side (the driver) -------------------------------------------------------------------------------

class HostTasks:
    """The group's hosts as a barrier stage of `len(parts)` tasks, seen from the trial that submits it.

    `start()` returns once every host said READY (else raises a LabError with why); every state line goes to
    `on_line`, and a host lost meanwhile to `on_lost(reason)`; `stop()` stops them and writes their traces and
    logs into `trial_dir` (else raises a LabError with why). `placements()` says where each ran.
    """

    def __init__(self, spark_context, trial_dir: Path, trial: str, host_args: list[str], parts: list[Slice],
                 on_line: Callable[[str], None], on_lost: Callable[[str], None], ready_timeout_s: float):
        self.sc, self.dir, self.trial = spark_context, trial_dir, trial
        self.host_args, self.parts = host_args, parts
        self.on_line, self.on_lost = on_line, on_lost
        self.ready_timeout_s = ready_timeout_s
        self.job_group = f"hosts-{trial}-{uuid.uuid4().hex[:8]}"
        self._server = socket.create_server((LOOPBACK, 0))
        self._server.settimeout(0.5)  # the accept loop looks up between connections, to end with the trial
        self._channels: dict[int, _Channel] = {}
        self._hello: dict[int, dict] = {}
        self._ready: set[int] = set()
        self._gathered: set[int] = set()  # past the barrier (the tasks pass it together): it hears `stop`
        self._work: dict[int, str] = {}  # each task's work dir, as it said
        self._failed: list[str] = []
        self._stopping = False
        self._changed = threading.Condition()
        self._results: list[dict] | None = None
        self._stage_error: BaseException | None = None
        self._stage_done = threading.Event()
        self._submitted = False  # start() got past its own checks and submitted the stage

    # -- start ---------------------------------------------------------------------------------------------------
    def start(self) -> HostTasks:
        problem = slots_problem(self.sc.master, len(self.parts), int(self.sc.getConf().get("spark.task.cpus", "1")))
        if problem is not None:
            raise problem
        self._submitted = True
        threading.Thread(target=self._accept, name=f"{self.job_group}-accept", daemon=True).start()
        threading.Thread(target=self._run_stage, name=f"{self.job_group}-stage", daemon=True).start()
        limit_s = CONNECT_S + self.ready_timeout_s
        deadline = time.monotonic() + limit_s
        with self._changed:
            while len(self._ready) < len(self.parts) and not self._failed and not self._stage_done.is_set():
                if time.monotonic() > deadline:
                    self._failed.append(f"{len(self.parts) - len(self._ready)} of the {len(self.parts)} host "
                                        f"task(s) did not start within {limit_s:.0f} s "
                                        f"(connected: {sorted(self._hello)})")
                    break
                self._changed.wait(0.2)
            if self._stage_done.is_set() and len(self._ready) < len(self.parts) and not self._failed:
                self._failed.append(f"the barrier stage ended before its hosts started: "
                                    f"{spark_error(self._stage_error)}")
            failed = list(self._failed)
        if failed:
            raise LabError(f"The group's host tasks could not start: {'; '.join(failed)}",
                           "The hosts' logs are in the trial's proc/. A stage that never started needs as many "
                           f"free task slots at once as it has tasks ({len(self.parts)}): give the cluster more, or "
                           "ask for fewer host tasks.")
        return self

    def _run_stage(self) -> None:
        task = functools.partial(host_task, self._server.getsockname()[:2], self.host_args, self.parts,
                                 self.ready_timeout_s)
        try:
            self.sc.setJobGroup(self.job_group, f"the consumer hosts of trial {self.trial}", True)
            rdd = self.sc.parallelize(range(len(self.parts)), len(self.parts))
            self._results = rdd.barrier().mapPartitions(task).collect()
        except BaseException as exc:  # reported by start() or stop()
            self._stage_error = exc
        finally:
            with self._changed:
                self._stage_done.set()
                self._changed.notify_all()

    def _accept(self) -> None:
        """Every connection, until the trial stops (so a late one is answered, not left in the backlog)."""
        while not self._stopping:
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by stop()
            conn.settimeout(None)
            threading.Thread(target=self._serve, args=(_Channel(conn),), name=f"{self.job_group}-task",
                             daemon=True).start()

    def _serve(self, channel: _Channel) -> None:
        """One task's messages: its hello, ready or failed, then its host's state lines until it closes."""
        hello = channel.receive()
        if hello is None or "hello" not in hello:
            channel.close()
            return
        index = int(hello["hello"])
        channel.send({"clock": time.monotonic_ns()})
        with self._changed:
            self._channels[index], self._hello[index] = channel, hello
            if self._stopping:
                channel.send({"stop": True})
        try:
            for line in iter(channel.reader.readline, ""):
                if line.startswith(TASK_EVENT):
                    self._task_event(index, json.loads(line))
                else:  # the host's own line (a state line), as the host printed it
                    self.on_line(line.rstrip("\n"))
        except (OSError, ValueError):
            pass  # closed under us by stop()
        with self._changed:
            if index not in self._ready:  # gone before its host started: start() must not wait for it
                self._failed.append(f"host task {index} ({self.parts[index].name}) closed its connection "
                                    "before its host started")
            self._changed.notify_all()
        if not self._stopping:
            self.on_lost(f"host task {index} ({self.parts[index].name}) closed its connection")

    def _task_event(self, index: int, message: dict) -> None:
        event = message["task_event"]
        with self._changed:
            if "work" in message:
                self._work[index] = message["work"]
            if event == "gathered":
                self._gathered.add(index)
            elif event == "ready":
                self._ready.add(index)
            else:
                self._failed.append(f"host task {index} ({self.parts[index].name}): {message['why']}")
            self._changed.notify_all()
        if event == "lost":
            self.on_lost(self._failed[-1])

    # -- stop ----------------------------------------------------------------------------------------------------
    def stop(self, quiet: bool = False) -> None:
        """Stop every host, wait for the stage (cancel it if it does not end), write its traces and logs into the
        trial's directory; a LabError if a task's traces did not come back, unless `quiet` (the trial is failing
        already, for a reason of its own). Idempotent."""
        with self._changed:
            if self._stopping:
                return
            self._stopping = True
            channels = list(self._channels.values())
        for channel in channels:
            try:
                channel.send({"stop": True})
            except OSError:
                pass
        cancelled = False
        if self._submitted:
            cancelled = not self._wait_returned()
            if cancelled:  # a task stuck at the barrier hears nothing; the rest have returned or run out of time
                self.sc.cancelJobGroup(self.job_group)
                self._stage_done.wait(30)
        self._server.close()
        for channel in channels:
            channel.close()
        if cancelled:
            self._remove_left_work()
        for result in self._results or []:
            self._write(result)
        lost = self._stage_error is not None or len(self._results or []) != len(self.parts)
        if self._submitted and lost and not quiet:
            raise LabError(f"The group's host tasks did not all hand their traces back "
                           f"({len(self._results or [])} of {len(self.parts)}): "
                           f"{spark_error(self._stage_error) if self._stage_error else 'the stage was cancelled'}.",
                           "Their hosts' logs, where they came back, are in the trial's proc/.")

    def _wait_returned(self) -> bool:
        """Wait until the stage ends, for at most STOP_S: True if it did. If no task got past the barrier (some
        task never came to it), none hears `stop` and the stage cannot end: False at once."""
        deadline = time.monotonic() + STOP_S
        with self._changed:
            while not self._stage_done.is_set() and time.monotonic() < deadline:
                if not self._gathered:
                    return False
                self._changed.wait(0.2)
            return self._stage_done.is_set()

    def _remove_left_work(self) -> None:
        """The work dirs of tasks killed by the cancel, where they are on this machine (their worker could not)."""
        mine = boot_id()
        for index, work in self._work.items():
            if self._hello.get(index, {}).get("boot_id") == mine:
                remove_temp_dir(Path(work))

    def _write(self, result: dict) -> None:
        same_clock = result["boot_id"] == boot_id()
        (self.dir / "traces").mkdir(parents=True, exist_ok=True)
        for name, data in result["files"].items():
            (self.dir / "traces" / name).write_bytes(data if same_clock else moved(data, result["offset_ns"]))
        (self.dir / "proc").mkdir(parents=True, exist_ok=True)
        (self.dir / "proc" / f"consumers-{result['slice']}.log").write_bytes(result["log"])

    def placements(self) -> list[dict]:
        """Where each task ran: its slice, machine, working dir (on a standalone cluster: its worker and
        executor), whether it shared the trial's clock."""
        mine = boot_id()
        return [{"task": i, "slice": self.parts[i].name, "machine": h.get("machine"), "dir": h.get("dir"),
                 "same_clock": h.get("boot_id") == mine} for i, h in sorted(self._hello.items())]
