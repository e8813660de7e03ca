"""The report's section on the real Kafka clients: does the lab's consumer behave like them on the same coordinator?

The lab's coordinator-era consumer (`classic`, `modern_coord/consumer.py`) is
written after Kafka's Java client; kafka-python's `KafkaConsumer` and
librdkafka's consumer (`kafka_clients/`) are the libraries people run,
unchanged, on the brokers' Kafka listeners. The herd, zombie and storm
experiments run all three against the same coordinator, and this section sets
their figures side by side, per experiment: the group requests the brokers
served per change and the rounds it took (herd), the fencing of a paused member
(zombie), and what a rolling restart cost (storm). Each experiment's own
findings check the era's claims on the real clients too (their ids start with
the client's name). Rendered from the run's stored summary only; an experiment
the run did not include is left out.
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import herd, storm, zombie
from experiments.engine.families import REAL_CLIENTS
from experiments.engine.finding import Finding, design_of
from experiments.report.parts import STYLE, findings_list, table

#: the lab's consumer, then the real clients, as the section compares them
COMPARED = ("classic", *REAL_CLIENTS)
HERD_TABLE = [("consumers", "N"), ("broker_requests_per_change", "group requests to brokers"),
              ("generations", "rounds"), ("members_revoking", "others revoking"),
              ("partitions_revoked", "partitions they revoked"), ("convergence_ms", "convergence ms"),
              ("unowned_partition_s", "unowned partition-s")]
ZOMBIE_TABLE = [("requests_fenced", "coordinator's fencing answers"), ("commits_fenced", "commits fenced"),
                ("zombie_commits_accepted", "zombie commits accepted"),
                ("offsets_moved_backwards", "offsets moved backwards"),
                ("double_processed_partition_s", "double-processed partition-s"), ("duplicates", "duplicates")]
STORM_TABLE = [("generations", "rebalance rounds"), ("members_revoking", "members revoking (sum)"),
               ("partitions_revoked", "partitions they revoked"), ("unowned_partition_s", "unowned partition-s"),
               ("duplicates", "duplicates"), ("stable_after_last_ms", "stable after last restart ms")]


def real_clients_section(summary: pd.DataFrame) -> str:
    ok = summary[(summary.status == "ok") & summary.design.isin(COMPARED)]
    if not ok.design.isin(REAL_CLIENTS).any():
        return ""
    parts = [_herd(ok), _zombie(ok), _storm(ok)]
    checked = _their_findings(summary)
    return f"""## The real Kafka clients: does the lab's consumer behave like them?

The lab's coordinator-era consumer (`classic`) is the lab's own code, written
after Kafka's Java client. kafka-python's `KafkaConsumer` (3.x) and librdkafka's
consumer (through confluent-kafka) are the libraries people run: here each is
the library itself, unchanged, pointed at the brokers' Kafka listeners, which
serve Kafka's binary protocol with the very handlers the lab's JSON listener
calls (`lab_cluster/kafka_listener/`). All three meet the same group
coordinator. What each client does is in its trace from its own callbacks
(`kafka_clients/member.py`: records processed, partitions assigned and revoked,
commit outcomes); what the coordinator did is in the brokers' traces, whoever
the client. The real clients run with their own defaults and the range assignor,
as `classic` does, except where an experiment sets the era's timings (zombie:
a 6 s session, 2 s heartbeats, a commit every second). A real client connects
where the brokers' metadata says, so no proxy can be put in its way: the
zombie experiment pauses it (SIGSTOP), and does not cut its link.

{(chr(10) * 2).join(p for p in parts if p)}

{_reading(ok)}

**The era's findings, checked on the real clients** (each experiment's `findings`, the ids that name a client):

