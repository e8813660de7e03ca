"""The soak section of the report: each design under a seeded random mix of faults, and its invariants.

Rendered from the run's stored results only (`experiment.StoredRun`).
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import soak
from experiments.engine.experiment import StoredRun
from experiments.report.parts import Section, findings_list, reproduce_line, table

TABLE = [("design", "design"), ("seed", "seed"), ("status", "status"), ("gaps", "records lost"),
         ("duplicates", "duplicates"), ("offsets_moved_backwards", "offsets backwards"),
         ("double_owned_partition_s", "double-owned p-s"), ("converged_last", "converged after the last")]


def soak_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    t = soak.per_trial(summary)
    broken = soak.violations(summary)
    sequences = table(["trial", "steps, in order"], [(r.trial, f"`{r.changes}`") for r in t.itertuples()])
    setup = [("designs", ", ".join(dict.fromkeys(t.design))),
             ("group", f"N = {run.spec(soak.NAME, 'consumers')}, each in its own process; "
                       f"P = {run.spec(soak.NAME, 'partitions')}; a producer writes "
                       f"{run.spec(soak.NAME, 'rate')} records/s per partition"),
             ("ZooKeeper", f"{run.spec(soak.NAME, 'zk_servers')} servers, a follower lagging its leader by "
                           f"{run.spec(soak.NAME, 'follower_delay_ms')} ms throughout"),
             ("faults", "drawn by the nemesis from the trial's seed (`soak.nemesis`), each followed by its "
                        "repair, one at a time once the group has converged"),
             ("seeds", f"{summary.seed.nunique()} per design")]
    short = f"""**Each trial's invariants** (records lost: produced at or below the highest offset processed, never
processed; offsets backwards: accepted commits lower than one before them):

{table([label for _, label in TABLE], t[[c for c, _ in TABLE]].itertuples(index=False))}"""
    takeaway = ("Invariants broken, each with the faults that led to it:\n\n" + "\n".join(f"- {v}" for v in broken)
                if broken else "No invariant was broken: every record was processed, no fencing design's offset "
                "moved backwards, and every group converged after its last fault. Double ownership is measured, "
                "not asserted: a paused or cut member believes it owns its partitions until it hears otherwise, "
                "in every design here.")
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

**The fault sequences** (replayed exactly from the seed):

{sequences}"""
    return Section("Soak", soak.QUESTION, findings_list(soak.findings(summary)), "", short, takeaway,
                   reproduce_line(soak.NAME, run.env), appendix, "experiments/catalogue/soak.py: findings")
