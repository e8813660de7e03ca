"""`assign --assignor NAME FILE.json`: run an assignment strategy on a group described in a file.

Kafka's leader-side assignors (`range`, `roundrobin`, `sticky`,
`cooperative-sticky`) and RocketMQ's
client-side strategies (`rocketmq-averagely`, `rocketmq-averagely-by-circle`)
read a group::

    {"topics": {"t1": 3},
     "members": [{"id": "c1", "topics": ["t1"], "owned": [["t1", 0]], "generation": 1,
                  "group_instance_id": null}]}

and print ``{"c1": [["t1", 0], ...]}``, every member listed and partitions
sorted. For the sticky assignors, `owned` and `generation` are the input that
matters; `cooperative-sticky` prints the first round's assignment, in which a
partition changing owner is given to nobody (its owner revokes it and the
group rebalances again: give the output back as `owned`, with the generation
one higher, for the second round). For RocketMQ's, each member's list is the share it computes for
itself, per topic it subscribes, over the group's sorted ids (every client of
the group, as a RocketMQ broker answers), partition p of topic t being queue p
of one broker named `broker-a`. (`owned`, `generation` and `group_instance_id`
are Kafka's and not read.)

Kafka 4.0's server-side assignors (KIP-848), `uniform` and `server-range`
(Kafka's `range` in `group.consumer.assignors`, named apart from the client's
`range` here), read the same file as the coordinator's view of the group:
each member's `owned` is its current target assignment, which `uniform` is
sticky to (`server-range` reads none), `group_instance_id` its static
identity (`server-range` orders static members first by it), and
`generation` is ignored. A partition that does not exist or is owned twice
is an error, as Kafka's coordinator never hands such an assignment over.

TubeMQ's `tubemq-modulo` reads ``{"source_count": 3, "partition_keys": ["1:t1:0", ...]}``
and prints each node id's keys, ``{"0": [...], "1": [...], "2": [...]}``.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab_cluster.errors import LabError

BROKER = "broker-a"  # the one broker whose queues stand for a topic's partitions (RocketMQ)
TUBEMQ = "tubemq-modulo"
#: the CLI's names for the server-side assignors: their Kafka names, `range` apart from the client's
SERVER = {"uniform": "uniform", "server-range": "range"}


def _names() -> list[str]:
    from lab_cluster.assignment import ASSIGNORS
    from lab_cluster.assignment.rocketmq import STRATEGIES

    return sorted([*ASSIGNORS, *SERVER, *STRATEGIES, TUBEMQ])


def add_parser(sub) -> None:
    p = sub.add_parser("assign", help="run an assignment strategy on a group described in a JSON file")
    p.add_argument("--assignor", required=True, choices=_names(), metavar="NAME",
                   help="Kafka's leader-side assignors (range, roundrobin, sticky, cooperative-sticky), its "
                        "server-side ones (uniform, server-range), RocketMQ's or TubeMQ's: %(choices)s")
    p.add_argument("file")
    p.set_defaults(run=run)


def _read(path: str) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise LabError(f"Cannot read {path}: {exc.strerror}.", "Give the path of a JSON file.") from None
    except json.JSONDecodeError as exc:
        raise LabError(f"{path} is not JSON ({exc.msg}, line {exc.lineno}).", "Fix the file.") from None
    return doc


def load_group(path: str):
    from lab_cluster.assignment import Subscription

    doc = _read(path)
    try:
        topics = {str(t): int(n) for t, n in doc["topics"].items()}
        subscriptions = {}
        for m in doc["members"]:
            subscriptions[str(m["id"])] = Subscription(
                topics=[str(t) for t in m["topics"]],
                owned_partitions=[(str(t), int(p)) for t, p in m.get("owned", [])],
                generation=int(m.get("generation", -1)),
                group_instance_id=m.get("group_instance_id"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LabError(f"{path} does not describe a group ({exc.__class__.__name__}: {exc}).",
                       'Write {"topics": {"t1": 3}, "members": [{"id": "c1", "topics": ["t1"]}]}.') from None
    return topics, subscriptions


def _rocketmq(strategy, topics: dict[str, int], subscriptions: dict) -> dict[str, list]:
    cid_all = sorted(subscriptions)
    shares: dict[str, list] = {cid: [] for cid in cid_all}
    for cid, subscription in subscriptions.items():
        for topic in subscription.topics:
            mq_all = sorted((topic, BROKER, q) for q in range(topics.get(topic, 0)))
            if mq_all:  # RocketMQ: a topic without route data is skipped ("the topic not exist")
                shares[cid] += [(t, q) for t, _, q in strategy(cid, mq_all, cid_all)]
    return shares


def _server(name: str, path: str, topics: dict[str, int], subscriptions: dict) -> dict:
    from lab_cluster.assignment import SERVER_ASSIGNORS, MemberSpec

    members = {m: MemberSpec(topics=frozenset(s.topics), assigned=frozenset(s.owned_partitions),
                             instance_id=s.group_instance_id) for m, s in subscriptions.items()}
    try:
        return SERVER_ASSIGNORS[SERVER[name]].assign(members, topics)
    except ValueError as exc:
        raise LabError(f"{path}: {exc}.", "Give each member's `owned` as a target assignment: existing "
                       "partitions, each owned by one member at most.") from None


def _tubemq(path: str) -> dict[str, list[str]]:
    from lab_cluster.assignment.tubemq import modulo

    doc = _read(path)
    try:
        count, keys = int(doc["source_count"]), [str(k) for k in doc["partition_keys"]]
        if count < 1:
            raise ValueError("source_count must be at least 1")
        return {str(node): modulo(keys, count, node) for node in range(count)}
    except (KeyError, TypeError, ValueError) as exc:
        raise LabError(f"{path} does not describe TubeMQ partitions ({exc.__class__.__name__}: {exc}).",
                       'Write {"source_count": 3, "partition_keys": ["1:t1:0", "1:t1:1"]}.') from None


def run(args) -> int:
    from lab_cluster.assignment import ASSIGNORS
    from lab_cluster.assignment.rocketmq import STRATEGIES

    if args.assignor == TUBEMQ:
        print(json.dumps(_tubemq(args.file)))
        return 0
    topics, subscriptions = load_group(args.file)
    if args.assignor in STRATEGIES:
        result = _rocketmq(STRATEGIES[args.assignor], topics, subscriptions)
    elif args.assignor in SERVER:
        result = _server(args.assignor, args.file, topics, subscriptions)
    else:
        result = ASSIGNORS[args.assignor].assign(topics, subscriptions)
    print(json.dumps({m: [list(tp) for tp in sorted(result[m])] for m in sorted(result)}))
    return 0
