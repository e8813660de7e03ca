"""The metrics of `docs/metrics.md`, computed from traces with Spark SQL and window functions.

Input: the events of any number of trials (`lab_cluster.trace_reader.TRACE_SCHEMA`),
as Spark reads them from the trace files, or their `Digest` (`digest.py`: the
records processed and produced reduced in two passes, the rest kept as it is,
all of it cached for a job that reads it many times). Every metric takes either.
Nothing is collected to the driver: every metric is a join, an aggregate or a
window over the events.

How the traces are cut (`digest.change_windows`). The trial runner's `scenario`
actor records each `change` (index, `join` or `leave`) and an `end`. A change's
window runs from its `change` event to the next change (or `end`). Within it:

- `notifications_per_change`: what told consumers of the change, in the window:
  their `zk_watch_fired` events (ZooKeeper era) and the NOTIFY_CONSUMER_IDS_CHANGED
  pushes they received (`notified`, RocketMQ);
- `zk_requests_per_change`: consumers' `zk_read` + `zk_write` from the change
  until convergence;
- `membership_reads_per_change`: of those, the reads of a member's
  registration (`getData` of `/consumers/<g>/ids/<id>`, `membership_reads`):
  the part of a ZooKeeper-era rebalance that grows as N², since every consumer
  that rebalances reads every member's registration;
- `broker_requests_per_change`: the group requests brokers served from the
  change until convergence: a coordinator's `coordinator_request` (every group
  API a consumer called), RocketMQ's `rocketmq_request` (heartbeats, id
  lists, offsets and locks) and TubeMQ's `tubemq_request` (registrations,
  heartbeats and partition metadata, at the master and the brokers; not its
  data path, a fetch and its confirm per batch: `TUBEMQ_DATA_PATH`);
- `control_messages_per_change`: the sum of the three;
- `rebalance_attempts` / `rebalance_failures`: consumers' `rebalance_begin` /
  (`rebalance_failed` or `consumer_failed`) in the window;
- `owner_conflicts`: consumers' `owner_conflict` in the window;
- `convergence_ms`: from the change to the last `assigned` in the window, if
  at the window's end every partition has exactly one owner among the change's
  live `members` (else null and `converged` false: the change did not converge,
  and the trial fails unless not converging is what it measures); 0 if the
  group was complete and nobody's assignment moved (a TubeMQ newcomer refused);
- `unowned_partition_s` / `double_owned_partition_s`: partition-seconds in
  the window with 0 / 2+ owners;
- `double_processed_partition_s`: partition-seconds in which two or more
  consumers actually processed one partition (`processing_intervals`: stretches
  of `processed` events), whatever each believed it owned, and
  `unprocessed_partition_s`, partition-seconds in which nobody did (a
  partition owned but leaderless after a broker died is unowned for no one
  and unprocessed all the same);
- `processing_resumed_ms`: from the change until every partition is processed
  again (`processing_resumed`): the end of the last pause of more than
  `PROCESSING_GAP_S` that ended in the window, over all partitions; 0 if no
  partition paused; null if one was still not processed at the window's end;
- `view_divergence`: the most distinct membership views the group's
  assignments came from at one instant, until convergence (`views_in_effect`
  says how in each era), and `stale_views`: ZooKeeper-era views older than one
  another consumer had already read (`stale_views`);
- `zombie_commits_accepted`: accepted `commit`s for a partition the committer
  had lost: another consumer's ownership of it began after the committer's
  own and before the commit (whether or not it still lasts: a zombie's stale
  offset that lands a moment after the new owner let go is still a zombie's),
  or the committer owned it no more;
- `processed_after_loss`: records a consumer processed of a partition it had
  lost, by the same rule (a zombie working through what it fetched before its
  pause, while another consumer owns the partition), whether or not anyone
  processed the partition at that very moment (`double_processed_partition_s`
  asks that);
- `unowned_at_end`: partitions with no owner among the change's members at
  the window's end (a TubeMQ node's share after it departs: nobody takes it);
- `member_partitions`: for a change about one member (a leave, a depart, a
  pause), how many partitions it owned when the change began;
- `partitions_moved`: partitions whose owner at the window's end (among the
  change's live `members`) did not own them when the change began (a
  leaver's partitions count: they must move; an eager member that revoked a
  partition and was given it back did not move it), and `partitions_spread`:
  the most minus the fewest partitions a live member owns at the window's end
  (a member with none counts), as the assignors experiment's computed replay
  counts them (`catalogue/assignors_replay.py`);
- `first_message_ms`: for a `join`, the joiner's time from its start
  (`consumer_start`) to its first processed record (`first_messages`);
- `learnt_ms`, `first_new_owned_ms`, `new_processing_ms` and
  `new_unowned_partition_s`: for a `grow`, from the topic's growth until the
  design first knew of the new partitions, until one was first owned, until
  every one had been processed, and their unowned partition-seconds
  (`growth`); a partition a `grow` added exists from its `topic_grown` on
  (`_partitions`), so the window's ownership metrics count it from then;
- `members_revoking`: the consumers other than the change's own (`about`: the
  restarted, joining or leaving member) with a `revoked` event naming at least
  one partition in the window (every family records one when it lets
  partitions go in a rebalance; the ZooKeeper era's on
  `releasePartitionOwnership`, every eager rebalance), and `partitions_revoked`,
  how many partitions they revoked in all (each revocation counted);
- `generations`: the rebalance rounds some consumer entered in the window
  (`rebalance_rounds`): the coordinator era's generations, the membership views
  of the families whose members compute (ZooKeeper era, RocketMQ; TubeMQ's
  client balance has none), TubeMQ's master's rebalance ids.

Ownership (`ownership_segments`): a consumer owns a partition from its
`assigned` event to its next `assigned`/`revoked` for it, or the end of its
trace (a stopped or killed consumer owns nothing). A sweep over +1/-1 steps,
summed by a running window per partition, gives each partition's owner count
between consecutive steps: the segments that unowned and double-owned time
are cut from.

Per trial (`trial_metrics`): `duplicates` (processed more than once), `gaps`
(produced below the highest processed offset of its partition but never
processed; messages produced after the consumers stopped are not gaps) and
`offsets_moved_backwards` (accepted commits, in time order, lower than one
accepted before them for the same partition) and `commits_fenced` (commits the
coordinator refused with ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or, from the
old process of a static member, FENCED_INSTANCE_ID; KIP-848's STALE_MEMBER_EPOCH)
and `members_fenced` (a member told by its coordinator that it is no longer
one, and resetting: `generation_reset` with UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, FENCED_INSTANCE_ID or KIP-848's FENCED_MEMBER_EPOCH; a
KIP-848 zombie learns it from its heartbeat, often before it commits) and
`requests_fenced` (the coordinator's side of both: its answers with one of
those errors, `coordinator_request`, whoever the client: a real Kafka client's
generation reset is not in its trace).

The cross-check (`cross_check`) compares, between the runner's two
`zk_server_counters` snapshots around each change (summed over the servers),
the watch notifications the clients recorded (plus the ones a stopping consumer
says its own close will trigger and it will not hear: `zk_watch_unheard`) with
the servers' own count (the sums of mntr's
`node_{children,created,deleted,changed}_watch_count`: every watcher a server
triggered), which must be equal for a membership change (a
paused or cut-off consumer's session expires with notifications the server
triggered and the client never received, so fault windows are shown, not
judged), and the requests the clients recorded
with the packets the server received (which also counts pings and other
clients' requests), which must not be fewer.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from experiments.digest import (
    CONSUMER_START,
    KEYS,
    NS_PER_S,
    PROCESSING_GAP_S,
    Digest,
    after_loss,
    digest_of,
    field,
    in_window,
)
from experiments.engine.families import FAMILIES
from experiments.engine.steps import MEMBERSHIP_CHANGES, ZK_SERVER_STEPS

WATCH_TRIGGER_COUNTERS = ("zk_sum_node_children_watch_count", "zk_sum_node_created_watch_count",
                          "zk_sum_node_deleted_watch_count", "zk_sum_node_changed_watch_count")
#: TubeMQ's per-batch requests: a fetch and the confirm that commits it (the data path, not group control)
TUBEMQ_DATA_PATH = ("getMessagesC2B", "consumerCommitC2B")


def commit_outcome(outcome: str) -> Column:
    """`commit` events with this outcome: `accepted`, or `fenced` (the coordinator refused it with
    ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID)."""
    return (F.col("kind") == "commit") & (field("outcome") == outcome)


def node_watch_events(events: DataFrame) -> DataFrame:
    """The events without the session-state callbacks kazoo delivers to watchers (`event_type` NONE).

    Those are the client's own news (connection lost, session expired), not a
    notification the server sent about a znode: they count as neither.
    """
    session_state = (F.col("kind") == "zk_watch_fired") & (F.coalesce(field("event_type"), F.lit("")) == "NONE")
    return events.where(~session_state)


#: a member's registration znode, `/consumers/<group>/ids/<consumer id>` (`legacy_zk/znodes.py`)
REGISTRATION_PATH = r"^/consumers/[^/]+/ids/[^/]+$"


def membership_reads(events: DataFrame) -> DataFrame:
    """The consumers' reads of a member's registration, as events of kind `membership_read`.

    `legacy_zk/view.py: read_view` reads every member's registration in
    every rebalance attempt (Kafka 0.8.2.2's `getConsumersPerTopic`), plus its
    own twice: N consumers rebalancing read N registrations each.
    """
    reads = events.where((F.col("kind") == "zk_read") & (field("op") == "getData")
                         & F.col("path").rlike(REGISTRATION_PATH))
    return reads.withColumn("kind", F.lit("membership_read"))


def _tally(events: DataFrame, windows: DataFrame, counts: dict[str, tuple[str, ...]],
           until_converged: tuple[str, ...] = ()) -> DataFrame:
    """Per window, how many events of each metric's kinds it holds: one join and one aggregate for them all.

    Only events of those kinds are joined (the bulk of a trace is `processed`).
    The metrics named in `until_converged` count from the change to convergence only.
    """
    kinds = sorted({kind for of_metric in counts.values() for kind in of_metric})
    inside = in_window(events.where(F.col("kind").isin(*kinds)), windows)

    def condition(name: str) -> Column:
        of_kind = F.col("kind").isin(*counts[name])
        return of_kind & (F.col("ts_ns") <= F.col("converged_ns")) if name in until_converged else of_kind

    return inside.groupBy(*KEYS).agg(*[F.count(F.when(condition(name), 1)).alias(name) for name in counts])


def _partitions(events: DataFrame) -> DataFrame:
    """trial, topic, partition, ts_ns (since when it exists): every partition, owned or not: the topic's at the
    trial's setup, and those a `grow` added, from its `topic_grown`."""
    scenario = events.where(F.col("actor") == "scenario")
    setup = scenario.where(F.col("kind") == "setup").select(
        "trial", "topic", "ts_ns", F.explode(F.sequence(F.lit(0), field("partitions").cast("int") - 1))
        .alias("partition"))
    grown = scenario.where((F.col("kind") == "topic_grown")
                           & (field("partitions").cast("int") > field("before").cast("int"))).select(
        "trial", "topic", "ts_ns", F.explode(F.sequence(field("before").cast("int"),
                                                        field("partitions").cast("int") - 1)).alias("partition"))
    return setup.unionByName(grown)


def owner_steps(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """trial, topic, partition, ts_ns, delta: the net change of a partition's owner count at each instant.

    Every partition also gets a step of 0 at the trial's setup and at its `end`, so that its first and last
    segments are measured too (a share nobody takes after its owner departed is unowned until the end)."""
    ups = intervals.select("trial", "topic", "partition", F.col("start_ns").alias("ts_ns"), F.lit(1).alias("d"))
    downs = intervals.select("trial", "topic", "partition", F.col("stop_ns").alias("ts_ns"), F.lit(-1).alias("d"))
    every = _partitions(events)
    ends = (events.where((F.col("actor") == "scenario") & (F.col("kind") == "end")).groupBy("trial")
            .agg(F.min("ts_ns").alias("ts_ns")))
    zero = every.unionByName(every.drop("ts_ns").join(ends, "trial")).withColumn("d", F.lit(0))
    return (ups.unionByName(downs).unionByName(zero.select("trial", "topic", "partition", "ts_ns", "d"))
            .groupBy("trial", "topic", "partition", "ts_ns").agg(F.sum("d").alias("delta")))


def ownership_segments(steps: DataFrame) -> DataFrame:
    """trial, topic, partition, ts_ns, stop_ns, owners: how many consumers owned it from ts_ns to stop_ns."""
    w = Window.partitionBy("trial", "topic", "partition").orderBy("ts_ns")
    return (steps.withColumn("owners", F.sum("delta").over(w.rowsBetween(Window.unboundedPreceding, 0)))
            .withColumn("stop_ns", F.lead("ts_ns").over(w))
            .where(F.col("stop_ns").isNotNull()))


def _seconds_per_window(segments: DataFrame, windows: DataFrame, names: tuple[str, str]) -> DataFrame:
    """Partition-seconds in each window with no owner (names[0]) and with two or more (names[1])."""
    w = windows.select(*KEYS, "start_ns", F.col("stop_ns").alias("w_stop"))
    clipped = (segments.join(w, "trial")
               .withColumn("len_ns", F.least("stop_ns", "w_stop") - F.greatest("ts_ns", "start_ns"))
               .where(F.col("len_ns") > 0))
    unowned, doubled = names
    return clipped.groupBy(*KEYS).agg(
        (F.sum(F.when(F.col("owners") == 0, F.col("len_ns")).otherwise(0)) / NS_PER_S).alias(unowned),
        (F.sum(F.when(F.col("owners") >= 2, F.col("len_ns")).otherwise(0)) / NS_PER_S).alias(doubled))


def _complete_at_end(events: DataFrame, intervals: DataFrame, windows: DataFrame) -> DataFrame:
    """Per window: did every partition have exactly one owner among the window's live members at its end?

    The live members are the change's `members` (a paused or cut-off zombie may
    still believe it owns partitions; it is not a member the group converged on).
    """
    w = windows.select(*KEYS, "members", F.col("stop_ns").alias("w_stop"))
    live = (intervals.join(w, "trial")
            .where((F.col("start_ns") < F.col("w_stop")) & (F.col("stop_ns") >= F.col("w_stop"))
                   & (F.col("members").isNull() | F.array_contains("members", F.col("actor"))))
            .groupBy(*KEYS, "topic", "partition").agg(F.count(F.lit(1)).alias("owners")))
    every = _partitions(events).select("trial", "topic", "partition").join(w.select(*KEYS), "trial")
    return (every.join(live, [*KEYS, "topic", "partition"], "left").fillna(0, subset=["owners"])
            .groupBy(*KEYS).agg(((F.min("owners") == 1) & (F.max("owners") == 1)).alias("complete_at_end"),
                                F.count(F.when(F.col("owners") == 0, 1)).alias("unowned_at_end")))


def _member_partitions(intervals: DataFrame, windows: DataFrame) -> DataFrame:
    """KEYS, member_partitions: how many partitions the change's `about` member owned when the change began."""
    w = windows.select(*KEYS, F.col("about").alias("actor"), F.col("start_ns").alias("change_ns"))
    return (intervals.join(w, ["trial", "actor"])
            .where((F.col("change_ns") >= F.col("start_ns")) & (F.col("change_ns") < F.col("stop_ns")))
            .groupBy(*KEYS).agg(F.count(F.lit(1)).alias("member_partitions")))


def _moves_and_spread(intervals: DataFrame, windows: DataFrame) -> DataFrame:
    """KEYS, partitions_moved, partitions_spread: who owned what when the change began and at the window's end."""
    w = windows.select(*KEYS, "members", F.col("start_ns").alias("w_start"), F.col("stop_ns").alias("w_stop"))
    joined = intervals.join(w, "trial")
    owned = [*KEYS, "actor", "topic", "partition"]
    at_start = (joined.where((F.col("start_ns") <= F.col("w_start")) & (F.col("stop_ns") > F.col("w_start")))
                .select(*owned).distinct())
    at_end = (joined.where((F.col("start_ns") < F.col("w_stop")) & (F.col("stop_ns") >= F.col("w_stop"))
                           & (F.col("members").isNull() | F.array_contains("members", F.col("actor"))))
              .select(*owned).distinct())
    moved = (at_end.join(at_start, owned, "left_anti").select(*KEYS, "topic", "partition").distinct()
             .groupBy(*KEYS).agg(F.count(F.lit(1)).alias("partitions_moved")))
    loads = (w.select(*KEYS, F.explode("members").alias("actor"))
             .join(at_end.groupBy(*KEYS, "actor").agg(F.count(F.lit(1)).alias("load")), [*KEYS, "actor"], "left")
             .fillna(0, subset=["load"])
             .groupBy(*KEYS).agg((F.max("load") - F.min("load")).alias("partitions_spread")))
    return loads.join(moved, KEYS, "full")


def group_requests(events: DataFrame) -> DataFrame:
    """The group requests brokers served (`broker_requests_per_change`), TubeMQ's data path left out."""
    data_path = (F.col("kind") == "tubemq_request") & field("api").isin(*TUBEMQ_DATA_PATH)
    return events.where(F.col("kind").isin("coordinator_request", "rocketmq_request", "tubemq_request") & ~data_path)


def processing_intervals(d: Digest) -> DataFrame:
    """trial, actor, topic, partition, start_ns, stop_ns, messages: stretches a consumer actually processed.

    Consecutive `processed` events of one consumer and partition at most
    `PROCESSING_GAP_S` apart form one stretch (`digest.bulk_pass`). This is
    what a partition's timeline draws, and what `double_processed_partition_s`
    sums: two consumers processing one partition at once, whatever each believed.
    """
    return d.stretches.select("trial", "actor", "topic", "partition", "start_ns", "stop_ns", "messages")


def stale_views(events: DataFrame) -> DataFrame:
    """trial, ts_ns, stale: every ZooKeeper-era `view`, stale if its `cversion` is older than one read before it.

    One server serves reads in order, so a stale view needs servers that
    disagree: a consumer on a lagging follower reading before it has caught up.
    """
    before = Window.partitionBy("trial").orderBy("ts_ns").rowsBetween(Window.unboundedPreceding, -1)
    return (events.where(F.col("kind") == "view").select("trial", "ts_ns", field("cversion").cast("long").alias("v"))
            .withColumn("stale", F.col("v") < F.max("v").over(before)).select("trial", "ts_ns", "stale"))


def _distinct_views_held(moves: DataFrame) -> DataFrame:
    """trial, ts_ns, views: at each instant a consumer moved (trial, actor, ts_ns, view; a null view: it holds
    none), how many distinct views the consumers' latest moves hold, where at least one is held.

    A sweep, not a join of every instant with every earlier move: each move hands
    one holder from the consumer's previous view to its new one; a view is in
    effect while it has holders; the views in effect at an instant are the
    running sum of views coming into and going out of effect up to it.
    """
    mine = Window.partitionBy("trial", "actor").orderBy("ts_ns")
    moves = moves.withColumn("prev", F.lag("view").over(mine))
    handed = (moves.where(F.col("view").isNotNull()).select("trial", "ts_ns", "view", F.lit(1).alias("d"))
              .unionByName(moves.where(F.col("prev").isNotNull())
                           .select("trial", "ts_ns", F.col("prev").alias("view"), F.lit(-1).alias("d")))
              .groupBy("trial", "view", "ts_ns").agg(F.sum("d").alias("d")))
    of_view = Window.partitionBy("trial", "view").orderBy("ts_ns")
    held = (handed.withColumn("holders", F.sum("d").over(of_view.rowsBetween(Window.unboundedPreceding, 0)))
            .withColumn("before", F.coalesce(F.lag("holders").over(of_view), F.lit(0))))
    in_effect = held.select("trial", "ts_ns", (F.when((F.col("holders") > 0) & (F.col("before") <= 0), 1)
                                               .when((F.col("holders") <= 0) & (F.col("before") > 0), -1)
                                               .otherwise(0)).alias("d"))
    instants = moves.select("trial", "ts_ns", F.lit(0).alias("d"))
    by_time = Window.partitionBy("trial").orderBy("ts_ns").rowsBetween(Window.unboundedPreceding, 0)
    return (in_effect.unionByName(instants).groupBy("trial", "ts_ns").agg(F.sum("d").alias("d"))
            .withColumn("views", F.sum("d").over(by_time)).where(F.col("views") > 0).select("trial", "ts_ns", "views"))


def views_in_effect(ce: DataFrame, events: DataFrame | None = None) -> DataFrame:
    """trial, ts_ns, views: how many distinct membership views the group's assignments came from, at each instant.

    Who computes an assignment is the family's (`Family.computes`):

    - ``"member"`` (the ZooKeeper era): each consumer's assignment is the split
      of the membership it read (`assigned` carries that view's id, `view`). At
      each `assigned` event, every live consumer's latest assignment is in
      effect; two consumers working from different views at once is the group
      computing from more than one view in one round. (A consumer that stopped
      is not counted.)
    - ``"leader"`` (the coordinator era): only the leader computes, once per
      generation, from the member list the coordinator gave it
      (`leader_assignment`): the number of distinct member lists in a generation.
    - ``"coordinator"`` (KIP-848): the coordinator computes the target
      assignment, once per group epoch, from its own member list (the
      broker's `target_assignment` in `events`): the number of distinct member
      lists in a group epoch.
    """
    by_member = [f.name for f in FAMILIES.values() if f.computes == "member"]
    moves = (ce.where(F.col("kind").isin("assigned", "consumer_stop") & F.col("design").isin(by_member))
             .select("trial", "actor", "ts_ns", F.when(F.col("kind") == "assigned", field("view"))
                     .alias("view")))
    each_member = _distinct_views_held(moves)
    by_leader = [f.name for f in FAMILIES.values() if f.computes == "leader"]
    leader = (ce.where((F.col("kind") == "leader_assignment") & F.col("design").isin(by_leader))
              .select("trial", "ts_ns", "generation",
                      F.array_join(F.array_sort(F.json_object_keys(field("assignment"))), ",").alias("view")))
    per_generation = Window.partitionBy("trial", "generation")
    leader = leader.select("trial", "ts_ns", F.size(F.collect_set("view").over(per_generation)).alias("views"))
    out = each_member.unionByName(leader)
    by_coordinator = [f.name for f in FAMILIES.values() if f.computes == "coordinator"]
    if events is None or not by_coordinator:
        return out
    trials = ce.where(F.col("design").isin(by_coordinator)).select("trial").distinct()
    target = (events.where(F.col("kind") == "target_assignment").join(trials, "trial")
              .select("trial", "ts_ns", "generation",
                      F.array_join(F.array_sort(F.json_object_keys(field("target"))), ",").alias("view")))
    target = target.select("trial", "ts_ns", F.size(F.collect_set("view").over(per_generation)).alias("views"))
    return out.unionByName(target)


def _view_divergence(events: DataFrame, ce: DataFrame, windows: DataFrame) -> DataFrame:
    """Per window, until convergence: the most views in effect at once, and the stale views read."""
    effect = (in_window(views_in_effect(ce, events), windows).where(F.col("ts_ns") <= F.col("converged_ns"))
              .groupBy(*KEYS).agg(F.max("views").alias("view_divergence")))
    stale = (in_window(stale_views(events), windows).where(F.col("ts_ns") <= F.col("converged_ns"))
             .groupBy(*KEYS).agg(F.count(F.when(F.col("stale"), 1)).alias("stale_views")))
    return effect.join(stale, KEYS, "full")


def _members_revoking(ce: DataFrame, windows: DataFrame) -> DataFrame:
    """KEYS, members_revoking, partitions_revoked: the consumers other than the change's own (`about`) that
    revoked at least one partition in the window, and how many partitions they revoked in all (a group-wide stop
    shows as every other member revoking everything; a cooperative rebalance as the moving partitions only)."""
    size = F.size(F.from_json(field("partitions"), ArrayType(ArrayType(StringType()))))
    revoked = ce.where(F.col("kind") == "revoked").withColumn("_n", size).where(F.col("_n") > 0)
    about = windows.select(*KEYS, F.split(F.coalesce("about", F.lit("")), ",").alias("_about"))
    return (in_window(revoked, windows).join(about, KEYS).where(~F.array_contains("_about", F.col("actor")))
            .groupBy(*KEYS).agg(F.countDistinct("actor").alias("members_revoking"),
                                F.sum("_n").alias("partitions_revoked")))


def rebalance_rounds(ce: DataFrame) -> DataFrame:
    """trial, ts_ns, round: each moment a consumer adopted an assignment from a round it was not in before.

    What a round is depends on who computes (`Family.computes`): the coordinator
    era's generation (`assigned.generation`; KIP-848's member epoch, which a member
    takes from the group epoch); where each member computes, the
    membership view it computed from (`assigned.view`: the ZooKeeper era's
    cversion of the ids node, RocketMQ's id list, TubeMQ's fixed `sourceCount`,
    which never changes). An `assigned` counts only if its round differs from the
    same consumer's previous one (through a restart too: a static member that
    comes back into its generation begins no round). TubeMQ's server balance
    plans at its master, and its members' view is always "master": its rounds are
    the master's rebalance ids its consumers carried out (`tubemq_event`).
    """
    by_leader = [f.name for f in FAMILIES.values() if f.computes in ("leader", "coordinator")]
    key = F.when(F.col("design").isin(by_leader), F.concat(F.lit("generation "), F.col("generation").cast("string"))
                 ).otherwise(F.concat(F.lit("view "), F.coalesce(field("view"), F.lit(""))))
    mine = Window.partitionBy("trial", "actor").orderBy("ts_ns")
    adopted = (ce.where(F.col("kind") == "assigned").withColumn("round", key)
               .withColumn("before", F.lag("round").over(mine))
               .where(F.col("before").isNull() | (F.col("before") != F.col("round"))))
    master = ce.where(F.col("kind") == "tubemq_event").withColumn(
        "round", F.concat(F.lit("master round "), field("rebalance_id")))
    return adopted.select("trial", "ts_ns", "round").unionByName(master.select("trial", "ts_ns", "round"))


def _generations(ce: DataFrame, windows: DataFrame) -> DataFrame:
    """KEYS, generations: the distinct rebalance rounds (`rebalance_rounds`) some consumer entered in the window."""
    return (in_window(rebalance_rounds(ce), windows).groupBy(*KEYS)
            .agg(F.countDistinct("round").alias("generations")))


def first_messages(ce: DataFrame, stretches: DataFrame, windows: DataFrame) -> DataFrame:
    """KEYS, first_message_ms: for a `join`, the joiner's time from its `consumer_start` to its first
    `processed` record (the start of its first stretch; null if it processed none)."""
    joins = windows.where(F.col("change") == "join").select(*KEYS, F.col("about").alias("actor"))
    starts = (ce.where(F.col("kind") == CONSUMER_START).groupBy("trial", "actor")
              .agg(F.min("ts_ns").alias("started_ns")))
    firsts = stretches.groupBy("trial", "actor").agg(F.min("start_ns").alias("first_ns"))
    return (joins.join(starts, ["trial", "actor"]).join(firsts, ["trial", "actor"], "left")
            .select(*KEYS, ((F.col("first_ns") - F.col("started_ns")) / 1e6).alias("first_message_ms")))


def growth(events: DataFrame, intervals: DataFrame, stretches: DataFrame, segments: DataFrame,
           windows: DataFrame) -> DataFrame:
    """KEYS, learnt_ms, first_new_owned_ms, new_processing_ms, new_unowned_partition_s: for a `grow`, from the
    moment the topic grew (`topic_grown`) until

    - `learnt_ms`: some actor of the design first knew the new count (`partitions_seen` with at least it: a
      consumer, or the coordinator or master that assigns for the group); null if none recorded it (a real
      client, which the lab does not trace inside);
    - `first_new_owned_ms`: a consumer first owned one of the new partitions (an `assigned` naming it);
    - `new_processing_ms`: every new partition had been processed (each one's first record after the growth,
      the latest of them); null if one was never processed in the window;

    and `new_unowned_partition_s`: the new partitions' partition-seconds with no owner in the window, from
    their creation."""
    w = windows.select(*KEYS, "start_ns", "stop_ns")
    grown = (events.where((F.col("actor") == "scenario") & (F.col("kind") == "topic_grown"))
             .select("trial", F.col("ts_ns").alias("grown_ns"), field("before").cast("int").alias("before"),
                     field("partitions").cast("int").alias("after"))
             .join(w, "trial").where((F.col("grown_ns") >= F.col("start_ns")) & (F.col("grown_ns") < F.col("stop_ns")))
             .select(*KEYS, "grown_ns", "before", "after", F.col("stop_ns").alias("w_stop")))
    after_growth = (F.col("ts_ns") >= F.col("grown_ns")) & (F.col("ts_ns") < F.col("w_stop"))
    since = (F.min("ts_ns") - F.first("grown_ns")) / 1e6
    learnt = (events.where(F.col("kind") == "partitions_seen")
              .select("trial", "ts_ns", field("partitions").cast("int").alias("_seen")).join(grown, "trial")
              .where(after_growth & (F.col("_seen") >= F.col("after"))).groupBy(*KEYS).agg(since.alias("learnt_ms")))
    new = (F.col("partition") >= F.col("before")) & (F.col("partition") < F.col("after"))
    owned = (intervals.select("trial", "partition", F.col("start_ns").alias("ts_ns")).join(grown, "trial")
             .where(new & after_growth).groupBy(*KEYS).agg(since.alias("first_new_owned_ms")))
    firsts = (stretches.select("trial", "partition", F.col("start_ns").alias("ts_ns")).join(grown, "trial")
              .where(new & after_growth).groupBy(*KEYS, "partition")
              .agg(F.min("ts_ns").alias("ts_ns"), F.first("grown_ns").alias("grown_ns"),
                   F.first("before").alias("before"), F.first("after").alias("after")))
    processing = firsts.groupBy(*KEYS).agg(
        F.when(F.count(F.lit(1)) == F.first(F.col("after") - F.col("before")),
               (F.max("ts_ns") - F.first("grown_ns")) / 1e6).alias("new_processing_ms"))
    unowned = (segments.where(F.col("owners") == 0).join(grown, "trial").where(new)
               .withColumn("len_ns", F.least("stop_ns", "w_stop") - F.greatest("ts_ns", "grown_ns"))
               .where(F.col("len_ns") > 0).groupBy(*KEYS)
               .agg((F.sum("len_ns") / NS_PER_S).alias("new_unowned_partition_s")))
    return (grown.select(*KEYS).join(learnt, KEYS, "left").join(owned, KEYS, "left").join(processing, KEYS, "left")
            .join(unowned, KEYS, "left").fillna(0.0, subset=["new_unowned_partition_s"]))


def processing_resumed(control: DataFrame, stretches: DataFrame, windows: DataFrame,
                       gap_s: float = PROCESSING_GAP_S) -> DataFrame:
    """KEYS, processing_resumed_ms: from the change until every partition was processed again.

    Per partition, whoever processed it: a pause is two consecutive `processed`
    events more than `gap_s` apart (the producer writes every partition several
    times a second); the partition resumed at the end of its last pause that
    ended in the window. The window's figure is the latest such resumption over
    all partitions, from the change; 0 if none paused; null if some partition
    was not processed in the window's last `gap_s` (it had not resumed).

    Read from the consumers' stretches (`processing_intervals`): within a
    stretch no two records are more than `gap_s` apart, so a pause ends where a
    stretch starts later than `gap_s` after every earlier stretch of the
    partition stopped; and a stretch that runs over the window's end had a record
    within `gap_s` before it.
    """
    key = ["trial", "topic", "partition"]
    earlier = Window.partitionBy(*key).orderBy("start_ns").rowsBetween(Window.unboundedPreceding, -1)
    pauses = (stretches.withColumn("prev", F.max("stop_ns").over(earlier))
              .where(F.col("start_ns") - F.col("prev") > gap_s * NS_PER_S)
              .select("trial", F.col("start_ns").alias("ts_ns")))
    resumed = (in_window(pauses, windows).groupBy(*KEYS)
               .agg(((F.max("ts_ns") - F.first("start_ns")) / 1e6).alias("_resumed_ms")))
    w = windows.select(*KEYS, F.col("stop_ns").alias("w_stop"))
    last = (stretches.join(w, "trial").where(F.col("start_ns") < F.col("w_stop"))
            .groupBy(*KEYS, "topic", "partition").agg(F.max(F.least("stop_ns", "w_stop")).alias("last_ns")))
    every = _partitions(control).select(*key).join(w, "trial")
    stalled = (every.join(last, [*KEYS, "topic", "partition"], "left")
               .groupBy(*KEYS).agg(F.count(F.when(F.col("last_ns").isNull()
                                                  | (F.col("w_stop") - F.col("last_ns") > gap_s * NS_PER_S), 1))
                                   .alias("_stalled")))
    return (stalled.join(resumed, KEYS, "left")
            .select(*KEYS, F.when(F.col("_stalled") == 0, F.coalesce("_resumed_ms", F.lit(0.0)))
                    .alias("processing_resumed_ms")))


def change_metrics(events: DataFrame | Digest) -> DataFrame:
    """One row per (trial, change) with every per-change metric (docs/metrics.md), from a run's events or its digest."""
    d = digest_of(events)
    events, ce, windows, intervals = d.control, d.consumers, d.windows, d.intervals
    steps = owner_steps(events, intervals)
    segments = ownership_segments(steps)
    lost = d.stretches.select("trial", F.explode("lost").alias("n")).select("trial", "n.change_index", "n.times")
    parts = [
        _tally(node_watch_events(ce).unionByName(membership_reads(ce)), windows,
               {"notifications_per_change": ("zk_watch_fired", "notified"),
                "zk_requests_per_change": ("zk_read", "zk_write"),
                "membership_reads_per_change": ("membership_read",),
                "rebalance_attempts": ("rebalance_begin",),
                "rebalance_failures": ("rebalance_failed", "consumer_failed"),
                "owner_conflicts": ("owner_conflict",)},
               until_converged=("zk_requests_per_change", "membership_reads_per_change")),
        # the coordinators' side: every group request a consumer sent, until convergence
        _tally(group_requests(events), windows,
               {"broker_requests_per_change": ("coordinator_request", "rocketmq_request", "tubemq_request")},
               until_converged=("broker_requests_per_change",)),
        in_window(after_loss(ce.where(commit_outcome("accepted")), intervals), windows).groupBy(*KEYS).agg(
            F.sum("times").alias("zombie_commits_accepted")),
        lost.where(F.col("change_index").isNotNull()).groupBy(*KEYS).agg(F.sum("times").alias("processed_after_loss")),
        _seconds_per_window(segments, windows, ("unowned_partition_s", "double_owned_partition_s")),
        growth(events, intervals, d.stretches, segments, windows),
        _seconds_per_window(ownership_segments(owner_steps(events, processing_intervals(d))), windows,
                            ("unprocessed_partition_s", "double_processed_partition_s")),
        processing_resumed(events, d.stretches, windows),
        _complete_at_end(events, intervals, windows),
        _member_partitions(intervals, windows),
        _moves_and_spread(intervals, windows),
        _view_divergence(events, ce, windows),
        first_messages(ce, d.stretches, windows),
        _members_revoking(ce, windows),
        _generations(ce, windows),
    ]
    out = windows
    for part in parts:
        out = out.join(part, KEYS, "left")
    counts = ["notifications_per_change", "zk_requests_per_change", "membership_reads_per_change",
              "broker_requests_per_change",
              "rebalance_attempts", "rebalance_failures", "owner_conflicts", "zombie_commits_accepted",
              "processed_after_loss",
              "unowned_partition_s", "double_owned_partition_s", "double_processed_partition_s", "stale_views",
              "unprocessed_partition_s",
              "unowned_at_end", "member_partitions", "partitions_moved", "members_revoking", "partitions_revoked",
              "generations"]
    return (out.drop("members", "about").fillna(0, subset=counts).fillna(False, subset=["complete_at_end"])
            .withColumnRenamed("complete_at_end", "converged")
            .withColumn("control_messages_per_change", F.col("notifications_per_change")
                        + F.col("zk_requests_per_change") + F.col("broker_requests_per_change"))
            .withColumn("convergence_ms",
                        F.when(F.col("converged"), F.coalesce((F.col("assigned_ns") - F.col("start_ns")) / 1e6,
                                                              F.lit(0.0))))
            .drop("assigned_ns"))


def trial_metrics(events: DataFrame | Digest) -> DataFrame:
    """One row per trial: duplicates, gaps, processed and produced messages (`digest.bulk_pass`), offsets
    moved backwards, and the fencing counts."""
    d = digest_of(events)
    events = d.control
    fenced = events.where(commit_outcome("fenced")).groupBy("trial").agg(F.count(F.lit(1)).alias("commits_fenced"))
    resets = (events.where((F.col("kind") == "generation_reset") & F.col("error").isin(*FENCING_ERRORS))
              .groupBy("trial").agg(F.count(F.lit(1)).alias("members_fenced")))
    refused = (events.where((F.col("kind") == "coordinator_request") & F.col("error").isin(*FENCING_ERRORS))
               .groupBy("trial").agg(F.count(F.lit(1)).alias("requests_fenced")))
    trials = events.select("trial").unionByName(d.offsets.select("trial")).distinct()
    offsets = d.offsets.drop("phantom_messages")
    return (trials.join(offsets, "trial", "left")
            .join(_backward_commits(events), "trial", "left").join(fenced, "trial", "left")
            .join(resets, "trial", "left").join(refused, "trial", "left")
            .fillna(0, subset=["duplicates", "gaps", "messages_processed", "messages_produced",
                               "offsets_moved_backwards", "commits_fenced", "members_fenced", "requests_fenced"]))


#: the coordinator's answers that tell a member it is no longer one (it resets and rejoins)
FENCING_ERRORS = ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_INSTANCE_ID", "FENCED_MEMBER_EPOCH")


def _backward_commits(events: DataFrame) -> DataFrame:
    """trial, offsets_moved_backwards: accepted commits lower than one accepted before for the same partition."""
    key = ["trial", "topic", "partition"]
    before = Window.partitionBy(*key).orderBy("ts_ns").rowsBetween(Window.unboundedPreceding, -1)
    commits = (events.where(commit_outcome("accepted"))
               .select(*key, "ts_ns", F.col("offset").alias("committed"))
               .withColumn("highest_before", F.max("committed").over(before)))
    return (commits.where(F.col("committed") < F.col("highest_before"))
            .groupBy("trial").agg(F.count(F.lit(1)).alias("offsets_moved_backwards")))


def cross_check(events: DataFrame | Digest) -> DataFrame:
    """Per (trial, change): client-recorded vs server-counted notifications and requests, and the verdict."""
    d = digest_of(events)
    events = d.control
    snaps = events.where((F.col("actor") == "scenario") & (F.col("kind") == "zk_server_counters")).select(
        "trial", field("index").cast("int").alias("change_index"), field("at").alias("at"), "ts_ns",
        *[field(f"counters.{c}").cast("long").alias(c) for c in ("zk_packets_received", *WATCH_TRIGGER_COUNTERS)])
    triggered = sum(F.col(c) for c in WATCH_TRIGGER_COUNTERS)
    snaps = snaps.withColumn("triggered", triggered)
    before, after = snaps.where(F.col("at") == "before").alias("b"), snaps.where(F.col("at") == "after").alias("a")
    spans = before.join(after, KEYS).select(
        *KEYS, F.col("b.ts_ns").alias("start_ns"), F.col("a.ts_ns").alias("stop_ns"),
        (F.col("a.triggered") - F.col("b.triggered")).alias("server_notifications"),
        (F.col("a.zk_packets_received") - F.col("b.zk_packets_received")).alias("server_packets_received"))
    counted = _tally(node_watch_events(events), spans, {"client_notifications": ("zk_watch_fired",),
                                                        "client_unheard": ("zk_watch_unheard",),
                                                        "client_requests": ("zk_read", "zk_write")})
    out = spans.join(counted, KEYS, "left").fillna(0, subset=["client_notifications", "client_unheard",
                                                              "client_requests"])
    # A fault on a consumer (pause, cut) lets its session expire with notifications queued for it: the
    # server counts them as triggered, the client never gets them. Equality is checked on membership changes.
    kinds = d.windows.select(*KEYS, "change")
    out = out.join(kinds, KEYS, "left")
    membership = F.col("change").isin(*MEMBERSHIP_CHANGES)
    # A consumer that stops closes its session, and the server triggers its own watch on the ids node it
    # deletes; it does not hear that one, and says so (`zk_watch_unheard`).
    expected = F.col("client_notifications") + F.col("client_unheard")
    problem = (F.when(membership & (expected != F.col("server_notifications")),
                      F.format_string("change %d: clients recorded %d watch notifications (and %d of their own they "
                                      "would not hear), the server triggered %d", "change_index",
                                      "client_notifications", "client_unheard", "server_notifications"))
               .when(~F.col("change").isin(*ZK_SERVER_STEPS)
                     & (F.col("client_requests") > F.col("server_packets_received")),
                     F.format_string("change %d: clients recorded %d ZooKeeper requests, the server received only "
                                     "%d packets", "change_index", "client_requests", "server_packets_received")))
    return out.withColumn("cross_check_problem", problem).drop("start_ns", "stop_ns", "change")


#: the events a timeline marks: what the scenario did, and when consumers rebalanced or were told off
TIMELINE_MARKS = ("change", "membership", "fault", "converged", "not_converged", "assigned", "session_expired",
                  "generation_reset")


def timelines(events: DataFrame | Digest) -> tuple[DataFrame, DataFrame]:
    """(stretches, marks) for drawing each trial's partitions over time, seconds from the trial's `setup`.

    stretches: trial, actor, partition, start_s, stop_s, messages (`processing_intervals`);
    marks: trial, t_s, actor, kind, label (the scenario's changes, faults and convergence; the
    consumers' `assigned`, `session_expired` and `generation_reset`; fenced commits).
    """
    d = digest_of(events)
    events = d.control
    origin = (events.where((F.col("actor") == "scenario") & (F.col("kind") == "setup"))
              .groupBy("trial").agg(F.min("ts_ns").alias("t0")))

    def seconds(c: str) -> Column:
        return F.round((F.col(c) - F.col("t0")) / NS_PER_S, 3)

    stretches = (processing_intervals(d).join(origin, "trial")
                 .select("trial", "actor", "partition", seconds("start_ns").alias("start_s"),
                         seconds("stop_ns").alias("stop_s"), "messages"))
    label = F.coalesce(field("action"), field("change"), F.col("error"), F.lit(""))
    fenced = commit_outcome("fenced")
    marks = (events.where(F.col("kind").isin(*TIMELINE_MARKS) | fenced).join(origin, "trial")
             .select("trial", seconds("ts_ns").alias("t_s"), "actor",
                     F.when(fenced, F.lit("commit_fenced")).otherwise(F.col("kind")).alias("kind"),
                     F.concat_ws(" ", label, F.coalesce(field("target"), F.col("member"), F.lit(""))).alias("label"))
             .dropDuplicates(["trial", "t_s", "actor", "kind"]))
    return stretches, marks
