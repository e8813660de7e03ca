"""Every consumer family the lab runs: the one place a family is registered (`lab_cluster/family.py`).

Adding a family: its package (exporting a `FAMILY`), and one line here.
"""

from __future__ import annotations

import legacy_zk
import modern_coord
from lab_cluster.family import Family

FAMILIES: dict[str, Family] = {f.name: f for f in (
    legacy_zk.FAMILY,
    modern_coord.FAMILY,
)}
