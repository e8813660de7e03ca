"""`python -m experiments SUBCOMMAND`: the lab's command line.

Subcommands (argparse, one module each):

- `run herd [--designs zookeeper,classic] [--consumers 2,4,8] [--profile tour|standard|full] [--out DIR]
  [--master URL]`:
  an experiment's grid of trials as a Spark job; writes DIR/summary.csv and Parquet results.
- `reproduce [--profile tour|standard|full]`: every experiment of the profile into a new run directory, then its
  report (the tour, the default: the lab's answer in minutes; standard: the published report's grid).
- `report RUN_DIR`: re-render REPORT.md from a run's stored results, running nothing.
- `compare RUN_DIR [--all]`: a run's findings and headline figures beside the published report's.

- `doctor [--start] [--backend B]`: what this machine can run, and which
  ZooKeeper backend `auto` picks; `--start` also starts one server and reads it.
- `zk up [--backend B] [--servers N] [--port P]`: a ZooKeeper (ensemble) to poke
  at with any client, until Ctrl-C.
- `cluster up [--brokers 3] [--topic t:12] [--rate 200]`: ZooKeeper, brokers, a
  topic and a producer, until Ctrl-C.
- `consumers --design zookeeper --zk C --group G --topic T --count N`: consumers
  that print every rebalance, until Ctrl-C.
- `assign --assignor NAME FILE.json`: run an assignment strategy (Kafka's leader-side and KIP-848
  server-side assignors, RocketMQ's and TubeMQ's client-side ones) on a group described in a file.
- `bench zk [--repeats 5] [--out FILE]`: time-to-ready of each backend.
- `bench cluster [--out FILE]`: fetch, produce and trace-write throughput.
- `bench hostile [--frames N] [--seed S]`: seeded hostile frames at a broker's two listeners: crashes, hangs,
  handler errors, memory, and whether both still serve.
- `bench coordinator [--out FILE]`: heartbeats/s one coordinator sustains, join-to-Stable time by group size.
- `bench harness [--profile tour|standard] [--events N] [--out FILE]`: wall time of `reproduce`, and the metrics
  job's
  events/s on a synthetic trace of ten million events.
- `bench group-size [--designs A,B] [--sizes 8,...,256] [--master URL]`: the largest group each design forms here
  with no trial failed or invalid (its hosts starved), and the lab's own overhead at each N.

A problem the user can fix is printed as one paragraph (no traceback) and the
exit status is 2.
"""

from __future__ import annotations

import argparse
import sys

from lab_cluster.errors import LabError
from lab_cluster.processes import caused_by_ctrl_c, honour_ctrl_c


def build_parser() -> argparse.ArgumentParser:
    from experiments.bench import cluster as bench_cluster
    from experiments.bench import coordinator as bench_coordinator
    from experiments.bench import group_size as bench_group_size
    from experiments.bench import harness as bench_harness
    from experiments.bench import hostile as bench_hostile
    from experiments.bench import trial_time as bench_trial_time
    from experiments.bench import zk as bench_zk
    from experiments.cli import assign, cluster_up, compare, consumers, doctor, spark_up, zk_up
    from experiments.cli import run as run_cmd

    parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_cmd.add_parsers(sub)
    compare.add_parser(sub)
    doctor.add_parser(sub)
    zk = sub.add_parser("zk", help="run a ZooKeeper server or ensemble")
    zk_sub = zk.add_subparsers(dest="zk_command", required=True, metavar="ZK_COMMAND")
    zk_up.add_parser(zk_sub)
    cluster = sub.add_parser("cluster", help="run ZooKeeper, brokers, a topic and a producer")
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="CLUSTER_COMMAND")
    cluster_up.add_parser(cluster_sub)
    spark = sub.add_parser("spark", help="run a standalone Spark cluster on loopback")
    spark_sub = spark.add_subparsers(dest="spark_command", required=True, metavar="SPARK_COMMAND")
    spark_up.add_parser(spark_sub)
    consumers.add_parser(sub)
    assign.add_parser(sub)
    bench = sub.add_parser("bench", help="benchmarks that write their figures to files")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")
    bench_zk.add_parser(bench_sub)
    bench_cluster.add_parser(bench_sub)
    bench_coordinator.add_parser(bench_sub)
    bench_harness.add_parser(bench_sub)
    bench_group_size.add_parser(bench_sub)
    bench_trial_time.add_parser(bench_sub)
    bench_hostile.add_parser(bench_sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    honour_ctrl_c()  # `zk up`, `cluster up`, `consumers` promise that Ctrl-C stops everything
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except LabError as exc:
        print(f"error: {exc.paragraph()}", file=sys.stderr)
        if exc.details:
            print(exc.details, file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Exception) as exc:  # an error raised while a Ctrl-C was handled is the Ctrl-C
        if not caused_by_ctrl_c(exc):
            raise
        print("interrupted; everything the lab started has been stopped", file=sys.stderr)
        return 130
