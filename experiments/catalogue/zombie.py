"""The zombie experiment: a consumer that the group gave up on wakes up. What does it do, and what is kept?

For each design, a group of two consumers (`c1`, the victim, and `c2`), each in
its own process, consuming a topic that a producer keeps writing to; then one
of two faults on `c1`, held until the group has converged without it and
`hold_s` more (so that `c2` processes and commits what `c1` had), then healed:

- `pause`: SIGSTOP past its session timeout, then SIGCONT (a long GC pause);
- `cut`: its link to ZooKeeper (`zookeeper`) or to its coordinator (`classic`) is
  blackholed while its links to the brokers stay up, then let through again;
  RocketMQ's and TubeMQ's consumers have one channel per broker for membership
  and messages alike, so their links to every broker are cut (TubeMQ's
  master, which every lab broker hosts, with them).

Every consumer spends `lab.processing.ms` on each record, so a zombie that
wakes up behind does not catch up at once. The finding, checked by `findings()`
(and by `pytest -m zombie`):

- ZooKeeper era: the zombie goes on fetching what `c2` now owns (its fetchers
  are not stopped by a lost connection: `legacy_zk/consumer.py`, session
  handling), so two consumers process one partition at once, and its offset
  commits are plain ZooKeeper writes (`legacy_zk/offsets.py`) that nothing
  refuses. Cut off, the auto-commit it was making when it lost ZooKeeper waits
  (zkclient's `retryUntilConnected`) and lands on its new session, with old
  positions, so a committed offset can move backwards. Paused, it learns of
  its expired session at its first contact after SIGCONT, and its overdue
  auto-commit ticks run at once with the positions of the pause: whether that
  writes anything depends on what it had processed since its last commit,
  which the finding does not claim;
- coordinator era: the coordinator fences the zombie's commits by generation
  and member id (`modern_coord/coordinator/`: ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID), so none is accepted and no committed offset moves
  backwards. It does not stop the zombie fetching: Kafka's consumers never
  wait on their coordinator to fetch and process (the auto-commit goes
  without waiting for its answer), so a zombie cut off from its coordinator
  goes on processing what another consumer now owns until it hears it was
  fenced, as the ZooKeeper-era zombie does (the finding: in the cut's window
  it processed, of partitions it had lost, at least 80% of what the producer
  wrote to them while both believed they owned them: `processed_after_loss`
  against `RATE` x `double_owned_partition_s`; a zombie that stopped for a
  request timeout falls short).
  Duplicates remain in both eras, which is why Kafka's answer to them is
  idempotent processing or transactions, not the group protocol;
- the consumer protocol (`consumer-848`, KIP-848): the coordinator fences by
  member epoch. Its session (the broker's `group.consumer.session.timeout.ms`,
  here 6 s as the classic consumer's) expires, the member is removed and its
  partitions go to `c2`; on waking, its heartbeat is answered
  UNKNOWN_MEMBER_ID (or FENCED_MEMBER_EPOCH) and a commit under its old epoch
  UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH: it drops everything as lost and
  rejoins with epoch 0. Which it learns first depends on which request it
  sends first, so the finding counts either (`commits_fenced`,
  `members_fenced`);
- RocketMQ: nothing fences anything. A broker forgets a silent consumer only
  when its scan finds no heartbeat for 120 s, and tells nobody
  (`rocketmq_client/broker/consumer_manager.py`); the others take its queues at
  their next periodic rebalance (20 s). Awake again, the zombie still holds
  its queues until its own next rebalance, and the offsets it sends meanwhile,
  periodic or as it lets a queue go, are accepted from anyone
  (`rocketmq_client/broker/offsets.py`);
- TubeMQ's client balance: the broker fences. Nobody takes the zombie's
  partitions while it is away (no membership: the others take only their own
  hash share), so its share waits for it; after 30 s of silence its broker
  releases its registrations (`tubemq_client/broker/registrations.py`), and
  what it sends on waking is refused: a confirm (the commit) is UNAUTHORIZED,
  a fetch HB_NO_NODE, after which it drops the partition and registers it
  again at its next balance round. Nothing double-processed, nothing
  accepted from a non-holder, at the price of the share's idle time;
- the real Kafka clients (kafka-python, librdkafka), `pause` only (they connect
  where the brokers' metadata says, so no proxy can cut their coordinator
  link): on the same coordinator as the lab's `classic` consumer, the same
  fencing. What a real client does inside (its generation reset) is not in its
  trace, so the finding reads the coordinator's side: its answers with a
  fencing error (`requests_fenced`), the zombie's heartbeat or commit.
  (Ownership, as the metrics count it, is what a consumer believes: the
  zombie believes it still holds its share while it is away, so the share
  counts as owned, once, and "double-owned" stays 0: nobody else claimed it.)
"""

