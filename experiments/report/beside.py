"""The report's part on the real systems: the lab's designs beside the systems they reconstruct.

Each real system's design (`Family.counterpart`, `real_systems/`) ran in the herd, zombie, storm and first
message experiments on its counterpart's grid and settings. This part sets each pair's figures side by side, per
experiment, draws the herd's ZooKeeper load of both ZooKeeper-era consumers, lists every finding about a real
system (its counterpart's findings judged on its own trials, and `catalogue/beside.py`'s distance), and says
where the two differ and why, each sentence written only where the run's figures show that difference.

The experiments' own sections show the lab's designs only (their bodies stay short); the real systems are
here, and on the first screen in one sentence (`first_screen_sentence`). Rendered from the run's stored
summary only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.catalogue import EXPERIMENTS, broker_churn, first_message, herd, storm, zombie
from experiments.catalogue.beside import per_n
from experiments.engine.families import FAMILIES, real_designs
from experiments.report import plotting
from experiments.report.parts import cell, findings_list, table

TITLE = "The lab beside the real systems"
#: the herd's figures each pair is compared on: the ZooKeeper era's load and outcome, the coordinator's stop
HERD_COLUMNS = {
    "zookeeper": (("notifications_per_change", "notifications"), ("zk_requests_per_change", "ZooKeeper requests"),
                  ("membership_reads_per_change", "registration reads"), ("rebalance_attempts", "attempts"),
                  ("owner_conflicts", "owner conflicts"), ("convergence_ms", "ms to stable")),
    "consumer-848": (("members_revoking", "members revoking"), ("partitions_revoked", "partitions revoked"),
                     ("partitions_moved", "partitions moved"), ("convergence_ms", "ms to stable"),
                     ("unowned_partition_s", "unowned partition-s")),
    "rocketmq": (("notifications_per_change", "notifications"), ("rebalance_attempts", "attempts"),
                 ("partitions_moved", "partitions moved"), ("convergence_ms", "ms to stable"),
                 ("unowned_partition_s", "unowned partition-s")),
    "kafka-python": (("members_revoking", "members revoking"), ("partitions_revoked", "partitions revoked"),
                     ("generations", "rounds"), ("convergence_ms", "ms to stable"),
                     ("unowned_partition_s", "unowned partition-s")),
}
ZOMBIE_COLUMNS = (("processed_after_loss", "processed after loss"),
                  ("zombie_commits_accepted", "zombie commits accepted"), ("commits_fenced", "commits fenced"),
                  ("offsets_moved_backwards", "offsets moved backwards"), ("duplicates", "duplicates"))
#: rounds (`generations`) are not shown: where members compute they are membership views, which Kafka 0.8.2.2's
#: log does not number (see `catalogue/storm.py`)
STORM_COLUMNS = (("members_revoking", "members revoking"),
                 ("partitions_revoked", "partitions revoked"), ("unowned_partition_s", "unowned partition-s"),
                 ("duplicates", "duplicates"), ("stable_after_last_ms", "stable after last ms"))

FIRST_MESSAGE_COLUMNS = (("first_message_ms", "newcomer's first message ms"), ("convergence_ms", "ms to stable"),
                         ("owner_conflicts", "owner conflicts"), ("members_revoking", "members revoking"))

#: broker churn, beside the lab's case that does what the real one does (0.8.2.2 watches /brokers/ids only
#: when no broker is left: the lab's `when_empty`)
CHURN_COLUMNS = (("kill_rebalances", "rebalances at the kill"), ("restart_rebalances", "at the return"),
                 ("members_revoking", "members revoking"), ("resumed_after_kill_ms", "ms until all processed again"),
                 ("unprocessed_partition_s", "unprocessed partition-s"))


def without_real(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary of the lab's own designs: what the experiments' sections and the first screen show."""
    return summary[~summary.design.isin(real_designs(tuple(FAMILIES)))]


