"""Choosing a ZooKeeper backend and provisioning an ensemble on it.

`LAB_ZK_BACKEND` (or the `backend` argument) picks one of:

| backend          | what runs                                       | needs                         |
|------------------|--------------------------------------------------|-------------------------------|
| `embedded`       | ZooKeeper JVMs, children of this process         | Java 17+, pyspark's jars      |
| `testcontainers` | one container per server, host networking        | a Docker engine, the image    |
| `external`       | the ensemble at `LAB_ZK_CONNECT`                 | a running ensemble            |
| `auto` (default) | testcontainers if the engine answers and the image is present, else embedded | |

`choose_backend()` says which one and why; `provision()` starts it::

    with provision(servers=3) as zk:
        print(zk.backend, zk.version, zk.connect)

Where the server starts is not always where the user asked: a trial runs in a
Spark task, whose environment is the executor's, not the driver's (on a
cluster, another machine's; even under `local[*]`, the Python workers keep the
environment the Spark JVM started with). So a run reads the request once, on
the driver (`BackendRequest.from_environment`), and hands it to every trial;
`auto` is then resolved where the trial runs, since that is the machine whose
Docker engine and Java matter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..docker_engine import docker_client, image_present, zk_image
from ..errors import LabError
from .distribution import find_distribution, find_java
from .ensemble import Ensemble
from .settings import ZkSettings

BACKENDS = ("auto", "embedded", "testcontainers", "external")


@dataclass(frozen=True)
class BackendChoice:
    name: str
    reason: str


@dataclass(frozen=True)
class BackendRequest:
    """The backend the user asked for, as the driver read it, carried to wherever a server is started."""

    backend: str = "auto"
    connect: str | None = None  # the ensemble of `external`
    said_by: str = "LAB_ZK_BACKEND"  # where the request came from, for the reason a trial records

    @classmethod
    def from_environment(cls, backend: str | None = None) -> BackendRequest:
        """`backend` (a command-line option) or LAB_ZK_BACKEND, and LAB_ZK_CONNECT for `external`."""
        name = requested_backend(backend)
        connect = os.environ.get("LAB_ZK_CONNECT") if name == "external" else None
        return cls(name, connect, "--backend" if backend else "LAB_ZK_BACKEND")


def requested_backend(backend: str | None = None) -> str:
    value = (backend or os.environ.get("LAB_ZK_BACKEND") or "auto").strip().lower()
    if value not in BACKENDS:
        raise LabError(f"Unknown ZooKeeper backend {value!r}.",
                       f"Choose one of {', '.join(BACKENDS)} (LAB_ZK_BACKEND or --backend).")
    return value


def testcontainers_problem() -> str | None:
    """Why the testcontainers backend cannot start a server here, or None if it can."""
    try:
        client = docker_client(timeout_s=3)
    except LabError as exc:
        return exc.problem
    image = zk_image()
    if not image_present(client, image):
        return f"the Docker engine answers but the image {image} is not present (docker/build-image.sh builds it)"
    return None


def embedded_problem() -> str | None:
    """Why the embedded backend cannot start a server here, or None if it can."""
    try:
        find_java()
        find_distribution()
    except LabError as exc:
        return exc.problem
    return None


def choose_backend(backend: str | BackendRequest | None = None) -> BackendChoice:
    request = backend if isinstance(backend, BackendRequest) else BackendRequest.from_environment(backend)
    name = request.backend
    if name != "auto":
        return BackendChoice(name, f"{request.said_by}={name}")
    problem = testcontainers_problem()
    if problem is None:
        return BackendChoice("testcontainers", f"auto: a Docker engine answers and the image {zk_image()} is present")
    return BackendChoice("embedded", f"auto: {problem.rstrip('.')}; so the embedded JVM")


def provision(servers: int = 1, backend: str | BackendRequest | None = None,
              settings: ZkSettings | None = None) -> Ensemble:
    """Start (or, for `external`, attach to) a ZooKeeper ensemble and wait until it serves.

    `backend`: a name, a `BackendRequest` carried from elsewhere, or None for LAB_ZK_BACKEND here."""
    settings = settings or ZkSettings()
    request = backend if isinstance(backend, BackendRequest) else BackendRequest.from_environment(backend)
    choice = choose_backend(request)
    if servers not in (1, 3, 5):
        raise LabError(f"An ensemble has 1, 3 or 5 servers, not {servers}.", "Choose one of those sizes.")
    if choice.name == "external":
        from .external import external_ensemble

        return external_ensemble(choice.reason, settings, request.connect)
    if choice.name == "embedded":
        from .embedded import EmbeddedServer

        java, distribution = find_java(), find_distribution()

        def factory(address, view, s):
            return EmbeddedServer(address, view, s, distribution=distribution, java=java)

        return Ensemble.start("embedded", factory, servers, settings, choice.reason)
    from .container import ContainerServer, network_mode

    network_mode()  # refuse unsupported networking before anything starts
    return Ensemble.start("testcontainers", ContainerServer, servers, settings, choice.reason)
