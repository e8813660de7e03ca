"""The report's first screen: the question, the headline table, the herd across every design, what to take from it.

Everything here is read from the run's summary (and the herd's full-profile run, when one is published beside
it): the table is `headline.py`'s, the figure the herd's control messages per join against N, and each
sentence of "what to take from it" is written only where the run has the trials it speaks of, with the
section that proves it. A tour's report gets a shorter first screen, never a sentence about a design it did
not run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.catalogue import growth, herd, split_brain, storm, zombie
from experiments.report import plotting
from experiments.report.headline import headline
from experiments.report.parts import STYLE, anchor, cell, table

QUESTION = ("Kafka 0.8's consumers managed their group through ZooKeeper: every consumer watched the membership "
            "and rebalanced by itself. This report measures, on one workload and a real ZooKeeper, what that cost "
            "and what each later design (Kafka's group coordinator and its protocols, RocketMQ's and TubeMQ's "
            "client-side balance, real Kafka clients) pays instead.")

#: the headline table's columns: (headline.py's column, the header the report gives it, the experiment it is from)
COLUMNS = (("zk_requests", "ZooKeeper requests", herd.NAME), ("notifications", "notifications", herd.NAME),
           ("members_stopped", "members that stop", herd.NAME),
           ("partitions_revoked", "partitions revoked", herd.NAME),
           ("stable_s", "s to a stable group", herd.NAME),
           ("split_brain_trouble", "owner conflicts + failed rebalances, lagging follower", split_brain.NAME),
           ("zombie_accepted", "zombie commits accepted", zombie.NAME))
#: what each experiment's columns measure, as the table's caption says it
MEASURES = {herd.NAME: "one join to a group of {n} ([Herd](#herd))",
            split_brain.NAME: "a burst of joins and a leave under the largest lag ([Split brain](#split-brain))",
            zombie.NAME: "a consumer paused, and one cut off where the design can be ([Zombie](#zombie))"}


def front(summary: pd.DataFrame, figures: Path, root: Path, full_herd: pd.DataFrame | None = None,
          also: str | None = None) -> str:
    """The first screen of the report of `summary`'s run; `full_herd`: the herd's full-profile summary, if any;
    `also`: a sentence from another part (the real systems beside the lab's), told with the first thing to take
    from it (the herd's, which it is about), so that the first screen stays one screen.
    The table has the columns of the experiments the run has, and no table where it has none of them."""
    lines = [f"# Why consumer-group management moved out of ZooKeeper\n\n{QUESTION}"]
    rows = headline(summary)
    ran = [e for e in MEASURES if (summary.experiment == e).any()]
    if not rows.empty and ran:
        columns = [(c, label) for c, label, e in COLUMNS if e in ran]
        ns = sorted(rows.herd_n.dropna().unique())
        n = f"N = {int(ns[0])}" if len(ns) == 1 else "N (the largest each design ran: column N)"
        several = len(ns) > 1
        header = ["design", *(["N"] if several else []), *(label for _, label in columns)]
        body = [(STYLE[r.design][1], *([r.herd_n] if several else []), *(getattr(r, c) for c, _ in columns))
                for r in rows.itertuples()]
        measured = "; ".join(MEASURES[e].format(n=n) for e in ran)
        lines.append("**The answer in one table.** " + measured[0].upper() + measured[1:]
                     + ". \"–\": no such trial for that design; no time to a stable group where the join was refused."
                     + "\n\n" + table(header, body))
    drawn = full_herd if full_herd is not None and not full_herd.empty else summary
    figure = headline_figure(drawn, figures / "headline.png")
    if figure:
        herd_rows = drawn[drawn.experiment == herd.NAME]
        n, p = int(herd_rows.consumers.max()), int(herd_rows.partitions.max())
        past_p = (f"; past N = P = {p} a join may move no partition, and then costs only the joiner's own requests"
                  if n > p else "")
        lines.append(f"![control messages for one join against the group size N, every design]"
                     f"({figure.relative_to(root).as_posix()})\n\n*Control messages (ZooKeeper requests and "
                     f"notifications, group requests) for one join, N up to {n}"
                     + (" (the herd's full-profile run)" if drawn is full_herd else "")
                     + f", with dashed guides for the growth the herd's findings claim: N² fitted to the ZooKeeper "
                     f"era's registration reads, N to the classic coordinator's messages{past_p}.*")
    sentences = takeaways(summary, full_herd)
    if also:
        sentences = [f"{sentences[0]} {also}", *sentences[1:]] if sentences else [also]
    if sentences:
        lines.append("**What to take from it.**\n\n" + "\n".join(f"- {s}" for s in sentences))
    return "\n\n".join(lines)


def headline_figure(summary: pd.DataFrame, path: Path) -> Path | None:
    """Control messages for one join against N, every design the herd ran, log-log, with the growth the herd's
    findings claim drawn beside it: N² fitted to the ZooKeeper era's registration reads, N to the classic
    coordinator's control messages."""
    import matplotlib.pyplot as plt

    ok = summary[(summary.status == "ok") & (summary.experiment == herd.NAME)]
    if ok.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4.6), layout="constrained")
    zeros = []
    for design in STYLE:
        s = herd.per_n(ok, design, "join", "control_messages_per_change")
        where = plotting.log_series(ax, s, design) if not s.empty else ""
        if where:
            zeros.append(f"{design}: {where}")
    reads = herd.per_n(ok, "zookeeper", "join", "membership_reads_per_change")
    if not reads.empty:
        ax.plot(reads.index, reads.values, linestyle=":", color=STYLE["zookeeper"][0], marker=".",
                label="zookeeper: of them, registration reads")
        plotting.guide(ax, reads.index, reads.values, 2, "guide ∝ N², fitted to the registration reads")
    classic = herd.per_n(ok, "classic", "join", "control_messages_per_change")
    if not classic.empty:
        plotting.guide(ax, classic.index, classic.values, 1, "guide ∝ N, fitted to the classic coordinator's")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("group size N")
    ax.set_ylabel("control messages for one join")
    ax.grid(True, alpha=0.3)  # major lines only: minor ones on log axes cost more to draw than they tell
    plotting.note_zeros(ax, zeros)
    plotting.legend_outside(fig, [ax])
    plotting.save(fig, path)
    return path


