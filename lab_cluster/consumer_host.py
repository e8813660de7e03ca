"""N consumers of one group in one process, for either consumer family.

A family says how to configure one member (`configure(actor)`, called for
every member before anything starts, so a bad config stops nothing half-way)
and how to build it (`build(config, trace, actor, on_change)`); the host gives
each member its trace (`<trial_dir>/traces/<actor>.jsonl`), starts them, and
stops them all at once, so that the group sees one departure rather than a
rebalance per leaver. `legacy_zk/host.py` and `modern_coord/host.py` use it
in-process (the CLI's `consumers`) and as a process of its own
(`python -m <family>.host ...`, one consumer that a fault can pause or kill).
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from pathlib import Path

from .errors import LabError
from .family import GroupMember
from .processes import add_owner_argument, emit_line, serve_until_terminated
from .trace import TraceRecorder


def print_state_line(actor: str, member: GroupMember) -> None:
    """A host's `on_change` as its own process: one state line per change, for the trial runner to read."""
    emit_line(member.snapshot().line(actor))


def actor_names(name: str, count: int) -> list[str]:
    """The actors a host of `count` consumers named `name` runs: `name` alone, or `name1..nameN`."""
    return [name] if count == 1 else [f"{name}{i + 1}" for i in range(count)]


class ConsumerHost:
    def __init__(self, *, design: str, configure: Callable[[str], object], build: Callable[..., object],
                 count: int, trial_dir: str | Path, name: str = "c", trial: str = "adhoc",
                 on_change: Callable[[str, object], None] | None = None):
        if count < 1:
            raise LabError(f"--count {count}: a host runs at least one consumer.", "Use --count 1 or more.")
        actors = actor_names(name, count)
        configs = [configure(actor) for actor in actors]  # validate before starting anything
        self.consumers: list = []
        self.traces: list[TraceRecorder] = []
        for actor, config in zip(actors, configs, strict=True):
            trace = TraceRecorder(trial_dir, trial=trial, design=design, actor=actor)
            self.traces.append(trace)
            callback = (lambda c, a=actor: on_change(a, c)) if on_change else None
            self.consumers.append(build(config, trace, actor, callback))

    def start(self) -> ConsumerHost:
        for consumer in self.consumers:
            consumer.start()
        return self

    def stop(self) -> None:
        stoppers = [threading.Thread(target=c.stop, name="stop-consumer") for c in self.consumers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        for trace in self.traces:
            trace.close()


def host_argument_parser(prog: str, address: str, address_help: str, config_help: str) -> argparse.ArgumentParser:
    """The arguments every `python -m <family>.host` takes; `address` is the family's way in (`--zk`, ...)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument(address, required=True, help=address_help)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--name", default="c")
    parser.add_argument("--config", action="append", default=[], help=f"KEY=VALUE, {config_help}")
    add_owner_argument(parser)
    return parser


def serve(host: ConsumerHost, ready_info: dict) -> None:
    """Run a started host as a lab process: READY, then until SIGTERM, then stop its consumers."""
    try:
        serve_until_terminated(ready_info)
    finally:
        host.stop()
