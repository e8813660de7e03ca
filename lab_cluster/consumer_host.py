"""N consumers of one group in one process, for any consumer family: the lab's one consumer host.

A `Family` (`lab_cluster/family.py`) says how to configure one member
(`configure`, called for every member before anything starts, so a bad config
stops nothing half-way) and how to build it (`build`); the host gives each
member its trace (`<trial_dir>/traces/<actor>.jsonl`), starts them, and stops
them all at once, so that the group sees one departure rather than a
rebalance per leaver. It also measures itself, how late its threads ran and
what CPU it took, into its own trace (`<name>.host`, `host_health.py`), so a
trial can tell the lab's overhead from the design's.

In-process, the members are threads: the CLI's `consumers` command. As its
own process, a host with `--count 1` is a consumer that a fault can pause or
kill alone; the trial runner starts one per member::

    python -m lab_cluster.consumer_host --family legacy_zk --address 127.0.0.1:2181/lab \\
        --group g --topic t --count 1 --trial-dir DIR --name c3 --config rebalance.backoff.ms=500

It prints `READY {"consumers": [...]}` (each member's `ident`), then one state
line per change (`MemberSnapshot.line`), and on SIGTERM stops its members
gracefully, as their family's client does on close (`Family.stops_by`).
"""

from __future__ import annotations

import argparse
import importlib
import threading
from collections.abc import Callable
from pathlib import Path

from .errors import LabError
from .family import Family, GroupMember
from .host_health import HealthProbe, host_actor
from .processes import add_owner_argument, emit_line, serve_until_terminated
from .trace import TraceRecorder


def print_state_line(actor: str, member: GroupMember) -> None:
    """A host's `on_change` as its own process: one state line per change, for the trial runner to read."""
    emit_line(member.snapshot().line(actor))


def actor_names(name: str, count: int, first: int = 0) -> list[str]:
    """The actors a host of `count` consumers named `name` runs: `name` alone, or `name1..nameN`; with `first`,
    one slice of a larger group spread over several hosts, `name<first>..name<first + count - 1>`.

    >>> actor_names("c", 1), actor_names("c", 3), actor_names("c", 2, first=5)
    (['c'], ['c1', 'c2', 'c3'], ['c5', 'c6'])
    """
    if first:
        return [f"{name}{first + i}" for i in range(count)]
    return [name] if count == 1 else [f"{name}{i + 1}" for i in range(count)]


def host_name(name: str, count: int, first: int = 0) -> str:
    """What a host calls itself (its health actor's prefix, `host_health.host_actor`): `name`, or for a slice
    of a spread group the slice, `c5-6`."""
    return f"{name}{first}-{first + count - 1}" if first else name


class ConsumerHost:
    def __init__(self, family: Family, address: str, group: str, topics: list[str], count: int,
                 trial_dir: str | Path, *, name: str = "c", first: int = 0, trial: str = "adhoc",
                 overrides: dict[str, str] | None = None,
                 on_change: Callable[[str, GroupMember], None] | None = None):
        if count < 1:
            raise LabError(f"--count {count}: a host runs at least one consumer.", "Use --count 1 or more.")
        props = {"group.id": group, family.address_config: address, **(overrides or {})}
        actors = actor_names(name, count, first)
        configs = [family.configure(props, actor) for actor in actors]  # validate before starting anything
        self.members: list[GroupMember] = []
        self.traces: list[TraceRecorder] = []
        # the host measures itself from the start (`host_health.py`), judged by its members' shortest timeout
        host = host_name(name, count, first)
        health_trace = TraceRecorder(trial_dir, trial=trial, design=family.name, actor=host_actor(host))
        self.traces.append(health_trace)
        self.health = HealthProbe(health_trace, host, min(family.session_timeout_ms(c) for c in configs))
        for actor, config in zip(actors, configs, strict=True):
            trace = TraceRecorder(trial_dir, trial=trial, design=family.name, actor=actor)
            self.traces.append(trace)
            callback = (lambda m, a=actor: on_change(a, m)) if on_change else None
            self.members.append(family.build(config, topics, trace, actor, callback))

    def start(self) -> ConsumerHost:
        self.health.start()
        for member in self.members:
            member.start()
        return self

    def stop(self) -> None:
        stoppers = [threading.Thread(target=m.stop, name="stop-consumer") for m in self.members]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        self.health.stop()
        for trace in self.traces:
            trace.close()


def load_family(package: str) -> Family:
    """The family `package` names (`Family.package`): the `FAMILY` a package exports, or with `module:ATTRIBUTE`
    the family that module exports under that name (a variant); else a clear error.

    >>> load_family("modern_coord.variants:STATIC").name
    'classic-static'
    """
    module, _, attribute = package.partition(":")
    try:
        family = getattr(importlib.import_module(module), attribute or "FAMILY")
    except (ImportError, AttributeError, ValueError):
        raise LabError(f"--family {package}: no consumer family of that name.",
                       "Give a package that exports FAMILY, such as legacy_zk or modern_coord, or "
                       "module:ATTRIBUTE for a variant, such as modern_coord.variants:STATIC.") from None
    if not isinstance(family, Family):
        raise LabError(f"--family {package}: that is not a consumer family (a {type(family).__name__}).",
                       "Give a package that exports FAMILY, or module:ATTRIBUTE naming a Family.")
    return family


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab_cluster.consumer_host", description=__doc__.split("\n")[0])
    parser.add_argument("--family", required=True, help="the family's package, e.g. legacy_zk or modern_coord, or "
                        "module:ATTRIBUTE for a variant, e.g. modern_coord.variants:STATIC")
    parser.add_argument("--address", required=True,
                        help="where the cluster is, as the family needs it: a ZooKeeper connect string or brokers")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--name", default="c")
    parser.add_argument("--first", type=int, default=0,
                        help="number the members from here (one slice of a group spread over several hosts)")
    parser.add_argument("--config", action="append", default=[], help="KEY=VALUE, in the family's config names")
    add_owner_argument(parser)
    args = parser.parse_args(argv)
    from .properties import parse_overrides

    host = ConsumerHost(load_family(args.family), args.address, args.group, args.topic, args.count,
                        args.trial_dir, name=args.name, first=args.first, trial=args.trial,
                        overrides=parse_overrides(args.config), on_change=print_state_line).start()
    try:
        serve_until_terminated({"consumers": [m.ident for m in host.members]})
    finally:
        host.stop()


if __name__ == "__main__":
    main()
