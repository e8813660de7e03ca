"""The growth section of the report: a topic's partitions grow under a stable group; learning of them, then using them.

Rendered from the run's stored results only (`experiment.StoredRun`): the figures from its summary, each
setting's value from the consumer configs the run's consumers recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import growth  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.engine.families import FAMILIES, settings_of  # noqa: E402
from experiments.report.parts import STYLE, Section, cell, findings_list, reproduce_line, table  # noqa: E402

TABLE = [("design", "design"), ("trials", "trials"), ("learnt_ms", "learnt ms"),
         ("first_new_owned_ms", "first new owned ms"), ("after_learning_ms", "then, until all processed, ms"),
         ("new_processing_ms", "all new processed ms"), ("rebalance_attempts", "rebalance attempts"),
         ("generations", "rounds"), ("partitions_revoked", "revoked"),
         ("control_messages_per_change", "control msgs"), ("new_unowned_partition_s", "new unowned partition-s")]

#: how each design learns of new partitions, and the setting that paces it: (how, consumer setting or None, where
#: the setting lives when it is not the consumer's)
LEARNS = {
    "zookeeper": ("every consumer's watch on the topic's znode fires at once", None, "no setting: at once"),
    **{d: ("the leader's metadata refresh, then a rejoin", key, "") for d, key in growth.REFRESH.items()},
    "consumer-848": ("the coordinator reads its broker's metadata at a member's next heartbeat",
                     None, "`group.consumer.heartbeat.interval.ms` on the broker, 5 s"),
    "rocketmq": ("each consumer's route refresh, then its next periodic rebalance", "pollNameServerInterval",
                 "and the rebalance service's 20 s"),
    "tubemq": ("the master's periodic pass, then each node's metadata check", "partMetaInfoCheckPeriodMs",
               "and the master's balance period"),
    "tubemq-server": ("the master's next balance pass, then heartbeats", None,
                      "`consumerBalancePeriodMs` on the master, and 13 s heartbeats"),
}


def growth_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    env, figures, root = run.env, run.figures, run.root
    t = growth.per_design(summary)
    setup = [("designs", ", ".join(sorted(summary.design.unique()))),
             ("group", f"N = {', '.join(str(int(n)) for n in sorted(summary.consumers.unique()))} consumers, "
                       "stable, in one process"),
             ("the change", f"the topic grows from {run.spec(growth.NAME, 'partitions')} to "
                            f"{run.spec(growth.NAME, 'grow_to')} partitions, as `kafka-topics.sh --alter` does "
                            "in the ZooKeeper era (the topic's znode rewritten); Kafka 4's "
                "and RocketMQ's own brokers: their admin APIs"),
             ("producer", f"{run.spec(growth.NAME, 'rate')} records/s per partition; it writes to the new "
                          "partitions as soon as they exist, so every delay below is the design's"),
             ("measured", "from the growth (`topic_grown`): until some part of the design first knew the new count "
                          "(`partitions_seen`), until every new partition was processed; medians over "
                          f"{summary.seed.nunique()} seed(s)"),
             ("configs", "every default but the classic clients' metadata refresh, as the table below says")]
    rows = t[[c for c, _ in TABLE]]
    figure = _figure(t, figures / "growth.png")
    decides = [(d, LEARNS[settings_of(d)][0], _setting(run, d)) for d in t.design if settings_of(d) in LEARNS]
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

**How each design learns, and what paces it** (the values the run's consumers recorded):

{table(["design", "learns by", "paced by"], decides)}

**Every result** (medians per design; rounds: generations, or the membership views assignments came from, which a
growth leaves as they were in the ZooKeeper era and RocketMQ; rebalance attempts: RocketMQ's and TubeMQ's periodic
ones too):

{table([label for _, label in TABLE], rows.itertuples(index=False))}
"""
    figures_ = "; ".join(f"{r.design} {cell(r.learnt_ms / 1000)} + {cell(r.after_learning_ms / 1000)} = "
                         f"{cell(r.new_processing_ms / 1000)}" for r in t.itertuples()
                         if not FAMILIES[r.design].counterpart)
    short = (f"**Results** (medians, seconds: learning of the new partitions + then until every new one was "
             f"processed = in all; \"–\": a real client, which the lab does not trace inside): {figures_}.")
    checked = growth.findings(summary)
    return Section("Growth", growth.QUESTION, findings_list(checked),
                   f"![growth: learning of new partitions, then using them]({figure.relative_to(root).as_posix()})",
                   short, _takeaway(t, {f.id: f for f in checked}, run), reproduce_line(growth.NAME, env), appendix,
                   "experiments/catalogue/growth.py: findings", WHY)


