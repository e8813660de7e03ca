"""REPORT.md, rendered from a run's stored results and nothing else.

`render(run_dir, out)` reads `summary.csv`, `environment.json`,
`configs.json` and `grid.json` (the trial specs, for the config overrides) of a
run directory (see `store.py`), and `timelines.csv`/`marks.csv` where the run
has them, draws the figures (matplotlib, headless) into
`<out's folder>/report/figures/`, copies the source files beside them
(`report/`), and writes the Markdown. Every number
in it comes from those files; rendering the same run twice gives the same
REPORT.md, which is what `python -m experiments report RUN_DIR` does. By
default a run's report goes inside the run directory (`RUN_DIR/REPORT.md`,
`RUN_DIR/report/`); only publishing (`published.py`) writes the lab's own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lab_cluster.errors import LabError  # noqa: E402

from . import herd, report_faults, split_brain, zombie  # noqa: E402
from .finding import Finding, by_id  # noqa: E402
from .report_parts import STYLE, findings_list, table  # noqa: E402
from .trial import MEMBERSHIP_CHANGES  # noqa: E402

SOURCES = ("summary.csv", "environment.json", "configs.json", "grid.json")
#: written by runs with fault experiments: the timelines' data
TIMELINE_SOURCES = ("timelines.csv", "marks.csv")
HERD_TABLE = [("consumers", "N"), ("notifications_per_change", "notifications"),
              ("zk_requests_per_change", "ZK requests"), ("membership_reads_per_change", "of them registration reads"),
              ("coordinator_requests_per_change", "coordinator requests"),
              ("control_messages_per_change", "control messages"), ("rebalance_attempts", "attempts"),
              ("rebalance_failures", "failures"), ("owner_conflicts", "owner conflicts"),
              ("convergence_ms", "convergence ms"), ("unowned_partition_s", "unowned partition-s"),
              ("double_owned_partition_s", "double-owned partition-s"), ("view_divergence", "views")]
HERD_FIGURES = [("notifications_per_change", "ZooKeeper notifications to consumers", "symlog"),
                ("zk_requests_per_change", "ZooKeeper requests by consumers", "symlog"),
                ("control_messages_per_change", "control messages (all three)", "log"),
                ("convergence_ms", "convergence (ms)", "log")]


def load(run_dir: Path) -> tuple[pd.DataFrame, dict, dict, list[dict]]:
    missing = [name for name in SOURCES if not (run_dir / name).exists()]
    if missing:
        raise LabError(f"{run_dir} is not a run directory with stored results: {', '.join(missing)} missing.",
                       "Give the directory a `run` or `reproduce` wrote (it holds summary.csv), or run one.")
    from .published import missing_columns

    summary = pd.read_csv(run_dir / "summary.csv")
    absent = missing_columns(summary)
    if absent:
        raise LabError(f"{run_dir / 'summary.csv'} was written by an older version of the lab: it has no "
                       f"{', '.join(absent)}.", "Render it with the lab's commit it records (environment.json), "
                       "or run the experiments again with this one.")
    return (summary, json.loads((run_dir / "environment.json").read_text()),
            json.loads((run_dir / "configs.json").read_text()), json.loads((run_dir / "grid.json").read_text()))


#: every experiment whose section states findings, in the report's order, with the function that checks them
FINDINGS = {herd.NAME: herd.findings, split_brain.NAME: split_brain.findings, zombie.NAME: zombie.findings}


def checked_findings(summary: pd.DataFrame) -> list[tuple[str, Finding]]:
    """(experiment, finding) for every finding the report states, checked on `summary`'s trials of that
    experiment; experiments the summary has no trial of are left out. Ids are unique per experiment."""
    return [(name, finding) for name, check in FINDINGS.items() if (summary.experiment == name).any()
            for finding in by_id(check(summary[summary.experiment == name])).values()]


def render(run_dir: Path, out: Path | None = None) -> Path:
    """Render `run_dir`'s report into `out` (default: `run_dir/REPORT.md`), its figures and sources into
    the `report/` folder beside it."""
    out = out or run_dir / "REPORT.md"
    summary, env, configs, grid = load(run_dir)
    report_dir = out.parent / "report"
    figures = report_dir / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    have_timelines = all((run_dir / name).exists() for name in TIMELINE_SOURCES)
    if run_dir.resolve() != report_dir.resolve():
        for name in SOURCES + (TIMELINE_SOURCES if have_timelines else ()):
            shutil.copyfile(run_dir / name, report_dir / name)
    timelines = tuple(pd.read_csv(run_dir / name) for name in TIMELINE_SOURCES) if have_timelines else None
    parts = [_header(env), _environment(env)]
    if (summary.experiment == herd.NAME).any():
        parts.append(_herd(summary[summary.experiment == herd.NAME], configs, env, figures, out.parent))
    for experiment, section in ((split_brain, report_faults.split_brain_section),
                                (zombie, report_faults.zombie_section)):
        rows = summary[summary.experiment == experiment.NAME]
        if not rows.empty:
            parts.append(section(rows, env, figures, out.parent, timelines, _overrides(grid, experiment.NAME)))
    parts.append(_failures(summary))
    parts.append(_cross_check(summary))
    out.write_text("\n\n".join(p.strip() for p in parts if p) + "\n")
    return out


def _overrides(grid: list[dict], experiment: str) -> list[tuple[str, str]]:
    """(design, its config overrides) in one experiment's trials, as the run's grid.json recorded them."""
    by_design: dict[str, dict[str, None]] = {}  # an ordered set: the overrides in the order the grid gave them
    for spec in grid:
        if spec["experiment"] == experiment:
            by_design.setdefault(spec["design"], {}).update(dict.fromkeys(json.loads(spec["overrides"])))
    return [(design, ", ".join(f"`{o}`" for o in found) or "none") for design, found in sorted(by_design.items())]


def _header(env: dict) -> str:
    return f"""# REPORT: why consumer-group management moved out of ZooKeeper

