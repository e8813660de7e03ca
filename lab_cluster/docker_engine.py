"""Talking to the Docker engine: is one there, is an image there, with clear errors.

The lab never pulls from a registry (this environment has none); images are
built locally by `docker/build-image.sh`. Testcontainers' Ryuk reaper is used
only when its image is already present; otherwise it is disabled and the lab's
own reaper and leak check remove containers (they are labelled with the pid of
the lab process that started them).
"""

from __future__ import annotations

import os

from .errors import LabError

DEFAULT_IMAGE = "zookeeper:3.9"
ENGINE_HINT = (
    "Start one: `scripts/setup.sh --docker` installs Debian's docker.io and runs "
    "`dockerd --bridge=none --iptables=false`; or use LAB_ZK_BACKEND=embedded, which needs only Java."
)


def zk_image() -> str:
    return os.environ.get("LAB_ZK_IMAGE", DEFAULT_IMAGE)


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def docker_client(timeout_s: float = 5.0):
    """A docker SDK client whose engine has answered a ping, or a LabError."""
    from docker.errors import DockerException

    import docker

    try:
        client = docker.from_env(timeout=int(max(1, timeout_s)))
        client.ping()
        return client
    except DockerException as exc:
        reason = str(exc).split("(")[0].strip() or exc.__class__.__name__
        raise LabError(f"No Docker engine answers at {engine_address()} ({reason}).", ENGINE_HINT) from None
    except Exception as exc:  # requests/urllib3 errors that escape the SDK
        raise LabError(f"No Docker engine answers at {engine_address()} ({exc.__class__.__name__}).",
                       ENGINE_HINT) from None


def engine_version(client) -> str:
    return client.version().get("Version", "unknown")


def image_present(client, image: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(image)
        return True
    except ImageNotFound:
        return False


def require_image(client, image: str) -> None:
    if not image_present(client, image):
        raise LabError(
            f"The ZooKeeper image {image} is not in the local Docker engine, and the lab never pulls from a registry.",
            "Build it with `docker/build-image.sh` (it needs no registry: it debootstraps a Debian base from this "
            "machine's apt mirror), or set LAB_ZK_IMAGE to an image that `docker images` lists.",
        )


def image_origin(client, image: str) -> str:
    """'built locally by docker/build-image.sh' or 'pulled' (from the image's label)."""
    labels = client.images.get(image).labels or {}
    return "built locally by docker/build-image.sh" if labels.get("org.rebalance-lab.recipe") else "pulled"


def configure_testcontainers(client) -> None:
    """Use Ryuk only if its image is here; never make testcontainers pull it."""
    from testcontainers.core.config import testcontainers_config

    if not image_present(client, testcontainers_config.ryuk_image):
        testcontainers_config.ryuk_disabled = True