def _setting(run: StoredRun, design: str) -> str:
    """The setting that paces `design`'s learning, with its value in the run: the growth trials' override, else
    the value its consumers recorded."""
    _, key, where = LEARNS[settings_of(design)]
    if key is None:
        return where
    # the experiment's own overrides first (configs.json holds one config per design, from any experiment)
    given = {k: v for spec in run.grid if spec["experiment"] == growth.NAME and spec["design"] == design
             for k, v in (o.split("=", 1) for o in json.loads(spec["overrides"]))}
    config = run.configs.get(design) or {}
    value = given.get(key, config.get(key, config.get(key.replace(".", "_"))))  # kafka-python: keyword names
    shown = f"`{key}` = {int(value) / 1000:g} s" if value is not None and str(value).isdigit() else f"`{key}`"
    return f"{shown} {where}".strip()


def _takeaway(t: pd.DataFrame, checked: dict, run: StoredRun) -> str:
    """The answer, with the run's own figures, and as its findings (`checked`, by id) say: whether the classic
    protocol's wait was mostly its refresh."""
    by = t.set_index("design")

    def s(design: str, column: str) -> str:
        return cell(by.loc[design, column] / 1000) if design in by.index else "–"

    if not {"classic", "consumer-848"} <= set(by.index) or "classic-grow-learning-decides" not in checked:
        return ("This run has no trial of both coordinator-era protocols, so it cannot compare them; the table "
                "gives each design's time to learn of the new partitions and then to use them.")
    figures = (f"Here the classic protocol learnt after {s('classic', 'learnt_ms')} s, at its leader's metadata "
               f"refresh ({_setting(run, 'classic')}; the default is 5 minutes), and then needed "
               f"{s('classic', 'after_learning_ms')} s for its eager round; the consumer protocol's coordinator "
               f"learnt after {s('consumer-848', 'learnt_ms')} s and every new partition was processed after "
               f"{s('consumer-848', 'new_processing_ms')} s. ")
    if checked["classic-grow-learning-decides"].holds:
        answer = ("So a figure like KIP-848's \"5 s versus 103 s\" is mostly about how a member learns of new "
                  "partitions, not about the rebalance: a classic group waits for its leader's next metadata "
                  "refresh, which the new protocol does not need, since its coordinator reads the count itself. ")
    else:
        answer = ("In this run learning was not the larger part of the classic protocol's wait, so these figures "
                  "do not say that \"5 s versus 103 s\" is about learning alone. ")
    return (figures + answer + "The ZooKeeper era learns through every consumer's watch at once, and pays with the "
            "herd: every member revokes everything. RocketMQ and TubeMQ learn on their periods (route refresh "
            "and rebalance ticks; the master's pass), and their waits follow those periods.")