Generated by `python -m experiments report` from the stored results of one run
(`report/summary.csv`, `report/environment.json`, `report/configs.json`,
`report/grid.json`); no
number below is typed by hand. The run: `{env.get('command', '?')}`, profile
`{env.get('profile', '?')}`. Every metric is defined in DESIGN.md §4 and
computed from the trial traces with Spark SQL (`experiments/metrics.py`)."""


def _environment(env: dict) -> str:
    machine = env.get("machine", {})
    rows = [("date (UTC)", env.get("date")), ("ZooKeeper backend", env.get("zk_backend")),
            ("ZooKeeper version", env.get("zk_version")), ("Spark", f"{env.get('spark_version')} "
                                                                    f"({env.get('spark_master')})"),
            ("Python", env.get("python_version")), ("platform", env.get("platform")),
            ("CPU", f"{machine.get('cpu', '?')} ({env.get('cpu_count')} cores)"),
            ("memory", f"{machine.get('mem_gib', machine.get('memory_gib', '?'))} GiB")]
    if "lab_commit" in env:  # runs stored before it was recorded have none
        rows.append(("lab commit", f"`{env['lab_commit']}`"))
    return "## Environment\n\n" + table(["", ""], rows)


def _herd(summary: pd.DataFrame, configs: dict, env: dict, figures: Path, root: Path) -> str:
    ok = summary[summary.status == "ok"]
    ns = sorted(summary.consumers.dropna().unique().astype(int))
    setup = [("designs", ", ".join(sorted(summary.design.unique()))), ("group sizes N", ", ".join(map(str, ns))),
             ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
             ("scenario", "stable group of N; `j1` joins (N -> N+1); `j1` leaves gracefully (N+1 -> N)"),
             ("ZooKeeper", "1 server per trial"), ("brokers", "3 per trial, each hosting a group coordinator")]
    config_rows = []
    for design, config in sorted(configs.items()):
        for key, value in sorted(config.items()):
            config_rows.append((design, key, value))
    tables = []
    for design in ("legacy", "modern"):
        for change in ("join", "leave"):
            rows = ok[(ok.design == design) & (ok.change == change)].sort_values("consumers")
            if rows.empty:
                continue
            tables.append(f"**{STYLE[design][1]}, {change}**\n\n" + table(
                [label for _, label in HERD_TABLE], rows[[c for c, _ in HERD_TABLE]].itertuples(index=False)))
    figure = _herd_figure(ok, figures / "herd.png")
    checked = herd.findings(summary)
    return f"""## Herd: {herd.QUESTION}

**Set-up.**

{table(["", ""], setup)}

