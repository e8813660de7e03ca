"""What every figure of the report shares: each design's colour and marker, log axes that never hide a zero,
guide lines for the growth a finding claims, legends outside the data.

Each design draws in its family's `colour` with its `marker` (`lab_cluster/family.py`), so one design looks
the same in every figure; a test checks both are unique per design.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.engine.families import FAMILIES  # noqa: E402

GUIDE_COLOUR = "0.45"


def look(design: str) -> dict:
    """matplotlib keywords that draw `design`: its colour, marker and label."""
    family = FAMILIES[design]
    return {"color": family.colour, "marker": family.marker, "label": family.label}


def log_series(ax, series: pd.Series, design: str, linestyle: str = "-", label: str | None = None) -> str:
    """Plot the positive values of `series` (index: N) on a log axis; returns where it was 0, which a log axis
    cannot show ("" if nowhere; "N = 2, 4" or "every N"), for the caller to say with `note_zeros`."""
    positive = series[series > 0]
    style = look(design) | ({"label": label} if label else {})
    if not positive.empty:
        ax.plot(positive.index, positive.values, linestyle=linestyle, **style)
    zero = series[series == 0].index
    if len(zero) == 0:
        return ""
    return "every N" if len(zero) == len(series) else "N = " + ", ".join(f"{n:g}" for n in zero)


def note_zeros(ax, names: list[str]) -> None:
    """Say under the panel (after its x label: call it last) which series were 0 where a log axis draws nothing,
    each "design, change: where" grouped by where, so the note never covers the data."""
    if not names:
        return
    by_where: dict[str, dict[str, list[str]]] = {}  # {where: {design: [its changes]}}
    for name in names:
        what, _, where = name.rpartition(": ")
        design, _, change = what.partition(", ")
        by_where.setdefault(where, {}).setdefault(design, []).extend([change] if change else [])
    lines = [f"0 at {where} (not drawn): " + ", ".join(f"{d} ({'/'.join(c)})" if c else d for d, c in designs.items())
             for where, designs in by_where.items()]
    ax.set_xlabel(ax.get_xlabel() + "\n" + "\n".join(textwrap.fill(line, 70) for line in lines), fontsize=8)


def guide(ax, ns, values, power: int, text: str) -> None:
    """A dashed guide c·N^power fitted (least squares in log space) to the positive (N, value) pairs, named
    `text` in the legend: the growth a finding claims, drawn beside the data it is judged on."""
    pairs = [(n, v) for n, v in zip(ns, values, strict=True) if v and v > 0]
    if len(pairs) < 2:
        return
    c = math.exp(sum(math.log(v) - power * math.log(n) for n, v in pairs) / len(pairs))
    xs = [pairs[0][0], pairs[-1][0]]
    dashes = (0, (6, 3)) if power == 2 else (0, (1.5, 2.5))  # N² dashed, N dotted: two guides, told apart
    ax.plot(xs, [c * x ** power for x in xs], linestyle=dashes, color=GUIDE_COLOUR, linewidth=1.2, label=text,
            zorder=1)


def legend_outside(fig, axes, ncol: int = 1, loc: str = "outside right upper") -> None:
    """One legend for the figure, outside the panels (right, or `loc`), with every label once."""
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc=loc, fontsize=8, ncol=ncol)


def all_zero(values) -> bool:
    """Whether a panel would show nothing but zeros (or nothing at all): replace it by a sentence."""
    values = pd.Series(list(values), dtype=float).dropna()
    return values.empty or bool((values == 0).all())


def save(fig, path) -> None:
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def drawn_and_zero(panels: list[tuple[str, str]], values) -> tuple[list[tuple[str, str]], str]:
    """Split (metric, title) panels into those to draw and a sentence for those that would show only zeros:
    `values(metric)` gives every value a panel would draw."""
    drawn = [(m, t) for m, t in panels if not all_zero(values(m))]
    zero = [t for m, t in panels if (m, t) not in drawn]
    return drawn, (f"*Not drawn, 0 for every design here: {'; '.join(zero)}.*" if zero else "")


def integer_ticks(ax, values) -> None:
    """Whole-number ticks on the y axis where every value is a count (no 0.5 of a rebalance)."""
    from matplotlib.ticker import MaxNLocator

    values = pd.Series(list(values), dtype=float).dropna()
    if not values.empty and bool((values == values.round()).all()):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
