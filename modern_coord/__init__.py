"""The coordinator-era consumer and group coordinator, after Kafka's classic protocol.

A broker-hosted coordinator owns membership and generations; one member
computes the assignment: DESIGN.md §3.

- `coordinator/`: the group coordinator (`group.py` states, `coordinator.py`
  the state machine, `scheduler.py` its timers, `service.py` the broker plug-in);
- `consumer.py`, `member.py`, `heartbeat.py`, `fetcher.py`, `config.py`: the client;
- its assignors (range, round-robin, sticky) are shared: `lab_cluster/assignment/`;
- `host.py`: N consumers in a process, or one process per consumer.
"""

from lab_cluster.family import Family

FAMILY = Family("modern", "coordinator era (modern_coord)", "tab:blue", host_module="modern_coord.host",
                address="bootstrap", settled_state="stable", victim_link="coordinator",
                from_beginning={"auto.offset.reset": "earliest"})
