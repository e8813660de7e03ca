"""The lab's test harness, after kazoo's.

- One real ZooKeeper per test process (`zk`, session-scoped, on the backend
  LAB_ZK_BACKEND picks, `auto` by default), and a chroot per test
  (`zk_client`), removed after the test.
- Tests that start their own ensembles use `ensembles`, which keeps them up
  until the test's report is written, so a failing test shows the servers' logs.
- Tests marked `docker` use `docker_backend`: they skip with the reason where
  no Docker engine or image is available, except under CI=true, where that is
  a failure (CI installs both).
- At the end of the session everything the lab started must be gone: any JVM,
  container, proxy or temp dir of this process left behind fails the run. The
  default run has two processes (pytest-xdist, `-n 2` in `pyproject.toml`):
  each worker checks its own and tells the controller, which fails the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from kazoo.client import KazooClient

from experiments.engine.families import BROKER_PLUGINS
from lab_cluster.cleanup import REAPER
from lab_cluster.errors import tail
from lab_cluster.leaks import find_leaks, lab_containers, lab_processes, lab_temp_dirs, process_alive, reap_orphans
from lab_cluster.processes import proc_stat
from lab_cluster.zk import Ensemble, ZkSettings, provision
from lab_cluster.zk.backends import testcontainers_problem

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO = Path(__file__).resolve().parent.parent


#: the test files that take minutes, heaviest first (from a whole run's `--durations`): sent to the two workers
#: before every other file. xdist hands out whole files in collection order (`--dist loadfile
#: --no-loadscope-reorder`, in pyproject.toml); its own order, by number of tests, sent exactly these last, and a
#: file of minutes handed out last keeps one worker busy while the other has nothing left to do. Files whose trials
#: run through the Spark harness (`SLOTTED`) alternate with files that run none: such trials share the machine's
#: trial slots (`experiments/engine/slots.py`: three here), so two of those files at once wait on each other.
SLOTTED = ("test_each_experiment.py", "test_main_job.py", "test_host_tasks.py", "test_spark_cluster.py")
UNSLOTTED = ("test_legacy.py", "test_kafka_clients.py", "test_digest.py", "test_modern.py")
HEAVY_FIRST = (*(name for pair in zip(SLOTTED, UNSLOTTED, strict=True) for name in pair),
               "test_full_runs.py", "test_spark_session.py", "test_metrics.py", "test_host_health.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(HEAVY_FIRST)))  # stable: the rest as collected


def pytest_sessionstart(session):
    reaped = reap_orphans()
    if reaped:
        print("\nremoved what earlier lab runs left behind: " + "; ".join(reaped))


#: what each xdist worker process left behind, as it told the controller (`pytest_testnodedown`)
_left_by_workers: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist's controller: a worker finished; keep what it left behind, for the controller's own verdict."""
    _left_by_workers.extend(getattr(node, "workeroutput", {}).get("lab_leaks", []))