from __future__ import annotations

import pandas as pd

from experiments.engine.experiment import Experiment
from experiments.engine.families import FAMILIES, REAL_CLIENTS, REFERENCES, settings_of, with_references
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec

NAME = "zombie"
QUESTION = ("A consumer paused past its session timeout (or cut off from ZooKeeper or its coordinator) wakes up: "
            "does it process partitions another consumer owns, are its commits accepted, and can a committed "
            "offset move backwards?")
#: records a second the producer writes to each partition, in every profile: the cut finding reads it
RATE = 5.0
PROFILES = {
    "standard": {"consumers": [2], "partitions": 4, "rate": RATE, "seeds": 1},
    # the standard grid's trials of these designs take 22-30 s each (`benchmarks/trial_time.json`)
    "tour": {"consumers": [2], "partitions": 4, "rate": RATE, "seeds": 1, "designs": ("zookeeper", "classic"),
             "why": "the zombie: paused or cut off, a consumer of the ZooKeeper era processes partitions another "
                    "consumer owns and nothing refuses its commits, where the coordinator fences them by generation"},
    "full": {"consumers": [2, 4], "partitions": 8, "rate": RATE, "seeds": 3},
}
#: the lab's designs, then the real systems beside them (`Family.counterpart`), each with its counterpart's settings
DESIGNS = with_references(("zookeeper", "classic", "consumer-848", "rocketmq", "tubemq", "kafka-python",
                           "librdkafka"))
VARIANTS = {"pause": ("pause", "resume"), "cut": ("cut", "heal")}
#: Both families: commit every second and spend 20 ms on each record. Coordinator era: the session
#: timeout of the ZooKeeper era's default (6 s instead of Kafka 3's 45 s) so both evict after the same
#: silence, and a 10 s request timeout so a request lost in the cut link is given up before the trial ends.
OVERRIDES = {
    "zookeeper": ("auto.commit.interval.ms=1000", "lab.processing.ms=20"),
    "classic": ("auto.commit.interval.ms=1000", "lab.processing.ms=20", "session.timeout.ms=6000",
               "heartbeat.interval.ms=2000", "request.timeout.ms=10000"),
    # KIP-848: the session and heartbeat are the coordinator's (BROKER_OVERRIDES)
    "consumer-848": ("auto.commit.interval.ms=1000", "lab.processing.ms=20", "request.timeout.ms=10000"),
    "rocketmq": ("persistConsumerOffsetInterval=1000", "lab.processing.ms=20"),
    "tubemq": ("lab.processing.ms=20",),  # it commits every batch it processed (confirmConsume)
    # the real clients: `classic`'s settings, under each library's names (librdkafka's consumer has no
    # request.timeout.ms: its socket.timeout.ms bounds a request)
    "kafka-python": ("auto.commit.interval.ms=1000", "lab.processing.ms=20", "session.timeout.ms=6000",
                     "heartbeat.interval.ms=2000", "request.timeout.ms=10000"),
    "librdkafka": ("auto.commit.interval.ms=1000", "lab.processing.ms=20", "session.timeout.ms=6000",
                   "heartbeat.interval.ms=2000", "socket.timeout.ms=10000"),
}
#: KIP-848's session and heartbeat, the classic consumer's values above, set where they live: on the broker
#: (their lower bounds, 45 s and 5 s by default, lowered to allow them)
BROKER_OVERRIDES = {
    "consumer-848": ("group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=6000",
                      "group.consumer.heartbeat.interval.ms=2000", "group.consumer.min.heartbeat.interval.ms=2000"),
}
#: how long the group may take to converge without the victim: a ZooKeeper session or a coordinator's member
#: expires after 6 s; a RocketMQ broker drops a silent channel after 120 s (its scan runs every 10 s) and the
#: others notice at their next periodic rebalance (20 s). A TubeMQ group cannot converge without its node: the
#: runner watches for 40 s, past the 30 s after which a broker releases a silent holder's registrations.
CONVERGE_LIMIT_S = {"zookeeper": 60.0, "classic": 60.0, "consumer-848": 60.0, "rocketmq": 240.0, "tubemq": 40.0,
                    "kafka-python": 60.0, "librdkafka": 60.0}