def beside_section(summary: pd.DataFrame, figures: Path, root: Path) -> str:
    """The part, or "" where the run has no ok trial of a real system."""
    ok = summary[summary.status == "ok"]
    reals = [d for d in real_designs(tuple(FAMILIES)) if (ok.design == d).any()]
    if not reals:
        return ""
    parts = [f"## {TITLE}", _introduction(reals)]
    figure = _herd_figure(ok, figures / "beside-herd.png")
    if figure:
        parts.append(f"![ZooKeeper requests and registration reads per change against N, the lab's ZooKeeper-era "
                     f"consumer and Kafka 0.8.2.2's own]({figure.relative_to(root).as_posix()})\n\n*Per change "
                     "(join, leave) against the group size N, log-log: the ZooKeeper requests of every member "
                     "(solid) and, of them, the reads of a member's registration (dotted), for the lab's "
                     "`zookeeper` design and Kafka 0.8.2.2's own consumer.*")
    for real in reals:
        parts += [p for p in (_herd(ok, real), _zombie(ok, real), _storm(ok, real), _first_message(ok, real),
                                       _broker_churn(ok, real)) if p]
    differences = _differences(ok, reals)
    if differences:
        parts.append("**Where they differ, and why.**\n\n" + "\n".join(f"- {d}" for d in differences))
    checked = [f for name, e in EXPERIMENTS.items() if name in (herd.NAME, zombie.NAME, storm.NAME, broker_churn.NAME)
               and (summary.experiment == name).any()
               for f in e.findings(summary[summary.experiment == name]) if _about_real(f.id)]
    parts.append("**The findings, checked on the real systems** (each experiment's `findings`, the ids that name "
                 "a real system: its counterpart's findings on its own trials, and its distance from it, "
                 "`experiments/catalogue/beside.py`):\n\n" + (findings_list(checked) or "- none"))
    return "\n\n".join(parts)


def first_screen_sentence(summary: pd.DataFrame) -> str | None:
    """The first screen's sentence on Kafka 0.8.2.2's own consumer, where the run has its herd beside the lab's."""
    ok = summary[(summary.status == "ok") & (summary.experiment == herd.NAME)]
    reals = [d for d in real_designs(tuple(FAMILIES)) if FAMILIES[d].counterpart == "zookeeper"]
    for real in reals:
        theirs = per_n(ok, herd.NAME, real, "join", "zk_requests_per_change")
        ours = per_n(ok, herd.NAME, "zookeeper", "join", "zk_requests_per_change")
        common = [n for n in theirs.index if n in ours.index]
        if common:
            n = max(common)
            reads = per_n(ok, herd.NAME, real, "join", "membership_reads_per_change")
            lab_reads = per_n(ok, herd.NAME, "zookeeper", "join", "membership_reads_per_change")
            return (f"Kafka 0.8.2.2's own consumer, run the same way, paid for one join to a group of {n} "
                    f"{cell(theirs.loc[n])} ZooKeeper requests ({cell(reads.loc[n])} registration reads); the "
                    f"lab's reconstruction {cell(ours.loc[n])} ({cell(lab_reads.loc[n])}) "
                    f"([{TITLE}](#the-lab-beside-the-real-systems)).")
    return None


def _about_real(finding_id: str) -> bool:
    return any(finding_id.startswith(f"{d}-") for d in real_designs(tuple(FAMILIES)))


def _introduction(reals: list[str]) -> str:
    listed = "\n".join(f"- `{d}` beside `{FAMILIES[d].counterpart}`: {FAMILIES[d].label}; its brokers: "
                       f"{FAMILIES[d].brokers.name}." for d in reals)
    return f"""Every design in the sections above is the lab's reconstruction. Here the systems themselves ran the
same experiments, on the same grids, with their counterpart's settings: the jars their projects published
(fetched from Maven Central by `scripts/setup.sh`, `real_systems/pom.xml`), started as child processes of the
trial (Kafka's on the same real ZooKeeper).

{listed}

Kafka 0.8.2.2's consumer is its own `ZookeeperConsumerConnector`, unchanged; a small driver of the lab's
starts each member and turns what the connector and its ZooKeeper client log into the lab's trace events
(`real_systems/kafka08/.../Observer.java`), so the same metrics apply, and the ZooKeeper servers' own counts
check them (the cross-check below). RocketMQ 4.9.7's consumers are its own `DefaultMQPushConsumer`s; the
driver observes them through the hooks RocketMQ offers (an allocation strategy that delegates to its own, a
request hook, the message listener: `real_systems/rocketmq49/`). Kafka's and RocketMQ's brokers write no lab
trace: what the clients report is measured, the brokers' side is not."""


