"""One trial: a fresh cluster, one consumer group, a scripted change, everything stopped after.

A `TrialSpec` says what to run: the experiment and its variant, the design
(`zookeeper` or `classic`), the group size N, the partitions P, the producer's
rate, the seed, consumer config overrides, the ZooKeeper ensemble's size, how
the group is laid out over processes, a follower's quorum delay and the
scenario's steps. `run_trial(spec, dir)` then, in order:

1. provisions its own ZooKeeper (`zk_servers`: 1 or 3; on the backend the
   run's `BackendRequest` asks for, resolved on the machine that runs the
   trial; LAB_ZK_BACKEND there when none is given), three brokers (which host the group coordinator,
   as Kafka 0.9+ brokers do; ZooKeeper-era consumers never ask for it; broker
   b holds its session on server b mod S), topic `t` with P partitions and a
   producer; a real system's design (`Family.brokers`, `real_systems/`) gets
   that system's own brokers, their topic and a producer in Kafka's protocol;
2. starts the group `c1..cN`: `layout="shared"` runs them in one process
   (`python -m lab_cluster.consumer_host --family <package> --count N`);
   `layout="spread"` runs each in its own process, so that a fault can pause
   one alone, and pins the k-th consumer started to ZooKeeper server k mod S
   (its connect string names that server only: a real 0.8 consumer listed
   every server and its client picked one at random; pinning makes the spread
   the same in every trial). It waits until the group has converged
   (`GroupWatch`), then, if the parameter `follower_delay_ms` is above 0 (`TrialSpec.params`), delays one follower's
   quorum link to the leader (a `quorum_delay` fault) until the end; if `broker_delay_ms` is, every
   consumer's link to the last broker (for families that learn membership from brokers: RocketMQ);
3. runs each step: records `zk_server_counters` (the servers' `mntr`, summed),
   records the `change`, does it, waits until the group has converged on its
   new membership or the limit has passed, waits `settle_s`, and records the
   server counters again. The steps (`join`, `leave`, `churn`, `pause`,
   `resume`, `cut`, `heal`, `restart`, `broker_kill`, `broker_restart`) and the membership each leads to are
   registered
   in `steps.py`; after `pause` and `cut` the scenario holds (parameter) `hold_s` beyond
   convergence, so that the survivors process (and commit) what the victim had; after a
   `restart` it waits `restart_gap_s` more before the next step (a rolling restart's gap);
4. records `end` and stops everything (consumers first, then the producer,
   brokers, fault proxies and ZooKeeper), on success, failure and Ctrl-C alike.

The scenario's own events go to the `scenario` actor's trace in the trial's
directory beside everyone else's, on the same monotonic clock (`change`,
`membership`, `converged`, `not_converged`, `member_started`, and every
`fault` through `lab_cluster.faults.Faults`), so the analysis
(`experiments/metrics.py`) cuts the traces into one window per change without
trusting anything the runner measured itself. The runner returns a
`TrialResult`: `ok`, or `failed` with its reason (a group that never converged,
a consumer that gave up, a process that died). When `converge_required` is
false (split brain: a ZooKeeper-era group may give up rebalancing, and that is
the finding), a change that does not converge is recorded as `not_converged`
and the trial goes on. A failed trial keeps its traces, for reading, and is
never analysed as if it had succeeded.

Usage::

    spec = TrialSpec("zombie", "zookeeper", consumers=2, partitions=4, layout="spread", steps=("pause", "resume"))
    result = run_trial(spec, Path("runs/x/trials") / spec.trial_id)
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from experiments.engine.families import BROKER_PLUGINS, FAMILIES
from experiments.engine.group_watch import GroupWatch
from experiments.engine.host_tasks import HostTasks, slices
from experiments.engine.steps import SPREAD_STEPS, STEPS, VICTIM, VICTIM_STEPS, StepImpossible
from lab_cluster import fourlw
from lab_cluster.broker import zk_layout
from lab_cluster.broker.admin import (
    BrokerProcess,
    add_partitions,
    create_topic,
    leaders,
    wait_for_leaders,
    wait_for_metadata,
)
from lab_cluster.consumer_host import actor_names
from lab_cluster.errors import LabError
from lab_cluster.family import Family
from lab_cluster.faultproxy import Mode
from lab_cluster.faults import Faults, Link, zk_link
from lab_cluster.processes import LabProcess
from lab_cluster.trace import TraceRecorder
from lab_cluster.trace_reader import COLUMNAR_FILE, write_columnar
from lab_cluster.zk import BackendRequest, provision

TOPIC = "t"
GROUP = "lab-group"
#: The `mntr` counters recorded around every change (the cross-check's server side).
SERVER_COUNTERS = ("zk_packets_received", "zk_packets_sent", "zk_watch_count", "zk_num_alive_connections",
                   "zk_sum_node_children_watch_count", "zk_sum_node_created_watch_count",
                   "zk_sum_node_deleted_watch_count", "zk_sum_node_changed_watch_count")
LAYOUTS = ("shared", "spread")
#: the knobs of a trial's set-up that an experiment may turn (`TrialSpec.params`), with their defaults:
#: `follower_delay_ms`, one follower's quorum link to the leader delayed by this much, each way, from the
#: first step on (split brain); `broker_delay_ms`, every consumer's link to the last broker delayed by this
#: much, each way, from the first step on: where brokers keep the membership (RocketMQ), that broker learns
#: of each change late and the brokers disagree meanwhile (split brain)
SETUP_PARAMS: dict[str, float] = {"follower_delay_ms": 0, "broker_delay_ms": 0}
#: every parameter a trial may be given, with its default: the set-up's, then each step's (`Step.params`)
PARAMS: dict[str, float] = {**SETUP_PARAMS, **{k: v for step in STEPS.values() for k, v in step.params.items()}}


def params_for(steps: tuple[str, ...], wanted: dict[str, float]) -> dict[str, float]:
    """Those of `wanted` a trial of `steps` takes (the set-up's, and its steps' own), where they differ from the
    default: an experiment states its knobs once for every scenario it draws or lays out, and each trial gets its
    own (a trial refuses a parameter none of its steps takes; a default is left out, as a grid row reads back)."""
    taken = set(SETUP_PARAMS) | {name for step in steps for name in STEPS[step].params}
    return {k: v for k, v in wanted.items() if k in taken and v != PARAMS[k]}


def host_ready_timeout_s(count: int) -> float:
    """How long a host of `count` consumers may take to say READY.

    It starts its consumers one after another while those already started rebalance on every join
    (the herd, during the group's formation): a ZooKeeper-era host of 256 took more than a minute on
    2 cores. A hang still ends, with the host's log in the error."""
    return 60.0 + 2.0 * count


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
    #: one consumer's own overrides, as `ACTOR:KEY=VALUE` (e.g. `j1:nodeId=0`, a node misconfigured on purpose);
    #: they apply after `overrides`
    member_overrides: tuple[str, ...] = ()
    #: broker settings beyond the design's own (`Family.broker_config`), as `KEY=VALUE`: the settings that live
    #: on the broker for a design (KIP-848's session timeout and heartbeat interval are the coordinator's)
    broker_overrides: tuple[str, ...] = ()
    #: the scenario: each step happens once the group has converged after the one before
    steps: tuple[str, ...] = ("join", "leave")
    converge_limit_s: float = 90.0
    settle_s: float = 1.0
    brokers: int = 3
    #: what sets this trial apart within its experiment (part of the trial id), e.g. `delay-1000`, `pause`
    variant: str = ""
    zk_servers: int = 1
    layout: str = "shared"
    converge_required: bool = True
    #: the group's hosts as this many tasks of one Spark barrier stage, on the cluster's executors
    #: (`host_tasks.py`); 0: one host on the trial's own machine (`layout`). The trial then runs on the driver.
    host_tasks: int = 0
    #: the experiment's own knobs, {name: value} among `PARAMS` (the set-up's and its steps'); a
    #: parameter not given takes its default. Kept as sorted pairs, so that a spec stays hashable.
    params: tuple[tuple[str, float], ...] | dict[str, float] = ()

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(sorted(dict(self.params).items())))
        if self.design not in FAMILIES:
            raise LabError(f"Unknown design {self.design!r}.", f"Use one of: {', '.join(FAMILIES)}.")
        if self.consumers < 1 or self.partitions < 1:
            raise LabError(f"A trial needs at least one consumer and one partition, not N={self.consumers}, "
                           f"P={self.partitions}.", "Use positive numbers.")
        unknown = [s for s in self.steps if s not in STEPS]
        if unknown:
            raise LabError(f"Unknown scenario step(s): {', '.join(unknown)}.", f"Use: {', '.join(STEPS)}.")
        if self.layout not in LAYOUTS:
            raise LabError(f"Unknown layout {self.layout!r}.", f"Use one of: {', '.join(LAYOUTS)}.")
        if self.layout == "shared" and VICTIM_STEPS & set(self.steps):
            raise LabError(f"The step(s) {', '.join(sorted(VICTIM_STEPS & set(self.steps)))} act on the victim "
                           f"{VICTIM}, which needs a process of its own.", 'Use layout="spread".')
        if self.layout == "shared" and SPREAD_STEPS & set(self.steps):
            raise LabError(f"The step(s) {', '.join(sorted(SPREAD_STEPS & set(self.steps)))} act on the group's "
                           "own consumers one at a time, each of which needs a process of its own.",
                           'Use layout="spread".')
        if self.host_tasks and (self.layout != "shared" or not 1 <= self.host_tasks <= self.consumers):
            raise LabError(f"host_tasks={self.host_tasks}: a group of {self.consumers} can be spread over 1 to "
                           f"{self.consumers} host tasks, in the shared layout (not {self.layout!r}).",
                           "Use host_tasks=0 (one local host), or a number of tasks up to N with layout shared.")
        for entry in self.member_overrides:
            actor, _, setting = entry.partition(":")
            if not actor or "=" not in setting:
                raise LabError(f"A member override is ACTOR:KEY=VALUE, not {entry!r}.", "E.g. j1:nodeId=0.")
        for name, _ in self.params:
            if name not in PARAMS:
                raise LabError(f"Unknown trial parameter {name!r}.", f"Use one of: {', '.join(PARAMS)}.")
            takers = [s for s in STEPS if name in STEPS[s].params]
            if name not in SETUP_PARAMS and not set(takers) & set(self.steps):
                raise LabError(f"The parameter {name} is for the step(s) {', '.join(takers)}, and this trial has "
                               f"none ({', '.join(self.steps)}).", f"Drop {name}, or add such a step.")
        if self.param("follower_delay_ms") and self.zk_servers < 3:
            raise LabError("A follower's quorum link needs an ensemble.", "Use zk_servers=3 with follower_delay_ms.")
        if {"cut", "heal"} & set(self.steps) and FAMILIES[self.design].victim_link == "none":
            raise LabError(f"{self.design}'s consumers cannot be routed through a fault proxy (a real Kafka client "
                           "connects where the brokers' metadata says), so no `cut` can isolate one.",
                           "Leave this design out of experiments that cut a link.")
        if self.param("broker_delay_ms") and FAMILIES[self.design].victim_link != "brokers":
            raise LabError(f"broker_delay_ms delays consumers' links to a broker, and {self.design}'s consumers "
                           "are not routed through such links.",
                           "Use it with a family whose victim_link is brokers (rocketmq).")

    def param(self, name: str) -> float:
        """The value of one of `PARAMS` in this trial: the one it was given, else the default."""
        return dict(self.params).get(name, PARAMS[name])

    @property
    def phases(self) -> int:
        """How many phases a trial goes through, for progress bars: ZooKeeper, brokers, group, each step."""
        return 3 + len(self.steps)

    @property
    def trial_id(self) -> str:
        variant = f"-{self.variant}" if self.variant else ""
        spread = f"-h{self.host_tasks}" if self.host_tasks else ""
        return (f"{self.experiment}{variant}-{self.design}-n{self.consumers}{spread}-p{self.partitions}-s{self.seed}"
                f"-r{self.repetition}")

    def as_row(self) -> dict:
        """The spec as flat values (lists as JSON), every parameter a column of its own (its value or default),
        with its `trial` id: a grid row, a line of grid.json."""
        row = asdict(self)
        del row["params"]
        row["overrides"] = json.dumps(list(self.overrides))
        row["member_overrides"] = json.dumps(list(self.member_overrides))
        row["broker_overrides"] = json.dumps(list(self.broker_overrides))
        row["steps"] = json.dumps(list(self.steps))
        row.update({name: self.param(name) for name in PARAMS})
        row["trial"] = self.trial_id
        return row

    @classmethod
    def from_row(cls, row: dict) -> TrialSpec:
        values = dict(row)
        values["overrides"] = tuple(json.loads(values["overrides"]))
        values["member_overrides"] = tuple(json.loads(values.get("member_overrides") or "[]"))
        values["broker_overrides"] = tuple(json.loads(values.get("broker_overrides") or "[]"))
        values["steps"] = tuple(json.loads(values["steps"]))
        values["params"] = {name: values[name] for name in PARAMS if values.get(name, PARAMS[name]) != PARAMS[name]}
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


