"""What runs trials: the spec and runner, steps, group watch, families, harness, slots, run store.

See `experiments/__init__.py` for the layers; the README follows one trial
through these modules end to end.
"""
