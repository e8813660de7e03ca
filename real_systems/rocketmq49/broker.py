"""RocketMQ 4.9.7's servers as child JVMs of the trial: one name server, then the trial's brokers, each a master
(`brokerId` 0) of its own name (`broker-<id>`, its own broker set), registered with that name server; the topic
made on each broker as `mqadmin updateTopic` makes it, and grown the same way (`add_partitions`); and the trial's
producer on RocketMQ's own producer.

Everything the processes address is on loopback: the brokers register `brokerIP1`/`brokerIP2` 127.0.0.1 with the
name server, which is what every client is routed to, and every client is told the name server's loopback
address and `clientIP` 127.0.0.1 (the VIP channel off). RocketMQ 4.9.7 has no setting for the address its
servers bind (its remoting server and HA service bind every interface on their port); the lab picks free
loopback ports for them: a broker's listen port p, its fast port p - 2 and its HA port p + 1, all free.

Settings: RocketMQ's defaults but for the ports, the store in the trial's directory (`storePathRootDir`), small
files (a 64 MB commit log file, consume-queue files of 100 000 units, a small index), no topic made by a
send (`autoCreateTopicEnable` false: the trial makes its topic), and what a trial sets on its brokers
(`TrialSpec.broker_overrides`, in RocketMQ's names). Each JVM's `user.home` is in the trial's directory, so
nothing RocketMQ keeps under a home (its default store, its client logs) lands outside it.

The topic's layout is the lab's `rocketmq` design's: partition p on broker (p mod B) + 1, as queue
p div B there (`Layout.java`), so that RocketMQ's sorted queue list is the lab's and the same strategy gives
the same shares.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from pathlib import Path

from lab_cluster.errors import LabError, tail
from lab_cluster.ports import LOOPBACK, free_port

from ..brokers import broker_home, start_jvm, write_properties
from ..jars import java_command

SYSTEM = "rocketmq49"
#: what RocketMQ 4.9.7 needs of Java 17: its store unmaps files and reads direct buffers by reflection
#: (`MappedFile.clean` calls the direct buffer's cleaner, `jdk.internal.ref.Cleaner`, at shutdown; seen without)
JVM_ARGS = ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
            "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED"]
LOGBACK = """<configuration>
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>[%d] %p %m [%logger]%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDERR"/></root>
</configuration>
"""
#: RocketMQ's defaults (1 GB commit log files, 6 MB consume-queue files, a 400 MB index) made small for a trial
STORE = {"mappedFileSizeCommitLog": 64 * 1024 * 1024, "mappedFileSizeConsumeQueue": 100_000 * 20,
         "maxHashSlotNum": 10_000, "maxIndexNum": 40_000}


#: RocketMQ's remoting starts in TLS "permissive" mode and makes a self-signed certificate at every start (seconds of
#: CPU per process); on loopback, plain connections only
TLS = {"tls.server.mode": "disabled"}


def properties(trial_dir: str | Path, name: str) -> dict[str, str]:
    """The system properties of every RocketMQ JVM of the trial (`name`: the process's): its home, its logging."""
    root = Path(trial_dir) / SYSTEM
    home = root / "home" / name
    home.mkdir(parents=True, exist_ok=True)
    return {"user.home": str(home), "logback.configurationFile": _logback(root), **TLS,
            "rocketmq.client.logRoot": str(Path(trial_dir) / "proc" / f"rocketmq-client-{name}"),
            "rocketmq.client.logLevel": "INFO"}


def _logback(directory: Path) -> str:
    logback = directory / "logback.xml"
    if not logback.exists():
        logback.write_text(LOGBACK)
    return str(logback)


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
            return True
        except OSError:
            return False


def broker_port() -> int:
    """A free port p whose p - 2 (the broker's fast port) and p + 1 (its HA port) are free too."""
    for _ in range(200):
        port = free_port()
        if port > 1026 and _free(port - 2) and _free(port + 1):
            return port
    raise LabError("No free loopback port p with p - 2 and p + 1 free for a RocketMQ broker.",
                   "Free some ports, or run fewer trials at once.")


def name_server(trial_dir: str | Path):
    """The trial's name server (`lab.real.rocketmq49.NameServer`); its `address`: host:port."""
    port = free_port()
    home = Path(trial_dir) / SYSTEM / "namesrv"
    server = start_jvm("namesrv", trial_dir, SYSTEM, "lab.real.rocketmq49.NameServer", [str(port), str(home)],
                       heap_mb=128, properties=properties(trial_dir, "namesrv"), jvm_args=JVM_ARGS)
    server.port, server.address = port, f"{LOOPBACK}:{port}"
    return server


def start(broker_id: int, namesrv: str, trial_dir: str | Path, *, session_timeout_ms: int = 6000,
          port: int = 0, config: dict[str, str] | None = None):
    """Broker `broker-<broker_id>` (a master), registered with the name server at `namesrv`; its `port` and
    `kafka_port` are both its one listener (RocketMQ's remoting). `session_timeout_ms` is not used."""
    port = port or broker_port()
    home = broker_home(trial_dir, SYSTEM, broker_id)
    props = write_properties(home / "broker.properties", {
        "brokerClusterName": "lab-cluster", "brokerName": f"broker-{broker_id}", "brokerId": 0,
        "namesrvAddr": namesrv, "brokerIP1": LOOPBACK, "brokerIP2": LOOPBACK, "listenPort": port,
        "storePathRootDir": home / "store", "autoCreateTopicEnable": "false", **STORE, **(config or {})})
    broker = start_jvm(f"broker-{broker_id}", trial_dir, SYSTEM, "lab.real.rocketmq49.Broker", [str(props)],
                       heap_mb=256, properties=properties(trial_dir, f"broker-{broker_id}"), jvm_args=JVM_ARGS)
    broker.broker_id, broker.port, broker.kafka_port = broker_id, port, port
    return broker


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Make `topic` on every broker of `bootstrap` (their listeners, in broker order) with its share of the
    partitions as queues, and wait until the name server's route holds them all (`Topics.java`)."""
    with tempfile.TemporaryDirectory(prefix=f"rebalance-lab-{os.getpid()}-") as home:  # its client's log: thrown away
        command = java_command(SYSTEM, "lab.real.rocketmq49.Topics", [topic, str(partitions), *bootstrap.split(",")],
                               heap_mb=128, jvm_args=JVM_ARGS,
                               properties={"user.home": home, "rocketmq.client.logRoot": home, **TLS,
                                           "logback.configurationFile": _logback(Path(home))})
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise LabError(f"Topic {topic} could not be made on RocketMQ's brokers.",
                       "Its output is below; check the brokers' logs in the trial's directory (proc/broker-*.log).",
                       details=tail(done.stdout + done.stderr))


def add_partitions(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Grow `topic` to `partitions` as RocketMQ grows a topic: `mqadmin updateTopic` again with more queues, which
    sends each broker the same UPDATE_AND_CREATE_TOPIC with its larger `readQueueNums`/`writeQueueNums`. So this is
    `create_topic` with the new count: in the lab's layout each broker's share only grows (partition p stays queue
    p div B of broker (p mod B) + 1), each broker replaces its topic config with the larger one and registers it
    with the name server before it answers, and the wait ends when the route holds every queue. A queue's consume
    queue is made on its first message."""
    create_topic(bootstrap, topic, partitions, timeout_s)
