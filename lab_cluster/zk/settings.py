"""What a lab ZooKeeper server is configured with, in one place for every backend.

`ZkSettings` holds the knobs; `plan_ensemble` picks loopback ports;
`server_properties` renders one server's `zoo.cfg` as a dict. The embedded
backend writes that dict to a file; the container backend turns it into the
environment variables of the official `zookeeper` image (`ZOO_TICK_TIME`,
`ZOO_SERVERS`, `ZOO_CFG_EXTRA`, ...), whose entrypoint writes the same file.

Departures from ZooKeeper's own defaults, and why:

- `maxClientCnxns=0` (unlimited; default 60 per client address): every lab
  consumer connects from 127.0.0.1, so the default would refuse large groups
  for a reason unrelated to the design under test.
- `admin.enableServer=false`: the admin HTTP server would want port 8080.
- `4lw.commands.whitelist=*`: the lab reads `mntr`, `wchc`, `cons`, `srvr`.
- Every address is 127.0.0.1 and every port is picked free, so several
  ensembles can run side by side on one machine.

`tickTime` 2000, `initLimit` 5 and `syncLimit` 2 are the official image's
defaults; experiments that lower them say so in their recorded config.

In an ensemble, server *i*'s view of server *j*'s quorum port (the port a
follower connects to when *j* leads) is a fault proxy for the link i->j, so
that one follower's link to the leader can be delayed alone::

    >>> plan = plan_ensemble(3, ports=iter(range(20000, 20009)))
    >>> [(a.sid, a.client_port, a.quorum_port, a.election_port) for a in plan]
    [(1, 20000, 20001, 20002), (2, 20003, 20004, 20005), (3, 20006, 20007, 20008)]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

from ..ports import LOOPBACK, free_ports


@dataclass(frozen=True)
class ZkSettings:
    tick_time_ms: int = 2000
    init_limit: int = 5
    sync_limit: int = 2
    #: 0 lifts ZooKeeper's 60-connections-per-address limit (see module doc).
    max_client_cnxns: int = 0
    #: None keeps ZooKeeper's defaults (2 and 20 ticks).
    min_session_timeout_ms: int | None = None
    max_session_timeout_ms: int | None = None
    #: fsync the transaction log on every write, as ZooKeeper does by default.
    force_sync: bool = True
    heap_mb: int = 256
    #: Ask for this client port (single server only); None picks a free one.
    client_port: int | None = None
    startup_timeout_s: float = 90.0

    def as_record(self) -> dict:
        """The settings as a flat dict, for results and reports."""
        return asdict(self)

    def with_(self, **changes) -> ZkSettings:
        return replace(self, **changes)


@dataclass(frozen=True)
class ServerAddress:
    """Where one server listens: clients, quorum (followers to leader), election."""

    sid: int
    client_port: int
    quorum_port: int
    election_port: int
    host: str = LOOPBACK

    def server_line(self) -> str:
        """The `server.N` value in ZooKeeper 3.5+ form: quorum:election;client."""
        return f"{self.host}:{self.quorum_port}:{self.election_port};{self.host}:{self.client_port}"


def plan_ensemble(size: int, *, client_port: int | None = None,
                  ports: Iterator[int] | None = None) -> list[ServerAddress]:
    """Pick three loopback ports per server; sids are 1..size."""
    if size not in (1, 3, 5):
        raise ValueError(f"an ensemble has 1, 3 or 5 servers, not {size}")
    ports = ports if ports is not None else iter(free_ports(3 * size))
    plan = []
    for sid in range(1, size + 1):
        client, quorum, election = next(ports), next(ports), next(ports)
        if sid == 1 and client_port is not None:
            client = client_port
        plan.append(ServerAddress(sid, client, quorum, election))
    return plan


def server_properties(settings: ZkSettings, me: ServerAddress, view: list[ServerAddress]) -> dict[str, str]:
    """Server `me`'s zoo.cfg (without dataDir), given its `view` of the ensemble.

    `view` lists every server as `me` should reach it: its own entry is real,
    the others' quorum ports may be fault proxies.
    """
    props = {
        "tickTime": str(settings.tick_time_ms),
        "initLimit": str(settings.init_limit),
        "syncLimit": str(settings.sync_limit),
        "maxClientCnxns": str(settings.max_client_cnxns),
        "standaloneEnabled": "true",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
        "clientPort": str(me.client_port),
        "clientPortAddress": me.host,
        "forceSync": "yes" if settings.force_sync else "no",
    }
    if settings.min_session_timeout_ms is not None:
        props["minSessionTimeout"] = str(settings.min_session_timeout_ms)
    if settings.max_session_timeout_ms is not None:
        props["maxSessionTimeout"] = str(settings.max_session_timeout_ms)
    for other in view:
        props[f"server.{other.sid}"] = other.server_line()
    return props


def render_zoo_cfg(props: dict[str, str], data_dir: str) -> str:
    lines = [f"dataDir={data_dir}"] + [f"{k}={v}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


# The official image's entrypoint writes these keys from these variables.
_OFFICIAL_ENV = {
    "tickTime": "ZOO_TICK_TIME",
    "initLimit": "ZOO_INIT_LIMIT",
    "syncLimit": "ZOO_SYNC_LIMIT",
    "maxClientCnxns": "ZOO_MAX_CLIENT_CNXNS",
    "standaloneEnabled": "ZOO_STANDALONE_ENABLED",
    "admin.enableServer": "ZOO_ADMINSERVER_ENABLED",
    "4lw.commands.whitelist": "ZOO_4LW_COMMANDS_WHITELIST",
}


def official_image_env(props: dict[str, str], sid: int, heap_mb: int) -> dict[str, str]:
    """The same zoo.cfg expressed the way the official `zookeeper` image takes it.

    >>> env = official_image_env({"tickTime": "2000", "server.1": "h:1:2;h:3", "clientPort": "3"}, 1, 256)
    >>> env["ZOO_TICK_TIME"], env["ZOO_SERVERS"], env["ZOO_CFG_EXTRA"], env["ZOO_MY_ID"]
    ('2000', 'server.1=h:1:2;h:3', 'clientPort=3', '1')
    """
    env = {"ZOO_MY_ID": str(sid), "JVMFLAGS": f"-Xmx{heap_mb}m -XX:+UseSerialGC"}
    servers, extra = [], []
    for key, value in props.items():
        if key in _OFFICIAL_ENV:
            env[_OFFICIAL_ENV[key]] = value
        elif key.startswith("server."):
            servers.append(f"{key}={value}")
        else:
            extra.append(f"{key}={value}")
    env["ZOO_SERVERS"] = " ".join(servers)
    env["ZOO_CFG_EXTRA"] = " ".join(extra)
    return env
