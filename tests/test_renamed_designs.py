"""The designs' old names (`legacy`, `modern`, ...) still work: stored runs read under today's names, and the
command line takes either (`experiments/engine/families.py: RENAMED`)."""

from __future__ import annotations

import json

from experiments.catalogue import herd
from experiments.cli.run import _designs
from experiments.engine.families import FAMILIES, RENAMED
from experiments.report import published, render


def test_every_new_name_is_a_registered_design_and_no_old_one_is():
    assert set(RENAMED.values()) <= set(FAMILIES)
    assert not set(RENAMED) & set(FAMILIES)


def test_a_published_run_stored_under_the_old_names_reads_under_todays():
    """The full herd run the report keeps (`report/full/herd/`) was made before the renaming."""
    sources = published.SOURCES / "full" / "herd"
    stored = {row["design"] for row in json.loads((sources / "grid.json").read_text())}
    assert {"legacy", "modern", "modern-kip848"} <= stored
    summary, _, configs, grid = render.load(sources)
    assert set(summary.design) <= set(FAMILIES) and {"zookeeper", "classic", "consumer-848"} <= set(summary.design)
    assert set(configs) <= set(FAMILIES) and {spec["design"] for spec in grid} <= set(FAMILIES)
    assert set(published.read_summary(sources / "summary.csv").design) == set(summary.design)


def test_the_command_line_takes_an_old_name_and_says_so(capsys):
    assert _designs("legacy,modern-kip848", herd.EXPERIMENT, "standard") == ("zookeeper", "consumer-848")
    assert "'legacy' is now called 'zookeeper'" in capsys.readouterr().out
