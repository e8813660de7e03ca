"""Kafka-style `key=value` settings: parsing `--config` pairs and converting values, for every lab component.

    >>> parse_overrides(["session.timeout.ms=6000", "enable.auto.commit = false"])
    {'session.timeout.ms': '6000', 'enable.auto.commit': 'false'}
    >>> convert_property("enable.auto.commit", "false", bool)
    False
"""

from __future__ import annotations

from .errors import LabError


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LabError(f"--config {pair!r} is not KEY=VALUE.", "Write it like session.timeout.ms=6000.")
        out[key.strip()] = value.strip()
    return out


def convert_property(key: str, value, kind):
    """`value` (a string from the command line, or already typed) as `kind` (int, bool or str)."""
    try:
        if kind in ("int", int):
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if kind in ("bool", bool):
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError
        return str(value)
    except (TypeError, ValueError):
        raise LabError(f"Consumer config {key}={value!r} is not a valid {getattr(kind, '__name__', kind)}.",
                       "Fix the value and try again.") from None
