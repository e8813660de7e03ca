"""An ensemble: 1, 3 or 5 real ZooKeeper servers, and fault proxies on their quorum links.

`Ensemble` is what the rest of the lab holds: a connect string for clients,
the servers to stop, pause or restart, and the quorum links to slow down.

Quorum links. Server *i* reaches server *j*'s quorum port (the one a follower
connects to when *j* leads) through its own `FaultProxy` "zk{i}->zk{j}", so
``ensemble.quorum_link(follower, leader).set_mode(Mode.DELAY, delay_ms=800)``
delays exactly one follower's link to the leader. That follower receives
proposals and commits late and serves stale reads to its clients until a
`sync()` (which travels the same delayed, ordered link) catches it up. Leader
election uses the election ports, which are direct.

Usage::

    with provision(servers=3) as zk:
        leader = zk.leader()
        lagging = zk.followers()[0]
        zk.quorum_link(lagging.sid, leader.sid).set_mode(Mode.DELAY, delay_ms=1000)
        KazooClient(hosts=lagging.connect)  # reads from the lagging follower
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ..cleanup import REAPER
from ..errors import LabError
from ..faultproxy import FaultProxy
from ..ports import held_ports, require_free
from .server import ServerState, ZkServer
from .settings import ServerAddress, ZkSettings, plan_ensemble

ServerFactory = Callable[[ServerAddress, list[ServerAddress], ZkSettings], ZkServer]
#: how many times an ensemble is started on fresh ports when a server lost one of its ports to another process
BIND_ATTEMPTS = 3


class Ensemble:
    def __init__(self, backend: str, servers: list[ZkServer], proxies: dict[tuple[int, int], FaultProxy],
                 settings: ZkSettings, reason: str = "", chroot: str = ""):
        self.backend = backend
        self.servers = servers
        self.proxies = proxies
        self.settings = settings
        #: Why this backend was chosen (printed by the CLI, recorded in results).
        self.reason = reason
        self.chroot = chroot
        self.version = "unknown"
        self._token = REAPER.register(f"ZooKeeper ensemble ({backend}, {len(servers)} servers)", self.close)
        self.closed = False

    # -- construction -----------------------------------------------------------
    @classmethod
    def start(cls, backend: str, factory: ServerFactory, size: int, settings: ZkSettings,
              reason: str = "") -> Ensemble:
        """Start `size` servers with `factory` and wait until they serve with one leader.

        Ports are picked free (`plan_ensemble`) and held while this ensemble's
        own quorum proxies bind theirs, but bound by the servers only when the
        JVMs start, so another process can take one in between; a server then exits with
        "Address already in use". The whole ensemble is then started again on
        new ports, up to `BIND_ATTEMPTS` times; any other failure is raised at once.
        """
        if settings.client_port is not None:
            if size != 1:
                raise LabError("A fixed client port applies to a single server only.",
                               "Leave the port out for an ensemble; the lab picks free ports.")
            require_free(settings.client_port, "the ZooKeeper client port")
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                return cls._start_once(backend, factory, size, settings, reason)
            except LabError as exc:
                lost_a_port = "Address already in use" in exc.details and settings.client_port is None
                if not lost_a_port or attempt == BIND_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _start_once(cls, backend: str, factory: ServerFactory, size: int, settings: ZkSettings,
                    reason: str) -> Ensemble:
        proxies: dict[tuple[int, int], FaultProxy] = {}
        servers: list[ZkServer] = []
        ensemble = cls(backend, servers, proxies, settings, reason)
        try:
            # The planned ports stay bound while the proxies bind theirs, so no proxy
            # can be given a port of the plan: one given the quorum port it forwards
            # to would forward to itself, each accept opening another connection to
            # itself until the process runs out of file descriptors.
            with held_ports(3 * size) as ports:
                plan = plan_ensemble(size, client_port=settings.client_port, ports=iter(ports))
                if size > 1:
                    for src in plan:
                        for dst in plan:
                            if src.sid != dst.sid:
                                proxies[(src.sid, dst.sid)] = FaultProxy(
                                    dst.quorum_port, name=f"quorum zk{src.sid}->zk{dst.sid}")
            for me in plan:
                view = [a if a.sid == me.sid else replace(a, quorum_port=proxies[(me.sid, a.sid)].port)
                        for a in plan]
                servers.append(factory(me, view, settings))
            for server in servers:
                server.start()
            for server in servers:
                info = server.wait_serving(settings.startup_timeout_s)
                ensemble.version = info.get("version", "unknown").split("-")[0]
            ensemble.wait_for_quorum(settings.startup_timeout_s)
        except BaseException:
            ensemble.close()
            raise
        return ensemble

    # -- what clients use --------------------------------------------------------
    @property
    def connect(self) -> str:
        """Connect string for every server, e.g. `127.0.0.1:2181,127.0.0.1:2182`."""
        return ",".join(s.connect for s in self.servers) + self.chroot

    def server(self, sid: int) -> ZkServer:
        for s in self.servers:
            if s.sid == sid:
                return s
        raise KeyError(f"no server {sid} in this ensemble")

    # -- roles ----------------------------------------------------------------
    def modes(self) -> dict[int, str | None]:
        return {s.sid: s.mode() for s in self.servers}

    def leader(self) -> ZkServer:
        leaders = [s for s in self.servers if s.mode() in ("leader", "standalone")]
        if len(leaders) != 1:
            raise LabError(f"Expected one leader, found {len(leaders)} (modes: {self.modes()}).",
                           "Wait for the ensemble to settle with wait_for_quorum().")
        return leaders[0]

    def followers(self) -> list[ZkServer]:
        return [s for s in self.servers if s.mode() == "follower"]

    def wait_for_quorum(self, timeout_s: float = 60.0) -> ZkServer:
        """Wait until every running server serves and exactly one leads; return the leader."""
        deadline = time.monotonic() + timeout_s
        while True:
            modes = self.modes()
            running = [s.sid for s in self.servers if s.state is ServerState.RUNNING]
            leaders = [sid for sid, m in modes.items() if m in ("leader", "standalone")]
            if len(leaders) == 1 and all(modes[sid] for sid in running):
                return self.server(leaders[0])
            if time.monotonic() > deadline:
                raise LabError(f"The ensemble did not settle on one leader within {timeout_s:.0f} s "
                               f"(modes: {modes}).", "See the servers' logs (server.log_text()).")
            time.sleep(0.2)

    # -- faults ---------------------------------------------------------------
    def quorum_link(self, src: int, dst: int) -> FaultProxy:
        """The proxy server `src` goes through to reach server `dst`'s quorum port."""
        try:
            return self.proxies[(src, dst)]
        except KeyError:
            raise LabError(f"There is no quorum link zk{src}->zk{dst} in this ensemble "
                           f"({len(self.servers)} servers).", "Quorum links exist between distinct servers "
                           "of a 3- or 5-server ensemble.") from None

    def server_logs(self) -> dict[int, str]:
        return {s.sid: s.log_text() for s in self.servers}

    def describe(self) -> dict:
        """What results and reports record about this ZooKeeper."""
        return {"zk_backend": self.backend, "zk_version": self.version, "zk_servers": len(self.servers),
                "zk_backend_reason": self.reason, **{f"zk_{k}": v for k, v in self.settings.as_record().items()}}

    # -- teardown ----------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        REAPER.unregister(self._token)
        errors = []
        for server in self.servers:
            try:
                server.close()
            except Exception as exc:
                errors.append(f"server {server.sid}: {exc!r}")
        for proxy in self.proxies.values():
            proxy.close()
        if errors:
            raise RuntimeError("; ".join(errors))

    def __enter__(self) -> Ensemble:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