#: the designs whose group never converges without the victim (its share waits for it)
WAITS_FOR_VICTIM = ("tubemq",)
HOLD_S = 3.0


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    return [TrialSpec(NAME, design, n, partitions or p["partitions"], rate=p["rate"], seed=seed, variant=variant,
                      layout="spread", steps=steps, params={"hold_s": HOLD_S},
                      overrides=OVERRIDES[settings_of(design)],
                      broker_overrides=BROKER_OVERRIDES.get(settings_of(design), ()),
                      converge_limit_s=CONVERGE_LIMIT_S[settings_of(design)],
                      converge_required=design not in WAITS_FOR_VICTIM)
            for variant, steps in VARIANTS.items() for design in designs for n in (consumers or p["consumers"])
            # a design with no link the lab can cut (a real Kafka client: `Family.victim_link` "none") is paused only
            for seed in range(seeds or p["seeds"]) if variant == "pause" or FAMILIES[design].victim_link != "none"]


def per_trial(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per ok trial: its variant, design, and the window sums and trial counts the finding uses."""
    rows = summary[(summary.experiment == NAME) & (summary.status == "ok")]
    return rows.groupby(["variant", "design", "trial"], as_index=False).agg(
        double_processed_partition_s=("double_processed_partition_s", "sum"),
        double_owned_partition_s=("double_owned_partition_s", "sum"),
        zombie_commits_accepted=("zombie_commits_accepted", "sum"),
        processed_after_loss=("processed_after_loss", "sum"),
        duplicates=("duplicates", "first"), gaps=("gaps", "first"),
        offsets_moved_backwards=("offsets_moved_backwards", "first"), commits_fenced=("commits_fenced", "first"),
        members_fenced=("members_fenced", "first"), requests_fenced=("requests_fenced", "first"))


def findings(summary: pd.DataFrame) -> list[Finding]:
    t = per_trial(summary)
    modern = t[t.design == "classic"]
    out = []
    for variant in VARIANTS:
        # the lab's ZooKeeper-era consumer, and Kafka 0.8.2.2's own beside it, judged alike
        for design, era in (("zookeeper", "ZooKeeper era"), *((d, FAMILIES[d].label)
                                                             for d in REFERENCES.get("zookeeper", ()))):
            lv = t[(t.design == design) & (t.variant == variant)]
            out.append(Finding(
                f"{design}-{variant}-unrefused",
                f"{era}, {variant}: the zombie processes partitions another consumer owns, and nothing refuses "
                "its commits", len(lv) > 0 and bool(((lv.processed_after_loss > 0)
                                                     & (lv.commits_fenced == 0)).all()),
                _evidence(lv, ["processed_after_loss", "double_processed_partition_s", "zombie_commits_accepted",
                               "commits_fenced", "duplicates"])))
        mv = modern[modern.variant == variant]
        out.append(Finding(
            f"classic-{variant}-fenced",
            f"Coordinator era, {variant}: the zombie's commits are fenced, none is accepted, no committed offset "
            "moves backwards", len(mv) > 0 and bool(((mv.zombie_commits_accepted == 0)
                                                     & (mv.offsets_moved_backwards == 0)
                                                     & (mv.commits_fenced > 0)).all()),
            _evidence(mv, ["commits_fenced", "zombie_commits_accepted", "offsets_moved_backwards", "duplicates"])))
    kip848 = t[t.design == "consumer-848"]
    for variant in VARIANTS:
        kv = kip848[kip848.variant == variant]
        out.append(Finding(
            f"consumer-848-{variant}-fenced",
            f"Consumer protocol (KIP-848), {variant}: the zombie is fenced by its member epoch (its commit refused "
            "or its heartbeat told it is no member), none of its commits is accepted, no committed offset moves "
            "backwards", len(kv) > 0 and bool(((kv.zombie_commits_accepted == 0) & (kv.offsets_moved_backwards == 0)
                                                & (kv.commits_fenced + kv.members_fenced > 0)).all()),
            _evidence(kv, ["commits_fenced", "members_fenced", "zombie_commits_accepted", "offsets_moved_backwards",
                           "duplicates"])))
    rocket = t[t.design == "rocketmq"]
    for variant in VARIANTS:
        rv = rocket[rocket.variant == variant]
        out.append(Finding(
            f"rocketmq-{variant}-accepted",
            f"RocketMQ, {variant}: nothing fences the zombie: commits it made for queues another consumer had "
            "taken were accepted, none refused", len(rv) > 0 and bool(((rv.zombie_commits_accepted > 0)
                                                                       & (rv.commits_fenced == 0)).all()),
            _evidence(rv, ["zombie_commits_accepted", "commits_fenced", "double_processed_partition_s",
                           "offsets_moved_backwards", "duplicates"])))
    tube = t[t.design == "tubemq"]
    for variant in VARIANTS:
        tv = tube[tube.variant == variant]
        out.append(Finding(
            f"tubemq-{variant}-fenced-share-idle",
            f"TubeMQ, {variant}: the broker fences: no commit of the zombie's is accepted and no partition is "
            "processed by two at once; nobody claims its share while it is away (it waits for it)",
            len(tv) > 0 and bool(((tv.zombie_commits_accepted == 0) & (tv.double_processed_partition_s == 0)
                                  & (tv.double_owned_partition_s == 0)).all()),
            _evidence(tv, ["zombie_commits_accepted", "commits_fenced", "double_processed_partition_s",
                           "double_owned_partition_s", "duplicates"])))
    for design in REAL_CLIENTS:
        r = t[(t.design == design) & (t.variant == "pause")]
        out.append(Finding(
            f"{design}-pause-fenced",
            f"{FAMILIES[design].label}, pause: as the lab's consumer, the zombie is fenced (the coordinator answers "
            "its heartbeat or commit with a fencing error), none of its commits is accepted, no committed offset "
            "moves backwards",
            len(r) > 0 and bool(((r.zombie_commits_accepted == 0) & (r.offsets_moved_backwards == 0)
                                 & (r.requests_fenced > 0)).all()),
            _evidence(r, ["requests_fenced", "commits_fenced", "zombie_commits_accepted", "offsets_moved_backwards",
                          "duplicates"])))
    for design in (*REFERENCES.get("kafka-python", ()), *REFERENCES.get("consumer-848", ())):  # Kafka's coordinator
        r = t[(t.design == design) & (t.variant == "pause")]
        out.append(Finding(
            f"{design}-pause-not-accepted",
            f"{FAMILIES[design].label}, pause: Kafka's own coordinator accepts none of the zombie's commits and no "
            "committed offset moves backwards (its refusals are not traced: Kafka's broker writes no lab trace)",
            len(r) > 0 and bool(((r.zombie_commits_accepted == 0) & (r.offsets_moved_backwards == 0)).all()),
            _evidence(r, ["commits_fenced", "zombie_commits_accepted", "offsets_moved_backwards",
                          "processed_after_loss", "duplicates"])))
    cut_windows = summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.change == "cut")]
    for design in ("classic", "consumer-848"):
        w = cut_windows[cut_windows.design == design]
        out.append(Finding(
            f"{design}-cut-processing-goes-on",
            f"{FAMILIES[design].label}, cut: fencing refuses the zombie's commits, not its processing: cut off from "
            "its coordinator, it goes on processing what another consumer owns (at least 80% of what was written "
            "to those partitions while both believed they owned them)",
            len(w) > 0 and bool(((w.double_owned_partition_s > 0)
                                 & (w.processed_after_loss >= 0.8 * RATE * w.double_owned_partition_s)).all()),
            _evidence(w, ["double_owned_partition_s", "double_processed_partition_s", "processed_after_loss"])))
    for design, era in (("zookeeper", "ZooKeeper era"), *((d, FAMILIES[d].label)
                                                         for d in REFERENCES.get("zookeeper", ()))):
        theirs = t[t.design == design]
        cut = theirs[theirs.variant == "cut"]
        out.append(Finding(f"{design}-cut-blocked-commit-lands",
                           f"{era}, cut: the commit the zombie was making when it lost ZooKeeper waits for the "
                           "connection and lands on its new session (zombie commits accepted)",
                           len(cut) > 0 and bool((cut.zombie_commits_accepted > 0).all()),
                           _evidence(cut, ["zombie_commits_accepted"])))
        out.append(Finding(f"{design}-offset-backwards",
                           f"{era}: a zombie's accepted commit moved a committed offset backwards (in at least "
                           "one trial)", bool((theirs.offsets_moved_backwards > 0).any()),
                           _evidence(theirs, ["offsets_moved_backwards"])))
    return of_designs_run(out, summary)


def _evidence(rows: pd.DataFrame, columns: list[str]) -> str:
    if rows.empty:
        return "no successful trial"
    return "; ".join(f"{r.trial}: " + ", ".join(f"{c} {getattr(r, c):,.3g}" for c in columns)
                     for r in rows.itertuples())


#: 1: "the zombie's commits are accepted" in both faults; 2: the faithful 0.8 model's finding (nothing refuses
#: its commits; cut off, the blocked commit lands on the new session; an offset moves backwards in some trial);
#: 3: RocketMQ's family; 4: TubeMQ's; 5: "processes partitions another owns" measured by the records the zombie
#: processed after losing them (`processed_after_loss`), not by two consumers processing at the same instant
#: (a paused zombie works through its fetched batch within milliseconds of the new owner's last record);
#: 6: KIP-848's consumer protocol; 7: the coordinator-era consumers no longer wait on their coordinator to process
#: (their auto-commit goes without waiting for its answer), and a finding says so for the cut
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.faults:zombie_section", keeps_timelines=True, version=7)