def _side_by_side(ok: pd.DataFrame, experiment: str, real: str, columns, keys: list[str]) -> pd.DataFrame:
    lab = FAMILIES[real].counterpart
    rows = ok[(ok.experiment == experiment) & ok.design.isin([lab, real])]
    if rows.empty or not (rows.design == real).any():
        return pd.DataFrame()
    values = rows.groupby(["design", *keys])[[c for c, _ in columns]].mean()
    out = []
    for key, _ in values.loc[real].iterrows():
        key = key if isinstance(key, tuple) else (key,)
        row = list(key)
        for c, _ in columns:
            row += [values.loc[(real, *key), c], values.loc[(lab, *key), c] if (lab, *key) in values.index else None]
        out.append(row)
    return pd.DataFrame(out)


def _pair_table(frame: pd.DataFrame, keys: list[str], columns, real: str) -> str:
    lab = FAMILIES[real].counterpart
    header = [*keys, *(f"{label}: real / {lab}" for _, label in columns)]
    rows = [(*r[:len(keys)], *(f"{cell(r[len(keys) + 2 * i])} / {cell(r[len(keys) + 2 * i + 1])}"
                               for i in range(len(columns)))) for r in frame.itertuples(index=False)]
    return table(header, rows)


def _part(rows: pd.DataFrame, experiment: str, real: str, columns, keys: list[str], shown: list[str],
          title: str, caption: str, qualifier: str = "") -> str:
    """One experiment's pair table, under its bold title ("Herd: `real` beside `lab`", then `qualifier`) and
    caption; "" where the run has no trial of `real` in it."""
    frame = _side_by_side(rows, experiment, real, columns, keys)
    if frame.empty:
        return ""
    return (f"**{title}: `{real}` beside `{FAMILIES[real].counterpart}`{qualifier}** {caption}\n\n"
            + _pair_table(frame, shown, columns, real))


def _herd(ok: pd.DataFrame, real: str) -> str:
    return _part(ok, herd.NAME, real, HERD_COLUMNS[FAMILIES[real].counterpart], ["change", "consumers"],
                 ["change", "N"], "Herd", "(one join, then one leave, per N; each cell the real system's figure, "
                 "then the lab's):")


def _zombie(ok: pd.DataFrame, real: str) -> str:
    rows = zombie.per_trial(ok[ok.experiment == zombie.NAME]).assign(experiment=zombie.NAME, consumers=0)
    return _part(rows, zombie.NAME, real, ZOMBIE_COLUMNS, ["variant"], ["fault"], "Zombie",
                 "(a member paused, or cut off where the design has a link the lab can cut, past its session "
                 "timeout):")


def _storm(ok: pd.DataFrame, real: str) -> str:
    if not (ok.experiment == storm.NAME).any():
        return ""
    rows = storm.per_trial(ok[ok.experiment == storm.NAME]).assign(experiment=storm.NAME)
    return _part(rows, storm.NAME, real, STORM_COLUMNS, ["consumers"], ["N"], "Storm",
                 "(a rolling restart of the whole group, in total):")


def _first_message(ok: pd.DataFrame, real: str) -> str:
    rows = ok[(ok.experiment == first_message.NAME) & (ok.change == "join")]
    return _part(rows, first_message.NAME, real, FIRST_MESSAGE_COLUMNS, ["consumers"], ["N"], "First message",
                 "(a newcomer joins a group of N; the mean over the run's seeds):")


