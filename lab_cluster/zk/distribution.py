"""Find Java and a ZooKeeper server's jars already installed on this machine.

The embedded backend needs no download: the pyspark wheel ships
`pyspark/jars/zookeeper-3.9.x.jar` and everything its server needs, so
`pip install` alone brings a real ZooKeeper. Also accepted, in this order of
preference: `$ZOOKEEPER_HOME` (an Apache release: `lib/*.jar`), then the
pyspark wheel, then Debian's `zookeeper` package (`/usr/share/java`).

Java comes from `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabError

_JAR_VERSION = re.compile(r"^zookeeper-(\d+\.\d+\.\d+)\.jar$")

# What a ZooKeeper 3.9 server loads from pyspark's jars: itself, its wire
# format (jute), logging (slf4j over log4j2), commons-io, and the netty classes
# its TLS utilities reference at start-up.
_PYSPARK_JAR_PREFIXES = (
    "zookeeper-",
    "slf4j-api-",
    "log4j-slf4j2-impl-",
    "log4j-api-",
    "log4j-core-",
    "commons-io-",
    "commons-cli-",
    "snappy-java-",
    "metrics-core-",
    "netty-handler-4",
    "netty-common-",
    "netty-buffer-",
    "netty-transport-4",
    "netty-codec-base-",
    "netty-codec-4",
    "netty-resolver-4",
    "netty-transport-native-unix-common-",
    "netty-transport-classes-epoll-",
)

JAVA_HINT = (
    "Install a Java runtime, version 17 or later (Debian: `apt-get install openjdk-17-jre-headless`), "
    "or set JAVA_HOME to one; PySpark needs it too. Or choose another backend: "
    "LAB_ZK_BACKEND=testcontainers (needs a Docker engine) or LAB_ZK_BACKEND=external with LAB_ZK_CONNECT."
)


@dataclass(frozen=True)
class ZkDistribution:
    """A set of jars that can run `QuorumPeerMain`."""

    source: str  # "ZOOKEEPER_HOME", "pyspark" or "debian"
    classpath: tuple[str, ...]
    version: str

    def describe(self) -> str:
        return f"ZooKeeper {self.version} from {self.source}"


def find_java() -> str:
    """Path of the `java` launcher, or a LabError that says how to get one."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return str(java)
        raise LabError(f"JAVA_HOME is set to {home}, but {java} is not an executable Java launcher.",
                       "Point JAVA_HOME at a JDK or JRE 17+ (or unset it to use `java` on PATH).")
    java = shutil.which("java")
    if java:
        return java
    raise LabError("Java was not found: the embedded ZooKeeper backend runs a ZooKeeper JVM, "
                   "and neither JAVA_HOME nor PATH has `java`.", JAVA_HINT)


def java_version(java: str) -> str:
    """`17.0.15`-style version of a Java launcher."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError(f"{java} -version failed ({exc}).", JAVA_HINT) from None
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return m.group(1) if m else "unknown"


def _version_of(jars: list[Path]) -> str | None:
    for jar in jars:
        m = _JAR_VERSION.match(jar.name)
        if m:
            return m.group(1)
    return None


def _from_zookeeper_home(home: str) -> ZkDistribution:
    root = Path(home)
    jars = sorted(root.glob("*.jar")) + sorted((root / "lib").glob("*.jar"))
    version = _version_of(jars)
    if not version:
        raise LabError(f"ZOOKEEPER_HOME is {home}, but it holds no zookeeper-X.Y.Z.jar (in it or in lib/).",
                       "Point it at an unpacked Apache ZooKeeper binary release, or unset it.")
    return ZkDistribution("ZOOKEEPER_HOME", tuple(map(str, jars)), version)


def pyspark_jars_dir() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    path = Path(pyspark.__file__).parent / "jars"
    return path if path.is_dir() else None


def _from_pyspark() -> ZkDistribution | None:
    jars_dir = pyspark_jars_dir()
    if jars_dir is None:
        return None
    jars = sorted(j for j in jars_dir.glob("*.jar") if j.name.startswith(_PYSPARK_JAR_PREFIXES))
    version = _version_of(jars)
    return ZkDistribution("pyspark", tuple(map(str, jars)), version) if version else None


def _from_debian() -> ZkDistribution | None:
    share = Path("/usr/share/java")
    if not (share / "zookeeper.jar").exists():
        return None
    env_file = Path("/etc/zookeeper/conf/environment")
    classpath: list[str] = []
    if env_file.exists():
        m = re.search(r'^CLASSPATH="?([^"\n]+)"?', env_file.read_text(), re.M)
        if m:
            classpath = [p for p in m.group(1).split(":") if p.endswith(".jar")]
    if not classpath:
        classpath = [str(p) for p in sorted(share.glob("*.jar"))]
    resolved = [Path(p).resolve() for p in classpath if Path(p).exists()]
    version = _version_of(resolved) or "unknown"
    return ZkDistribution("debian", tuple(classpath), version)


def find_distribution() -> ZkDistribution:
    """The ZooKeeper jars to run, or a LabError that says how to get some."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        return _from_zookeeper_home(home)
    for finder in (_from_pyspark, _from_debian):
        found = finder()
        if found:
            return found
    raise LabError(
        "No ZooKeeper jars were found: pyspark is not installed (its wheel ships zookeeper-3.9.x.jar), "
        "ZOOKEEPER_HOME is unset and Debian's zookeeper package is absent.",
        "Run scripts/setup.sh (it installs pyspark into .venv), or set ZOOKEEPER_HOME to an Apache ZooKeeper release.",
    )
