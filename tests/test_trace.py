"""The trace recorder, the Spark reader and the completeness check."""

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lab_cluster.trace import TraceRecorder, trace_path

REPO = Path(__file__).resolve().parent.parent


def _lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_a_trace_opens_records_and_closes(tmp_path):
    with TraceRecorder(tmp_path, trial="t1", design="zookeeper", actor="c1") as trace:
        trace.record("processed", topic="t", partition=2, offset=41)
        trace.record("view", members=["c1", "c2"], cversion=7)
    events = _lines(trace_path(tmp_path, "c1"))
    assert [e["kind"] for e in events] == ["trace_open", "processed", "view", "trace_close"]
    assert all(e["trial"] == "t1" and e["design"] == "zookeeper" and e["actor"] == "c1" for e in events)
    assert events[1]["topic"] == "t" and events[1]["partition"] == 2 and events[1]["offset"] == 41
    assert json.loads(events[2]["fields"]) == {"cversion": 7, "members": ["c1", "c2"]}
    ts = [e["ts_ns"] for e in events]
    assert ts == sorted(ts)
    assert events[-1]["fields"] and json.loads(events[-1]["fields"])["events"] == 4


def test_many_threads_lose_nothing(tmp_path):
    trace = TraceRecorder(tmp_path, trial="t", design="classic", actor="c1", flush_interval_s=0.01)

    def work(n):
        for i in range(2000):
            trace.record("processed", topic="t", partition=n, offset=i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trace.close()
    events = [e for e in _lines(trace.path) if e["kind"] == "processed"]
    assert len(events) == 8000
    for n in range(4):
        assert [e["offset"] for e in events if e["partition"] == n] == list(range(2000))


_CHILD = """
import sys, threading
from lab_cluster.trace import TraceRecorder
t = TraceRecorder(sys.argv[1], trial="t", design="zookeeper", actor="child", flush_interval_s=60)
t.record("processed", topic="t", partition=0, offset=0)
print("READY", flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_process_flushes_and_closes_its_trace(tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout.readline().strip() == "READY"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    kinds = [e["kind"] for e in _lines(trace_path(tmp_path, "child"))]
    assert kinds == ["trace_open", "processed", "trace_close"]  # nothing waited for the 60 s flush


@pytest.mark.spark
class TestReader:
    def _trial(self, tmp_path, *, close_consumer=True, phantom=False, killed=False):
        producer = TraceRecorder(tmp_path, trial="t", design="zookeeper", actor="producer")
        consumer = TraceRecorder(tmp_path, trial="t", design="zookeeper", actor="c1")
        faults = TraceRecorder(tmp_path, trial="t", design="zookeeper", actor="faults")
        for offset in range(3):
            producer.record("produced", topic="t", partition=0, offset=offset)
            consumer.record("processed", topic="t", partition=0, offset=offset)
        if phantom:
            consumer.record("processed", topic="t", partition=0, offset=99)
        if killed:
            faults.record("fault", action="kill", target="c1")
        consumer.flush()
        if close_consumer:
            consumer.close()
        else:  # as if the process died: written but never closed
            consumer._closed.set()
        producer.close()
        faults.close()
        return tmp_path

    def test_schema_and_rows(self, spark, tmp_path):
        from lab_cluster.trace_reader import TRACE_SCHEMA, load_traces

        df = load_traces(spark, self._trial(tmp_path))
        assert df.schema == TRACE_SCHEMA
        counts = {r["kind"]: r["count"] for r in df.groupBy("kind").count().collect()}
        assert counts == {"trace_open": 3, "trace_close": 3, "produced": 3, "processed": 3}

    def test_the_columnar_file_holds_what_spark_reads_from_the_json_lines(self, spark, tmp_path):
        from lab_cluster.trace_reader import TRACE_SCHEMA, write_columnar

        trial = self._trial(tmp_path, close_consumer=False)
        with (trial / "traces" / "c1.jsonl").open("a") as cut:  # a process killed mid-write: half a line
            cut.write('{"ts_ns": 5, "kind": "proc')
        with (trial / "traces" / "odd.jsonl").open("w") as odd:  # a value of the wrong type is null
            odd.write('{"ts_ns": 7, "trial": "t", "actor": "odd", "kind": "x", "partition": "zero", "fields": "{}"}\n')
        columnar = spark.read.schema(TRACE_SCHEMA).parquet(str(write_columnar(trial)))

        def rows(df):
            return sorted(tuple(r) for r in df.where("trial is not null").collect())

        # as the analysis read the JSON lines before: Spark's PERMISSIVE mode (a bad line is a row of nulls)
        assert rows(columnar) == rows(spark.read.schema(TRACE_SCHEMA).json(str(trial / "traces" / "*.jsonl")))
        assert ("odd", None) in {(r.actor, r.partition) for r in columnar.collect()}
        # the producer (open, 3 produced, close), faults (open, close), c1 (open, 3 processed; its half line
        # dropped), odd
        assert columnar.count() == 5 + 2 + 4 + 1

    def test_a_complete_trial(self, spark, tmp_path):
        from lab_cluster.trace_reader import check_complete, load_traces

        report = check_complete(load_traces(spark, self._trial(tmp_path)))
        assert report.complete and report.problems == []

    def test_a_missing_close_is_incomplete(self, spark, tmp_path):
        from lab_cluster.trace_reader import check_complete, load_traces

        report = check_complete(load_traces(spark, self._trial(tmp_path, close_consumer=False)))
        assert not report.complete
        assert report.problems == ["the trace of c1 was never closed (and no kill of it was recorded)"]

    def test_a_recorded_kill_explains_a_missing_close(self, spark, tmp_path):
        from lab_cluster.trace_reader import check_complete, load_traces

        report = check_complete(load_traces(spark, self._trial(tmp_path, close_consumer=False, killed=True)))
        assert report.complete and report.killed == ["c1"]

    def test_a_kill_of_the_process_explains_every_trace_it_wrote(self, spark, tmp_path):
        from lab_cluster.trace_reader import check_complete, load_traces

        trial = self._trial(tmp_path, close_consumer=False)
        host = TraceRecorder(trial, trial="t", design="zookeeper", actor="c1.host")  # the host's own trace, same pid
        host.flush()
        host._closed.set()
        faults = TraceRecorder(trial, trial="t", design="zookeeper", actor="runner")
        # as the trial runner records it: the process's name (not an actor's) and its pid
        faults.record("fault", action="kill", target="consumers-c1", pid=os.getpid())
        faults.close()
        report = check_complete(load_traces(spark, trial))
        assert report.complete and report.killed == ["c1", "c1.host"]

    def test_a_processed_offset_never_produced_is_incomplete(self, spark, tmp_path):
        from lab_cluster.trace_reader import check_complete, load_traces

        report = check_complete(load_traces(spark, self._trial(tmp_path, phantom=True)))
        assert not report.complete
        assert report.problems == ["1 processed message(s) were never produced: c1 processed t-0@99"]