#: what the broker-churn table's reader must know: Kafka's replication makes every partition wait, not only the
#: dead leader's
CHURN_CAPTION = ("(a broker that leads a third of the partitions is killed, then comes back). Kafka's brokers "
                 "replicate, and the producer asks every in-sync replica's acknowledgement, so until the controller "
                 "drops the dead broker from every partition's in-sync replicas (its ZooKeeper session expires, 6 s) "
                 "every partition's writes wait, not only the dead leader's: its unprocessed time counts partitions "
                 "that had nothing new to process. The lab's brokers do not replicate (`catalogue/broker_churn.py`).")


def _broker_churn(ok: pd.DataFrame, real: str) -> str:
    if not (ok.experiment == broker_churn.NAME).any():
        return ""
    rows = broker_churn.per_trial(ok[ok.experiment == broker_churn.NAME])
    rows = rows[(rows.design == real) | ((rows.design == FAMILIES[real].counterpart) & (rows.watch == "when_empty"))]
    return _part(rows.assign(experiment=broker_churn.NAME), broker_churn.NAME, real, CHURN_COLUMNS, ["consumers"],
                 ["N"], "Broker churn", CHURN_CAPTION, qualifier=" watching `/brokers/ids` only when empty")


def _differences(ok: pd.DataFrame, reals: list[str]) -> list[str]:
    """A sentence for each difference the run's figures show, with its cause as the traces showed it."""
    out = []
    for real in (d for d in reals if FAMILIES[d].counterpart == "zookeeper"):
        theirs = per_n(ok, herd.NAME, real, "join", "owner_conflicts")
        ours = per_n(ok, herd.NAME, "zookeeper", "join", "owner_conflicts")
        common = [n for n in theirs.index if n in ours.index]
        if common and ours.loc[common].sum() > theirs.loc[common].sum():
            out.append(
                f"Joins cost the lab's consumer {cell(ours.loc[common].sum())} owner conflicts over N = "
                f"{', '.join(map(str, common))}, Kafka 0.8.2.2's own {cell(theirs.loc[common].sum())}. A conflict "
                "is the newcomer claiming a partition before its old owner has released it, and a retry "
                "`rebalance.backoff.ms` (2 s) later. Both designs race the same way; what differs is the newcomer's "
                "speed: 0.8.2.2's first rebalance runs in a fresh JVM and is slow (its first reads of the broker "
                "registrations wait for its classes to load: its trace shows the gap), so the old members have "
                "released by the time it claims; the lab's newcomer, a Python process already warm, claims "
                "within milliseconds. Where the lab's figures are higher at small N, this is why; from N = 8 on, "
                "both agree within the stated distance (the beside findings).")
        out += _convergence(ok, real)
        out += _storm_duplicates(ok, real)
        told = per_n(ok, herd.NAME, real, "leave", "notifications_per_change")
        lab_told = per_n(ok, herd.NAME, "zookeeper", "leave", "notifications_per_change")
        common = [n for n in told.index if n in lab_told.index]
        if common and all(told.loc[n] == lab_told.loc[n] + 1 for n in common):
            out.append(
                "On a leave, Kafka 0.8.2.2's consumers record one notification more than the lab's at every N: the "
                "leaver's own. Closing its session deletes its registration, and the server sends the watch "
                "event to the closing session too; Java's client reads it before the close's answer, the lab's "
                "(kazoo) stops reading first and records it as `zk_watch_unheard`. The servers' own count is "
                "the same for both (the cross-check).")
    for real in (d for d in reals if FAMILIES[d].counterpart == "rocketmq"):
        out += _rocketmq(ok, real)
    return out


