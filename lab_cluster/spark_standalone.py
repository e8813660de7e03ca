"""A standalone Spark cluster on loopback: a master and its workers, from the pyspark installation itself.

Why: the grid's trials are Spark tasks, and a lab that says its job runs on a
cluster has to run one. `StandaloneCluster(workers=2)` starts what
`sbin/start-master.sh` and `sbin/start-worker.sh` start (the pip wheel ships
`bin/spark-class` but not those wrappers, which only daemonise it):

- the master, `spark-class org.apache.spark.deploy.master.Master`, on
  127.0.0.1 and a free port (its status page on another: `/json/`);
- each worker, `spark-class org.apache.spark.deploy.worker.Worker <master>`,
  with `cores_per_worker` cores, `memory_per_worker`, its own work directory
  (where its executors run) and status page.

Each JVM runs in its own process group with its log in the cluster's temp dir,
marked `-Drebalance.lab.owner=<pid>` (SPARK_DAEMON_JAVA_OPTS) for the leak
check. `start()` returns once every worker has registered with the master (its
status page lists them ALIVE), or raises a LabError with the logs' tails.
`stop()` stops the workers (their executors go with them: a worker kills its
executors as it shuts down), then the master, and removes the temp dir; the
reaper does the same if the process exits first. `url` is the master's
`spark://` URL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from .cleanup import OWNER_PROPERTY, REAPER, child_preexec, make_temp_dir, remove_temp_dir, signal_process
from .errors import LabError
from .ports import LOOPBACK, free_ports
from .zk.distribution import find_java

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The pyspark installation's directory (its `bin/spark-class` and `jars/`)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


class StandaloneCluster:
    def __init__(self, workers: int = 2, cores_per_worker: int = 1, memory_per_worker: str = "2g",
                 start_timeout_s: float = 90.0):
        self.workers, self.cores, self.memory = workers, cores_per_worker, memory_per_worker
        self.start_timeout_s = start_timeout_s
        self.dir: Path | None = None
        self.url = ""
        self.status_url = ""
        self._procs: list[tuple[str, subprocess.Popen, Path]] = []
        self._token: int | None = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> StandaloneCluster:
        """Start the master and workers; on any failure (or Ctrl-C) on the way, stop what did start."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> StandaloneCluster:
        java = find_java()
        self.dir = make_temp_dir("spark-standalone")
        self._token = REAPER.register("standalone Spark cluster", self.stop)
        port, ui, *worker_uis = free_ports(2 + self.workers)
        self.url, self.status_url = f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ui}/json/"
        self._spawn("master", [MASTER_CLASS, "--host", LOOPBACK, "--port", str(port), "--webui-port", str(ui)], java)
        for i, worker_ui in enumerate(worker_uis, 1):
            work = self.dir / f"worker{i}"
            work.mkdir()
            self._spawn(f"worker{i}", [WORKER_CLASS, "--host", LOOPBACK, "--cores", str(self.cores),
                                       "--memory", self.memory, "--work-dir", str(work),
                                       "--webui-port", str(worker_ui), self.url], java)
        self._wait_for_workers()
        return self

    def _spawn(self, name: str, args: list[str], java: str) -> None:
        env = dict(os.environ, SPARK_HOME=str(spark_home()), JAVA_HOME=str(Path(java).resolve().parent.parent),
                   SPARK_LOCAL_IP=LOOPBACK, SPARK_LOG_DIR=str(self.dir), SPARK_NO_DAEMONIZE="1",
                   SPARK_DAEMON_JAVA_OPTS=f"-D{OWNER_PROPERTY}={os.getpid()} -Djava.net.preferIPv4Stack=true")
        log = self.dir / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env, cwd=self.dir,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=child_preexec())
        self._procs.append((name, proc, log))

    def status(self) -> dict:
        """The master's status page (`/json/`): its workers, their state, cores and memory, the applications."""
        with urllib.request.urlopen(self.status_url, timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            exited = [(name, proc.returncode) for name, proc, _ in self._procs if proc.poll() is not None]
            if exited:
                raise LabError(f"the standalone Spark cluster's {exited[0][0]} exited at start-up "
                               f"(exit status {exited[0][1]}).", "Its log is below.", details=self._logs())
            if self.alive_workers() == self.workers:
                return
            time.sleep(0.5)
        raise LabError(f"the standalone Spark cluster's {self.workers} worker(s) did not all register with its "
                       f"master within {self.start_timeout_s:.0f} s.", "Their logs are below.", details=self._logs())

    def _logs(self, lines: int = 15) -> str:
        out = []
        for name, _, log in self._procs:
            try:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                tail = []
            out.append(f"--- {name} ({log.name}) ---\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        for _, proc, _ in reversed(self._procs):  # the workers first, then the master
            if proc.poll() is None:
                signal_process(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    signal_process(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=15)
        self._procs.clear()
        if self._token is not None:
            REAPER.unregister(self._token)
            self._token = None
        if self.dir is not None:
            remove_temp_dir(self.dir)
            self.dir = None
