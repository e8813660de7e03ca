"""Where the real systems' jars are, and the `java` command that runs one of their classes.

`scripts/setup.sh` builds `real_systems/pom.xml`: each module `real_systems/<system>/` leaves its driver in
`target/<system>-driver.jar` and every jar it needs in `target/lib/`. Nothing here fetches anything: a
missing build is a `LabError` that says how to make it.
"""

from __future__ import annotations

import os
from pathlib import Path

from lab_cluster.cleanup import OWNER_PROPERTY
from lab_cluster.errors import LabError
from lab_cluster.zk.distribution import find_java

ROOT = Path(__file__).resolve().parent


def classpath(system: str) -> list[str]:
    """The driver jar of `system` (a module of `real_systems/pom.xml`) and every jar it runs on."""
    target = ROOT / system / "target"
    driver = target / f"{system}-driver.jar"
    libs = sorted((target / "lib").glob("*.jar")) if (target / "lib").is_dir() else []
    if not driver.is_file() or not libs:
        raise LabError(f"The real system {system!r} is not built: {driver.relative_to(ROOT.parent)} or its "
                       "jars are missing.",
                       "Run scripts/setup.sh: it builds real_systems/pom.xml with Maven, which fetches the jars "
                       "from Maven Central. Without Maven or that registry the real systems are unavailable; "
                       "every other design runs as before.")
    return [str(driver), *map(str, libs)]


def available(system: str) -> bool:
    try:
        classpath(system)
        return True
    except LabError:
        return False


def java_command(system: str, main_class: str, args: list[str], *, heap_mb: int = 256,
                 properties: dict[str, str] | None = None, jvm_args: list[str] | None = None) -> list[str]:
    """`java ... <main_class> <args>` on `system`'s classpath, marked as the lab's (the leak check finds it);
    `jvm_args`: options of the JVM itself a system needs (RocketMQ's `--add-opens` on Java 17)."""
    props = [f"-D{k}={v}" for k, v in (properties or {}).items()]
    return [find_java(), f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true", f"-D{OWNER_PROPERTY}={os.getpid()}", *(jvm_args or []), *props,
            "-cp", os.pathsep.join(classpath(system)), main_class, *args]