def _rocketmq(ok: pd.DataFrame, real: str) -> list[str]:
    """RocketMQ 4.9.7 beside the lab's `rocketmq`: where the newcomer's time goes, and the paused member's
    replay; each sentence only where the run's figures show the difference."""
    out = []
    time, lab_time = (per_n(ok, herd.NAME, d, "join", "convergence_ms") for d in (real, "rocketmq"))
    common = [n for n in time.index if n in lab_time.index]
    if common and all(time.loc[n] > lab_time.loc[n] for n in common):
        first = ok[(ok.experiment == first_message.NAME) & (ok.change == "join")].groupby("design").first_message_ms
        firsts = first.mean()
        tail = (f"; its newcomer's first message came {cell(firsts[real])} ms after its start on average (the "
                f"lab's {cell(firsts['rocketmq'])} ms)" if {real, "rocketmq"} <= set(firsts.index) else "")
        out.append(
            f"A RocketMQ 4.9.7 group is stable {cell(time.loc[common].min())} to {cell(time.loc[common].max())} ms "
            f"after a join (the lab's design {cell(lab_time.loc[common].min())} to "
            f"{cell(lab_time.loc[common].max())} ms){tail}. Both take the same steps (route, a heartbeat to every "
            "broker, an allocation from one broker's id list, an offset query per new queue, pulls); the time is "
            "mostly the newcomer's JVM: the trial's clock starts when the runner launches it, and "
            "`DefaultMQPushConsumer.start()`, cold, takes most of a second before its first heartbeat reaches a "
            "broker (its client log shows each step). Then its first pulls are often refused "
            "SUBSCRIPTION_NOT_LATEST: its rebalance raised its subscription's version before the heartbeat "
            "carrying it reached the broker, and RocketMQ pulls again 1 s later "
            "(`pullTimeDelayMillsWhenException`). The lab's broker does not check that version "
            "(`rocketmq_client/broker/service.py`, a stated departure).")
    rows = zombie.per_trial(ok[(ok.experiment == zombie.NAME) & (ok.variant == "pause")])
    theirs, ours = rows[rows.design == real], rows[rows.design == "rocketmq"]
    if len(theirs) and len(ours) and theirs.duplicates.sum() > ours.duplicates.sum():
        out.append(
            f"Paused past its channel's expiry, RocketMQ 4.9.7's zombie made {theirs.duplicates.sum():,.0f} "
            f"records be processed twice (the lab's {ours.duplicates.sum():,.0f}), and its offsets moved backwards "
            f"{theirs.offsets_moved_backwards.sum():,.0f} times (lab {ours.offsets_moved_backwards.sum():,.0f}). "
            "Both run the same steps when it resumes: its first rebalance reads an id list without it, drops its "
            "queues and persists its stale offsets, which the broker takes from anyone; it registers again and "
            "takes its queues back from whatever offset the broker holds by then. Which comes first, its stale "
            "offset or the survivor's newer one (written when the survivor lets go), is a matter of "
            "milliseconds. Where the zombie reads back its own (this run's traces show it did), it processes again "
            "all the survivor worked off of the pause's backlog, and the survivor, with RocketMQ's 20 consume "
            "threads, works off all of it "
            "(the lab's one consuming thread works off less: a stated departure, `rocketmq_client/consumer.py`). "
            "RocketMQ's offset task runs at a fixed rate, so after the pause it sends every run it missed, each "
            "a backwards commit (the lab's runs once). Its zombie commits are recorded when sent, and some went "
            "out on the channel the broker had closed and never arrived (`docs/real-systems.md`).")
    return out


