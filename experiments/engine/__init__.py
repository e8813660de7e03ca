"""What runs trials: the spec and runner, steps, group watch, families, harness, slots, run store.

See `experiments/__init__.py` for the layers; `docs/learn.md` follows one rebalance
through the modules.
"""