WHY = """KIP-848's announcement put a figure on this trigger: ten consumers, a
topic grown from 100 to 1,000 partitions, settled in 5 s with the new protocol
and 103 s with the classic one (its set-up was a public load script; where the
figure was first measured is not confirmed). A topic that grows changes no membership, so nothing in the
group's own protocol notices it: each design must learn of the new partitions
from somewhere else. In the ZooKeeper era, every consumer watches the topic's
znode (`legacy_zk/`: the topic listener), so the rewrite fires every watch at
once and every consumer runs a full rebalance, reading every registration:
the fastest to learn, at the herd's price. A classic group's members never
watch anything: only the leader compares the partition counts it assigned
with its metadata, which it refreshes every `metadata.max.age.ms`
(`modern_coord/`), and once it differs it rejoins, which makes the coordinator
start an eager round: every member revokes everything, rejoins, and waits for
the leader's new assignment. KIP-848 moved that check to the coordinator: it
reads the topic's partition count from its own broker's metadata when a member
heartbeats, bumps the group epoch and computes new targets
(`modern_coord/coordinator/consumer_protocol.py`), which the members receive
on their next heartbeats; the new partitions were nobody's, so nobody revokes.
RocketMQ's consumers refresh their route every `pollNameServerInterval`, which
only updates the queue set they know; the new queues are allocated at the next
tick of the rebalance service (`rocketmq_client/`). TubeMQ's master refreshes
a group's topic metadata in its periodic pass; a client-balance node reads it
every `partMetaInfoCheckPeriodMs` and connects its hash share, while the
server balance hands the new partitions out at the master's next balance pass,
one heartbeat at a time (`tubemq_client/`)."""


def _figure(t: pd.DataFrame, path: Path) -> Path:
    """Per design, one bar: the time to learn of the new partitions, then the time until every one was processed."""
    fig, ax = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
    designs = [d for d in STYLE if (t.design == d).any()]
    by = t.set_index("design")
    for i, design in enumerate(designs):
        color, _ = STYLE[design]
        learnt = by.loc[design, "learnt_ms"] / 1000 if pd.notna(by.loc[design, "learnt_ms"]) else 0.0
        total = by.loc[design, "new_processing_ms"] / 1000 if pd.notna(by.loc[design, "new_processing_ms"]) else 0.0
        ax.barh(i, learnt, color=color, alpha=0.9)
        ax.barh(i, max(total - learnt, 0.0), left=learnt, color=color, alpha=0.35, hatch="//")
    ax.set_yticks(range(len(designs)), [STYLE[d][1] for d in designs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds after the topic grew: learning (solid), then until every new partition was processed")
    ax.grid(True, axis="x", alpha=0.3)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def growth_full_section(summary: pd.DataFrame, run: StoredRun) -> str:
    """The growth experiment's full-profile run (`report/full_runs.py`): the source text's scale, every default."""
    env, machine = run.env, run.env.get("machine", {})
    command = re.sub(r" --out \S+", "", env.get("command", f"python -m experiments run {growth.NAME} --profile full"))
    t = growth.per_design(summary)
    trials = summary.drop_duplicates("trial")
    figure = _figure(t, run.figures / "growth-full.png")
    rows = t[["design", "trials", "learnt_ms", "first_new_owned_ms", "new_processing_ms", "partitions_revoked"]]
    decides = [(d, _setting(run, d)) for d in t.design if settings_of(d) in LEARNS]
    size = (f"{run.spec(growth.NAME, 'consumers')} consumers, {run.spec(growth.NAME, 'partitions')} to "
            f"{run.spec(growth.NAME, 'grow_to')} partitions")
    return f"""## Growth at full size: {size}

KIP-848's figure was about ten consumers and a topic grown from 100 to 1,000 partitions. This is one run of the
growth experiment's full profile at that scale, with every default (the classic clients' metadata refresh
included), stored apart from the standard reproduction (`report/full/{growth.NAME}/`): `{command}`,
{env.get('date', '?')}, lab commit `{env.get('lab_commit', '?')}`, on {machine.get('cpus', '?')} CPUs,
{machine.get('memory_gib', '?')} GiB. {(trials.status == 'ok').sum()} of {len(trials)} trials ended ok.

**What paces each design** (as its consumers recorded their settings):

{table(["design", "paced by"], decides)}

**Results** (medians per design, from the growth; "–": the lab does not trace when a real client learns):

{table(["design", "trials", "learnt ms", "first new owned ms", "all new processed ms", "partitions revoked"],
       rows.itertuples(index=False))}

![growth at full size: learning, then using]({figure.relative_to(run.root).as_posix()})
"""
