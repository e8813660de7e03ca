"""The `external` backend: an ensemble the user already runs (`LAB_ZK_CONNECT`).

The lab only reads it (four-letter words) and uses it; it cannot stop, pause
or delay its servers, so experiments that inject server faults refuse to run
on it with a clear error.
"""

from __future__ import annotations

import os

from ..errors import LabError
from ..fourlw import parse_ruok, send
from .server import ServerState, ZkServer
from .settings import ServerAddress, ZkSettings

_NO_CONTROL = "the external backend cannot start, stop or pause servers it does not own"


class ExternalServer(ZkServer):
    backend = "external"

    def __init__(self, address: ServerAddress):
        super().__init__(address)
        self.state = ServerState.RUNNING

    def _refuse(self, *_a, **_k):
        raise LabError(f"Server {self.connect}: {_NO_CONTROL}.",
                       "Use LAB_ZK_BACKEND=embedded or testcontainers for experiments that inject server faults.")

    start = stop = pause = resume = _refuse

    def close(self) -> None:
        self.state = ServerState.CLOSED

    def log_text(self) -> str:
        return "(the external backend has no access to the server's log)"

    def exited(self) -> str | None:
        return None


def parse_connect(connect: str) -> tuple[list[ServerAddress], str]:
    """Split `h1:p1,h2:p2/chroot` into addresses and the chroot.

    >>> parse_connect("127.0.0.1:2181,127.0.0.1:2182/lab")
    ([ServerAddress(sid=1, client_port=2181, quorum_port=0, election_port=0, host='127.0.0.1'), \
ServerAddress(sid=2, client_port=2182, quorum_port=0, election_port=0, host='127.0.0.1')], '/lab')
    """
    hosts, slash, chroot = connect.strip().partition("/")
    addresses = []
    for i, hostport in enumerate(h for h in hosts.split(",") if h.strip()):
        host, sep, port = hostport.strip().rpartition(":")
        if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
            raise LabError(f"LAB_ZK_CONNECT={connect!r} is not a ZooKeeper connect string.",
                           "Write it as host:port[,host:port...][/chroot], e.g. 127.0.0.1:2181.")
        addresses.append(ServerAddress(i + 1, int(port), 0, 0, host=host))
    if not addresses:
        raise LabError(f"LAB_ZK_CONNECT={connect!r} names no server.", "Write it as host:port[,host:port...].")
    return addresses, (slash + chroot if chroot else "")


def external_ensemble(reason: str, settings: ZkSettings, connect: str | None = None):
    """The ensemble at `connect` (default: LAB_ZK_CONNECT), once one of its servers answers `ruok`."""
    from .ensemble import Ensemble

    connect = connect or os.environ.get("LAB_ZK_CONNECT", "")
    if not connect:
        raise LabError("LAB_ZK_BACKEND=external needs LAB_ZK_CONNECT, and it is not set.",
                       "Set it to your ensemble's connect string, e.g. LAB_ZK_CONNECT=127.0.0.1:2181.")
    addresses, chroot = parse_connect(connect)
    answers = {}
    for a in addresses:
        try:
            answers[f"{a.host}:{a.client_port}"] = parse_ruok(send(a.host, a.client_port, "ruok", 3.0))["ok"]
        except LabError as exc:
            answers[f"{a.host}:{a.client_port}"] = exc.problem
    if not any(v is True for v in answers.values()):
        detail = "; ".join(f"{k}: {'not imok' if v is False else v}" for k, v in answers.items())
        raise LabError(f"No server of LAB_ZK_CONNECT={connect} answered `ruok` with imok ({detail}).",
                       "Start the ensemble (docker/compose.yaml runs one), check the ports, "
                       "or choose LAB_ZK_BACKEND=embedded.")
    ensemble = Ensemble("external", [ExternalServer(a) for a in addresses], {}, settings, reason, chroot)
    for server in ensemble.servers:
        try:
            ensemble.version = server.srvr().get("version", "unknown").split("-")[0]
            break
        except LabError:
            continue
    return ensemble
