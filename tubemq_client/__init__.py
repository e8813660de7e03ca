"""Apache InLong TubeMQ's client balance (`ClientBalanceConsumer`), a family still to build: DESIGN.md §3c.

Each node is started with the group's node count (`sourceCount`) and its own
`nodeId`, and takes the partitions whose key hashes to its id: no membership
at all (`lab_cluster/assignment/tubemq.py`). The broker fences: one holder
per group and partition, and only the holder may fetch or commit.

Built so far (issue 16), without I/O:

- `broker/registrations.py`: the broker's registrations, its refusals
  (PARTITION_OCCUPIED, HB_NO_NODE, DUPLICATE_PARTITION, UNAUTHORIZED) and the
  30 s release of a silent holder.

The client, the master, the broker plug-in and `FAMILY` come next; until then
the family is not in the registry (`experiments/engine/families.py`).
"""
