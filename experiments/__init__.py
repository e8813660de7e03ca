"""The lab's experiments and its command line (`python -m experiments`).

For now: `doctor` (what can run here) and `zk up` (a ZooKeeper to poke at),
and the `bench zk` benchmark. The trial runner, the Spark harness and the
experiments of DESIGN.md §5 join here.
"""
