"""The member's link to its group's coordinator, shared by both coordinator-era consumers (classic and KIP-848).

Find the coordinator (FindCoordinator to the known brokers, then the
bootstrap ones), connect to it, send a request on the poll loop's
connection, and mark it unknown when it fails (which fails the requests in
flight at once, as a Java client's disconnect does). The heartbeat thread
has a connection of its own; the departure is stated on `CoordinatorLink`.
"""

from __future__ import annotations

from lab_cluster.clock import monotonic_ms
from lab_cluster.wire import ErrorCode, WireClient

from .error_policy import ErrorAction, error_action
from .lookup import find_coordinator


class ConsumerFailed(Exception):
    pass


#: why the heartbeat thread marks the coordinator unknown when the session runs out (the `coordinator_lost` reason)
SESSION_EXPIRED = "no heartbeat answered within session.timeout.ms"


class CoordinatorLink:
    """The member's connections to its group's coordinator, shared by both consumers (classic and KIP-848): find
    it, mark it unknown (which fails the requests in flight at once), send a request on the poll loop's
    connection.

    Departure, stated: the poll loop and the heartbeat thread each have their own connection (`_coord_client`,
    `_hb_client`). Java's client has one, shared by both threads, and the broker reads no further request on a
    connection while a JoinGroup or SyncGroup is parked on it; so in Kafka a heartbeat sent while the member's
    SyncGroup waits is answered after it, in the lab at once. It changes when heartbeats are answered during a
    rebalance, not how many are sent.

    A consumer using it has `config`, `trace`, `fetcher`, `_lock`, `_lookup_lock`, `_stop`, `_coordinator`,
    `_coord_client` and `_hb_client`."""

    def _coordinator_unknown(self, why: str) -> None:
        with self._lock:
            if self._coordinator is None:
                return
            self._coordinator = None
            clients = [c for c in (self._coord_client, self._hb_client) if c is not None]
            self._coord_client = self._hb_client = None
        for client in clients:  # outside the lock: a client still connecting holds its own lock a while
            client.close(retire=True)
        self.trace.record("coordinator_lost", reason=why)

    def _ensure_coordinator(self) -> bool:
        """Ask the known brokers, then the bootstrap ones, until one answers; True once a coordinator is known
        (one lookup at a time: the heartbeat thread and the poll loop may both try)."""
        with self._lookup_lock:
            with self._lock:
                if self._coordinator is not None:
                    return True
            for host, port in list(self.fetcher.brokers.values()) + self.config.bootstrap:
                try:
                    response = find_coordinator(host, port, self.config.group_id, self.config.client_id)
                except ConnectionError:
                    continue  # no answer: ask the next broker
                if self._handle_find_coordinator_response(response):
                    return True
                break  # retry, after the back-off
            self._stop.wait(self.config.retry_backoff_ms / 1000)
            return False

    def _handle_find_coordinator_response(self, response: dict) -> bool:
        """FindCoordinator's answer: connect to the coordinator it names (True), or not found (False)."""
        error = ErrorCode(response.get("error_code", 0))
        self.trace.record("find_coordinator", error=error.name, node=response.get("node_id"))
        action = error_action("FindCoordinator", error)
        if action is ErrorAction.FATAL:
            raise ConsumerFailed(f"FindCoordinator: {error.name}: {response.get('message', '')}")
        if action is not ErrorAction.PROCEED:
            return False
        timeout = self.config.request_timeout_ms / 1000
        # lab only: the route through a fault proxy, if the experiment gave one (see config.py)
        address = self.config.coordinator_via or (response["host"], response["port"])
        with self._lock:
            self._coordinator = address
            self._coord_client = WireClient(*address, client_id=self.config.client_id, timeout_s=timeout)
            self._hb_client = WireClient(*address, client_id=self.config.client_id, timeout_s=timeout)
        self._coordinator_found(monotonic_ms())
        return True

    def _coordinator_found(self, now_ms: int) -> None:
        """Called when FindCoordinator named the coordinator (the classic member restarts its session there)."""

    def _call_coordinator(self, api: str, *, timeout_s: float | None = None, **body) -> dict | None:
        """One request on the poll loop's connection; None if there is none or it failed (the coordinator is then
        marked unknown, and looked up again)."""
        with self._lock:
            client = self._coord_client
        if client is None:
            return None
        try:
            return client.request(api, timeout_s=timeout_s, group_id=self.config.group_id, **body)
        except ConnectionError as exc:
            self._coordinator_unknown(f"{api}: {exc}")
            return None
