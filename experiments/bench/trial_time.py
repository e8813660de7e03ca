"""`bench trial-time RUN`: where a stored run's trial seconds went, phase by phase, per experiment and design.

A question first: a reproduction is mostly its trials, run one at a
time; which of their seconds are what the trial measures, and which are the
lab's fixed waits? Each trial's `scenario` trace (`experiments/engine/trial.py`)
marks its phases on the monotonic clock every trace shares:

    trace_open -> setup            `cluster`: ZooKeeper, the brokers, the topic
    setup -> converged 0           `forming`: the group's members start and converge
    change i -> converged i        `converging`: what the trial measures (or to not_converged i:
                                   the convergence limit ran out)
    converged i -> next change     `holding`: the step's fixed waits after convergence (`hold_s`,
                                   `settle_s`, a rolling restart's gap) and the server counters
    end -> trace_close             `stopping`: consumers, producer, brokers, ZooKeeper

and the trial's `wall_s` (its Spark task's clock) less the trace's span is
`outside_trace` (the task's own start-up, and the trial directory's
Parquet file written at the end). The sums go to `--out` (default
`benchmarks/trial_time.json`) per experiment and design, with the run and the
lab commit that made it: figures read from a stored run, never asserted.

Beside the sums, the run's longest trials (`longest_trials`): however many
trials run at once, a reproduction takes at least its longest one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from experiments.digest import NS_PER_S
from lab_cluster.trace_reader import COLUMNAR_FILE

PHASES = ("cluster", "forming", "converging", "holding", "stopping", "outside_trace")


def add_parser(sub) -> None:
    p = sub.add_parser("trial-time", help="where a stored run's trial seconds went, phase by phase")
    p.add_argument("run_dir", type=Path, help="a run directory (runs/<time>-...)")
    p.add_argument("--out", default="benchmarks/trial_time.json")
    p.set_defaults(run=run)


def phases(scenario: list[tuple[int, str, str]], wall_s: float) -> dict[str, float]:
    """A trial's seconds per phase, from its scenario events (ts_ns, kind, index as text or ""), in time order.

    >>> s = 1_000_000_000
    >>> events = [(0, "trace_open", ""), (3 * s, "setup", ""), (5 * s, "converged", "0"), (5 * s, "change", "1"),
    ...           (9 * s, "converged", "1"), (13 * s, "end", ""), (14 * s, "trace_close", "")]
    >>> phases(events, wall_s=14.5)
    {'cluster': 3.0, 'forming': 2.0, 'converging': 4.0, 'holding': 4.0, 'stopping': 1.0, 'outside_trace': 0.5}
    """
    out = dict.fromkeys(PHASES, 0.0)
    at: dict[str, int] = {}
    changed: dict[str, int] = {}  # change index -> when it began
    settled = None  # when the last change converged (or gave up), until the next change or the end
    for ts, kind, index in scenario:
        if kind in ("trace_open", "setup", "end", "trace_close"):
            at.setdefault(kind, ts)
        if kind in ("converged", "not_converged"):
            if index == "0":
                at.setdefault("formed", ts)
            elif index in changed:
                out["converging"] += (ts - changed.pop(index)) / NS_PER_S
            settled = ts
        elif kind in ("change", "end") and settled is not None:
            out["holding"] += (ts - settled) / NS_PER_S
            settled = None
        if kind == "change":
            changed[index] = ts
    span = [("cluster", "trace_open", "setup"), ("forming", "setup", "formed"), ("stopping", "end", "trace_close")]
    for name, start, stop in span:
        if start in at and stop in at:
            out[name] = (at[stop] - at[start]) / NS_PER_S
    if "trace_open" in at and "trace_close" in at:
        out["outside_trace"] = wall_s - (at["trace_close"] - at["trace_open"]) / NS_PER_S
    return {name: round(seconds, 3) for name, seconds in out.items()}


def scenario_events(trial_dir: Path) -> list[tuple[int, str, str]]:
    """The trial's scenario events (ts_ns, kind, change index), from the Parquet file its task wrote."""
    table = pq.read_table(trial_dir / COLUMNAR_FILE, columns=["ts_ns", "actor", "kind", "fields"],
                          filters=[("actor", "=", "scenario")]).sort_by("ts_ns")
    out = []
    for ts, kind, fields in zip(*(table[c].to_pylist() for c in ("ts_ns", "kind", "fields")), strict=True):
        index = json.loads(fields).get("index", "") if fields and kind in ("change", "converged",
                                                                           "not_converged") else ""
        out.append((ts, kind, str(index)))
    return out