def takeaways(summary: pd.DataFrame, full_herd: pd.DataFrame | None) -> list[str]:
    """Up to six sentences, each written only where the run has the trials it speaks of, each stating the run's
    own figures (no claim a figure could contradict) and pointing to the section that proves what they mean."""
    ok = summary[summary.status == "ok"]
    rows = headline(summary).set_index("design")
    out = []

    def has(design: str, column: str) -> bool:
        return design in rows.index and pd.notna(rows.at[design, column])

    def at(design: str, column: str) -> str:
        return cell(rows.at[design, column])

    if has("zookeeper", "zk_requests") and has("classic", "control_messages"):
        said = (f"One join to a group of {int(rows.at['zookeeper', 'herd_n'])}: the ZooKeeper era's consumers "
                f"received {at('zookeeper', 'notifications')} notifications and sent "
                f"{at('zookeeper', 'zk_requests')} ZooKeeper requests, each rebalancing alone; the classic "
                f"coordinator's members sent {at('classic', 'zk_requests')} to ZooKeeper and "
                f"{at('classic', 'control_messages')} control messages in all")
        if has("consumer-848", "members_stopped"):
            said += (f"; KIP-848 stopped {at('consumer-848', 'members_stopped')} of them where the classic "
                     f"protocol stopped {at('classic', 'members_stopped')}")
        out.append(said + " ([Herd](#herd)).")
    if full_herd is not None and not full_herd.empty:
        out.append(_at_full_size(full_herd))
    if has("zookeeper", "split_brain_trouble"):
        delay = int(ok[(ok.experiment == split_brain.NAME) & (ok.design == "zookeeper")].follower_delay_ms.max())
        said = (f"With a follower {delay} ms behind, one burst of joins and a leave cost the ZooKeeper era "
                f"{at('zookeeper', 'split_brain_trouble')} owner conflicts and failed rebalances")
        if has("classic", "split_brain_trouble"):
            said += f", the classic coordinator {at('classic', 'split_brain_trouble')}"
        out.append(said + " ([Split brain](#split-brain)).")
    if has("zookeeper", "zombie_accepted") and has("classic", "zombie_fenced"):
        said = (f"Of the commits a consumer made after the group had given up on it, ZooKeeper accepted "
                f"{at('zookeeper', 'zombie_accepted')}; the classic coordinator accepted "
                f"{at('classic', 'zombie_accepted')} and fenced {at('classic', 'zombie_fenced')}")
        if has("rocketmq", "zombie_accepted"):
            said += f"; RocketMQ's brokers accepted {at('rocketmq', 'zombie_accepted')}"
        out.append(said + " ([Zombie](#zombie)).")
    restarts = storm.per_trial(ok[ok.experiment == storm.NAME]) if (ok.experiment == storm.NAME).any() else None
    if restarts is not None and {"classic", "classic-coop", "classic-static"} <= set(restarts.design):
        revoked = restarts.groupby("design").partitions_revoked.mean()
        out.append(f"A rolling restart of the whole group made the others give up "
                   f"{cell(revoked['classic'])} partitions under the classic protocol, "
                   f"{cell(revoked['classic-coop'])} with cooperative rebalancing and "
                   f"{cell(revoked['classic-static'])} with static membership ([Storm](#storm)).")
    grown = growth.per_design(ok).set_index("design")
    if {"classic", "consumer-848"} <= set(grown.index):
        def s(design: str, column: str) -> str:
            return cell(grown.at[design, column] / 1000)
        out.append(f"When the topic's partitions grew, the classic protocol's leader learnt of them after "
                   f"{s('classic', 'learnt_ms')} s, at its metadata refresh, and its round then took "
                   f"{s('classic', 'after_learning_ms')} s; KIP-848's coordinator learnt after "
                   f"{s('consumer-848', 'learnt_ms')} s and the new partitions were all processed after "
                   f"{s('consumer-848', 'new_processing_ms')} s ([Growth](#growth)).")
    return out


def _at_full_size(full: pd.DataFrame) -> str:
    ok = full[(full.status == "ok") & (full.change == "join")]
    n = int(ok.consumers.max())
    said = []
    for design in STYLE:
        r = ok[(ok.design == design) & (ok.consumers == n)]
        if not r.empty:
            settled = herd.settled_ms(r)
            took = "refused" if pd.isna(settled) else f"{settled / 1000:,.1f} s"
            said.append(f"{design} {cell(r.control_messages_per_change.mean())}, {took}")
    return (f"At N = {n}, one join cost (control messages, then seconds to a stable group) " + "; ".join(said)
            + f" ([Herd at full size]({anchor(f'Herd at full size: N up to {n}')})).")
