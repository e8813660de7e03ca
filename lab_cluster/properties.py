"""Kafka-style `key=value` settings: parsing `--config` pairs and converting values, for every lab component.

    >>> parse_overrides(["session.timeout.ms=6000", "enable.auto.commit = false"])
    {'session.timeout.ms': '6000', 'enable.auto.commit': 'false'}
    >>> convert_property("enable.auto.commit", "false", bool)
    False
    >>> camel_key("heartbeat_broker_interval")
    'heartbeatBrokerInterval'
    >>> parse_addresses("127.0.0.1:9092, 127.0.0.1:9093")
    [('127.0.0.1', 9092), ('127.0.0.1', 9093)]
    >>> parse_routes("127.0.0.1:9092=127.0.0.1:40001")
    {('127.0.0.1', 9092): ('127.0.0.1', 40001)}
"""

from __future__ import annotations

from dataclasses import fields

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


def field_values(config_class, props: dict, key_of, required: tuple[str, ...]) -> dict:
    """Kafka-keyed `props` as typed field values of the dataclass `config_class`.

    `key_of(field_name)` gives a field's key; an unknown key, a value of the
    wrong type or a missing required key is a LabError naming what is allowed.
    """
    by_key = {key_of(f.name): f for f in fields(config_class)}
    unknown = sorted(set(props) - set(by_key))
    if unknown:
        raise LabError(f"Unknown consumer config key(s): {', '.join(unknown)}.",
                       f"Known keys: {', '.join(sorted(by_key))}.")
    values = {by_key[k].name: convert_property(k, v, by_key[k].type) for k, v in props.items()}
    for key in required:
        if not values.get(by_key[key].name):
            raise LabError(f"Consumer config needs {key}.", f"Set {key}.")
    return values


def check_all(checks: list[tuple[bool, str]]) -> None:
    """Raise one LabError listing every failed (ok, why) check."""
    bad = [why for ok, why in checks if not ok]
    if bad:
        raise LabError(f"Invalid consumer config: {'; '.join(bad)}.", "Fix the value(s) and try again.")


def parse_addresses(text: str) -> list[tuple[str, int]]:
    """`host:port,host:port,...` as [(host, port)]; ValueError if an entry is not host:port."""
    out = []
    for entry in text.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host:
            raise ValueError(f"{entry.strip()!r} is not host:port")
        out.append((host, int(port)))
    return out


def parse_routes(text: str) -> dict[tuple[str, int], tuple[str, int]]:
    """`host:port=host:port,...` (a server's address, then the address to reach it through) as a dict; empty
    text: no route. ValueError if an entry is malformed."""
    out = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        server, sep, via = entry.partition("=")
        if not sep:
            raise ValueError(f"{entry!r} is not host:port=host:port")
        (address,), (proxy,) = parse_addresses(server), parse_addresses(via)
        out[address] = proxy
    return out


def valid_addresses(text: str) -> bool:
    """True when `text` is a non-empty `host:port,...` list with ports in range (a config check)."""
    try:
        return all(0 < port < 65536 for _, port in parse_addresses(text))
    except ValueError:
        return False


def valid_routes(text: str) -> bool:
    """True when `text` is empty or a well-formed `host:port=host:port,...` list (a config check)."""
    try:
        parse_routes(text)
        return True
    except ValueError:
        return False


def camel_key(field_name: str, exceptions: dict[str, str] | None = None) -> str:
    """The camelCase config key of a snake_case field, as RocketMQ's and TubeMQ's configs name them, unless
    `exceptions` names it otherwise (a system property, an acronym, a lab-only key)."""
    if exceptions and field_name in exceptions:
        return exceptions[field_name]
    head, *rest = field_name.split("_")
    return head + "".join(word.capitalize() for word in rest)
