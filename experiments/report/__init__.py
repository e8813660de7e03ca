"""REPORT.md from a stored run: `render.py` (the document), `parts.py` (tables, styles), `figures.py`
(timelines), one prose module per experiment family of sections (`herd.py`, `faults.py`), and
`published.py` (what may be published, and how a new run compares with the published one)."""
