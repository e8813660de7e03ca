"""ZooKeeper's four-letter words, sent over a plain socket and parsed into dicts.

A four-letter word is four ASCII bytes written to a server's client port; the
server answers with text and closes the connection. The lab's servers allow
all of them (`4lw.commands.whitelist=*`). They are the server's own view, which
the lab compares with what its clients recorded:

- `ruok` -> ``{"ok": True}`` when the server answers ``imok``;
- `srvr` -> ``{"version": "3.9.5-…", "mode": "leader", "zxid": 4294967298, …}``;
- `mntr` -> ``{"zk_version": "…", "zk_watch_count": 3, "zk_packets_sent": 41, …}``
  (numbers as ints or floats, like the server's own keys);
- `wchc` -> ``{"0x10000a3f2d0000": ["/brokers/topics/t", …], …}`` (watches by session).
  Beware: ZooKeeper 3.9's `wchc` (like `wchs` and `wchp`) lists *data* watches
  only (those set by getData/exists); child watches (getChildren, the ones on
  `/consumers/<g>/ids`) are missing from it, while `mntr`'s `zk_watch_count`
  counts both kinds. The lab's cross-checks use each counter for what it counts;
- `cons` -> ``[{"address": "127.0.0.1:51234", "sid": "0x1000…", "queued": 0, …}, …]``.

Usage::

    srvr("127.0.0.1", 2181)["mode"]     # -> 'standalone'
"""

from __future__ import annotations

import re
import socket

from .errors import LabError

NOT_SERVING = "This ZooKeeper instance is not currently serving requests"


def send(host: str, port: int, word: str, timeout_s: float = 3.0) -> str:
    """Send one four-letter word and return the server's whole answer."""
    if len(word) != 4:
        raise ValueError(f"a four-letter word has four letters, not {word!r}")
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
    except OSError as exc:
        raise LabError(
            f"ZooKeeper at {host}:{port} did not answer '{word}' ({exc.__class__.__name__}: {exc}).",
            "Check that the server is running and that this is its client port.",
        ) from None
    return b"".join(chunks).decode("utf-8", errors="replace")


def ruok(host: str, port: int, timeout_s: float = 3.0) -> dict:
    return parse_ruok(send(host, port, "ruok", timeout_s))


def srvr(host: str, port: int, timeout_s: float = 3.0) -> dict:
    return parse_srvr(send(host, port, "srvr", timeout_s))


def mntr(host: str, port: int, timeout_s: float = 3.0) -> dict:
    return parse_mntr(send(host, port, "mntr", timeout_s))


def wchc(host: str, port: int, timeout_s: float = 3.0) -> dict:
    return parse_wchc(send(host, port, "wchc", timeout_s))


def cons(host: str, port: int, timeout_s: float = 3.0) -> list[dict]:
    return parse_cons(send(host, port, "cons", timeout_s))


def parse_ruok(text: str) -> dict:
    return {"ok": text.strip() == "imok"}


def _number(value: str):
    """Turn '12' into 12, '0.5' into 0.5, '0x1f' into 31, and leave other text alone."""
    try:
        return int(value, 0) if value.lower().startswith("0x") else int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


def parse_srvr(text: str) -> dict:
    """Parse `srvr`. A server that is up but not serving answers NOT_SERVING.

    >>> parse_srvr("Zookeeper version: 3.9.5-abc, built on x\\nZxid: 0x100000002\\nMode: follower\\n")
    {'serving': True, 'version': '3.9.5-abc, built on x', 'zxid': 4294967298, 'mode': 'follower'}
    """
    if NOT_SERVING in text:
        return {"serving": False, "mode": None}
    out: dict = {"serving": True}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "zookeeper version":
            out["version"] = value
        elif key == "latency min/avg/max":
            lo, avg, hi = value.split("/")
            out.update(latency_min=_number(lo), latency_avg=_number(avg), latency_max=_number(hi))
        else:
            out[key.replace(" ", "_")] = _number(value)
    return out


def parse_mntr(text: str) -> dict:
    """Parse `mntr`: one tab-separated key and value per line.

    >>> parse_mntr("zk_version\\t3.9.5\\nzk_watch_count\\t2\\nzk_avg_latency\\t0.5\\n")
    {'zk_version': '3.9.5', 'zk_watch_count': 2, 'zk_avg_latency': 0.5}
    """
    if NOT_SERVING in text:
        return {"zk_server_state": "not_serving"}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            out[key.strip()] = value.strip() if key == "zk_version" else _number(value.strip())
    return out


def parse_wchc(text: str) -> dict[str, list[str]]:
    """Parse `wchc`: a session id line, then its watched paths indented by a tab.

    >>> parse_wchc("0x100000abc\\n\\t/a\\n\\t/b\\n0x100000abd\\n\\t/a\\n")
    {'0x100000abc': ['/a', '/b'], '0x100000abd': ['/a']}
    """
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("\t"):
            if current is not None:
                out[current].append(line.strip())
        elif line.startswith("0x"):
            current = line.strip()
            out[current] = []
    return out


_CONS_LINE = re.compile(r"^\s*/(?P<address>[^\[]+)\[(?P<interest>\d+)\]\((?P<fields>.*)\)\s*$")


def parse_cons(text: str) -> list[dict]:
    """Parse `cons`: one line per client connection.

    >>> parse_cons(" /127.0.0.1:5[1](queued=0,recved=3,sent=3,sid=0x1000,lop=PING,to=6000)\\n")
    [{'address': '127.0.0.1:5', 'queued': 0, 'recved': 3, 'sent': 3, 'sid': '0x1000', 'lop': 'PING', 'to': 6000}]
    """
    out = []
    for line in text.splitlines():
        m = _CONS_LINE.match(line)
        if not m:
            continue
        conn: dict = {"address": m["address"]}
        for field in m["fields"].split(","):
            key, _, value = field.partition("=")
            # Session ids stay hex strings, as `wchc` prints them.
            conn[key] = value if key == "sid" else _number(value)
        out.append(conn)
    return out