{findings_list(checked) if checked else "- none: the run has no ok trial of a real client"}
"""


def _rows(frame: pd.DataFrame, columns, first: tuple[str, ...] = ("label",)) -> list[tuple]:
    """The table's rows: the design's label (and `first`'s other columns), then `columns`."""
    return list(frame[[*first, *(c for c, _ in columns)]].itertuples(index=False))


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    order = {d: i for i, d in enumerate(COMPARED)}
    return (frame.assign(order=frame.design.map(order), label=frame.design.map(lambda d: STYLE[d][1]))
            .sort_values(["order", *(["consumers"] if "consumers" in frame else [])]))


def _herd(ok: pd.DataFrame) -> str:
    rows = ok[(ok.experiment == herd.NAME) & ok.change.isin(("join", "leave"))]
    if rows.empty:
        return ""
    out = ["**Herd: one join, one leave, per group size N** (the window of each change until convergence; "
           "\"group requests\" are every group API call the coordinator served, `coordinator_request`, whichever "
           "listener it came on; \"rounds\" the generations some member adopted, a real client's read from the "
           "library: kafka-python's own, librdkafka's group metadata; the finding compares the stop, and shows the "
           "rounds beside it, `catalogue/herd.py: _like_the_labs_consumer`):"]
    for change in ("join", "leave"):
        c = _labelled(rows[rows.change == change])
        out.append(f"*{change}*\n\n" + table(["design", *(label for _, label in HERD_TABLE)], _rows(c, HERD_TABLE)))
    return "\n\n".join(out)


def _zombie(ok: pd.DataFrame) -> str:
    rows = ok[(ok.experiment == zombie.NAME) & (ok.variant == "pause")]
    if rows.empty:
        return ""
    t = _labelled(zombie.per_trial(rows))
    return ("**Zombie: `c1` paused past its session timeout, then resumed** (the trial's figures; "
            "\"coordinator's fencing answers\" are its answers with ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, "
            "FENCED_INSTANCE_ID or FENCED_MEMBER_EPOCH to anyone, `requests_fenced`; a commit is `fenced` when the "
            "client's commit callback got one of them):\n\n"
            + table(["design", *(label for _, label in ZOMBIE_TABLE)], _rows(t, ZOMBIE_TABLE)))


def _storm(ok: pd.DataFrame) -> str:
    rows = ok[ok.experiment == storm.NAME]
    if rows.empty:
        return ""
    t = _labelled(storm.per_trial(rows))
    return ("**Storm: a rolling restart of the whole group** (the N restarts summed):\n\n"
            + table(["design", "N", *(label for _, label in STORM_TABLE)],
                    _rows(t, STORM_TABLE, first=("label", "consumers"))))


def _reading(ok: pd.DataFrame) -> str:
    """What the herd's tables say, computed from them: the requests per change of each real client against the
    lab consumer's at the same N and change, and where the rounds differ."""
    rows = ok[(ok.experiment == herd.NAME) & ok.change.isin(("join", "leave"))]
    ours = rows[rows.design == "classic"].set_index(["consumers", "change"])
    lines = []
    for design in REAL_CLIENTS:
        theirs = rows[rows.design == design].set_index(["consumers", "change"])
        both = theirs.index.intersection(ours.index)
        if both.empty:
            continue
        ratio = theirs.loc[both, "broker_requests_per_change"] / ours.loc[both, "broker_requests_per_change"]
        differ = [f"N={n} {c} ({theirs.loc[(n, c), 'generations']:.0f} against {ours.loc[(n, c), 'generations']:.0f})"
                  for n, c in sorted(both) if theirs.loc[(n, c), "generations"] != ours.loc[(n, c), "generations"]]
        lines.append(f"- {STYLE[design][1]}: {ratio.min():.2f} to {ratio.max():.2f} times the lab consumer's group "
                     f"requests per change; its rounds differ from the lab consumer's at "
                     f"{', '.join(differ) if differ else 'no change'}.")
    if not lines:
        return ""
    return ("**Reading the herd's tables** (computed from them; where a client ran a round more, the trial's "
            "coordinator events, `group_state`, say which member rejoined after the round had completed: in the one "
            "trial examined, a kafka-python member right after its SyncGroup; kafka-python rejoins on any "
            "REBALANCE_IN_PROGRESS answer to a heartbeat, where Java's client ignores it unless stable, a plausible "
            "cause not proven here):\n\n" + "\n".join(lines))


def _their_findings(summary: pd.DataFrame) -> list[Finding]:
    """The findings of herd, zombie and storm about a real client (ids starting with its design's name)."""
    out = []
    for experiment in (herd, zombie, storm):
        rows = summary[summary.experiment == experiment.NAME]
        if rows.empty:
            continue
        out += [f for f in experiment.findings(rows) if design_of(f.id) in REAL_CLIENTS]
    return out
