"""A full-profile run joins the published report after its experiment's quick section, and stays there.

The published report is copied into `tmp_path` and the module's paths pointed at the copy, so nothing here
writes the lab's own REPORT.md. The "full run" is the published run's herd trials under a full profile's
environment: what matters here is where its section goes and what publishing refuses, not its figures. So each
figure is saved as a placeholder file here, not drawn (`figures_not_drawn`): drawing is most of a render's time
(about 15 of 25 s here), and this module renders four times. Figures are drawn and checked in `test_herd.py`,
`test_zombie.py` and `test_main_job.py`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pytest

from experiments.report import full_runs, published
from experiments.report.render import render
from lab_cluster.errors import LabError

FULL_HEADING = "## Herd at full size: N up to 32"


@pytest.fixture(autouse=True)
def figures_not_drawn(monkeypatch):
    """Every figure saved as a small placeholder file where the report links it, its drawing skipped."""
    def placeholder(figure, path, *args, **kwargs):
        Path(path).write_bytes(b"not drawn: tests/test_full_runs.py checks the report's text, not its figures")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", placeholder)


@pytest.fixture
def published_copy(tmp_path, monkeypatch) -> Path:
    """A copy of the published report (REPORT.md and report/, without any full run's sources) that publishing
    writes."""
    root = tmp_path / "lab"
    shutil.copytree(published.SOURCES, root / "report", ignore=shutil.ignore_patterns(full_runs.FULL))
    shutil.copyfile(published.REPORT, root / "REPORT.md")
    monkeypatch.setattr(published, "SOURCES", root / "report")
    monkeypatch.setattr(published, "REPORT", root / "REPORT.md")
    return root


def _run(tmp_path: Path, name: str, *, profile: str, experiment: str = "herd", **env_changes) -> Path:
    run_dir = tmp_path / name
    shutil.copytree(published.SOURCES, run_dir, ignore=shutil.ignore_patterns("figures", full_runs.FULL))
    summary = pd.read_csv(run_dir / "summary.csv")
    summary[summary.experiment == experiment].to_csv(run_dir / "summary.csv", index=False)
    env = json.loads((run_dir / "environment.json").read_text())
    env.update(profile=profile, command=f"python -m experiments run {experiment} --profile {profile}", **env_changes)
    (run_dir / "environment.json").write_text(json.dumps(env))
    return run_dir


def _bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_full_profile_run_follows_its_quick_section_and_stays_when_a_quick_run_is_published(
        tmp_path, published_copy):
    render(published.SOURCES, published.REPORT)  # as published before any full run
    before = published.REPORT.read_text()
    full_run = _run(tmp_path, "full", profile="full", date="2026-12-01T00:00:00+00:00")
    published.publish(full_run)

    report = published.REPORT.read_text()
    stored = published.SOURCES / full_runs.FULL / "herd"
    assert (stored / "summary.csv").read_bytes() == (full_run / "summary.csv").read_bytes()
    assert (published.SOURCES / "figures" / "herd-full.png").exists()
    herd, full, split = report.index("## Herd: "), report.index(FULL_HEADING), report.index("## Split brain: ")
    assert herd < full < split
    section = report[full:split]
    assert "2026-12-01T00:00:00+00:00" in section and "`python -m experiments run herd --profile full`" in section
    assert "![herd at full size: cost of one change against N](report/figures/herd-full.png)" in section
    assert "❌" not in section  # the published run's findings hold on its own herd trials
    # the rest of the report after its first screen (whose figure and sentences now read the full run) is the
    # quick run's, byte for byte
    body = report.index("## Herd\n")
    assert "(the herd's full-profile run)" in report[:body] and "At N = 32, one join cost" in report[:body]
    assert report[body:full] + report[split:] == before[before.index("## Herd\n"):]

    # a quick run published later replaces the report, and the full run stays in it
    published.publish(_copy_of_sources(tmp_path))
    assert FULL_HEADING in published.REPORT.read_text()
    assert (stored / "summary.csv").exists()

    # a run's own report, rendered from a copy of the published sources, is the published one
    copy = _copy_of_sources(tmp_path, "copy", keep_full=True)
    assert render(copy).read_text() == published.REPORT.read_text()


def _copy_of_sources(tmp_path: Path, name: str = "sources", keep_full: bool = False) -> Path:
    ignored = ("figures",) if keep_full else ("figures", full_runs.FULL)
    shutil.copytree(published.SOURCES, tmp_path / name, ignore=shutil.ignore_patterns(*ignored))
    return tmp_path / name


def test_publishing_a_full_run_refuses_failed_trials_uncommitted_code_and_experiments_without_a_full_section(
        tmp_path, published_copy):
    failed = _run(tmp_path, "failed", profile="full")
    summary = pd.read_csv(failed / "summary.csv")
    summary["reason"] = summary["reason"].astype(object)
    summary.loc[summary.consumers == 32, ["status", "reason"]] = ["invalid", "a host woke 4,000 ms late"]
    summary.to_csv(failed / "summary.csv", index=False)
    dirty = _run(tmp_path, "dirty", profile="full", lab_commit="abc+dirty")
    zombie = _run(tmp_path, "zombie", profile="full", experiment="zombie")
    before = _bytes(published_copy)
    for run_dir, why in ((failed, "trials failed or were invalid"), (dirty, "code that was not committed"),
                         (zombie, "no full-profile section for zombie")):
        with pytest.raises(LabError) as info:
            published.publish(run_dir)
        assert "cannot be published as a full-profile run" in info.value.problem and why in info.value.problem
    assert "a host woke 4,000 ms late" in _refusal(failed)
    assert _bytes(published_copy) == before


def _refusal(run_dir: Path) -> str:
    return "; ".join(published.refusals(run_dir))
