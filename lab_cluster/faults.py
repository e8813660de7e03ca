"""Fault injection: every fault is done through here and recorded in the trace.

`Faults` wraps the fault actions of `docs/design.md` (the cluster) and records each one as a `fault`
event (`action`, `target`, details) at the moment it took effect, so the
analysis can line up what consumers did with what was done to them:

| action                 | what                                                      |
|------------------------|-----------------------------------------------------------|
| `pause` / `resume`     | SIGSTOP / SIGCONT a lab process (a long GC pause)          |
| `kill` / `stop`        | SIGKILL (crash) / SIGTERM (graceful) a lab process         |
| `start`                | a killed lab process started again (a broker's return)    |
| `pass`, `delay`, `blackhole`, `reset` | switch one client's `Link` (its own proxies) |
| `zk_pause`, `zk_resume`, `zk_stop`, `zk_start` | one ZooKeeper server                  |
| `quorum_delay`, `quorum_pass` | one follower's quorum link to the leader           |

A `Link` is one client's private path to a service with several servers (a
ZooKeeper ensemble, or a coordinator): one `FaultProxy` per server, and a
connect string through them. Cutting a consumer's `Link` to ZooKeeper leaves
its broker connections alone: the zombie experiment's second variant.

Usage::

    link = zk_link(ensemble, "c3-zk")                 # c3 connects to link.connect
    faults = Faults(trace)
    faults.link(link, Mode.BLACKHOLE)                 # c3 is partitioned from ZooKeeper
    faults.link(link, Mode.PASS)                      # healed
"""

from __future__ import annotations

from .faultproxy import FaultProxy, Mode
from .processes import LabProcess
from .trace import TraceRecorder
from .zk import Ensemble


class Link:
    """One client's own proxies to a set of servers."""

    def __init__(self, name: str, upstreams: list[tuple[str, int]], chroot: str = ""):
        self.name = name
        self.proxies = [FaultProxy(port, upstream_host=host, name=f"{name}->{host}:{port}") for host, port in upstreams]
        self.chroot = chroot
        self.mode = Mode.PASS

    @property
    def connect(self) -> str:
        return ",".join(f"127.0.0.1:{p.port}" for p in self.proxies) + self.chroot

    @property
    def routes(self) -> str:
        """`upstream host:port=proxy host:port,...`: for a client that learns its servers' addresses elsewhere
        (a route) and must reach each through its proxy."""
        return ",".join(f"{p.upstream[0]}:{p.upstream[1]}=127.0.0.1:{p.port}" for p in self.proxies)

    def set_mode(self, mode: Mode, delay_ms: int = 0) -> None:
        for proxy in self.proxies:
            proxy.set_mode(mode, delay_ms=delay_ms)
        self.mode = mode

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.close()


def zk_link(ensemble: Ensemble, name: str, chroot: str = "") -> Link:
    """A private path from one client to every server of `ensemble`."""
    return Link(name, [(s.address.host, s.address.client_port) for s in ensemble.servers],
                chroot or ensemble.chroot)


class Faults:
    def __init__(self, trace: TraceRecorder):
        self.trace = trace

    def _done(self, action: str, target: str, **details) -> int:
        return self.trace.record("fault", action=action, target=target, **details)

    # processes
    def pause(self, proc: LabProcess) -> int:
        proc.pause()
        return self._done("pause", proc.name, pid=proc.pid)

    def resume(self, proc: LabProcess) -> int:
        proc.resume()
        return self._done("resume", proc.name, pid=proc.pid)

    def kill(self, proc: LabProcess, **details) -> int:
        proc.kill()
        return self._done("kill", proc.name, pid=proc.pid, **details)

    def started(self, proc: LabProcess, **details) -> int:
        """Record that a killed process was started again (`proc`, the new one, is running already)."""
        return self._done("start", proc.name, pid=proc.pid, **details)

    def stop(self, proc: LabProcess, **details) -> int:
        proc.stop()
        return self._done("stop", proc.name, pid=proc.pid, **details)

    # links
    def link(self, link: Link, mode: Mode, delay_ms: int = 0) -> int:
        link.set_mode(mode, delay_ms)
        return self._done(mode.value, link.name, delay_ms=delay_ms)

    # ZooKeeper servers
    def zk_pause(self, ensemble: Ensemble, sid: int) -> int:
        ensemble.server(sid).pause()
        return self._done("zk_pause", f"zk{sid}")

    def zk_resume(self, ensemble: Ensemble, sid: int) -> int:
        ensemble.server(sid).resume()
        return self._done("zk_resume", f"zk{sid}")

    def zk_stop(self, ensemble: Ensemble, sid: int) -> int:
        ensemble.server(sid).stop()
        return self._done("zk_stop", f"zk{sid}")

    def zk_start(self, ensemble: Ensemble, sid: int) -> int:
        ensemble.server(sid).start()
        return self._done("zk_start", f"zk{sid}")

    def quorum_delay(self, ensemble: Ensemble, follower: int, leader: int, delay_ms: int) -> int:
        ensemble.quorum_link(follower, leader).set_mode(Mode.DELAY, delay_ms=delay_ms)
        return self._done("quorum_delay", f"zk{follower}->zk{leader}", delay_ms=delay_ms)

    def quorum_pass(self, ensemble: Ensemble, follower: int, leader: int) -> int:
        ensemble.quorum_link(follower, leader).set_mode(Mode.PASS)
        return self._done("quorum_pass", f"zk{follower}->zk{leader}")
