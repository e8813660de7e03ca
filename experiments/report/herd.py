"""The herd section of the report: set-up, results per N, the figure, the finding and what to take from it.

Rendered from the run's stored results only (`experiment.StoredRun`).
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import herd  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.report import plotting  # noqa: E402
from experiments.report.parts import STYLE, Section, cell, findings_list, reproduce_line, table  # noqa: E402

HERD_TABLE = [("consumers", "N"), ("notifications_per_change", "notifications"),
              ("zk_requests_per_change", "ZK requests"), ("membership_reads_per_change", "of them registration reads"),
              ("broker_requests_per_change", "group requests to brokers"),
              ("control_messages_per_change", "control messages"), ("rebalance_attempts", "attempts"),
              ("rebalance_failures", "failures"), ("owner_conflicts", "owner conflicts"),
              ("convergence_ms", "convergence ms"), ("unowned_partition_s", "unowned partition-s"),
              ("double_owned_partition_s", "double-owned partition-s"), ("view_divergence", "views"),
              ("member_partitions", "the leaver held"), ("unowned_at_end", "unowned at the end")]
#: the changes of the herd's scenarios: TubeMQ's group has a node depart instead of a joiner leave
CHANGES = ("join", "leave", "depart")
#: the lab's own overhead in each herd trial, as its hosts measured it (`experiments/overhead.py`)
OVERHEAD_TABLE = [("consumers", "N"), ("status", "trial"), ("hosts", "host processes"),
                  ("host_late_ms_max", "threads late, ms (max)"), ("host_cpu_share_max", "host CPU share (max)"),
                  ("host_cpu_s", "hosts' CPU s"), ("zk_ping_late_ms_max", "ZK pings late, ms (max)"),
                  ("zk_ping_rtt_ms_max", "ZK ping answer, ms (max)"), ("wall_s", "trial wall s")]
HERD_FIGURES = [("notifications_per_change", "notifications (ZooKeeper watches, broker pushes)", "log"),
                ("zk_requests_per_change", "ZooKeeper requests by consumers", "log"),
                ("control_messages_per_change", "control messages (all of them)", "log"),
                ("convergence_ms", "convergence (ms)", "log")]


#: the body's short table: one join at the largest N, per design (`at_largest_table`)
SHORT_TABLE = [("notifications_per_change", "notifications"), ("zk_requests_per_change", "ZooKeeper requests"),
               ("control_messages_per_change", "control messages"), ("members_revoking", "members that stopped"),
               ("convergence_ms", "convergence ms")]


def herd_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    configs, env, figures, root = run.configs, run.env, run.figures, run.root
    figure = _herd_figure(summary[summary.status == "ok"], figures / "herd.png")
    appendix = f"""**Set-up.**

{table(["", ""], setup_rows(summary, run))}

Consumer configuration as the consumers recorded it (the lab's departures from
the defaults: `auto.offset.reset` from the start of the log, so that every
produced message is one a consumer must process; addresses and ids, which
differ in every trial, left out):

<details><summary>consumer configs</summary>

{table(["design", "key", "value"], config_rows(configs, summary.design.unique()))}

</details>

**Results** (one row per N; metrics per change, `docs/metrics.md`):

{results_tables(summary)}
{overhead_part(summary, env)}

**The other families in detail.** RocketMQ took ZooKeeper away but kept "every consumer is its own brain": the
brokers stand where the ids node stood. Every broker keeps its own consumer
table from the heartbeats that reach it
(`rocketmq_client/broker/consumer_manager.py`) and, on a change, pushes
NOTIFY_CONSUMER_IDS_CHANGED to every channel of the group
(`rocketmq_client/broker/service.py`), so each consumer is told once per
broker: the notifications are brokers x members, the herd of the ZooKeeper
era times the number of brokers. Each push wakes the consumer's
RebalanceService (`rocketmq_client/consumer.py`), which asks one broker, at
random, for the id list and splits the queues by itself
(`rocketmq_client/rebalance.py`, `lab_cluster/assignment/rocketmq.py`). What
it saves is ZooKeeper's per-member reads: the id list is one request, so the
load grows with N rather than N². What it keeps is that nobody checks the
shares add up: "views" is how many distinct id lists the group's assignments
came from at once.

