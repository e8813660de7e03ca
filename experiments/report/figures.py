"""Timelines: for each partition, which consumer processed it when, with the faults and rebalances marked.

Drawn from a run's `timelines.csv` (stretches of processing, `metrics.timelines`)
and `marks.csv` (the scenario's changes and faults, the consumers'
rebalances). Each consumer has its own colour and its own lane inside a
partition's row, so two consumers processing one partition at once show as
two bars side by side: double ownership seen, not read off a number.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FAULT_COLOR = "tab:red"


def draw(ax, stretches: pd.DataFrame, marks: pd.DataFrame, title: str) -> None:
    actors = sorted(stretches.actor.unique(), key=lambda a: (a[0] != "c", a))
    colors = {a: plt.cm.tab10(i % 10) for i, a in enumerate(actors)}
    lane = 0.8 / max(1, len(actors))
    for i, actor in enumerate(actors):
        rows = stretches[stretches.actor == actor]
        for r in rows.itertuples():
            width = max(r.stop_s - r.start_s, 0.05)
            ax.broken_barh([(r.start_s, width)], (r.partition - 0.4 + i * lane, lane * 0.9), color=colors[actor])
        ax.plot([], [], color=colors[actor], linewidth=6, label=actor)
    top = stretches.partition.max() + 0.6 if not stretches.empty else 1
    for m in marks.itertuples():
        if m.kind == "fault":
            ax.axvline(m.t_s, color=FAULT_COLOR, linewidth=1.5)
            ax.text(m.t_s, top, f" {m.label}", color=FAULT_COLOR, fontsize=7, rotation=90, va="bottom")
        elif m.kind in ("change", "membership"):
            ax.axvline(m.t_s, color="grey", linestyle="--", linewidth=0.8)
            ax.text(m.t_s, top, f" {m.label}", color="grey", fontsize=7, rotation=90, va="bottom")
        elif m.kind in ("converged", "not_converged"):
            ax.axvline(m.t_s, color="tab:green" if m.kind == "converged" else "black", linestyle=":", linewidth=1)
    rebalances = marks[marks.kind == "assigned"]
    ax.plot(rebalances.t_s, [-0.75] * len(rebalances), "k|", markersize=8, label="a consumer's assignment")
    told = marks[marks.kind.isin(["session_expired", "generation_reset", "commit_fenced"])]
    ax.plot(told.t_s, [-0.75] * len(told), "rx", markersize=6, label="session expired / fenced")
    ax.set_ylim(-1.1, top + 0.2)
    ax.set_yticks(sorted(stretches.partition.unique()) if not stretches.empty else [])
    ax.set_ylabel("partition")
    ax.set_xlabel("seconds since the trial's set-up")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def figure(panels: list[tuple[str, str]], stretches: pd.DataFrame, marks: pd.DataFrame, path: Path) -> Path:
    """One figure, one panel per (trial id, title), stacked."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.6 * len(panels)), constrained_layout=True, squeeze=False)
    for ax, (trial, title) in zip(axes.flat, panels, strict=True):
        draw(ax, stretches[stretches.trial == trial], marks[marks.trial == trial], title)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return path
