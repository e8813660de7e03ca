"""Stop everything the lab started, on every way out of the process.

Every server, container, proxy and temp dir the lab starts registers a stop
function with the process-wide `REAPER`. The reaper runs them, newest first and
each exactly once, when:

- the owner stops the thing itself (it then unregisters it);
- the process exits normally or through an exception (`atexit`);
- Ctrl-C arrives (SIGINT is Python's KeyboardInterrupt, which unwinds to exit);
- SIGTERM or SIGHUP arrives (turned into `SystemExit` so that the same
  unwinding happens instead of the default instant death).

Child processes are also started so that the kernel kills them if this process
dies without running any of that (SIGKILL, a crash): see `child_preexec`.
Every lab resource is marked with this process id (JVM system property,
container label, temp dir name) so that `lab_cluster.leaks` can find what a
dead lab process left behind.

Example::

    token = REAPER.register("zookeeper server 1", server.stop)
    ...
    server.stop(); REAPER.unregister(token)
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

#: Prefix of every temp dir the lab makes: `rebalance-lab-<owner pid>-<purpose>-<random>`.
TEMP_PREFIX = "rebalance-lab-"
#: Marker on every JVM command line and container: the pid of the lab process that owns it.
OWNER_PROPERTY = "rebalance.lab.owner"
OWNER_LABEL = "rebalance-lab.owner"
#: Marker on the command line of the Spark driver JVM a lab process starts (`lab_cluster.spark`): its pid. Not the
#: owner marker, because that JVM serves its process until the process ends and is no leak while it lives.
SPARK_DRIVER_PROPERTY = "rebalance.lab.spark.driver"


class Reaper:
    """A registry of stop functions, run newest first, each at most once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, tuple[str, Callable[[], None]]] = {}
        self._next_token = 0

    def register(self, what: str, stop: Callable[[], None]) -> int:
        _install_signal_handlers()
        with self._lock:
            self._next_token += 1
            self._items[self._next_token] = (what, stop)
            return self._next_token

    def unregister(self, token: int) -> None:
        with self._lock:
            self._items.pop(token, None)

    def pending(self) -> list[str]:
        """What is still registered (started and not yet stopped)."""
        with self._lock:
            return [what for what, _ in self._items.values()]

    def stop_all(self) -> list[str]:
        """Run every stop function, newest first; return the failures as text."""
        failures = []
        while True:
            with self._lock:
                if not self._items:
                    return failures
                token = max(self._items)
                what, stop = self._items.pop(token)
            try:
                stop()
            except Exception as exc:  # cleanup goes on with the rest
                failures.append(f"{what}: {exc!r}")


REAPER = Reaper()
atexit.register(REAPER.stop_all)


def _raise_system_exit(signum, _frame):
    raise SystemExit(128 + signum)


def _install_signal_handlers() -> None:
    """Make SIGTERM and SIGHUP unwind like Ctrl-C does, if nobody else handles them."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _raise_system_exit)


_temp_tokens: dict[Path, int] = {}


def make_temp_dir(purpose: str) -> Path:
    """A fresh temp dir named after this process, removed by the reaper at exit.

    The caller may remove it earlier with `remove_temp_dir`.
    """
    path = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{purpose}-"))
    token = REAPER.register(f"temp dir {path}", lambda: shutil.rmtree(path, ignore_errors=True))
    _temp_tokens[path] = token
    return path


def remove_temp_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    token = _temp_tokens.pop(path, None)
    if token is not None:
        REAPER.unregister(token)


def signal_process(pid: int, sig: int) -> None:
    """Send `sig` to `pid`; a process that has already gone is not an error."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def child_preexec() -> Callable[[], None] | None:
    """A `preexec_fn` that makes a child die with SIGKILL when its parent dies.

    Linux delivers the "parent death signal" when the *thread* that forked the
    child exits, so it is only used for children started from the main thread;
    children started from other threads rely on the reaper alone.
    """
    if _libc is None or threading.current_thread() is not threading.main_thread():
        return None

    def _set_pdeathsig() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return _set_pdeathsig
