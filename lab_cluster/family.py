"""What the lab needs to know of a consumer family to run, watch and report it: its `Family` descriptor.

Each family package exports one (`legacy_zk.FAMILY`, `modern_coord.FAMILY`)
and `experiments/families.py` lists them: the trial runner starts a family's
consumers through `host_module`, tells them where the cluster is by `address`,
reads read-from-the-start config from `from_beginning`, knows a member has
settled when it reports `settled_state`, and cuts a victim's `victim_link`;
the report draws it in `colour` under `label`. Nothing outside the family
package and that list names a family.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Family:
    name: str  # the `design` of traces, specs and summaries, e.g. "legacy"
    label: str  # how the report names it, e.g. "ZooKeeper era (legacy_zk)"
    colour: str  # matplotlib colour of its lines and bars
    host_module: str  # `python -m <host_module>` runs N of its consumers and prints their state lines
    address: str  # "zk": its consumers are given a ZooKeeper connect string; "bootstrap": brokers
    settled_state: str  # the state a member reports once it consumes its share
    victim_link: str  # the link a `cut` blackholes: "zk" (its own ZooKeeper link) or "coordinator"
    #: the config that makes a consumer read from the start of the log (every produced record is one to process)
    from_beginning: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if self.address not in ("zk", "bootstrap") or self.victim_link not in ("zk", "coordinator"):
            raise ValueError(f"family {self.name}: address must be zk or bootstrap, victim_link zk or coordinator")