def run_trial(spec: TrialSpec, trial_dir: Path, zk_backend: BackendRequest | None = None,
              spark_context=None) -> TrialResult:
    """Run `spec` into `trial_dir` on a ZooKeeper of `zk_backend` (default: LAB_ZK_BACKEND here); a trial with
    `host_tasks` submits its hosts through `spark_context` (the driver's)."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    environment: dict = {}
    scenario = TraceRecorder(trial_dir, trial=spec.trial_id, design=spec.design, actor="scenario")
    try:
        with ExitStack() as stack:
            stack.callback(scenario.close)
            _Scenario(spec, trial_dir, scenario, stack, environment, zk_backend, spark_context).run()
        status, reason = "ok", ""
    except TrialFailed as exc:
        status, reason = "failed", str(exc)
    except LabError as exc:
        status, reason = "failed", exc.paragraph()
        if exc.details:  # e.g. the log tail of a ZooKeeper server that exited at start-up: kept with the trial
            (trial_dir / "failure.log").write_text(exc.details + "\n")
            reason += " (its details: failure.log in the trial's directory)"
    except Exception as exc:  # a bug or an unforeseen error: this trial fails, the run's other trials go on
        status, reason = "failed", f"unexpected {type(exc).__name__}: {exc} (traceback: failure.log)"
        (trial_dir / "failure.log").write_text(traceback.format_exc())
    try:  # every process has stopped and closed its trace: the analysis reads them from one columnar file
        write_columnar(trial_dir)
    except (OSError, ValueError) as exc:
        if status == "ok":
            status, reason = "failed", f"its traces could not be stored for analysis ({COLUMNAR_FILE}): {exc}"
    return TrialResult(spec.trial_id, status, reason, str(trial_dir), round(time.monotonic() - started, 2),
                       environment)


class _Scenario:
    def __init__(self, spec: TrialSpec, trial_dir: Path, trace: TraceRecorder, stack: ExitStack, environment: dict,
                 zk_backend: BackendRequest | None = None, spark_context=None):
        self.spec, self.dir, self.trace, self.stack, self.environment = spec, trial_dir, trace, stack, environment
        self.zk_backend, self.spark_context = zk_backend, spark_context
        self.watch = GroupWatch(spec.design, spec.partitions)
        self.faults = Faults(trace)
        self.members: dict[str, LabProcess] = {}  # the processes of consumers started one by one
        self.joined: list[str] = []  # joiners still running, oldest first
        self.joins = 0  # joiners started so far: the next is j<joins + 1>
        self.restarts = 0  # restarts done so far: the next restarts c<restarts + 1>
        self.broker_stops = 0  # broker_stops done so far: the next stops broker <broker_stops + 1>
        self.slots: dict[str, int] = {}  # each consumer's start order: its ZooKeeper server, through restarts
        self.started = 0  # consumers started so far: the k-th is pinned to ZooKeeper server k mod S
        self.victim_link: Link | None = None
        self.lagging_broker: Link | None = None  # every consumer's link to the last broker (`broker_delay_ms`)
        self.brokers: dict[int, BrokerProcess] = {}  # the broker processes by id (a restarted one replaces its own)
        self.killed: int | None = None  # the broker a `broker_kill` or `broker_stop` took down, until its restart
        self.zk_stopped: int | None = None  # the ZooKeeper server a `zk_stop` stopped, until its `zk_start`
        self.topic_partitions = spec.partitions  # the topic's partitions now (a `grow` adds some)

    def progress(self, phase: str, done: int) -> None:
        """Where the trial is, for the driver's progress bars (`progress.json` in the trial's directory)."""
        (self.dir / "progress.json").write_text(json.dumps({"phase": phase, "done": done,
                                                            "total": self.spec.phases}))

    def run(self) -> None:
        spec = self.spec
        self.progress("starting ZooKeeper", 0)
        self.zk = zk = provision(servers=spec.zk_servers, backend=self.zk_backend)
        self.stack.callback(zk.close)
        self.environment.update(zk.describe())
        # retried as Kafka's ZkClient retries (retryUntilConnected): a loaded machine can make a server drop
        # its clients for a moment (e.g. a follower that fell behind syncLimit), which is not the trial's fault
        admin = KazooClient(hosts=zk.connect, timeout=10, command_retry={"max_tries": -1, "deadline": 60})
        admin.start(timeout=30)
        self.stack.callback(lambda: (admin.stop(), admin.close()))
        self.admin = admin
        self.progress("starting brokers", 1)
        real = FAMILIES[spec.design].brokers
        self.namesrv = ""  # a real system's name server (`RealBrokers.name_server`), once per trial, before its brokers
        if real is not None and real.name_server is not None:
            namesrv = real.name_server(self.dir)
            self.stack.callback(namesrv.stop)
            self.namesrv = namesrv.address
        brokers = [self._broker(i) for i in range(1, spec.brokers + 1)]
        self.bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers)
        self.kafka_bootstrap = ",".join(f"127.0.0.1:{b.kafka_port}" for b in brokers)  # for real Kafka clients
        if real is not None and real.create_topic is not None:  # KRaft: the topic through Kafka's admin API
            real.create_topic(self.kafka_bootstrap, TOPIC, spec.partitions)
        else:
            admin.retry(create_topic, admin, TOPIC, spec.partitions, [b.broker_id for b in brokers])
            self._wait_for_metadata()
        self.trace.record("setup", topic=TOPIC, partitions=spec.partitions, consumers=spec.consumers,
                          group=GROUP, spec=spec.as_row(), **self.environment)
        if spec.rate > 0:
            producer = self._producer()
            self.stack.callback(producer.stop)
        self.progress(f"forming a group of {spec.consumers}", 2)
        if {"cut", "heal"} & set(spec.steps):
            self.victim_link = self._victim_link()
        if spec.param("broker_delay_ms"):
            self.lagging_broker = Link(f"consumers-broker-{brokers[-1].broker_id}", self._brokers()[-1:])
            self.stack.callback(self.lagging_broker.close)
        members = actor_names("c", spec.consumers)
        group = None
        if spec.host_tasks:
            group = self._host_tasks()
        elif spec.layout == "shared":
            group = self._consumers("c", spec.consumers)
        if group is None:
            for name in members:
                self._start_member(name)
        self._wait_converged(members, since_ns=0, what="the initial group")
        lags = []  # how to lift the set-up's lags, once the trial has ended
        if spec.param("follower_delay_ms"):
            leader = zk.leader()
            follower = zk.followers()[0]
            self.faults.quorum_delay(zk, follower.sid, leader.sid, int(spec.param("follower_delay_ms")))
            lags.append(lambda: zk.quorum_link(follower.sid, leader.sid).set_mode(Mode.PASS))
            self.stack.callback(lags[-1])
        if self.lagging_broker is not None:
            self.faults.link(self.lagging_broker, Mode.DELAY, int(spec.param("broker_delay_ms")))
            lags.append(lambda: self.lagging_broker.set_mode(Mode.PASS))
        for index, step in enumerate(spec.steps, start=1):
            self.progress(f"step {index}: {step}", 2 + index)
            members = self._step(index, step, members)
        self.progress("stopping", spec.phases)
        self.trace.record("end")
        # The lag was the trial's subject up to its end; the group stopping under it measured nothing and cost
        # time (a ZooKeeper-era group of 4 behind a follower delayed 1 s took 23.5 s to stop, 3.6 s without).
        for lift in lags:
            lift()
        # the group stops as one (a shared host stops every consumer at once), before the cluster under it
        for process in [group, *self.members.values()]:
            if process is not None:
                process.stop()

    # -- the pieces ------------------------------------------------------------------
    def _server(self, k: int) -> str:
        """The connect string of ZooKeeper server k mod S, with the ensemble's chroot."""
        servers = self.zk.servers
        return servers[k % len(servers)].connect + self.zk.chroot

    def _broker(self, broker_id: int, port: int = 0, kafka_port: int = 0) -> BrokerProcess:
        # the settings the trial's own design needs of its brokers (KIP-848's timings)
        config = {**FAMILIES[self.spec.design].broker_config,
                  **dict(o.split("=", 1) for o in self.spec.broker_overrides)}
        real = FAMILIES[self.spec.design].brokers
        if real is not None:  # a real system's broker (`real_systems/`): one Kafka listener
            registry = self.namesrv or self._server(broker_id - 1)  # where it registers: a name server or ZooKeeper
            broker = real.start(broker_id, registry, self.dir, session_timeout_ms=6000, port=port, config=config)
        else:  # the lab's, with every family's plug-in
            broker = BrokerProcess(broker_id, self._server(broker_id - 1), self.dir, trial=self.spec.trial_id,
                                   session_timeout_ms=6000, plugins=BROKER_PLUGINS, port=port, kafka_port=kafka_port,
                                   config=config)
        self.stack.callback(broker.stop)
        self.brokers[broker_id] = broker
        return broker

    def _wait_for_metadata(self) -> None:
        """Wait until every partition has a leader and every live broker's metadata says so; a real system's
        brokers are asked by their clients, which wait for metadata themselves: there, the leaders are enough."""
        real = FAMILIES[self.spec.design].brokers
        if real is None:
            self.admin.retry(wait_for_metadata, self.admin, TOPIC, self.topic_partitions)
        elif real.create_topic is None:
            self.admin.retry(wait_for_leaders, self.admin, TOPIC, self.topic_partitions)
        else:  # KRaft: nothing of the topic is in ZooKeeper; its creation waited for the leaders
            real.create_topic(self.kafka_bootstrap, TOPIC, self.topic_partitions)

    def _producer(self) -> LabProcess:
        """The lab producer, or for a real system's brokers one that speaks Kafka's protocol to them."""
        spec, family = self.spec, FAMILIES[self.spec.design]
        common = ["--topic", TOPIC, "--rate", str(spec.rate), "--trial-dir", str(self.dir), "--trial", spec.trial_id]
        log = self.dir / "proc" / "producer.log"
        if family.brokers is None:
            return LabProcess("producer", "lab_cluster.producer", ["--zk", self.zk.connect, *common], log)
        version = ["--api-version", family.brokers.api_version] if family.brokers.api_version else []
        args = ["--bootstrap", self.namesrv or self.kafka_bootstrap, "--partitions", str(spec.partitions), *version,
                *common]
        if family.brokers.producer_command is not None:  # a producer of the system's own, with the same arguments
            return LabProcess("producer", "", [], log, command=family.brokers.producer_command(args))
        return LabProcess("producer", "real_systems.kafka_producer", args, log)

    def _victim_link(self) -> Link:
        """The victim's own path to ZooKeeper, its coordinator or every broker (`Family.victim_link`), for `cut`
        and `heal`."""
        family = FAMILIES[self.spec.design]
        if family.victim_link == "zk":
            link = zk_link(self.zk, f"{VICTIM}-zk")
        elif family.victim_link == "coordinator":
            link = Link(f"{VICTIM}-coordinator", [self._find_coordinator(family)])
        else:
            link = Link(f"{VICTIM}-brokers", self._brokers())
        self.stack.callback(link.close)
        return link

    def _brokers(self) -> list[tuple[str, int]]:
        return [(h, int(p)) for h, p in (b.split(":") for b in self.bootstrap.split(","))]

    def _find_coordinator(self, family: Family) -> tuple[str, int]:
        try:
            return family.find_coordinator(self._brokers(), GROUP)
        except TimeoutError as exc:
            raise TrialFailed(str(exc)) from None

    def _consumers(self, name: str, count: int, address: str | None = None,
                   extra: dict[str, str] | None = None) -> LabProcess:
        args = [*self._host_args(name, address, extra), "--count", str(count), "--trial-dir", str(self.dir)]
        own_host = FAMILIES[self.spec.design].host_command  # a real system's consumers run in a host of their own
        process = LabProcess(f"consumers-{name}", "lab_cluster.consumer_host", [] if own_host else args,
                             self.dir / "proc" / f"consumers-{name}.log", on_line=self.watch.update,
                             ready_timeout_s=host_ready_timeout_s(count), command=own_host and own_host(args))
        self.stack.callback(process.stop)
        return process

    def _host_args(self, name: str, address: str | None = None, extra: dict[str, str] | None = None) -> list[str]:
        """A consumer host's arguments but its count and directory: the family, where the cluster is, the config."""
        family = FAMILIES[self.spec.design]
        address = address or {"zk": self.zk.connect, "bootstrap": self.bootstrap,
                               "kafka_bootstrap": self.kafka_bootstrap, "namesrv": self.namesrv}[family.address]
        args = ["--family", family.package, "--address", address, "--group", GROUP, "--topic", TOPIC,
                "--trial", self.spec.trial_id, "--name", name]
        extra = dict(extra or {})
        if self.lagging_broker is not None:  # routed through it from the start, delayed from the first step on
            routes = [r for r in (extra.get(family.via_config), self.lagging_broker.routes) if r]
            extra[family.via_config] = ",".join(routes)
        overrides = {**family.from_beginning, **self._group_size(family),
                     **dict(o.split("=", 1) for o in self.spec.overrides), **self._own_overrides(name), **extra}
        for key, value in overrides.items():
            args += ["--config", f"{key}={value}"]
        return args

    def _host_tasks(self) -> HostTasks:
        """The group `c1..cN` in `host_tasks` hosts, each in a task of one barrier stage (`host_tasks.py`)."""
        if self.spark_context is None:
            raise LabError(f"Trial {self.spec.trial_id} spreads its group over {self.spec.host_tasks} Spark tasks, "
                           "and was run without a SparkContext to submit them.",
                           "Run it through the harness (run_grid), which runs such trials on the driver.")
        parts = slices(self.spec.consumers, self.spec.host_tasks)
        hosts = HostTasks(self.spark_context, self.dir, self.spec.trial_id, self._host_args("c"), parts,
                          on_line=self.watch.update, on_lost=self.watch.broken,
                          ready_timeout_s=host_ready_timeout_s(max(p.count for p in parts)))
        self.stack.callback(hosts.stop, quiet=True)  # on a failure; the trial's end stops them itself, loudly
        hosts.start()
        self.environment["host_tasks"] = hosts.placements()
        self.trace.record("hosts_placed", hosts=self.environment["host_tasks"])
        return hosts

    def _group_size(self, family: Family) -> dict[str, str]:
        return {family.group_size_config: str(self.spec.consumers)} if family.group_size_config else {}

    def _own_overrides(self, name: str) -> dict[str, str]:
        """`member_overrides` for the consumer(s) `name` (a shared host's name is its group's prefix, `c`)."""
        mine = [e.split(":", 1)[1] for e in self.spec.member_overrides if e.split(":", 1)[0] == name]
        return dict(o.split("=", 1) for o in mine)

    def _start_member(self, name: str) -> None:
        """One consumer in its own process; ZooKeeper-era ones pinned to a server (the victim: through its link)."""
        address, extra = None, {}
        if FAMILIES[self.spec.design].address == "zk":
            if name == VICTIM and self.victim_link is not None:
                address = self.victim_link.connect
            elif self.spec.layout == "spread":  # a restarted consumer goes back to its server, as to its host
                address = self._server(self.slots.setdefault(name, self.started))
        elif name == VICTIM and self.victim_link is not None:
            family = FAMILIES[self.spec.design]
            extra[family.via_config] = self.victim_link.connect if family.victim_link == "coordinator" \
                else self.victim_link.routes
        self.members[name] = self._consumers(name, 1, address, extra)
        self.trace.record("member_started", member=name, address=address or "",
                          pid=self.members[name].pid, **extra)
        self.started += 1

    def _stop_member(self, name: str) -> None:
        self.members.pop(name).stop()
        self.watch.forget(name)

    def _server_counters(self, index: int, at: str) -> None:
        """`mntr` of every running server, summed (the cross-check's server side); a server a `zk_stop` stopped
        is left out, and its counters start again from zero when it starts, so the cross-check leaves the windows
        of those steps alone (`steps.ZK_SERVER_STEPS`)."""
        totals = dict.fromkeys(SERVER_COUNTERS, 0)
        for server in self.zk.servers:
            if server.sid == self.zk_stopped:
                continue
            host, port = server.connect.split(":")
            values = fourlw.mntr(host, int(port))
            for k in SERVER_COUNTERS:
                totals[k] += int(values.get(k, 0))
        self.trace.record("zk_server_counters", index=index, at=at, counters=totals)

    def join(self) -> str:
        self.joins += 1
        name = f"j{self.joins}"
        self.trace.record("membership", action="join", member=name)
        self._start_member(name)
        self.joined.append(name)
        return name

    def leave(self, name: str) -> None:
        self.trace.record("membership", action="leave", member=name)
        self._stop_member(name)
        self.joined.remove(name)

    def depart(self, name: str) -> None:
        self.trace.record("membership", action="depart", member=name)
        self._stop_member(name)

    def restart(self, name: str) -> None:
        """Stop `name` gracefully (its family's close), wait `restart_down_s`, start it again under the same name
        and config: a new process, appending to the same trace (`trace_open` marks its second life)."""
        self.restarts += 1
        self.trace.record("membership", action="stop", member=name)
        self._stop_member(name)
        time.sleep(self.spec.param("restart_down_s"))
        self.trace.record("membership", action="start", member=name)
        self._start_member(name)

    def _step(self, index: int, step: str, members: list[str]) -> list[str]:
        spec = self.spec
        self._server_counters(index, "before")
        try:
            plan = STEPS[step].plan(self, members)
        except StepImpossible as exc:
            raise TrialFailed(str(exc)) from None
        since = self.trace.record("change", index=index, change=step, member=plan.about,
                                  members_before=len(members), members_after=len(plan.after), members=plan.after)
        plan.act()
        # a broker's death or return harms no member: the group need only be whole again (nobody need rebalance)
        self._wait_converged(plan.after, since_ns=0 if STEPS[step].group_untouched else since,
                             what=f"step {index} ({step})", index=index)
        if STEPS[step].holds:
            time.sleep(spec.param(STEPS[step].hold_param))
        time.sleep(spec.settle_s)
        self._server_counters(index, "after")
        if STEPS[step].then_waits:
            time.sleep(spec.param(STEPS[step].then_waits))
        return plan.after

    # -- the Stage a step plans against (`steps.py`) ---------------------------------------------------

    def has_victim(self) -> bool:
        return VICTIM in self.members

    def fault(self, step: str) -> Callable[[], object]:
        victim = self.members[VICTIM]
        if step == "crash":
            return lambda: (self.faults.kill(victim, member=VICTIM), self.members.pop(VICTIM),
                            self.watch.forget(VICTIM))
        return {"pause": lambda: self.faults.pause(victim), "resume": lambda: self.faults.resume(victim),
                "cut": lambda: self.faults.link(self.victim_link, Mode.BLACKHOLE),
                "heal": lambda: self.faults.link(self.victim_link, Mode.PASS)}[step]

    def broker_down(self) -> int | None:
        return self.killed

    def broker_victim(self, step: str) -> int:
        """The broker `step` takes down: for `broker_stop`, broker k at the k-th (a rolling bounce, as Kafka's
        `rolling_bounce_brokers` restarts each node in turn); for `broker_kill`, the group's coordinator if
        `kill_coordinator` (a family with one), else the highest-numbered broker that is not the coordinator."""
        if step == "broker_stop":
            return sorted(self.brokers)[self.broker_stops % len(self.brokers)]
        coordinator = self._coordinator_broker()
        if self.spec.param("kill_coordinator"):
            if coordinator is None:
                raise StepImpossible(f"{self.spec.design} has no group coordinator to take down")
            return coordinator
        return max(i for i in self.brokers if i != coordinator)

    def _coordinator_broker(self) -> int | None:
        """The id of the broker that coordinates the group now (FindCoordinator), or None for a family without
        a coordinator."""
        family = FAMILIES[self.spec.design]
        if family.find_coordinator is None:
            return None
        _, port = self._find_coordinator(family)
        return next(i for i, b in self.brokers.items() if b.port == port)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL the broker (a crash, as Kafka's `test_broker_failure` with clean_shutdown=False: its
        registration stays until ZooKeeper expires its session), then wait until the controller has given its
        partitions new leaders and every live broker's metadata says so."""
        self._take_down(broker_id, self.faults.kill)

    def stop_broker(self, broker_id: int) -> None:
        """Shut the broker down cleanly (SIGTERM: its plug-ins stop, its ZooKeeper session closes, so its
        registration goes at once and the controller moves its partitions' leadership, `__consumer_offsets`'s
        with the rest: the coordinator of its groups moves to their new leaders), then wait as `kill_broker` does.
        A departure: Kafka's controlled shutdown asks the controller to move the leaderships before the broker
        closes its session; the lab's controller moves them when the registration goes."""
        self.broker_stops += 1
        self._take_down(broker_id, self.faults.stop)

    def _take_down(self, broker_id: int, how) -> None:
        controller = json.loads(self.admin.retry(self.admin.get, zk_layout.CONTROLLER)[0])["brokerid"]
        led = sorted(p for p, leader in self.admin.retry(leaders, self.admin, TOPIC).items() if leader == broker_id)
        how(self.brokers[broker_id], broker=broker_id, coordinator=broker_id == self._coordinator_broker(),
            controller=broker_id == controller, leads=led)
        self.killed = broker_id
        self.admin.retry(wait_for_leaders, self.admin, TOPIC, self.topic_partitions, timeout_s=60,
                         exclude=frozenset({broker_id}))
        self._wait_for_metadata()

    def zk_down(self) -> int | None:
        return self.zk_stopped

    def zk_victim(self) -> int:
        """The server `zk_stop` stops: the only one, or an ensemble's leader (`zk_stop_leader`) or follower."""
        if len(self.zk.servers) == 1:
            return self.zk.servers[0].sid
        leader = self.zk.leader()
        return leader.sid if self.spec.param("zk_stop_leader") else self.zk.followers()[0].sid

    def stop_zk(self, sid: int) -> None:
        """Stop the server cleanly; its clients' links to it break, and they reconnect to another server of the
        ensemble, or, to a single server, when it is back (their sessions live on in its data if they were not
        away longer than their timeouts)."""
        self.faults.zk_stop(self.zk, sid)
        self.zk_stopped = sid

    def start_zk(self, sid: int) -> None:
        """Start it again (same id, ports and data), then wait until the ensemble has one leader and the brokers'
        metadata is whole again."""
        self.faults.zk_start(self.zk, sid)
        self.zk_stopped = None
        self.zk.wait_for_quorum(60)
        self._wait_for_metadata()

    def restart_broker(self, broker_id: int) -> None:
        """Start the killed or stopped broker again under its id and ports, and wait until it is registered and
        every live broker's metadata agrees (the lab has no preferred-leader election: it leads nothing until
        another dies)."""
        broker = self._broker(broker_id, port=self.brokers[broker_id].port,
                              kafka_port=self.brokers[broker_id].kafka_port)
        self.faults.started(broker, broker=broker_id)
        self.killed = None
        self._wait_for_metadata()

    def param(self, name: str) -> float:
        return self.spec.param(name)

    def partitions(self) -> int:
        return self.topic_partitions

    def grow_topic(self, partitions: int) -> None:
        """Add partitions to the topic up to `partitions`, as its system's admin tool does: for the lab's brokers
        and a ZooKeeper-mode real system's, rewrite the topic's znode with the new assignment (Kafka's
        `AdminUtils.addPartitions`: the controller elects the new leaders, the brokers and every watcher hear
        the change); for a system whose brokers keep no metadata in ZooKeeper, its own admin API
        (`RealBrokers.add_partitions`). Recorded as `topic_grown` the moment the change is made (through an admin
        API: as the call starts, so RocketMQ's admin tool's start, about 0.6 s here, counts in the design's time),
        then the runner waits for the new partitions' leaders; the group is then watched until it owns them all."""
        real = FAMILIES[self.spec.design].brokers
        before, self.topic_partitions = self.topic_partitions, partitions
        self.watch.partitions = partitions
        if real is not None and real.add_partitions is not None:
            self.trace.record("topic_grown", topic=TOPIC, before=before, partitions=partitions)
            real.add_partitions(self.kafka_bootstrap, TOPIC, partitions)
            return
        if real is not None and real.create_topic is not None:
            raise TrialFailed(f"{self.spec.design}'s brokers keep no topic metadata in ZooKeeper, and the lab has "
                              "no way to grow a topic on them (RealBrokers.add_partitions)")
        self.admin.retry(add_partitions, self.admin, TOPIC, partitions, sorted(self.brokers))
        self.trace.record("topic_grown", topic=TOPIC, before=before, partitions=partitions)
        self._wait_for_metadata()

    def churn(self) -> None:
        first = self.join()
        time.sleep(self.spec.param("churn_gap_s"))
        self.join()
        time.sleep(self.spec.param("churn_gap_s"))
        self.leave(first)

    def _wait_converged(self, members: list[str], since_ns: int, what: str, index: int = 0) -> None:
        problem = self.watch.wait_converged(members, since_ns, self.spec.converge_limit_s)
        if problem is None:
            self.trace.record("converged", index=index, members=members)
        elif self.spec.converge_required or index == 0:
            if self.watch.gave_up(members) or self.watch.broken_by:  # waiting out the limit cannot help now
                raise TrialFailed(f"{what} cannot converge: {problem}")
            raise TrialFailed(f"{what} did not converge within {self.spec.converge_limit_s:.0f} s: {problem}")
        else:
            self.trace.record("not_converged", index=index, members=members, problem=problem)
