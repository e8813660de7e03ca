"""What every real system's broker process shares: its home in the trial's directory, its properties file, its
logging to the process log, and the JVM that runs it as a lab child (`LabProcess`, owner-marked, reaped)."""

from __future__ import annotations

from pathlib import Path

from lab_cluster.processes import LabProcess

from .jars import java_command

#: log4j 1.x (Kafka 0.8's, and 3.9's reload4j): INFO and worse to stderr, which is the process's log file
LOG4J = """log4j.rootLogger=INFO, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""


def broker_home(trial_dir: str | Path, system: str, broker_id: int) -> Path:
    home = Path(trial_dir) / system / f"broker-{broker_id}"
    home.mkdir(parents=True, exist_ok=True)
    return home


def write_properties(path: Path, settings: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def start_jvm(name: str, trial_dir: str | Path, system: str, main_class: str, args: list[str], *,
              heap_mb: int = 256, properties: dict[str, str] | None = None,
              jvm_args: list[str] | None = None) -> LabProcess:
    """A JVM of `system` running `main_class`, as the lab's child process `name` (its log: proc/<name>.log)."""
    return LabProcess(name, "", [], Path(trial_dir) / "proc" / f"{name}.log",
                      command=java_command(system, main_class, args, heap_mb=heap_mb, properties=properties,
                                           jvm_args=jvm_args))
