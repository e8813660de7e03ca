"""Find Java and a ZooKeeper server's jars already installed on this machine.

The embedded backend needs no download: Spark ships ZooKeeper (`jars/zookeeper-3.9.x.jar`
and everything its server needs), in the pyspark wheel as in any Spark distribution, so
`pip install` alone brings a real ZooKeeper. Accepted, in this order of preference:
`$ZOOKEEPER_HOME` (an Apache release: `lib/*.jar`), then Spark's jars, then Debian's
`zookeeper` package (`/usr/share/java`).

Spark's jars are looked for where the installation really is, never beside
`pyspark.__file__`: inside a Spark Python worker Spark puts its own
`pyspark.zip` first on `sys.path`, so `pyspark.__file__` is
`.../pyspark/python/lib/pyspark.zip/pyspark/__init__.py`, which has no `jars`
beside it. The candidates, first that holds a ZooKeeper jar wins:

1. `$SPARK_HOME/jars` (Spark sets it in its workers and executors; on a
   cluster it is the worker machine's own Spark);
2. the installed pyspark distribution's `pyspark/jars`, found through its
   package metadata (`importlib.metadata`), which names the site-packages
   directory whatever `sys.path` puts first;
3. pyspark's own guess, `pyspark.find_spark_home._find_spark_home()`.

Java comes from `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` on PATH.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabError

_JAR_VERSION = re.compile(r"^zookeeper-(\d+\.\d+\.\d+)\.jar$")

# What a ZooKeeper 3.9 server loads from Spark's jars: itself, its wire
# format (jute), logging (slf4j over log4j2), commons-io, and the netty classes
# its TLS utilities reference at start-up.
_SPARK_JAR_PREFIXES = (
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

    source: str  # "ZOOKEEPER_HOME", "spark" or "debian"
    classpath: tuple[str, ...]
    version: str
    where: str = ""  # the directory, and how it was found

    def describe(self) -> str:
        return f"ZooKeeper {self.version} from {self.source}" + (f" ({self.where})" if self.where else "")


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


def spark_jars_dirs() -> list[tuple[Path, str]]:
    """Every place Spark's jars may be on this machine, as (directory, how it was found), best first."""
    found: list[tuple[Path, str]] = []
    home = os.environ.get("SPARK_HOME")
    if home:
        found.append((Path(home) / "jars", "SPARK_HOME"))
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        found.append((Path(distribution("pyspark").locate_file("pyspark/jars")), "the installed pyspark package"))
    except PackageNotFoundError:
        pass
    try:
        from pyspark.find_spark_home import _find_spark_home

        with contextlib.redirect_stderr(io.StringIO()):  # it prints, then exits, when it finds nothing
            found.append((Path(_find_spark_home()) / "jars", "pyspark.find_spark_home"))
    except (ImportError, SystemExit):
        pass
    return found


def _from_spark() -> ZkDistribution | None:
    for jars_dir, how in spark_jars_dirs():
        jars = sorted(j for j in jars_dir.glob("*.jar") if j.name.startswith(_SPARK_JAR_PREFIXES))
        version = _version_of(jars)
        if version:
            return ZkDistribution("spark", tuple(map(str, jars)), version, f"{jars_dir.resolve()}, via {how}")
    return None


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
    for finder in (_from_spark, _from_debian):
        found = finder()
        if found:
            return found
    raise LabError(
        "No ZooKeeper jars were found: ZOOKEEPER_HOME is unset, no Spark installation holds zookeeper-3.9.x.jar "
        f"(looked in: {_looked_in()}) and Debian's zookeeper package is absent.",
        "Run scripts/setup.sh (it installs pyspark into .venv), or set ZOOKEEPER_HOME to an Apache ZooKeeper release.",
    )


def _looked_in() -> str:
    return "; ".join(f"{d} ({how})" for d, how in spark_jars_dirs()) or "no SPARK_HOME and no pyspark package"
