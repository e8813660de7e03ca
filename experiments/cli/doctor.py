"""`doctor`: what can run on this machine, and which backend `auto` would pick.

Exit status 0 when at least one backend can start a ZooKeeper server, 1 when
none can. `--start` goes further: it starts a server on the chosen backend,
asks it `ruok` and `mntr`, creates and reads an ephemeral znode with kazoo,
prints the server's version, and stops everything. Then it does the same again
from inside a Spark task (`local[*]`, or `--master`), because that is where a
trial starts its ZooKeeper: a Spark Python worker has its own `sys.path` and
environment (on a cluster, its own machine), and what works on the driver may
not work there. It says which backend a trial gets in the task, and why; exit
status 1 if either start fails.
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
    p.add_argument("--master", help="Spark master for --start's task (default: spark-submit's, else local[*])")
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
    if args.start:  # a backend that cannot start says why, as the CLI's error
        return _start(console, args.backend, args.master)
    if not usable:
        console.print("[red]No backend can start a ZooKeeper server here.[/] Run scripts/setup.sh "
                      "(Java, pyspark) or scripts/setup.sh --docker (Docker engine and image).")
        return 1
    return 0


def start_and_read(request) -> dict:
    """Start one server on `request`'s backend here, read it, stop it: what was seen, or a LabError.

    Run on the driver and, through `_probe_in_task`, inside a Spark task; returns plain values for both."""
    import os
    import socket

    from kazoo.client import KazooClient

    from lab_cluster.zk import choose_backend, provision

    choice = choose_backend(request)
    seen = {"host": socket.gethostname(), "pid": os.getpid(), "backend": choice.name, "reason": choice.reason,
            "jars": _zk_jars() if choice.name == "embedded" else None}
    with provision(servers=1, backend=request) as zk:
        server = zk.servers[0]
        seen.update(version=zk.version, connect=zk.connect, ruok=server.four_letter("ruok").strip())
        mntr = server.mntr()
        seen["mntr"] = {k: mntr.get(k) for k in ("zk_server_state", "zk_znode_count", "zk_num_alive_connections")}
        client = KazooClient(hosts=zk.connect, timeout=10)
        client.start(timeout=15)
        try:
            path = client.create("/doctor-", b"hello", ephemeral=True, sequence=True)
            data, stat = client.get(path)
        finally:
            client.stop()
            client.close()
        seen.update(znode=path, data=data.decode(), owner=f"0x{stat.ephemeralOwner:x}")
    return seen


def _probe_in_task(request) -> dict:
    """`start_and_read` as a Spark task runs it: a problem comes back as a value, not as a Py4J traceback."""
    import os
    import socket

    try:
        return {"ok": True, **start_and_read(request)}
    except LabError as exc:
        from lab_cluster.zk import choose_backend

        try:
            choice = choose_backend(request)
            chosen = {"backend": choice.name, "reason": choice.reason}
        except LabError:
            chosen = {}
        return {"ok": False, "problem": exc.paragraph(), "host": socket.gethostname(), "pid": os.getpid(), **chosen}


def _start(console: Console, backend: str | None, master: str | None = None) -> int:
    from lab_cluster.spark import local_session
    from lab_cluster.zk import BackendRequest

    request = BackendRequest.from_environment(backend)
    with console.status("starting a ZooKeeper server..."):
        here = {"ok": True, **start_and_read(request)}  # a problem here is the CLI's error, as before
    _show(console, "here", here)
    with console.status("starting a ZooKeeper server from inside a Spark task, as a trial does..."):
        spark = local_session(master)
        there = spark.sparkContext.parallelize([0], 1).map(lambda _: _probe_in_task(request)).collect()[0]
    _show(console, f"in a Spark task ({spark.sparkContext.master}; host {there['host']}, worker pid {there['pid']})",
          there)
    return 0 if there["ok"] else 1


def _show(console: Console, where: str, seen: dict) -> None:
    if "backend" in seen:
        console.print(f"{where}: a trial gets backend [bold]{seen['backend']}[/] ({seen['reason']})"
                      + (f"; jars: {seen['jars']}" if seen.get("jars") else ""))
    if not seen["ok"]:
        console.print(f"[red]{where}: could not start a ZooKeeper server:[/] {seen['problem']}")
        return
    mntr = seen["mntr"]
    console.print(f"{where}: started ZooKeeper [bold]{seen['version']}[/] at {seen['connect']}; ruok: "
                  f"{seen['ruok']}; mntr: zk_server_state={mntr['zk_server_state']}, zk_znode_count="
                  f"{mntr['zk_znode_count']}, zk_num_alive_connections={mntr['zk_num_alive_connections']}; kazoo "
                  f"created ephemeral {seen['znode']} and read back {seen['data']!r} (owner session "
                  f"{seen['owner']}); stopped, nothing left running")