TubeMQ's client balance goes to the end of that road: no membership at all.
Every node is started with the group's size (`sourceCount`) and its own
`nodeId`, and takes the partitions whose key hashes to its id
(`lab_cluster/assignment/tubemq.py`); the master only checks that the nodes
can coexist (`tubemq_client/master/groups.py`) and tells nobody anything. So
a change costs no notification and no rebalance, and it also changes nothing:
the newcomer, whose id is past the group's, is refused by its own `start`
(`tubemq_client/consumer.py`: BAD_REQUEST; "failures" counts it), and when
node 0 departs, the others' metadata checks every `partMetaInfoCheckPeriodMs`
(`BalancingNode.balance_once`) find nothing new of theirs, so its partitions
stay unowned ("the leaver held" = "unowned at the end") until an operator
restarts every node with a new `sourceCount`. The group requests in its rows
are its periodic heartbeats and metadata checks during the watch, not a
reaction to the change. The hash split is also uneven (one key's hash
decides, not a count): as N nears P some nodes get several partitions and
others none, so a departing node may hold nothing ("the leaver held")."""
    takeaway = """In the ZooKeeper era nobody coordinates: one change
wakes every consumer's watch, and each runs the whole rebalance alone, reading
every member's registration (N reads each, N² in all) and colliding with the
others on the owner znodes; the cost of one change is paid N times over. In the
coordinator era the consumers never talk to ZooKeeper: the coordinator tells
them at their next heartbeat, each sends a fixed handful of requests, and the
leader alone computes. The price is latency (the heartbeat's pace), not load."""
    why = """In the ZooKeeper era nobody coordinates: every
consumer keeps its own watch on `/consumers/<group>/ids`
(`legacy_zk/watches.py`, zkclient's listeners), so one change notifies all N
of them; each re-arms its watch at once (two reads), then runs the whole
rebalance by itself (`legacy_zk/consumer.py: _synced_rebalance`): it reads the
brokers twice, its own registration twice, the partitions and every member's
registration (`legacy_zk/view.py`: Kafka 0.8.2.2's reads, in its order
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
is not always faster at small N."""
    return Section("Herd", herd.QUESTION, findings_list(herd.findings(summary)),
                   f"![herd: cost of one change against N]({figure.relative_to(root).as_posix()})",
                   at_largest_table(summary), takeaway, reproduce_line("herd", env), appendix,
                   "experiments/catalogue/herd.py: findings", why)


#: config keys whose values differ in every trial (addresses, generated ids): the report leaves them out
EPHEMERAL_KEYS = ("bootstrap.servers", "bootstrap_servers", "masterHostAndPort", "namesrvAddr", "zookeeper.connect",
                  "consumer.id", "clientIP", "lab.brokers.via", "lab.coordinator.via")


def config_rows(configs: dict, designs) -> list[tuple]:
    """(design, key, value) of the consumer configs the run recorded, for `designs` only, without the keys
    whose values are a trial's own (`EPHEMERAL_KEYS`: addresses, generated ids)."""
    return [(design, key, value) for design, config in sorted(configs.items()) if design in set(designs)
            for key, value in sorted(config.items()) if key not in EPHEMERAL_KEYS]


def _settled(rows: pd.DataFrame, column: str):
    """The mean of `column`; for convergence, the time to a stable group (`herd.settled_ms`)."""
    return herd.settled_ms(rows) if column == "convergence_ms" else rows[column].mean()


def at_largest_table(summary: pd.DataFrame) -> str:
    """One join at the largest N the run has, one row per design (`SHORT_TABLE`), with its caption."""
    joins = summary[(summary.status == "ok") & (summary.change == "join")]
    if joins.empty:
        return ""
    n = int(joins.consumers.max())
    rows = [(STYLE[d][1], *(_settled(joins[(joins.design == d) & (joins.consumers == n)], c) for c, _ in SHORT_TABLE))
            for d in STYLE if ((joins.design == d) & (joins.consumers == n)).any()]
    return (f"One join to a group of N = {n}, per design (a row per N and per change: the appendix):\n\n"
            + table(["design", *(label for _, label in SHORT_TABLE)], rows))


def setup_rows(summary: pd.DataFrame, run: StoredRun) -> list[tuple[str, str]]:
    """The set-up table's rows: designs, N, P, the scenarios, the servers of each trial."""
    ns = sorted(summary.consumers.dropna().unique().astype(int))
    return [("designs", ", ".join(sorted(summary.design.unique()))), ("group sizes N", ", ".join(map(str, ns))),
            ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
            ("scenario", "stable group of N; `j1` joins (N -> N+1); `j1` leaves gracefully (N+1 -> N)"),
            ("TubeMQ's scenario", "every node in its own process, told N as its `sourceCount`; `j1` joins (its "
                                  "`nodeId` N is past the group's); then `c1` (node 0) departs gracefully; the "
                                  f"runner watches each change for {herd.TUBEMQ_WATCH_S:.0f} s, as neither can "
                                  "converge"),
            ("ZooKeeper", f"{run.spec(herd.NAME, 'zk_servers')} server per trial"),
            ("brokers", f"{run.spec(herd.NAME, 'brokers')} per trial, each hosting a group coordinator and "
                        "RocketMQ's consumer table; TubeMQ's master and broker side")]


def results_tables(summary: pd.DataFrame) -> str:
    """One table per design and change of the trials that ended ok, a row per N (`HERD_TABLE`)."""
    ok = summary[summary.status == "ok"]
    tables = []
    for design in STYLE:
        for change in CHANGES:
            rows = ok[(ok.design == design) & (ok.change == change)].sort_values("consumers")
            if not rows.empty:
                tables.append(f"**{STYLE[design][1]}, {change}**\n\n" + table(
                    [label for _, label in HERD_TABLE], rows[[c for c, _ in HERD_TABLE]].itertuples(index=False)))
    return "\n".join(t + "\n" for t in tables)


def overhead_part(summary: pd.DataFrame, env: dict) -> str:
    """The lab's own overhead in each trial, with the machine it ran on and the rule that makes a trial invalid."""
    rows = _overhead_rows(summary)
    machine = env.get("machine", {})
    return f"""**The lab's own overhead** in each trial, as its consumer hosts measured it
(`lab_cluster/host_health.py`): how late their threads woke, the CPU they took,
and the ZooKeeper-era sessions' pings, on this machine
({machine.get('cpus', '?')} CPUs, {machine.get('cpu', '?')}). A trial whose host
woke later than a third of its session timeout is `invalid` and left out of the results above: its
figures would be the lab's, not the design's (`experiments/overhead.py`).

{table(["design", *(label for _, label in OVERHEAD_TABLE)], rows) if rows else
 "(this run's traces have no host measurements: recorded by an older lab)"}"""


def _overhead_rows(summary: pd.DataFrame) -> list[tuple]:
    """One row per herd trial that has host measurements: design and the `OVERHEAD_TABLE` columns."""
    trials = summary[summary.experiment == herd.NAME].drop_duplicates("trial")
    if "hosts" not in trials or trials.hosts.isna().all():
        return []
    order = {design: i for i, design in enumerate(STYLE)}
    trials = trials.assign(order=trials.design.map(order)).sort_values(["order", "consumers"])
    return [(STYLE[r.design][1] if r.design in STYLE else r.design, *(getattr(r, c) for c, _ in OVERHEAD_TABLE))
            for r in trials.itertuples()]


def _herd_figure(ok: pd.DataFrame, path: Path) -> Path:
    """Four costs of one change against N, a line per design and change (solid: join, dashed: leave, dotted:
    depart), each design in its own colour and marker; the growth the findings claim drawn as fitted guides."""
    fig, axes = plt.subplots(2, 2, figsize=(13, 10), layout="constrained")
    for ax, (metric, title, scale) in zip(axes.flat, HERD_FIGURES, strict=True):
        zeros = []
        for design, (_, label) in STYLE.items():
            for change, linestyle in (("join", "-"), ("leave", "--"), ("depart", ":")):
                s = herd.per_n(ok, design, change, metric)
                if s.empty:
                    continue
                if where := plotting.log_series(ax, s, design, linestyle, f"{label}, {change}"):
                    zeros.append(f"{design}, {change}: {where}")
        if metric == "zk_requests_per_change":
            reads = herd.per_n(ok, "zookeeper", "join", "membership_reads_per_change")
            if not reads.empty:
                ax.plot(reads.index, reads.values, linestyle=":", color=STYLE["zookeeper"][0], marker=".",
                        label="zookeeper, join: of them, registration reads")
                plotting.guide(ax, reads.index, reads.values, 2, "guide ∝ N², fitted to the registration reads")
        if metric == "control_messages_per_change":
            classic = herd.per_n(ok, "classic", "join", metric)
            plotting.guide(ax, classic.index, classic.values, 1, "guide ∝ N, fitted to classic's join")
        ax.set_xscale("log", base=2)
        ax.set_yscale(scale)
        ax.set_title(title)
        ax.set_xlabel("group size N")
        plotting.note_zeros(ax, zeros)
        ax.grid(True, alpha=0.3)  # major lines only: minor ones on log axes cost more to draw than they tell
    plotting.legend_outside(fig, axes.flat, ncol=3, loc="outside lower center")
    plotting.save(fig, path)
    return path


#: the costs whose growth with N the full-profile section sums up: (metric, label)
GROWTH = [("control_messages_per_change", "control messages"), ("zk_requests_per_change", "ZK requests"),
          ("convergence_ms", "convergence ms")]


def herd_full_section(summary: pd.DataFrame, run: StoredRun) -> str:
    """The herd's full-profile run (`report/full_runs.py`): N up to 256 here, with the machine it ran on."""
    env, machine = run.env, run.env.get("machine", {})
    # the command as the run was given it, without its --out: a path on the machine that made it
    command = re.sub(r" --out \S+", "", env.get("command", "python -m experiments run herd --profile full"))
    ok = summary[summary.status == "ok"]
    figure = _herd_figure(ok, run.figures / "herd-full.png")
    trials = summary.drop_duplicates("trial")
    ended_ok = (trials.status == "ok").sum()
    largest = int(summary.consumers.max())
    converging = {s["design"] for s in run.grid if s["experiment"] == herd.NAME and s["converge_required"]}
    return f"""## Herd at full size: N up to {largest}

The standard profile above stops at N = {herd.PROFILES['standard']['consumers'][-1]}, where the herd is only
beginning. This is one run of the full profile, stored apart from the standard reproduction
(`report/full/herd/`) because it takes far longer: `{command}`, {env.get('date', '?')},
lab commit `{env.get('lab_commit', '?')}`. Its {len(trials)} trials' wall times sum to
{trials.wall_s.sum() / 3600:.1f} h, on {machine.get('cpus', '?')} CPUs
({machine.get('cpu', '?')}), {machine.get('memory_gib', '?')} GiB, ZooKeeper {env.get('zk_version', '?')}
(`{env.get('zk_backend', '?')}`), Spark {env.get('spark_version', '?')} (`{env.get('spark_master', '?')}`).
{ended_ok} of {len(trials)} ended ok; a trial whose hosts were starved is `invalid`
(`experiments/overhead.py`), and a run with one is not published (`experiments/report/full_runs.py`). The
runner gives a group of N max(90 s, {herd.CONVERGE_S_PER_MEMBER:.0f} s × N) to converge
(`herd.converge_limit_s`): the lab's patience, not the design's.

**Set-up.**{_partitions_note(summary)}

{table(["", ""], setup_rows(summary, run))}

**At the largest N.** {_at_largest(ok, largest, converging)}

**How each cost grows with N** (the smallest and the largest N of the trials that ended ok, and the log-log
slope over every N: 1 is linear, 2 quadratic):

{table(["design", "change", "N", *(f"{label}, slope" for _, label in GROWTH)], _growth_rows(ok))}

**Results** (one row per N; metrics per change, `docs/metrics.md`):

{results_tables(summary)}
![herd at full size: cost of one change against N]({figure.relative_to(run.root).as_posix()})

{overhead_part(summary, env)}

**The finding, checked on these results** (`experiments/catalogue/herd.py: findings`):

{findings_list(herd.findings(summary))}

**Reproduce:** `{command}`, then
`python -m experiments report RUN_DIR --publish` to put it here."""


def _growth_rows(ok: pd.DataFrame) -> list[tuple]:
    """Per design and change: N's range, and per `GROWTH` cost its values at both ends and its log-log slope."""
    rows = []
    for design in STYLE:
        for change in CHANGES:
            series = [herd.per_n(ok, design, change, metric) for metric, _ in GROWTH]
            if series[0].empty:
                continue
            ns = series[0].index
            cells = [_growth(s) for s in series]
            rows.append((STYLE[design][1], change, f"{ns[0]} to {ns[-1]}", *cells))
    return rows


def _partitions_note(summary: pd.DataFrame) -> str:
    """Says so where the run's P is not the full profile's (`run herd --profile full --partitions P`)."""
    ps, profile_p = sorted(summary.partitions.unique()), herd.PROFILES["full"]["partitions"]
    if ps == [profile_p]:
        return ""
    note = (f" P is {', '.join(str(int(p)) for p in ps)}, as the run was given it (`--partitions`), not the full "
            f"profile's {profile_p}: `docs/experiments.md` (herd) says why.")
    if max(ps) < summary.consumers.max():
        note += (" Past N = P, the members beyond the P-th own nothing: a change may move no partition at all, and "
                 "what it still costs is the protocol's alone.")
    return note


def _growth(s: pd.Series) -> str:
    """`first → last, slope` of a cost per N (no slope where fewer than two values are above zero)."""
    if s.isna().all():
        return "–"
    slope = herd.loglog_slope(s.index, s.values)
    return f"{cell(s.iloc[0])} → {cell(s.iloc[-1])}" + ("" if pd.isna(slope) else f", {slope:.2f}")


def _at_largest(ok: pd.DataFrame, n: int, converging: set[str]) -> str:
    """One join at N = `n`, design by design: who was told, what it cost, and how long the designs that
    converge took (TubeMQ's client balance refuses the newcomer: nothing converges)."""
    rows = ok[(ok.consumers == n) & (ok.change == "join")]
    said = []
    for design in STYLE:
        r = rows[rows.design == design]
        if r.empty:
            continue
        r = r.iloc[0]
        took = (f", converged in {r.convergence_ms / 1000:,.1f} s" if design in converging
                and pd.notna(r.convergence_ms) else "")
        said.append(f"{STYLE[design][1]}: {cell(float(r.notifications_per_change))} notifications, "
                    f"{cell(float(r.control_messages_per_change))} control messages{took}")
    return (f"One join to a group of {n}: " + "; ".join(said) + "." if said
            else f"No trial at N = {n} ended ok.")
