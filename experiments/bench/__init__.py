"""Benchmarks (`python -m experiments bench ...`): speed, scale and memory, written to files, never asserted."""
