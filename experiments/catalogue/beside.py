"""The real systems beside the lab's designs: how far a real design lands from its lab counterpart.

A real system's design (`Family.counterpart`, `real_systems/`) runs in an experiment wherever its counterpart
does, on the same grid. Its qualitative findings are its counterpart's, judged on its own trials; `beside`
adds one quantitative finding per change: for each measure, at every N both ran (from `min_n` on), the real
system's figure is within the stated tolerance of the lab design's. The tolerances are stated here, before a
run, with the reason for each; a finding that fails is a disagreement to explain (`docs/experiments.md`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from experiments.engine.families import FAMILIES
from experiments.engine.finding import Finding


@dataclass(frozen=True)
class Measure:
    metric: str  # a column of the summary (`experiments/metrics.py`)
    what: str  # how the finding names it
    tolerance: float  # |real - lab| <= tolerance x lab (0: equal) ...
    min_n: int = 0  # judged at N >= min_n; smaller groups are shown, not judged
    absolute: float = 0.0  # ... or <= this much, whichever is more


def per_n(summary: pd.DataFrame, experiment: str, design: str, change: str, metric: str) -> pd.Series:
    """Per N, the mean of `metric` over `design`'s ok windows of `change`."""
    rows = summary[(summary.experiment == experiment) & (summary.design == design) & (summary.change == change)
                   & (summary.status == "ok")]
    return rows.groupby("consumers")[metric].mean().sort_index()


def within(real: float, lab: float, tolerance: float, absolute: float = 0.0) -> bool:
    """Whether `real` is within `tolerance` (relative) of `lab`, or within `absolute` of it.

    >>> within(1838, 1845, 0.15), within(244, 297, 0.15), within(3, 3, 0), within(3, 4, 0, absolute=1)
    (True, False, True, True)
    """
    return abs(real - lab) <= max(tolerance * abs(lab), absolute)


def beside(summary: pd.DataFrame, experiment: str, real: str, change: str, measures: tuple[Measure, ...],
           *, at_least: int = 3) -> Finding:
    """`real`'s figures beside its counterpart's, per N, for one kind of change: the finding holds when at least
    `at_least` group sizes were judged and every judged pair is within its measure's tolerance."""
    lab = FAMILIES[real].counterpart
    parts, ok, judged = [], True, set()
    for m in measures:
        theirs = per_n(summary, experiment, real, change, m.metric)
        ours = per_n(summary, experiment, lab, change, m.metric)
        pairs = []
        for n in [n for n in theirs.index if n in ours.index]:
            counted = n >= m.min_n
            if counted:
                judged.add(n)
                ok = ok and within(theirs.loc[n], ours.loc[n], m.tolerance, m.absolute)
            pairs.append(f"N={n}: {theirs.loc[n]:,.0f} vs {ours.loc[n]:,.0f}" + ("" if counted else " (shown)"))
        parts.append(f"{m.what}: " + (", ".join(pairs) or "no trial of both"))
    stated = "; ".join(f"{m.what} within ±{m.tolerance:.0%}" + (f" or {m.absolute:,g}" if m.absolute else "")
                       if m.tolerance else f"{m.what} within {m.absolute:g}" if m.absolute else f"{m.what} equal"
                       for m in measures)
    smallest = max(m.min_n for m in measures)
    return Finding(f"{real}-{change}-beside-{lab}",
                   f"{FAMILIES[real].label}, {change}: within the stated distance of the lab's {lab} ({stated}"
                   + (f", at N >= {smallest}" if smallest else "") + ")",
                   bool(ok and len(judged) >= at_least), "real vs lab, " + "; ".join(parts))
