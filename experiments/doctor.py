"""`doctor`: what can run on this machine, and which backend `auto` would pick.

Exit status 0 when at least one backend can start a ZooKeeper server, 1 when
none can. `--start` goes further: it starts a server on the chosen backend,
asks it `ruok` and `mntr`, creates and reads an ephemeral znode with kazoo,
prints the server's version, and stops everything.
"""

from __future__ import annotations

import platform
import sys

from rich.console import Console
from rich.table import Table

from lab_cluster.errors import LabError


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="check Java, pyspark, Docker and the ZooKeeper backends")
    p.add_argument("--start", action="store_true", help="also start a server, read it, and stop it")
    p.add_argument("--backend", help="backend for --start (default: LAB_ZK_BACKEND or auto)")
    p.set_defaults(run=run)


def _check(fn):
    """(ok, text) of a probe that returns text or raises LabError."""
    try:
        return True, fn()
    except LabError as exc:
        return False, exc.problem


def _java() -> str:
    from lab_cluster.zk.distribution import find_java, java_version

    java = find_java()
    return f"{java_version(java)} ({java})"


def _pyspark() -> str:
    import pyspark

    return f"{pyspark.__version__}"


def _zk_jars() -> str:
    from lab_cluster.zk.distribution import find_distribution

    return find_distribution().describe()


def _docker() -> str:
    from lab_cluster.docker_engine import docker_client, engine_address, engine_version

    return f"engine {engine_version(docker_client(timeout_s=3))} at {engine_address()}"


def _image() -> str:
    from lab_cluster.docker_engine import docker_client, image_origin, require_image, zk_image

    client = docker_client(timeout_s=3)
    image = zk_image()
    require_image(client, image)
    return f"{image} ({image_origin(client, image)})"


def _external() -> str:
    import os

    from lab_cluster.fourlw import ruok
    from lab_cluster.zk.external import parse_connect

    connect = os.environ.get("LAB_ZK_CONNECT")
    if not connect:
        raise LabError("LAB_ZK_CONNECT is not set")
    addresses, _ = parse_connect(connect)
    ok = [a for a in addresses if ruok(a.host, a.client_port)["ok"]]
    if not ok:
        raise LabError(f"no server of {connect} answers ruok")
    return f"{len(ok)}/{len(addresses)} servers of {connect} answer"


def run(args) -> int:
    from lab_cluster.zk.backends import choose_backend, embedded_problem, requested_backend, testcontainers_problem

    console = Console()
    requested_backend(args.backend)  # an unknown backend is an error before anything else
    table = Table(title="rebalance lab: doctor", show_lines=False)
    table.add_column("check")
    table.add_column("ok")
    table.add_column("details", overflow="fold")
    rows = [("Python", (True, f"{platform.python_version()} ({sys.executable})")),
            ("Java", _check(_java)), ("pyspark", _check(_pyspark)), ("ZooKeeper jars", _check(_zk_jars)),
            ("Docker", _check(_docker)), ("ZooKeeper image", _check(_image))]
    embedded, container = embedded_problem(), testcontainers_problem()
    external = _check(_external)
    rows += [("backend embedded", (embedded is None, embedded or "can start a server")),
             ("backend testcontainers", (container is None, container or "can start a server")),
             ("backend external", external)]
    for name, (ok, text) in rows:
        table.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", text)
    console.print(table)
    choice = choose_backend(args.backend)
    console.print(f"backend: [bold]{choice.name}[/] ({choice.reason})")
    usable = embedded is None or container is None or external[0]
    if not usable:
        console.print("[red]No backend can start a ZooKeeper server here.[/] Run scripts/setup.sh "
                      "(Java, pyspark) or scripts/setup.sh --docker (Docker engine and image).")
        return 1
    if args.start:
        return _start(console, args.backend)
    return 0


def _start(console: Console, backend: str | None) -> int:
    from kazoo.client import KazooClient

    from lab_cluster.zk import provision

    with console.status("starting a ZooKeeper server..."):
        zk = provision(servers=1, backend=backend)
    with zk:
        server = zk.servers[0]
        ruok = server.four_letter("ruok").strip()
        mntr = server.mntr()
        client = KazooClient(hosts=zk.connect, timeout=10)
        client.start(timeout=15)
        try:
            path = client.create("/doctor-", b"hello", ephemeral=True, sequence=True)
            data, stat = client.get(path)
        finally:
            client.stop()
            client.close()
        console.print(f"started ZooKeeper [bold]{zk.version}[/] on backend [bold]{zk.backend}[/] "
                      f"({zk.reason}) at {zk.connect}")
        console.print(f"ruok: {ruok}; mntr: zk_server_state={mntr.get('zk_server_state')}, "
                      f"zk_znode_count={mntr.get('zk_znode_count')}, zk_num_alive_connections="
                      f"{mntr.get('zk_num_alive_connections')}")
        console.print(f"kazoo created ephemeral {path} and read back {data!r} (owner session "
                      f"0x{stat.ephemeralOwner:x})")
    console.print("stopped; nothing left running")
    return 0
