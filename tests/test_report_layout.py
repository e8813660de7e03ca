"""The report answers first: where the published REPORT.md puts its headline, its first figure and its appendices,
and that every design is drawn its own way in every figure.

These read the committed REPORT.md (rendered from the stored run in `report/`) and the family registry; they
run no trial.
"""

from __future__ import annotations

from pathlib import Path

from experiments.engine.families import FAMILIES
from experiments.report.parts import Section, anchor

REPORT = Path(__file__).resolve().parents[1] / "REPORT.md"


def _lines() -> list[str]:
    return REPORT.read_text().splitlines()


def test_every_design_has_a_colour_and_a_marker_of_its_own():
    colours = [f.colour for f in FAMILIES.values()]
    markers = [f.marker for f in FAMILIES.values()]
    assert len(set(colours)) == len(colours), f"two designs share a colour: {colours}"
    assert len(set(markers)) == len(markers), f"two designs share a marker: {markers}"


def test_the_headline_table_is_on_the_first_screen():
    first_row = next(i for i, line in enumerate(_lines(), 1) if line.startswith("| design |"))
    assert first_row <= 30


def test_the_first_figure_is_on_the_first_screen():
    first_figure = next(i for i, line in enumerate(_lines(), 1) if line.startswith("!["))
    assert first_figure <= 45
    assert "headline.png" in _lines()[first_figure - 1]


def test_the_body_before_the_appendices_is_at_most_510_lines():
    """The first screen and ten experiments' answers, each in about fifty lines (500 for nine, until the growth
    experiment's section came; its results are one line, not a table, to keep it short)."""
    lines = _lines()
    assert "# Appendices" in lines
    assert lines.index("# Appendices") <= 510


def test_every_link_inside_the_report_has_its_heading():
    text = REPORT.read_text()
    headings = {anchor(line.lstrip("#").strip()) for line in text.splitlines() if line.startswith("#")}
    links = {part.split(")")[0] for part in text.split("](#")[1:]}
    assert links, "the report links to none of its parts"
    assert {f"#{link}" for link in links} <= headings


def test_a_section_links_its_body_to_its_appendix():
    s = Section("Herd", "Q?", "- ✅ a", "![f](f.png)", "| t |", "Because.", "**Reproduce:** `x`.", "Set-up.")
    assert "(#herd-set-up-and-every-result)" in s.body()
    assert s.appendix_section().startswith("## Herd: set-up and every result")


def test_a_sections_mechanism_opens_its_appendix_and_its_body_keeps_the_short_answer():
    s = Section("Herd", "Q?", "- ✅ a", "", "| t |", "Short.", "**Reproduce:** `x`.", "Set-up.", why="Step by step.")
    assert "**What to take from it.** Short." in s.body() and "Step by step" not in s.body()
    assert "Why, step by step; the set-up" in s.body()
    assert s.appendix_section() == "## Herd: set-up and every result\n\n**Why, in detail.** Step by step.\n\nSet-up."


def test_no_tracked_report_text_cites_a_path_outside_the_repository():
    text = REPORT.read_text()
    outside = ("/".join(["..", "shared"]), "DESIGN" + ".md")  # the design notes the lab began from, not shipped
    assert not any(path in text for path in outside)