Consumer configuration as the consumers recorded it (the lab's departures from
the defaults: `auto.offset.reset` from the start of the log, so that every
produced message is one a consumer must process):

<details><summary>consumer configs</summary>

{table(["design", "key", "value"], config_rows)}

</details>

**Results** (one row per N; metrics per change, DESIGN.md §4):

{chr(10).join(t + chr(10) for t in tables)}
![herd: cost of one change against N]({figure.relative_to(root).as_posix()})

**The finding, checked on these results** (`experiments/herd.py: findings`):

{findings_list(checked)}

**What to take from it.** In the ZooKeeper era nobody coordinates: every
consumer keeps its own watch on `/consumers/<group>/ids`
(`legacy_zk/watches.py`, zkclient's listeners), so one change notifies all N
of them; each re-arms its watch at once (two reads), then runs the whole
rebalance by itself (`legacy_zk/consumer.py: _synced_rebalance`): it reads the
brokers twice, its own registration twice, the partitions and every member's
registration (`legacy_zk/rebalance.py`: Kafka 0.8.2.2's reads, in its order
and number; N reads each, N² in all), releases and re-claims its owner znodes,
and collides with the others while they do the same
(`legacy_zk/ownership.py`: one owner conflict per refused partition, back-off
`rebalance.backoff.ms`). The cost of one change is paid N times over, and the
part that reads the membership grows with N². In the coordinator era the
consumers never talk to ZooKeeper: the coordinator learns of the change
(`modern_coord/coordinator/coordinator.py`), tells the members through the
answer to their next Heartbeat (REBALANCE_IN_PROGRESS), and each member sends
a fixed handful of requests (OffsetCommit, JoinGroup, SyncGroup); the leader
alone computes the assignment (`modern_coord/consumer.py: _assign_as_leader`).
The price is latency, not load: members learn of a change only at their next
heartbeat (`heartbeat.interval.ms`), which is why coordinator-era convergence
is not always faster at small N.

**Reproduce:** `python -m experiments run herd --profile {env.get('profile', 'quick')}` (or `reproduce`)."""


def _herd_figure(ok: pd.DataFrame, path: Path) -> Path:
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    for ax, (metric, title, scale) in zip(axes.flat, HERD_FIGURES, strict=True):
        for design, (color, label) in STYLE.items():
            for change, style in (("join", "-o"), ("leave", "--s")):
                s = herd.per_n(ok, design, change, metric)
                if not s.empty:
                    ax.plot(s.index, s.values, style, color=color, label=f"{label}, {change}")
        ax.set_xscale("log", base=2)
        if scale == "symlog":
            ax.set_yscale("symlog", linthresh=1)
            ax.set_ylim(bottom=0)  # counts: nothing below zero to show
        else:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("group size N")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def _failures(summary: pd.DataFrame) -> str:
    failed = summary[summary.status != "ok"].drop_duplicates("trial")
    if failed.empty:
        return "## Failed trials\n\nNone: every trial ran to the end, its traces were complete, and it converged."
    rows = [(r.trial, r.reason) for r in failed.itertuples()]
    return ("## Failed trials\n\nThese trials are left out of every table and figure above.\n\n"
            + table(["trial", "why"], rows))


def _cross_check(summary: pd.DataFrame) -> str:
    ok = summary[summary.status == "ok"]
    if ok.empty:
        return ""
    judged = ok[ok.change.isin(MEMBERSHIP_CHANGES)]
    unheard = judged.client_unheard.fillna(0) if "client_unheard" in judged else 0  # runs before it was recorded
    agree = (judged.client_notifications + unheard == judged.server_notifications).sum()
    return f"""## Cross-check with the servers

Around every change the runner read every ZooKeeper server's `mntr`; in the
changes of membership alone ({", ".join(MEMBERSHIP_CHANGES)}) the clients' recorded watch
notifications (with those a stopping ZooKeeper-era consumer's own session close
triggers and it does not hear, which it records) equal the watchers the
servers triggered in {agree} of
{len(judged)} changes (a disagreement fails the trial; around a pause or a cut
the victim's session expires with notifications the server triggered and the
client never received, so those windows are not judged), and the clients'
recorded requests never exceed the packets the servers received (
{int(ok.client_requests.sum()):,} requests recorded, {int(ok.server_packets_received.sum()):,} packets
received, which also counts pings and brokers' requests)."""
