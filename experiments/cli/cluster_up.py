"""`cluster up`: ZooKeeper, brokers, a topic and a producer, until Ctrl-C.

    python -m experiments cluster up --brokers 3 --topic t:12 --rate 200

Prints the ZooKeeper connect string and the broker addresses, then keeps
everything running for consumers (`python -m experiments consumers ...`) or
any other client. Every broker has two listeners: the lab's JSON protocol
(`bootstrap servers`, for the lab's consumers) and Kafka's binary protocol
(the line that starts with `kafka bootstrap:`, for real Kafka clients:
kafka-python, librdkafka, the Java client). The partition logs and traces go to `--dir` (kept) or a temp
dir (removed at exit). Ctrl-C stops the producer, the brokers and ZooKeeper.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kazoo.client import KazooClient
from rich.console import Console

from experiments.engine.families import BROKER_PLUGINS
from lab_cluster.broker.admin import BrokerProcess, broker_addresses, create_topic, wait_for_metadata
from lab_cluster.broker.zk_layout import KAFKA_LISTENER
from lab_cluster.cleanup import make_temp_dir
from lab_cluster.errors import LabError
from lab_cluster.processes import LabProcess
from lab_cluster.zk import provision


def add_parser(sub) -> None:
    p = sub.add_parser("up", help="start ZooKeeper, brokers, a topic and a producer until Ctrl-C")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--topic", default="t:12", help="NAME:PARTITIONS (default t:12)")
    p.add_argument("--rate", type=float, default=200.0, help="messages per second per partition (0: no producer)")
    p.add_argument("--backend", help="ZooKeeper backend (default: LAB_ZK_BACKEND or auto)")
    p.add_argument("--servers", type=int, default=1, choices=(1, 3, 5), help="ZooKeeper ensemble size")
    p.add_argument("--session-timeout-ms", type=int, default=6000, help="brokers' ZooKeeper session timeout")
    p.add_argument("--dir", help="keep partition logs and traces here (default: a temp dir removed at exit)")
    p.set_defaults(run=run)


def parse_topic(spec: str) -> tuple[str, int]:
    name, sep, count = spec.partition(":")
    if not name or not sep or not count.isdigit() or int(count) < 1:
        raise LabError(f"--topic {spec!r} is not NAME:PARTITIONS.", "Write it like t:12.")
    return name, int(count)


def run(args, stop: threading.Event | None = None) -> int:
    console = Console()
    topic, partitions = parse_topic(args.topic)
    if args.brokers < 1:
        raise LabError(f"--brokers {args.brokers}: a cluster needs at least one broker.", "Use --brokers 3.")
    trial_dir = Path(args.dir) if args.dir else make_temp_dir("cluster")
    trial_dir.mkdir(parents=True, exist_ok=True)
    with console.status("starting ZooKeeper..."):
        zk = provision(servers=args.servers, backend=args.backend)
    with zk:
        brokers, producer = [], None
        client = KazooClient(hosts=zk.connect, timeout=10)
        client.start(timeout=30)
        try:
            with console.status(f"starting {args.brokers} brokers..."):
                for i in range(1, args.brokers + 1):
                    brokers.append(BrokerProcess(i, zk.connect, trial_dir,
                                                 session_timeout_ms=args.session_timeout_ms,
                                                 plugins=BROKER_PLUGINS))
                create_topic(client, topic, partitions, [b.broker_id for b in brokers])
                leaders = wait_for_metadata(client, topic, partitions)
            if args.rate > 0:
                producer = LabProcess("producer", "lab_cluster.producer",
                                      ["--zk", zk.connect, "--topic", topic, "--rate", str(args.rate),
                                       "--trial-dir", str(trial_dir)], trial_dir / "proc" / "producer.log")
            console.print(f"ZooKeeper {zk.version} on {zk.backend}: [bold]{zk.connect}[/]")
            kafka = broker_addresses(client, listener=KAFKA_LISTENER)
            for broker_id, (host, port) in sorted(broker_addresses(client).items()):
                led = sorted(p for p, b in leaders.items() if b == broker_id)
                kafka_port = kafka[broker_id][1] if broker_id in kafka else "-"
                console.print(f"  broker {broker_id}: {host}:{port} (Kafka protocol: {kafka_port}) "
                              f"leads {topic} partitions {led}")
            bootstrap = ",".join(f"{h}:{p}" for _, (h, p) in sorted(broker_addresses(client).items()))
            console.print(f"bootstrap servers (every broker hosts a group coordinator): [bold]{bootstrap}[/]")
            # a plain line, for scripts: `grep '^kafka bootstrap:'`
            console.print("kafka bootstrap: " + ",".join(f"{h}:{p}" for _, (h, p) in sorted(kafka.items())),
                          markup=False, highlight=False, soft_wrap=True)
            console.print(f"topic {topic}: {partitions} partitions; producer: "
                          f"{f'{args.rate:g} msg/s per partition' if producer else 'off'}")
            console.print(f"logs and traces: {trial_dir}")
            console.print("Ctrl-C stops everything.")
            (stop or threading.Event()).wait()
        finally:
            if producer is not None:
                producer.stop()
            for broker in brokers:
                broker.stop()
            client.stop()
            client.close()
    return 0