def measure(run_dir: Path) -> dict:
    """Per experiment and design: trials, wall seconds and each phase's seconds, summed; and the run's total."""
    trials = pq.read_table(run_dir / "results" / "trials.parquet",
                           columns=["experiment", "design", "trial", "status", "wall_s"]).to_pylist()
    sums: dict[str, dict] = defaultdict(lambda: {"trials": 0, "wall_s": 0.0, **dict.fromkeys(PHASES, 0.0)})
    for row in trials:
        trial_dir = run_dir / "trials" / row["trial"]
        if not (trial_dir / COLUMNAR_FILE).exists():
            continue  # a trial that never ran (or kept no traces) has no phases to read
        wall_s = row["wall_s"] or 0.0
        seconds = phases(scenario_events(trial_dir), wall_s)
        for key in (f"{row['experiment']}/{row['design']}", "all"):
            group = sums[key]
            group["trials"] += 1
            group["wall_s"] += wall_s
            for name, value in seconds.items():
                group[name] += value
    return {key: {name: round(value, 1) if isinstance(value, float) else value for name, value in group.items()}
            for key, group in sorted(sums.items())}


def longest_trials(run_dir: Path, count: int = 5) -> list[dict]:
    """The run's `count` longest trials by wall seconds, longest first: the floor under the run's own length."""
    trials = pq.read_table(run_dir / "results" / "trials.parquet",
                           columns=["experiment", "design", "trial", "wall_s"]).to_pylist()
    ran = sorted((t for t in trials if t["wall_s"] is not None), key=lambda t: t["wall_s"], reverse=True)
    return [{**t, "wall_s": round(t["wall_s"], 1)} for t in ran[:count]]


#: where `bench trial-time` writes by default, and what the harness reads to start the longest trials first
FIGURES = Path(__file__).resolve().parents[2] / "benchmarks" / "trial_time.json"


def mean_seconds(figures: Path = FIGURES) -> dict[str, float]:
    """{"experiment/design": the mean wall seconds of its trials} in the last run `bench trial-time` measured
    here (empty where there is none)."""
    if not figures.exists():
        return {}
    from experiments.engine.families import current_name

    groups = json.loads(figures.read_text()).get("seconds", {})
    return {_renamed(key, current_name): g["wall_s"] / g["trials"] for key, g in groups.items()
            if key != "all" and g.get("trials")}


def _renamed(key: str, current_name) -> str:
    """"experiment/design" with the design under today's name (figures stored before the renaming)."""
    experiment, _, design = key.partition("/")
    return f"{experiment}/{current_name(design)}" if design else key


def run(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from experiments.engine.environment import machine

    console = Console()
    environment = json.loads((args.run_dir / "environment.json").read_text())
    figures = measure(args.run_dir)
    doc = {"benchmark": "trial-time", "run": str(args.run_dir), "command": environment.get("command"),
           "lab_commit": environment.get("lab_commit"), "run_date": environment.get("date"),
           "machine": environment.get("machine", machine()), "seconds": figures,
           "longest_trials": longest_trials(args.run_dir)}
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    table = Table("experiment/design", "trials", "wall s", *PHASES, title=f"trial seconds of {args.run_dir}")
    for key, group in figures.items():
        table.add_row(key, str(group["trials"]), f"{group['wall_s']:.1f}", *(f"{group[p]:.1f}" for p in PHASES))
    console.print(table)
    console.print("longest trials (no reproduction of this grid is shorter than the first): " + "; ".join(
        f"{t['trial']} {t['wall_s']:.1f} s" for t in doc["longest_trials"]))
    console.print(f"written to {args.out}")
    return 0
