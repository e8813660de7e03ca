"""One ZooKeeper server of an ensemble, whatever runs it.

A `ZkServer` is a real ZooKeeper server process: a JVM child of this process
(`EmbeddedServer`) or a container (`ContainerServer`). Both answer to the same
controls, which is all the experiments use:

    state:    STOPPED --start()--> RUNNING --pause()--> PAUSED
              RUNNING --stop()---> STOPPED   PAUSED --resume()--> RUNNING
              any     --close()--> CLOSED (data dir and container removed)

`stop(crash=True)` kills instead of asking it to exit (SIGKILL). Pausing is
SIGSTOP or `docker pause`: the server stops answering but its TCP connections
stay open, which is what a long GC pause or a frozen VM looks like to a client.
"""

from __future__ import annotations

import enum
import logging
import time
from abc import ABC, abstractmethod

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from .. import fourlw
from ..errors import LabError, tail
from .settings import ServerAddress


class ServerState(enum.Enum):
    STOPPED = "stopped"
    RUNNING = "running"
    PAUSED = "paused"
    CLOSED = "closed"


class ZkServer(ABC):
    backend: str = "?"

    def __init__(self, address: ServerAddress):
        self.address = address
        self.state = ServerState.STOPPED

    @property
    def sid(self) -> int:
        return self.address.sid

    @property
    def connect(self) -> str:
        """The `host:port` a client uses to reach this server alone."""
        return f"{self.address.host}:{self.address.client_port}"

    # -- lifecycle -------------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Launch the server; returns without waiting for it to serve."""

    @abstractmethod
    def stop(self, crash: bool = False) -> None: ...

    @abstractmethod
    def pause(self) -> None: ...

    @abstractmethod
    def resume(self) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """Stop and remove everything of this server (idempotent)."""

    @abstractmethod
    def log_text(self) -> str:
        """The server's log so far (for failing tests and start-up errors)."""

    @abstractmethod
    def exited(self) -> str | None:
        """Why the server process ended on its own, or None while it runs."""

    # -- what the server says about itself -------------------------------------
    def four_letter(self, word: str, timeout_s: float = 3.0) -> str:
        return fourlw.send(self.address.host, self.address.client_port, word, timeout_s)

    def srvr(self) -> dict:
        return fourlw.parse_srvr(self.four_letter("srvr"))

    def mntr(self) -> dict:
        return fourlw.parse_mntr(self.four_letter("mntr"))

    def mode(self) -> str | None:
        """'leader', 'follower', 'standalone', or None when not serving/reachable."""
        if self.state is not ServerState.RUNNING:
            return None
        try:
            return self.srvr().get("mode")
        except LabError:
            return None

    def wait_serving(self, timeout_s: float) -> dict:
        """Wait until `ruok` says imok, `srvr` says it serves and kazoo connects; return `srvr`.

        Raises a LabError with the log tail if the process died or time ran out.
        """
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            why = self.exited()
            if why:
                raise LabError(f"ZooKeeper server {self.sid} ({self.backend}) exited during start-up: {why}.",
                               "Its log follows.", details=tail(self.log_text()))
            try:
                if fourlw.parse_ruok(self.four_letter("ruok", 1.0))["ok"]:
                    info = self.srvr()
                    if info.get("serving") and kazoo_connects(self.address.host, self.address.client_port):
                        return info
                    last = "up but not serving yet (no quorum?)"
            except LabError as exc:
                last = exc.problem
            time.sleep(0.2)
        raise LabError(f"ZooKeeper server {self.sid} ({self.backend}) did not serve within {timeout_s:.0f} s "
                       f"(last: {last}).", "Its log follows.", details=tail(self.log_text()))


_quiet_kazoo = logging.getLogger("rebalance_lab.readiness")
_quiet_kazoo.setLevel(logging.ERROR)  # refused connections while polling are expected, not news


def kazoo_connects(host: str, port: int) -> bool:
    """True when a kazoo client opens a session on `host:port` and reads `/`."""
    client = KazooClient(hosts=f"{host}:{port}", timeout=2.0, logger=_quiet_kazoo)
    try:
        client.start(timeout=3.0)
        client.get("/")
        return True
    except KazooTimeoutError:
        return False
    finally:
        client.stop()
        client.close()

