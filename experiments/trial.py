"""One trial: a fresh cluster, one consumer group, a scripted change, everything stopped after.

A `TrialSpec` says what to run: the experiment, the design (`legacy` or
`modern`), the group size N, the partitions P, the producer's rate, the seed,
consumer config overrides and the scenario's steps. `run_trial(spec, dir)`
then, in order:

1. provisions its own ZooKeeper (one server; the backend `LAB_ZK_BACKEND`
   picks), three brokers (which host the group coordinator, as Kafka 0.9+
   brokers do; ZooKeeper-era consumers never ask for it), topic `t` with P
   partitions and a producer;
2. starts the group: one process hosting N consumers `c1..cN`
   (`python -m legacy_zk.host` or `python -m modern_coord.host`) and waits
   until it has converged (`GroupWatch`);
3. runs each step: records `zk_server_counters` (the server's `mntr`), records
   the `change`, does it (`join`: a consumer `j1` in its own process; `leave`:
   `j1` stops gracefully), waits until the group has converged on its new
   membership or the step's limit has passed, waits `settle_s`, and records
   the server counters again;
4. records `end` and stops everything (consumers first, then the producer,
   brokers and ZooKeeper), on success, failure and Ctrl-C alike.

The scenario's own events go to the `scenario` actor's trace in the trial's
directory beside everyone else's, on the same monotonic clock, so the
analysis (`experiments/metrics.py`) cuts the traces into one window per change
without trusting anything the runner measured itself. The runner returns a
`TrialResult`: `ok`, or `failed` with its reason (a group that never converged,
a consumer that gave up, a process that died). A failed trial keeps its
traces, for reading, and is never analysed as if it had succeeded.

Usage::

    spec = TrialSpec("herd", "legacy", consumers=4, partitions=16)
    result = run_trial(spec, Path("runs/x/trials") / spec.trial_id)
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from lab_cluster import fourlw
from lab_cluster.broker.admin import BrokerProcess, create_topic, wait_for_metadata
from lab_cluster.consumer_host import actor_names
from lab_cluster.errors import LabError
from lab_cluster.processes import LabProcess
from lab_cluster.trace import TraceRecorder
from lab_cluster.zk import provision

from .group_watch import GroupWatch

TOPIC = "t"
GROUP = "lab-group"
#: Every broker hosts a group coordinator; the only departure from Kafka's broker defaults is none:
#: `offsets.topic.num.partitions` 50 and `group.initial.rebalance.delay.ms` 3000 are Kafka's own.
COORDINATOR_PLUGIN = "modern_coord.coordinator.service:install"
#: The families' host modules and how each is told where the cluster is.
HOSTS = {"legacy": ("legacy_zk.host", "--zk"), "modern": ("modern_coord.host", "--bootstrap")}
#: Read from the start of the log, so every produced message is one a consumer should process.
OFFSET_RESET = {"legacy": {"auto.offset.reset": "smallest"}, "modern": {"auto.offset.reset": "earliest"}}
#: The `mntr` counters recorded around every change (the cross-check's server side).
SERVER_COUNTERS = ("zk_packets_received", "zk_packets_sent", "zk_watch_count", "zk_num_alive_connections",
                   "zk_sum_node_children_watch_count", "zk_sum_node_created_watch_count",
                   "zk_sum_node_deleted_watch_count", "zk_sum_node_changed_watch_count")
STEP_ACTIONS = ("join", "leave")


@dataclass(frozen=True)
class TrialSpec:
    experiment: str
    design: str
    consumers: int
    partitions: int
    rate: float = 2.0  # messages per second per partition
    seed: int = 0
    repetition: int = 0
    #: consumer config overrides, as `KEY=VALUE` strings (recorded with the results)
    overrides: tuple[str, ...] = ()
    #: the scenario: each step happens once the group has converged after the one before
    steps: tuple[str, ...] = ("join", "leave")
    converge_limit_s: float = 90.0
    settle_s: float = 1.0
    brokers: int = 3

    def __post_init__(self):
        if self.design not in HOSTS:
            raise LabError(f"Unknown design {self.design!r}.", f"Use one of: {', '.join(HOSTS)}.")
        if self.consumers < 1 or self.partitions < 1:
            raise LabError(f"A trial needs at least one consumer and one partition, not N={self.consumers}, "
                           f"P={self.partitions}.", "Use positive numbers.")
        unknown = [s for s in self.steps if s not in STEP_ACTIONS]
        if unknown:
            raise LabError(f"Unknown scenario step(s): {', '.join(unknown)}.", f"Use: {', '.join(STEP_ACTIONS)}.")

    @property
    def phases(self) -> int:
        """How many phases a trial goes through, for progress bars: ZooKeeper, brokers, group, each step."""
        return 3 + len(self.steps)

    @property
    def trial_id(self) -> str:
        return f"{self.experiment}-{self.design}-n{self.consumers}-p{self.partitions}-s{self.seed}-r{self.repetition}"

    def as_row(self) -> dict:
        """The spec as flat values (lists as JSON), with its `trial` id: a grid row, a line of grid.json."""
        row = asdict(self)
        row["overrides"] = json.dumps(list(self.overrides))
        row["steps"] = json.dumps(list(self.steps))
        row["trial"] = self.trial_id
        return row

    @classmethod
    def from_row(cls, row: dict) -> TrialSpec:
        values = dict(row)
        values["overrides"] = tuple(json.loads(values["overrides"]))
        values["steps"] = tuple(json.loads(values["steps"]))
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})


@dataclass
class TrialResult:
    trial: str
    status: str  # ok | failed
    reason: str = ""
    trial_dir: str = ""
    wall_s: float = 0.0
    environment: dict = field(default_factory=dict)


class TrialFailed(Exception):
    """The scenario could not go on (the reason is the message); the traces so far are kept."""


def run_trial(spec: TrialSpec, trial_dir: Path) -> TrialResult:
    trial_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    environment: dict = {}
    scenario = TraceRecorder(trial_dir, trial=spec.trial_id, design=spec.design, actor="scenario")
    try:
        with ExitStack() as stack:
            stack.callback(scenario.close)
            _Scenario(spec, trial_dir, scenario, stack, environment).run()
        status, reason = "ok", ""
    except TrialFailed as exc:
        status, reason = "failed", str(exc)
    except LabError as exc:
        status, reason = "failed", exc.paragraph()
    return TrialResult(spec.trial_id, status, reason, str(trial_dir), round(time.monotonic() - started, 2),
                       environment)


class _Scenario:
    def __init__(self, spec: TrialSpec, trial_dir: Path, trace: TraceRecorder, stack: ExitStack, environment: dict):
        self.spec, self.dir, self.trace, self.stack, self.environment = spec, trial_dir, trace, stack, environment
        self.watch = GroupWatch(spec.design, spec.partitions)
        self.joiner: LabProcess | None = None

    def progress(self, phase: str, done: int) -> None:
        """Where the trial is, for the driver's progress bars (`progress.json` in the trial's directory)."""
        (self.dir / "progress.json").write_text(json.dumps({"phase": phase, "done": done,
                                                            "total": self.spec.phases}))

    def run(self) -> None:
        spec = self.spec
        self.progress("starting ZooKeeper", 0)
        zk = provision(servers=1)
        self.stack.callback(zk.close)
        self.environment.update(zk.describe())
        self.server = zk.servers[0].connect.split(":")
        admin = KazooClient(hosts=zk.connect, timeout=10)
        admin.start(timeout=30)
        self.stack.callback(lambda: (admin.stop(), admin.close()))
        self.progress("starting brokers", 1)
        brokers = [self._broker(i, zk.connect) for i in range(1, spec.brokers + 1)]
        create_topic(admin, TOPIC, spec.partitions, [b.broker_id for b in brokers])
        wait_for_metadata(admin, TOPIC, spec.partitions)
        self.bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers)
        self.zk_connect = zk.connect
        self.trace.record("setup", topic=TOPIC, partitions=spec.partitions, consumers=spec.consumers,
                          group=GROUP, spec=spec.as_row(), **self.environment)
        if spec.rate > 0:
            producer = LabProcess("producer", "lab_cluster.producer",
                                  ["--zk", zk.connect, "--topic", TOPIC, "--rate", str(spec.rate), "--trial-dir",
                                   str(self.dir), "--trial", spec.trial_id], self.dir / "proc" / "producer.log")
            self.stack.callback(producer.stop)
        self.progress(f"forming a group of {spec.consumers}", 2)
        group = self._consumers("c", spec.consumers)
        members = actor_names("c", spec.consumers)
        self._wait_converged(members, since_ns=0, what="the initial group")
        self.trace.record("converged", index=0, members=members)
        for index, step in enumerate(spec.steps, start=1):
            self.progress(f"step {index}: {step}", 2 + index)
            members = self._step(index, step, members)
        self.progress("stopping", spec.phases)
        self.trace.record("end")
        # the group stops as one (its host stops every consumer at once), before the cluster under it
        group.stop()

    # -- the pieces ------------------------------------------------------------------
    def _broker(self, broker_id: int, connect: str) -> BrokerProcess:
        broker = BrokerProcess(broker_id, connect, self.dir, trial=self.spec.trial_id, session_timeout_ms=6000,
                               plugins=(COORDINATOR_PLUGIN,))
        self.stack.callback(broker.stop)
        return broker

    def _consumers(self, name: str, count: int) -> LabProcess:
        module, address_flag = HOSTS[self.spec.design]
        address = self.zk_connect if self.spec.design == "legacy" else self.bootstrap
        args = [address_flag, address, "--group", GROUP, "--topic", TOPIC, "--count", str(count),
                "--trial-dir", str(self.dir), "--trial", self.spec.trial_id, "--name", name]
        overrides = {**OFFSET_RESET[self.spec.design], **dict(o.split("=", 1) for o in self.spec.overrides)}
        for key, value in overrides.items():
            args += ["--config", f"{key}={value}"]
        process = LabProcess(f"consumers-{name}", module, args, self.dir / "proc" / f"consumers-{name}.log",
                             on_line=self.watch.update)
        self.stack.callback(process.stop)
        return process

    def _server_counters(self, index: int, at: str) -> None:
        host, port = self.server
        values = fourlw.mntr(host, int(port))
        self.trace.record("zk_server_counters", index=index, at=at,
                          counters={k: values.get(k, 0) for k in SERVER_COUNTERS})

    def _step(self, index: int, step: str, members: list[str]) -> list[str]:
        self._server_counters(index, "before")
        if step == "join":
            if self.joiner is not None:
                raise TrialFailed("the scenario joins j1 twice")
            after = members + ["j1"]
            since = self.trace.record("change", index=index, change="join", member="j1",
                                      members_before=len(members), members_after=len(after))
            self.joiner = self._consumers("j1", 1)
        else:
            if self.joiner is None:
                raise TrialFailed("the scenario's leave has no joined consumer to stop")
            after = [m for m in members if m != "j1"]
            since = self.trace.record("change", index=index, change="leave", member="j1",
                                      members_before=len(members), members_after=len(after))
            self.joiner.stop()
            self.joiner = None
            self.watch.forget("j1")
        self._wait_converged(after, since_ns=since, what=f"step {index} ({step})")
        self.trace.record("converged", index=index, members=after)
        time.sleep(self.spec.settle_s)
        self._server_counters(index, "after")
        return after

    def _wait_converged(self, members: list[str], since_ns: int, what: str) -> None:
        problem = self.watch.wait_converged(members, since_ns, self.spec.converge_limit_s)
        if problem:
            raise TrialFailed(f"{what} did not converge within {self.spec.converge_limit_s:.0f} s: {problem}")
