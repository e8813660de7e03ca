"""The `testcontainers` backend: one container per ZooKeeper server.

`ZooKeeperContainer` is a testcontainers `DockerContainer` for the official
`zookeeper` image (or the equivalent that `docker/build-image.sh` builds). It
is configured the way that image is: `ZOO_MY_ID`, `ZOO_SERVERS`,
`ZOO_4LW_COMMANDS_WHITELIST`, `ZOO_CFG_EXTRA`, ... (see `settings.py`), and it
is ready when `KazooConnectWaitStrategy` sees the server serve and a kazoo
client connect. Usable on its own::

    with ZooKeeperContainer(port=2181) as zk:
        KazooClient(hosts=zk.connect).start()

Networking: containers use the host's network namespace (`LAB_DOCKER_NETWORK=host`,
the only mode this lab supports) and each server's ports are set explicitly,
so every address is on 127.0.0.1 and the quorum-link fault proxies, which run
in this process, sit between containers like they sit between JVMs.
"""

from __future__ import annotations

import os
import uuid

from kazoo.handlers.threading import KazooTimeoutError
from testcontainers.core.container import DockerContainer
from testcontainers.core.waiting_utils import WaitStrategy

from ..cleanup import OWNER_LABEL, REAPER
from ..docker_engine import configure_testcontainers, docker_client, require_image, zk_image
from ..errors import LabError, tail
from ..fourlw import parse_srvr, send
from .server import ServerState, ZkServer, kazoo_connects
from .settings import ServerAddress, ZkSettings, official_image_env, plan_ensemble, server_properties


def network_mode() -> str:
    mode = os.environ.get("LAB_DOCKER_NETWORK", "host")
    if mode != "host":
        raise LabError(f"LAB_DOCKER_NETWORK={mode} is not supported.",
                       "The lab runs containers with host networking only (LAB_DOCKER_NETWORK=host): "
                       "all its traffic stays on 127.0.0.1 and its fault proxies run on the host.")
    return mode


class KazooConnectWaitStrategy(WaitStrategy):
    """Ready when `srvr` says the server serves and a kazoo client connects."""

    def __init__(self, host: str, port: int):
        super().__init__()
        self.host, self.port = host, port
        self.with_transient_exceptions(KazooTimeoutError, LabError, OSError)

    def _serving_and_connectable(self, container) -> bool:
        container.reload()
        if container.status in ("exited", "dead"):
            raise StopIteration  # no point polling a container that has died
        if not parse_srvr(send(self.host, self.port, "srvr", 1.0)).get("serving"):
            return False
        return kazoo_connects(self.host, self.port)

    def wait_until_ready(self, container) -> None:
        if not self._poll(lambda: self._serving_and_connectable(container)):
            stdout, stderr = container.get_logs()
            raise LabError(
                f"ZooKeeper container {container.get_wrapped_container().short_id} did not serve on "
                f"{self.host}:{self.port} within {self._startup_timeout:.0f} s (status: {container.status}).",
                "Its log follows.", details=tail((stdout + stderr).decode(errors="replace")))


class ZooKeeperContainer(DockerContainer):
    """A ZooKeeper server in a container, configured like the official image."""

    def __init__(self, image: str | None = None, *, port: int | None = None, env: dict[str, str] | None = None,
                 address: ServerAddress | None = None, settings: ZkSettings | None = None, name: str = ""):
        settings = settings or ZkSettings()
        if address is None:
            address = plan_ensemble(1, client_port=port)[0]
        if env is None:
            env = official_image_env(server_properties(settings, address, [address]), address.sid, settings.heap_mb)
        super().__init__(image or zk_image())
        self.address = address
        for key, value in env.items():
            self.with_env(key, value)
        self.with_kwargs(network_mode=network_mode(),
                         labels={OWNER_LABEL: str(os.getpid()), "rebalance-lab.sid": str(address.sid)})
        self.with_name(name or f"rebalance-lab-{os.getpid()}-zk{address.sid}-{uuid.uuid4().hex[:6]}")
        self.waiting_for(KazooConnectWaitStrategy(address.host, address.client_port)
                         .with_startup_timeout(settings.startup_timeout_s).with_poll_interval(0.25))

    @property
    def connect(self) -> str:
        return f"{self.address.host}:{self.address.client_port}"

    def start_without_waiting(self) -> ZooKeeperContainer:
        """Start the container but skip the wait (an ensemble member cannot serve alone)."""
        strategy, self._wait_strategy = self._wait_strategy, None
        try:
            return self.start()
        finally:
            self._wait_strategy = strategy

    def wait_until_ready(self) -> None:
        self._wait_strategy.wait_until_ready(self)


class ContainerServer(ZkServer):
    backend = "testcontainers"

    def __init__(self, address: ServerAddress, view: list[ServerAddress], settings: ZkSettings):
        super().__init__(address)
        client = docker_client()
        image = zk_image()
        require_image(client, image)
        configure_testcontainers(client)
        env = official_image_env(server_properties(settings, address, view), address.sid, settings.heap_mb)
        self.container = ZooKeeperContainer(image, env=env, address=address, settings=settings)
        self._token: int | None = None
        self._created = False

    def _wrapped(self):
        return self.container.get_wrapped_container()

    def start(self) -> None:
        if self.state is ServerState.RUNNING:
            return
        if not self._created:
            self.container.start_without_waiting()
            self._created = True
            self._token = REAPER.register(f"ZooKeeper container {self.container._name}", self._remove)
        else:
            self._wrapped().start()
        self.state = ServerState.RUNNING

    def wait_serving(self, timeout_s: float) -> dict:
        self.container.wait_until_ready()
        return self.srvr()

    def stop(self, crash: bool = False) -> None:
        if self.state in (ServerState.STOPPED, ServerState.CLOSED) or not self._created:
            return
        if self.state is ServerState.PAUSED:
            self._wrapped().unpause()
        if crash:
            self._wrapped().kill()
        else:
            self._wrapped().stop(timeout=10)
        self.state = ServerState.STOPPED

    def pause(self) -> None:
        if self.state is ServerState.RUNNING:
            self._wrapped().pause()
            self.state = ServerState.PAUSED

    def resume(self) -> None:
        if self.state is ServerState.PAUSED:
            self._wrapped().unpause()
            self.state = ServerState.RUNNING

    def close(self) -> None:
        if self.state is ServerState.CLOSED:
            return
        self._remove()
        if self._token is not None:
            REAPER.unregister(self._token)
        self.state = ServerState.CLOSED

    def _remove(self) -> None:
        if self._created:
            try:
                self.container.stop()  # testcontainers: force-remove with its volumes
            except Exception:
                pass
            self._created = False

    def log_text(self) -> str:
        if not self._created:
            return ""
        try:
            return self._wrapped().logs().decode(errors="replace")
        except Exception:
            return ""

    def exited(self) -> str | None:
        if not self._created:
            return None
        wrapped = self._wrapped()
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            return f"container {wrapped.status}, exit code {wrapped.attrs['State'].get('ExitCode')}"
        return None
