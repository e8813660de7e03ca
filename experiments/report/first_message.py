"""The first-message section of the report: how long a newcomer waits for its first message, per design.

Rendered from the run's stored results only (`experiment.StoredRun`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import first_message  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.engine.families import FAMILIES  # noqa: E402
from experiments.report.parts import STYLE, Section, findings_list, reproduce_line, table  # noqa: E402

TABLE = [("design", "design"), ("consumers", "N"), ("trials", "trials"), ("median_ms", "median ms"),
         ("min_ms", "min ms"), ("max_ms", "max ms")]


def first_message_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    env, figures, root = run.env, run.figures, run.root
    ok = summary[(summary.status == "ok") & (summary.change == "join")]
    setup = [("designs", ", ".join(sorted(summary.design.unique()))),
             ("group", f"N = {', '.join(str(int(n)) for n in sorted(summary.consumers.unique()))} consumers, "
                       "stable; then `j1` starts in a process of its own"),
             ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
             ("producer", f"{run.spec(first_message.NAME, 'rate')} records/s per partition, so every partition "
                          "has records waiting"),
             ("TubeMQ", "client balance: a group of N does not take another node, so `c1` (node 0) departs "
                        "first and `j1` starts with its `nodeId`, every node in its own process; server balance: "
                        "`j1` joins, and the master's ticks are 30 s apart, its consumers' heartbeats 13 s"),
             ("measured", "from `j1`'s `consumer_start` to its first `processed` record; "
                          f"{summary.seed.nunique()} seed(s) per design and N"),
             ("configs", "each family's defaults (see the herd section), from the start of the log")]
    rows = first_message.per_design(summary)[[c for c, _ in TABLE]]
    figure = _figure(ok, figures / "first_message.png")
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

"""
    short = f"""**Results** (per design and N, over the seeds):

{table([label for _, label in TABLE], rows.itertuples(index=False))}"""
    takeaway = """A newcomer's first message waits for the rebalance its
arrival starts. The coordinator era paces it by the heartbeat, by design: every
member revokes before anyone is assigned. A RocketMQ newcomer waits for nobody
and is first, bought with queues that have two owners for a moment. In the
ZooKeeper era the newcomer's claims are refused until the others release, and
each refusal backs off. A TubeMQ client-balance node takes only its own hash
share, which nobody else holds; TubeMQ's older server balance makes it wait
tens of seconds for the master's hand-over: the price client balance removed."""
    why = """A newcomer's first message waits for the
rebalance its arrival starts, and each design starts it differently. In the
coordinator era the coordinator cannot answer the newcomer's JoinGroup until
every member has rejoined, and members learn of the rebalance only from the
answer to their next heartbeat (`modern_coord/coordinator/coordinator.py`,
`heartbeat.interval.ms`): the wait is paced by the heartbeat, by design, so
that every member revokes before anyone is assigned. A RocketMQ newcomer
waits for nobody: its heartbeat registers it at every broker, its own
rebalance reads one broker's id list, which already has it, and it takes its
share and pulls at once (`rocketmq_client/consumer.py`), often before the
previous owners, woken by the brokers' pushes, have let those queues go
(`rocketmq_client/rebalance.py`): the fastest first message, bought with
queues that have two owners for a moment and nobody checking that the
members agree (see the herd, split-brain and zombie sections for the price). In the
ZooKeeper era every member's watch fires at once too, but the newcomer must
claim owner znodes the others have not released yet, and a refused claim
waits `rebalance.backoff.ms` before it retries (`legacy_zk/ownership.py`).
A TubeMQ client-balance node waits for nobody either, and takes nothing
anyone holds: it registers with the master, reads the partition metadata and
registers its own hash share at the brokers (`tubemq_client/consumer.py`),
which its predecessor released when it shut down; it can only ever be a
replacement, since the group's size is fixed by `sourceCount`. TubeMQ's
older server balance is the contrast the seed text draws: the newcomer
computes nothing and waits for the master, first for its next balance tick
(`consumerBalancePeriodMs`, every 30 s at a phase fixed by the master's
start, so anywhere from 0 to 30 s), then for three heartbeats of 13 s, one
per step of the hand-over (`tubemq_client/master/balancer.py`): the holders
are told to let go, report that they have, and only then is the newcomer told
to take. Nobody ever holds a partition twice, and the newcomer's wait is tens
of seconds: the price client balance was built to remove."""
    return Section("First message", first_message.QUESTION, findings_list(first_message.findings(summary)),
                   f"![first message: a newcomer's wait per design]({figure.relative_to(root).as_posix()})",
                   short, takeaway, reproduce_line('first_message', env), appendix,
                   "experiments/catalogue/first_message.py: findings", why)


def _figure(ok: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3.4), constrained_layout=True)
    designs = [d for d in STYLE if (ok.design == d).any()]
    for i, design in enumerate(designs):
        values = ok[ok.design == design].first_message_ms.dropna()
        color, label = STYLE[design]
        ax.scatter([i] * len(values), values, color=color, marker=FAMILIES[design].marker, label=label, zorder=3)
        if len(values):
            ax.hlines(values.median(), i - 0.25, i + 0.25, color=color, linewidth=2)
    ax.set_xticks(range(len(designs)), [STYLE[d][1] for d in designs], fontsize=7, rotation=12, ha="right")
    ax.set_ylabel("first message after start (ms)")
    ax.set_yscale("log")  # from tens of milliseconds (RocketMQ, TubeMQ client balance) to tens of seconds
    ax.grid(True, axis="y", alpha=0.3)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path
