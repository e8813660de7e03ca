"""The `embedded` backend: a ZooKeeper JVM as a child process of this one.

The server is `org.apache.zookeeper.server.quorum.QuorumPeerMain` run from the
jars `distribution.find_distribution()` finds (the pyspark wheel's, usually),
with its own temp dir holding `zoo.cfg`, `data/myid`, the data and its log
(`server.log`, kept until the server is closed and shown when start-up fails).

The JVM runs in its own process group (Ctrl-C at a terminal reaches this
process, which stops the servers in order) and is marked with
`-Drebalance.lab.owner=<this pid>` so that the leak check can find it.
"""

from __future__ import annotations

import os
import signal
import subprocess

from ..cleanup import OWNER_PROPERTY, REAPER, child_preexec, make_temp_dir, remove_temp_dir, signal_process
from .distribution import ZkDistribution, find_distribution, find_java
from .server import ServerState, ZkServer
from .settings import ServerAddress, ZkSettings, render_zoo_cfg, server_properties

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} [myid:%X{myid}] %-5p [%t] %c{1}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
"""


class EmbeddedServer(ZkServer):
    backend = "embedded"

    def __init__(self, address: ServerAddress, view: list[ServerAddress], settings: ZkSettings,
                 distribution: ZkDistribution | None = None, java: str | None = None):
        super().__init__(address)
        self.settings = settings
        self.java = java or find_java()
        self.distribution = distribution or find_distribution()
        self.dir = make_temp_dir(f"zk{address.sid}")
        (self.dir / "data").mkdir()
        (self.dir / "data" / "myid").write_text(f"{address.sid}\n")
        props = server_properties(settings, address, view)
        (self.dir / "zoo.cfg").write_text(render_zoo_cfg(props, str(self.dir / "data")))
        (self.dir / "log4j2.properties").write_text(_LOG4J2)
        self.log_path = self.dir / "server.log"
        self._proc: subprocess.Popen | None = None
        self._token: int | None = None

    def command(self) -> list[str]:
        return [
            self.java,
            f"-Xmx{self.settings.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # faster start-up; a lab server is never CPU-bound
            "-Djava.net.preferIPv4Stack=true",
            f"-D{OWNER_PROPERTY}={os.getpid()}",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            "-cp", ":".join(self.distribution.classpath),
            MAIN_CLASS,
            str(self.dir / "zoo.cfg"),
        ]

    def start(self) -> None:
        if self.state is ServerState.RUNNING:
            return
        if self.state is ServerState.CLOSED:
            raise RuntimeError("server is closed")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=child_preexec(), cwd=self.dir,
            )
        self._token = REAPER.register(f"embedded ZooKeeper {self.sid} (pid {self._proc.pid})", self._kill_quietly)
        self.state = ServerState.RUNNING

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def stop(self, crash: bool = False) -> None:
        if self._proc is None or self.state in (ServerState.STOPPED, ServerState.CLOSED):
            return
        if self.state is ServerState.PAUSED:
            self._signal(signal.SIGCONT)
        if crash:
            self._signal(signal.SIGKILL)
        else:
            self._signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._proc.wait(timeout=15)
        if self._token is not None:
            REAPER.unregister(self._token)
            self._token = None
        self.state = ServerState.STOPPED

    def pause(self) -> None:
        if self.state is ServerState.RUNNING:
            self._signal(signal.SIGSTOP)
            self.state = ServerState.PAUSED

    def resume(self) -> None:
        if self.state is ServerState.PAUSED:
            self._signal(signal.SIGCONT)
            self.state = ServerState.RUNNING

    def close(self) -> None:
        if self.state is ServerState.CLOSED:
            return
        self.stop()
        remove_temp_dir(self.dir)
        self.state = ServerState.CLOSED

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def exited(self) -> str | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        return f"exit status {self._proc.returncode}"

    def _signal(self, sig: int) -> None:
        signal_process(self._proc.pid, sig)

    def _kill_quietly(self) -> None:
        """Reaper path: at exit there is no time for a graceful shutdown."""
        if self._proc and self._proc.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGKILL)
            self._proc.wait(timeout=15)