def _convergence(ok: pd.DataFrame, real: str) -> list[str]:
    """The herd's time to a stable group, real beside lab: where only the lab's consumer met an owner conflict
    (each a `rebalance.backoff.ms` wait, 2 s), and how far apart they are where neither did."""
    conflicted, clean = [], []
    for change in ("join", "leave"):
        time, lab_time = (per_n(ok, herd.NAME, d, change, "convergence_ms") for d in (real, "zookeeper"))
        hits, lab_hits = (per_n(ok, herd.NAME, d, change, "owner_conflicts") for d in (real, "zookeeper"))
        for n in [n for n in time.index if n in lab_time.index]:
            pair = (change, n, time.loc[n], lab_time.loc[n])
            if lab_hits.loc[n] > 0 and hits.loc[n] == 0:
                conflicted.append(pair)
            elif lab_hits.loc[n] == 0 and hits.loc[n] == 0 and time.loc[n] > 0:
                clean.append(pair)
    out = []
    if conflicted and all(lab > ours for _, _, ours, lab in conflicted):
        listed = ", ".join(f"{c} N={n}: {cell(lab)} vs {cell(ours)} ms" for c, n, ours, lab in conflicted)
        out.append(f"Where the lab's consumer met an owner conflict and Kafka 0.8.2.2's did not, the lab's took "
                   f"longer to a stable group ({listed}, lab vs real): the conflict's retry waits "
                   "`rebalance.backoff.ms` (2 s).")
    if clean:
        ratios = [lab / ours for _, _, ours, lab in clean]
        out.append(f"Where neither met a conflict ({len(clean)} of the herd's changes), the lab's time to a stable "
                   f"group is {min(ratios):.1f} to {max(ratios):.1f} times the real one's, in both directions: "
                   "one trial per N, and a change's time is a few hundred milliseconds of ZooKeeper round trips "
                   "and fetcher restarts on two shared cores, so the lab states no distance for it."
                   if min(ratios) < 1 < max(ratios) else
                   f"Where neither met a conflict ({len(clean)} of the herd's changes), the lab's time to a stable "
                   f"group is {min(ratios):.1f} to {max(ratios):.1f} times the real one's.")
    return out


def _storm_duplicates(ok: pd.DataFrame, real: str) -> list[str]:
    """The storm's duplicates, real beside lab, where they differ: both designs have the same race."""
    if not (ok.experiment == storm.NAME).any():
        return []
    rows = storm.per_trial(ok[ok.experiment == storm.NAME])
    theirs, ours = (rows[rows.design == d].duplicates.sum() for d in (real, "zookeeper"))
    if not (rows.design == real).any() or theirs == ours:
        return []
    return [f"In the storm the lab's consumer processed {cell(ours)} messages twice, Kafka 0.8.2.2's own "
            f"{cell(theirs)}. Both have the same race, in the order of 0.8.2.2's `rebalance`: a member reads a "
            "partition's committed offset (`fetchOffsets`) before it claims the partition "
            "(`reflectPartitionOwnershipDecision`), and the previous owner commits in its own rebalance just "
            "before it releases the partition. A member whose read falls before that commit and whose claim "
            "falls after the release starts from the older offset, and processes again what the previous owner "
            "processed since its last commit (with `auto.commit.interval.ms` 60 s, everything since its last "
            "rebalance). A claim that comes before the release is refused, and the retry reads the new offset. "
            "Which restarts hit the window is a matter of milliseconds, one trial per N; the traces of both "
            "show the race (an offset read, the other member's commit, then the claim)."]


def _herd_figure(ok: pd.DataFrame, path: Path) -> Path | None:
    import matplotlib.pyplot as plt

    pairs = [(FAMILIES[d].counterpart, d) for d in real_designs(tuple(FAMILIES))
             if FAMILIES[d].counterpart == "zookeeper" and ((ok.experiment == herd.NAME) & (ok.design == d)).any()]
    if not pairs:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained", sharey=True)
    for ax, change in zip(axes, ("join", "leave"), strict=True):
        for design in dict.fromkeys(d for pair in pairs for d in pair):
            plotting.log_series(ax, per_n(ok, herd.NAME, design, change, "zk_requests_per_change"), design)
            reads = per_n(ok, herd.NAME, design, change, "membership_reads_per_change")
            plotting.log_series(ax, reads, design, linestyle=":", label=f"{design}: registration reads")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(change)
        ax.set_xlabel("group size N")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("per change")
    plotting.legend_outside(fig, [axes[0]])
    plotting.save(fig, path)
    return path

