"""Lab child processes: brokers, the producer, consumer hosts.

A `LabProcess` runs `python -m <module> ...` (or, given `command`, any program
that keeps the same protocol: a real system's JVM, `real_systems/`) with its stderr in a log file, and
waits for the child to print one line `READY {json}` on stdout (its port, its
id): until then it is starting; if the child dies first, the error says why
and shows its log. Afterwards the parent can:

    stop()    SIGTERM: the child leaves gracefully (closes sessions, flushes traces)
    kill()    SIGKILL: a crash; sessions stay until ZooKeeper expires them
    pause()   SIGSTOP: a long GC pause; resume() sends SIGCONT

Every child carries `--rebalance.lab.owner=<parent pid>` on its command line
(the leak check finds it) and dies with its parent if the parent is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .cleanup import OWNER_PROPERTY, REAPER, child_preexec, signal_process
from .errors import LabError, tail


def owner_arg() -> str:
    return f"--{OWNER_PROPERTY}={os.getpid()}"


class LabProcess:
    def __init__(self, name: str, module: str, args: list[str], log_path: str | Path, *,
                 ready_timeout_s: float = 60.0, env: dict[str, str] | None = None,
                 on_line: Callable[[str], None] | None = None, command: list[str] | None = None):
        self.name = name
        #: Called with every line the child prints other than READY (after it is logged).
        self.on_line = on_line
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # a JVM carries the owner mark as a system property already (`real_systems/jars.py: java_command`)
        self.command = [*command, *args] if command else [sys.executable, "-m", module, *args, owner_arg()]
        child_env = dict(os.environ, **(env or {}))
        repo_root = str(Path(__file__).resolve().parent.parent)
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, child_env.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log, env=child_env, start_new_session=True,
                                         preexec_fn=child_preexec())
        self._token = REAPER.register(f"lab process {name} (pid {self.proc.pid})", self.kill)
        self.paused = False
        self.info: dict = {}
        self._ready = threading.Event()
        self._ready_error: ValueError | None = None
        self._stdout_closed = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True, name=f"{name}-stdout").start()
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stdout(self) -> None:
        """The one reader of the child's stdout: its READY line sets `info`; every other line is logged
        and given to `on_line`.

        Reads the pipe with os.read into its own buffer and splits lines itself
        (whole lines only: a READY that arrives in one chunk with the lines
        before it is still seen), so one thread does it from start to exit.
        """
        fd, pending = self.proc.stdout.fileno(), b""
        with open(self.log_path, "ab") as log:
            while chunk := os.read(fd, 65536):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if not self._ready.is_set() and line.startswith(b"READY"):
                        try:
                            self.info = json.loads(line[5:].decode(errors="replace").strip() or "{}")
                        except ValueError as exc:
                            self._ready_error = exc
                        self._ready.set()
                        continue
                    log.write(line + b"\n")
                    log.flush()
                    if self.on_line is not None:
                        self.on_line(line.decode(errors="replace"))
            log.write(pending)
        self._stdout_closed.set()

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.2):
            if self._stdout_closed.is_set() or time.monotonic() > deadline:
                break
        if self._ready.is_set():
            if self._ready_error is not None:
                raise self._ready_error
            return
        if self._stdout_closed.is_set():
            try:
                self.proc.wait(5)  # stdout closes as the child exits
            except subprocess.TimeoutExpired:
                pass
        why = f"exited with status {self.proc.returncode}" if self.proc.poll() is not None else \
            f"did not say READY within {timeout_s:.0f} s"
        raise LabError(f"Lab process {self.name} ({' '.join(self.command[2:4])}) {why}.",
                       f"Its log ({self.log_path}) follows.", details=tail(self.log_text()))

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        signal_process(self.proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP, and return once the kernel shows the process stopped (so the fault's time is true)."""
        self._signal(signal.SIGSTOP)
        self.paused = True
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and self.alive() and _proc_state(self.proc.pid) not in ("T", "t"):
            time.sleep(0.001)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout_s: float = 30.0) -> int:
        """Graceful: SIGTERM, then SIGKILL if it does not exit in time. Returns the exit status."""
        if self.alive():
            if self.paused:
                self.resume()
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout_s)
        REAPER.unregister(self._token)
        return self.proc.returncode

    def kill(self) -> None:
        if self.alive():
            self._signal(signal.SIGKILL)
            self.proc.wait(30)
        REAPER.unregister(self._token)


def proc_stat(pid: int) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after the command name: [state, ppid, ...]; None if it is gone (or no /proc).

    The command name is in parentheses and may itself hold spaces or `)`, hence the split at the last `)`.
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_state(pid: int) -> str:
    fields = proc_stat(pid)
    return fields[0] if fields else "?"


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...), read from /proc; [] where there is none."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait until these processes have exited (a zombie has), at most `timeout_s`; SIGKILL the ones still there
    then, and return them."""
    deadline = time.monotonic() + timeout_s
    living = [p for p in pids if _proc_state(p) not in ("?", "Z")]
    while living and time.monotonic() < deadline:
        time.sleep(0.1)
        living = [p for p in living if _proc_state(p) not in ("?", "Z")]
    for pid in living:
        signal_process(pid, signal.SIGKILL)
    return living


_STDOUT = threading.Lock()


def emit_line(text: str) -> None:
    """Child side: write one whole line to stdout. Threads that print() can interleave their text and
    newlines (a READY glued to the end of another line was missed); one locked write cannot."""
    with _STDOUT:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def honour_ctrl_c() -> None:
    """Make SIGINT raise KeyboardInterrupt again, whatever this process inherited.

    A command started as a background job of a non-interactive shell (`cmd &`
    in a script, a CI runner) inherits SIGINT *ignored* (POSIX), and Python then
    installs no KeyboardInterrupt handler: Ctrl-C, or a test's SIGINT, would be
    dropped and whatever the command started would run on. Main thread only.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def caused_by_ctrl_c(error: BaseException | None) -> bool:
    """Whether `error` is a KeyboardInterrupt or was raised while one was handled.

    A Ctrl-C that lands in a call to Spark's JVM is not always the exception that reaches the caller: PySpark's
    `collect` tells the JVM, on its way out, to clear the call site, on a new Py4J connection, and under load
    that call can fail ("Answer from Java side is empty", seen in a test) and replace the KeyboardInterrupt,
    which stays as its `__context__`. Such an error is the Ctrl-C, and is reported as one."""
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


def serve_until_terminated(ready_info: dict) -> None:
    """Child side: announce READY, then wait; SIGTERM/SIGINT end the wait with SystemExit.

    The wait wakes twice a second. Python runs a signal's handler in the main thread only, and the kernel may
    deliver a process-directed SIGTERM to any other thread (a consumer's, a kazoo's): a main thread blocked in
    a lock wait with no timeout is then never woken to run the handler, and the process ignores SIGTERM
    until it is killed (seen once: a ZooKeeper-era consumer that kept consuming for the 30 s its stop allows).
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    honour_ctrl_c()
    emit_line("READY " + json.dumps(ready_info))
    forever = threading.Event()
    try:
        while not forever.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass


def add_owner_argument(parser) -> None:
    """Child side: accept the leak marker the parent adds (and ignore it)."""
    parser.add_argument(f"--{OWNER_PROPERTY}", dest="lab_owner", help="(set by the parent; marks the process)")
