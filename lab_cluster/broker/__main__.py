"""Run one broker as its own process (a stand-in for `kafka-server-start.sh`).

    python -m lab_cluster.broker --id 1 --zk 127.0.0.1:2181 --trial-dir DIR [--port 0] [--kafka-port 0]
        [--session-timeout-ms 6000] [--trial ID --design D] [--plugin module:function ...]
        [--config KEY=VALUE ...]

Prints `READY {"id": 1, "port": P, "kafka_port": K}` once registered (P: the lab's JSON
listener, K: the Kafka listener); SIGTERM stops it gracefully.
Partition logs live in DIR/logs, its trace in DIR/traces/broker-<id>.jsonl.
"""

import argparse
from pathlib import Path

from ..processes import add_owner_argument, serve_until_terminated
from ..trace import TraceRecorder
from .broker import Broker


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab_cluster.broker")
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--zk", required=True, help="ZooKeeper connect string")
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--port", type=int, default=0, help="the lab's JSON listener (0: any free port)")
    parser.add_argument("--kafka-port", type=int, default=0, help="the Kafka listener (0: any free port)")
    parser.add_argument("--session-timeout-ms", type=int, default=6000, help="Kafka 0.8's default: 6000")
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--design", default="cluster")
    parser.add_argument("--plugin", action="append", default=[], help="module:function called with the broker")
    parser.add_argument("--config", action="append", default=[], help="KEY=VALUE broker setting, for plug-ins")
    add_owner_argument(parser)
    args = parser.parse_args()
    config = {}
    for pair in args.config:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"--config {pair!r} is not KEY=VALUE")
        config[key.strip()] = value.strip()
    trial_dir = Path(args.trial_dir)
    with TraceRecorder(trial_dir, trial=args.trial, design=args.design, actor=f"broker-{args.id}") as trace:
        broker = Broker(args.id, args.zk, str(trial_dir / "logs"), port=args.port,
                        session_timeout_s=args.session_timeout_ms / 1000, trace=trace, plugins=tuple(args.plugin),
                        config=config, kafka_port=args.kafka_port)
        broker.start()
        try:
            serve_until_terminated({"id": args.id, "port": broker.port, "kafka_port": broker.kafka_port})
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
