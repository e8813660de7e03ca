"""`assign --assignor NAME FILE.json`: run an assignor on a group described in a file.

Input::

    {"topics": {"t1": 3},
     "members": [{"id": "c1", "topics": ["t1"], "owned": [["t1", 0]], "generation": 1,
                  "group_instance_id": null}]}

Output: ``{"c1": [["t1", 0], ...]}`` with every member listed and partitions sorted.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab_cluster.errors import LabError


def add_parser(sub) -> None:
    from lab_cluster.assignment import ASSIGNORS

    p = sub.add_parser("assign", help="run an assignor on a group described in a JSON file")
    p.add_argument("--assignor", required=True, choices=sorted(ASSIGNORS))
    p.add_argument("file")
    p.set_defaults(run=run)


def load_group(path: str):
    from lab_cluster.assignment import Subscription

    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise LabError(f"Cannot read {path}: {exc.strerror}.", "Give the path of a JSON file.") from None
    except json.JSONDecodeError as exc:
        raise LabError(f"{path} is not JSON ({exc.msg}, line {exc.lineno}).", "Fix the file.") from None
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


def run(args) -> int:
    from lab_cluster.assignment import ASSIGNORS

    topics, subscriptions = load_group(args.file)
    result = ASSIGNORS[args.assignor].assign(topics, subscriptions)
    print(json.dumps({m: [list(tp) for tp in sorted(result[m])] for m in sorted(result)}))
    return 0