def pytest_sessionfinish(session, exitstatus):
    left = REAPER.stop_all() + find_leaks()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its exit status does not reach the run's, so it says
        workeroutput["lab_leaks"] = [f"{leak} (worker {os.getpid()})" for leak in left]
        return
    left += _left_by_workers
    if left:
        print("\nLEAK CHECK FAILED: the lab left behind: " + "; ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def zk():
    """The test process's own real ZooKeeper server."""
    with provision(servers=1) as ensemble:
        yield ensemble


def interrupt(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Ctrl-C a CLI the test started and wait for it; if it ignores SIGINT, stop it anyway and fail.

    Either way nothing it started outlives the test (SIGTERM runs its clean-up).
    """
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout_s)
        return
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    raise AssertionError(f"{' '.join(map(str, proc.args))} did not stop within {timeout_s:.0f} s of SIGINT")


#: Set in the environment of a CLI run a test starts. Every process of the run inherits it (the lab starts its
#: children with the parent's environment), so a test can tell what its own run left from what a trial of the
#: other pytest-xdist worker has running at the same moment.
RUN_TAG_VAR = "REBALANCE_LAB_TEST_RUN"


def tagged_env(tag: str) -> dict[str, str]:
    """The environment for a CLI run whose processes `left_by_run(tag)` finds."""
    return dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", **{RUN_TAG_VAR: tag})


def _carries(pid: int, tag: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{RUN_TAG_VAR}={tag}".encode() in environ


def descends_from_me(pid: int) -> bool:
    """Whether `pid` is this test process or runs under it (a child, a grandchild, ...)."""
    while pid > 1:
        if pid == os.getpid():
            return True
        fields = proc_stat(pid)
        if not fields:
            return False
        pid = int(fields[1])
    return False


def left_by_run(tag: str, containers_before: frozenset[str] = frozenset()) -> set[str]:
    """What the run tagged `tag` still has: its lab processes, the temp dirs of its live processes, and its
    containers (those whose owner carries the tag, or whose owner is gone (a container's own environment is not
    the run's) and that were not there before the run)."""
    found = {f"pid {pid}" for pid in lab_processes() if _carries(pid, tag)}
    found |= {f"temp dir {path}" for path, owner in lab_temp_dirs().items() if _carries(owner, tag)}
    for container, owner in lab_containers():
        if container.name not in containers_before and (_carries(owner, tag) or not process_alive(owner)):
            found.add(f"container {container.name}")
    return found


def cli(*args, env_changes=None, timeout=120) -> subprocess.CompletedProcess:
    """Run `python -m experiments ARGS` from the checkout with `env_changes` (None: unset); its output as text.

    The time limit is a guard against hangs, not a speed assertion."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for key, value in (env_changes or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-m", "experiments", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def kazoo(hosts: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=30)
    return client


@pytest.fixture
def zk_client(zk, request):
    """A kazoo client chrooted to a fresh path, removed after the test."""
    chroot = f"/tests/{request.node.name.replace('/', '_')[:60]}-{uuid.uuid4().hex[:8]}"
    admin = kazoo(zk.connect)
    admin.ensure_path(chroot)
    client = kazoo(zk.connect + chroot)
    yield client
    client.stop()
    client.close()
    admin.delete(chroot, recursive=True)
    admin.stop()
    admin.close()


@pytest.fixture
def ensembles():
    """Start ensembles with `ensembles(servers=3, backend=...)`; closed after the test."""
    started: list[Ensemble] = []

    def start(servers: int = 3, backend: str | None = None, settings: ZkSettings | None = None) -> Ensemble:
        ensemble = provision(servers=servers, backend=backend, settings=settings)
        started.append(ensemble)
        return ensemble

    start.started = started
    yield start
    for ensemble in started:
        ensemble.close()


#: the tests pytest-timeout cut short in this process (see `module_session`)
_CUT_SHORT: list[str] = []


def module_session(master: str):
    """The body of a module's `spark` fixture: a local Spark session, stopped after the module.

    If pytest-timeout cut a test of the module short, or the stop fails, the driver JVM goes too and the next
    module starts a new one. The timeout's signal may land in the middle of a Py4J call, whose answer, left
    unread on the connection, is then read by the next call, and so on: seen in CI, one analysis cut short
    at 300 s and then nine failures in the modules after it ("KeyError: 'c'", "SparkSession does not exist in
    the JVM"), each call reading the answer meant for the one before it."""
    from lab_cluster.spark import cached_datasets, local_session, stop_driver, stop_session

    cut_before = len(_CUT_SHORT)
    yield local_session(master)
    if len(_CUT_SHORT) > cut_before:
        stop_driver()
        return
    try:
        left = cached_datasets()  # every analysis unpersists what it cached, also when it fails
        stop_session()
    except Exception:
        stop_driver()
        raise
    assert not left, f"the module left data cached in its Spark session: {left}"


@pytest.fixture(scope="module")
def spark():
    """A local Spark session for one test module, stopped after it (`module_session`).

    One session for the whole run used to serve thousands of jobs, and twice an aggregation in the last module
    found no execution memory left to take (AGGREGATE_OUT_OF_MEMORY, then "Could not allocate memory to grow
    BytesToBytesMap"), with 1 GiB and then 2 GiB of driver memory, although its input was a few megabytes. A
    session per module starts each module's analyses with a fresh SparkContext and its own memory accounting
    (the driver JVM stays up, so this costs a few seconds per module)."""
    yield from module_session("local[2]")


def run_experiment(spark, run_dir, specs, trials_per_machine: int = 1):
    """Run a grid of trials on Spark into `run_dir` and analyse it: (run_dir, specs, summary)."""
    from experiments.catalogue import KEEP_TIMELINES
    from experiments.engine.harness import analyse, run_grid

    results = run_grid(spark, specs, str(run_dir), trials_per_machine=trials_per_machine)
    return run_dir, specs, analyse(spark, str(run_dir), specs, results, timelines_for=KEEP_TIMELINES)


def trace_events(trial_dir, actor: str, kind: str) -> list[dict]:
    """The events of one kind in an actor's trace, each with its `fields` parsed as `f`. The trace may be read
    while its writer is in the middle of a line: only whole lines (ending in a newline) are read."""
    out = []
    *whole, _partial = (Path(trial_dir) / "traces" / f"{actor}.jsonl").read_text().split("\n")
    for line in filter(None, whole):
        event = json.loads(line)
        if event["kind"] == kind:
            out.append({**event, "f": json.loads(event.get("fields") or "{}")})
    return out


def wait_for(predicate, what, timeout_s=60, every_s=0.05):
    """Poll `predicate` until it is true; an AssertionError naming `what` if it never is within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")


def vocabulary_problems(run_dir) -> dict[str, int]:
    """{problem: how many events have it} over every trace line of a run's trials (`lab_cluster/events.py`)."""
    from collections import Counter

    from lab_cluster.events import problems

    found: Counter[str] = Counter()
    for trace in Path(run_dir).glob("trials/*/traces/*.jsonl"):
        for line in trace.read_text().splitlines():
            found.update(problems(json.loads(line)))
    return dict(found)


@pytest.fixture
def docker_backend():
    """'testcontainers', or a skip (a failure under CI) saying why it cannot run."""
    problem = testcontainers_problem()
    if problem:
        if IN_CI:
            pytest.fail(f"CI must run the Docker tests, but: {problem}")
        pytest.skip(problem)
    return "testcontainers"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and "from pytest-timeout" in str(call.excinfo.value):
        _CUT_SHORT.append(item.nodeid)
    if report.when != "call" or not report.failed:
        return
    found = [v for v in item.funcargs.values() if isinstance(v, Ensemble)]
    factory = item.funcargs.get("ensembles")
    if factory is not None:
        found += factory.started
    for ensemble in found:
        for sid, log in ensemble.server_logs().items():
            report.sections.append((f"ZooKeeper {ensemble.backend} server {sid} log (tail)", tail(log, 60)))


# -- the cluster: three broker processes and a topic, in a chroot of the session's ZooKeeper --

#: Brokers' session timeout: the smallest ZooKeeper allows with tickTime 2000, so crashes show in seconds.
SESSION_MS = 4000
PARTITIONS = 4
#: Every broker hosts what each family needs of it (a group coordinator, as Kafka 0.9+ brokers do; RocketMQ's
#: consumer table); ZooKeeper-era consumers never ask for either.
BROKER = {"plugins": BROKER_PLUGINS,
               "config": {"offsets.topic.num.partitions": "5", "group.initial.rebalance.delay.ms": "0"}}


class InProcessMembers:
    """Consumers of one family in the test process, against a `cluster`: each built by the family from its
    config (`group.id`, the cluster's brokers, from the start of the log, then `defaults`, then the member's own
    overrides) with a trace of its own; `stop_all` stops them and closes their traces."""

    def __init__(self, cluster, family, group: str, defaults: dict[str, str]):
        self.cluster, self.family, self.group, self.defaults = cluster, family, group, defaults
        self.members, self.traces = {}, []

    def add(self, name: str, **overrides):
        from lab_cluster.trace import TraceRecorder

        config = self.family.configure({"group.id": self.group, self.family.address_config: self.cluster.bootstrap,
                                        **self.family.from_beginning, **self.defaults, **overrides}, name)
        trace = TraceRecorder(self.cluster.dir, trial="t", design=self.family.name, actor=name)
        self.traces.append(trace)
        self.members[name] = self.family.build(config, ["t"], trace, name, None).start()
        return self.members[name]

    def stop(self, name: str) -> None:
        self.members.pop(name).stop()

    def stop_all(self) -> None:
        for name in list(self.members):
            self.stop(name)
        for trace in self.traces:
            trace.close()


@pytest.fixture
def broker_config() -> dict[str, str]:
    """Extra config for the `cluster` fixture's brokers; a test module overrides this fixture to change it."""
    return {}


@pytest.fixture
def cluster(zk, tmp_path, broker_config):
    """Brokers 1-3 and topic `t` with PARTITIONS partitions, in a fresh chroot; everything stopped after."""
    from lab_cluster.broker.admin import create_topic, start_broker, wait_for_metadata

    chroot = f"/clusters/{uuid.uuid4().hex[:10]}"
    admin = kazoo(zk.connect)
    admin.ensure_path(chroot)
    connect = zk.connect + chroot
    client = kazoo(connect)
    brokers = {i: start_broker(i, connect, tmp_path, session_timeout_ms=SESSION_MS, plugins=BROKER["plugins"],
                               config={**BROKER["config"], **broker_config})
               for i in (1, 2, 3)}
    create_topic(client, "t", PARTITIONS, [1, 2, 3])
    wait_for_metadata(client, "t", PARTITIONS)
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers.values())
    ns = SimpleNamespace(connect=connect, zk=client, brokers=brokers, dir=tmp_path, producer=None, ensemble=zk,
                         chroot=chroot, bootstrap=bootstrap)
    yield ns
    if ns.producer is not None:
        ns.producer.stop()
    for broker in brokers.values():
        broker.stop()
    client.stop()
    client.close()
    admin.delete(chroot, recursive=True)
    admin.stop()
    admin.close()


def _client(cluster, broker_id):
    from lab_cluster.broker.admin import broker_addresses
    from lab_cluster.wire import WireClient

    host, port = broker_addresses(cluster.zk)[broker_id]
    return WireClient(host, port, client_id="test")


def _produced(trial_dir):
    """{partition: [(offset, value), ...]} from the producer's trace."""
    events = [json.loads(line) for line in (trial_dir / "traces" / "producer.jsonl").read_text().splitlines()]
    out = {}
    for e in events:
        if e["kind"] == "produced":
            out.setdefault(e["partition"], []).append((e["offset"], json.loads(e["fields"])["value"]))
    return out


def _fetch_all(cluster, partition):
    from lab_cluster.broker.admin import leaders

    leader = leaders(cluster.zk, "t")[partition]
    client = _client(cluster, leader)
    records, offset = [], 0
    while True:
        batch = client.call("Fetch", topic="t", partition=partition, offset=offset, max_records=500)["records"]
        if not batch:
            return [(r["offset"], r["value"]) for r in records]
        records += batch
        offset = batch[-1]["offset"] + 1


def produce_values(cluster, per_partition: int, tag: str) -> dict[int, list[str]]:
    """Write `per_partition` values to each partition through the lab's own Produce; {partition: values}."""
    from lab_cluster.broker.admin import broker_addresses, leaders
    from lab_cluster.wire import WireClient

    addresses = broker_addresses(cluster.zk)
    written = {}
    for partition, leader in leaders(cluster.zk, "t").items():
        client = WireClient(*addresses[leader], client_id="test-producer")
        values = [f"{tag}/{partition}/{i}" for i in range(per_partition)]
        client.call("Produce", topic="t", partition=partition, values=values)
        client.close()
        written[partition] = values
    return written


def _start_producer(cluster, rate=100):
    from lab_cluster.processes import LabProcess

    cluster.producer = LabProcess("producer", "lab_cluster.producer",
                                  ["--zk", cluster.connect, "--topic", "t", "--rate", str(rate),
                                   "--trial-dir", str(cluster.dir)], cluster.dir / "proc" / "producer.log")
    return cluster.producer


def _wait_produced(cluster, at_least, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (cluster.dir / "traces" / "producer.jsonl").exists():
            counts = _produced(cluster.dir)
            if len(counts) == PARTITIONS and all(len(v) >= at_least for v in counts.values()):
                return
        time.sleep(0.1)
    raise AssertionError(f"the producer did not produce {at_least} messages per partition")


def real_system_trial(tmp_path_factory, design: str, module: str):
    """One herd trial of a real system's design (2 members, 4 partitions: a join, a leave), for its smoke tests:
    (result, trial dir, what this test process had running before it, for the leak check)."""
    from experiments.engine.trial import TrialSpec, run_trial
    from real_systems import jars

    if not jars.available(module):
        pytest.fail(f"{design}'s jars are not built: run scripts/setup.sh (it runs Maven on real_systems/pom.xml)")
    spec = TrialSpec("herd", design, consumers=2, partitions=4, rate=2.0)
    before = set(find_leaks())  # this test process's own, e.g. its session's ZooKeeper container
    trial_dir = tmp_path_factory.mktemp(design) / spec.trial_id
    return run_trial(spec, trial_dir), trial_dir, before


def window(trial_dir, index: int) -> tuple[int, int]:
    """In a real system's smoke trial, the span of change `index` (1: the join, 2: the leave): from its `change`
    to the next change or the `end`."""
    marks = [e["ts_ns"] for e in trace_events(trial_dir, "scenario", "change")]
    end = trace_events(trial_dir, "scenario", "end")[0]["ts_ns"]
    return marks[index - 1], (marks + [end])[index]


def in_window(events, span):
    """The events within `span` (`window`)."""
    return [e for e in events if span[0] <= e["ts_ns"] < span[1]]
