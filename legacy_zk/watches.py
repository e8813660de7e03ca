"""The consumer's subscriptions: zkclient 0.3's listeners and event thread, as Kafka 0.8.2.2 used them.

0.8's consumer does not hold one-shot watches itself: it subscribes listeners
with zkclient (`subscribeChildChanges` on `/consumers/<group>/ids`,
`subscribeDataChanges` on each `/brokers/topics/<t>`, and `/brokers/ids`), and
zkclient keeps a watch on every path that has a listener:

- **subscribing** reads the path with a watch (children: `exists` +
  `getChildren`; data: `exists`);
- **every read of a subscribed path sets a watch** (ZkClient L408-409, 761), so
  the rebalance's own reads of the ids and topic paths re-arm them at no cost;
- **when a watch fires**, one event goes to zkclient's single event thread
  (`ZkEventThread`, FIFO), which re-arms at once, `exists` + `getChildren`
  (or `exists` + `getData`), two requests, and then calls the listener, which
  only raises the consumer's "rebalance needed" flag (ZkClient L537-578). The
  event waits behind whatever that thread is doing (a `handleNewSession`
  rebalance, a registration back-off);
- **a child listener** (`on_change`: 0.8's `ZKRebalancerListener.handleChildChange`)
  is called with nothing; **a data listener** (`DataListener`: zkclient's
  `IZkDataListener`, here 0.8's `ZKTopicPartitionChangeListener`,
  `topic_listener.py`) is handed what the re-arming `getData` read:
  `handle_data_change(path, data, stat)`, or `handle_data_deleted(path)` when
  the node is gone (zkclient's `fireDataChangedEvents`: `exists(path, true)`,
  then `readData`, whose `ZkNoNodeException` means deleted). The stat is the
  lab's addition (zkclient hands the data only);
- **a lost connection is not an event**: the Java client keeps its watches and,
  on reconnecting within the same session, sends them back (`SetWatches` with
  the last zxid it saw), and the server fires those whose node changed
  meanwhile; zkclient passes the state change to the consumer, whose
  `handleStateChanged` does nothing. kazoo instead calls every watcher with
  EventType NONE and forgets them, so here a NONE event is recorded and
  ignored, and `rewatch()` (on reconnecting within the session) stands in for
  `SetWatches`: it re-arms every subscribed path with the same two reads and
  fires the listener for each path whose stat moved since it was last read
  (the child listener once; each moved data path's own listener, with what
  was just read).
  (Departure, stated: one `SetWatches` request in Java, two reads per path here.)
- **on a new session** (the old one expired) zkclient re-fires every listener
  (`fireAllEvents`, after `handleNewSession`): `fire_all()`.

Every firing is recorded as `zk_watch_fired` (path, event type), the
herd's notifications; the re-arming reads are `zk_read` events like any other.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from lab_cluster.trace import TraceRecorder

from .zkclient import Stopping, TracedZk


class EventThread:
    """zkclient's `ZkEventThread`: one thread that runs queued events in order, and never dies of one."""

    def __init__(self, name: str, trace: TraceRecorder):
        self.trace = trace
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"zkevents-{name}", daemon=True)

    def start(self) -> EventThread:
        self._thread.start()
        return self

    def send(self, what: str, event: Callable[[], None]) -> None:
        self._queue.put((what, event))

    def stop(self, timeout_s: float = 30.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            what, event = item
            try:
                event()
            except Stopping:
                return
            except Exception as exc:  # zkclient logs and goes on with the next event
                self.trace.record("zk_event_error", event=what, error=f"{type(exc).__name__}: {exc}")


class DataListener(Protocol):
    """zkclient's `IZkDataListener`, called on the event thread after the re-arming reads."""

    def handle_data_change(self, path: str, data: bytes, stat) -> None: ...

    def handle_data_deleted(self, path: str) -> None: ...


class GroupWatches:
    """The consumer's zkclient listeners: child paths (all with `on_change`, 0.8's `handleChildChange`) and data
    paths (each with its `DataListener`), each path with the stat it was last read at."""

    def __init__(self, zk: TracedZk, events: EventThread, trace: TraceRecorder, on_change: Callable[[], None]):
        self.zk = zk
        self.events = events
        self.trace = trace
        self.on_change = on_change
        self.child_paths: list[str] = []
        self.data_paths: list[str] = []
        self._data_listeners: dict[str, DataListener] = {}
        self._seen: dict[str, int] = {}  # path -> pzxid (children) or mzxid (data) at its last watched read
        self._armed_children: set[str] = set()  # paths whose child watch is set now

    # -- subscribing and reading ---------------------------------------------------------
    def subscribe_children(self, path: str) -> None:
        """zkclient's `subscribeChildChanges`: `exists` + `getChildren`, both watched."""
        if path not in self.child_paths:
            self.child_paths.append(path)
            self._rearm_children(path)

    def subscribe_data(self, path: str, listener: DataListener) -> None:
        """zkclient's `subscribeDataChanges(path, listener)`: `exists`, watched (no data is read)."""
        if path not in self.data_paths:
            self.data_paths.append(path)
            self._data_listeners[path] = listener
            self._seen_stat(path, self.zk.exists(path, watch=self.fired), data=True)

    def children(self, path: str) -> tuple[list[str], object]:
        """`getChildren` of a subscribed path (watched, as zkclient does for any path with listeners)."""
        children, stat = self.zk.get_children(path, watch=self.fired, include_data=True)
        self._armed_children.add(path)
        self._seen_stat(path, stat, data=False)
        return children, stat

    def data(self, path: str) -> tuple[bytes, object]:
        """`getData` of a subscribed path (watched)."""
        value, stat = self.zk.get(path, watch=self.fired)
        self._seen_stat(path, stat, data=True)
        return value, stat

    def watched(self, path: str) -> bool:
        return path in self.child_paths or path in self.data_paths

    # -- events ------------------------------------------------------------------------------
    def fired(self, event: WatchedEvent) -> None:
        """The watcher of every watched read (kazoo calls it once per firing, on its callback thread)."""
        self.trace.record("zk_watch_fired", path=event.path, event_type=event.type, zk_state=event.state)
        if event.type == EventType.NONE:
            self._armed_children.clear()  # kazoo has forgotten every watch
            return  # kazoo's news of a lost connection, not a change of the node: the Java client's is no event
        path = event.path
        if event.type == EventType.CHILD:
            self._armed_children.discard(path)
        self.events.send(f"{event.type} {path}", lambda: self._deliver(path))

    def _deliver(self, path: str) -> None:
        """On the event thread: re-arm (zkclient: `exists` + `getChildren`/`getData`), then the listener."""
        if path in self.data_paths:
            self._to_data_listener(path, *self._rearm_data(path))
            return
        if path in self.child_paths:
            self._rearm_children(path)
        self.on_change()

    def _to_data_listener(self, path: str, data: bytes | None, stat) -> None:
        """zkclient's `fireDataChangedEvents`: the data read, or (no node) `handleDataDeleted`."""
        listener = self._data_listeners[path]
        if stat is None:
            listener.handle_data_deleted(path)
        else:
            listener.handle_data_change(path, data, stat)

    def rewatch(self) -> None:
        """Reconnected within the same session: what `SetWatches` would do (see the module docstring)."""
        self.events.send("rewatch", self._rewatch)

    def _rewatch(self) -> None:
        moved_children, moved_data = [], {}  # moved_data: path -> what the re-arming read found
        for path in self.child_paths:
            before = self._seen.get(path)
            if self._rearm_children(path, why="rewatch") != before:
                moved_children.append(path)
        for path in self.data_paths:
            before = self._seen.get(path)
            read = self._rearm_data(path, why="rewatch")
            if self._seen.get(path) != before:
                moved_data[path] = read
        self.trace.record("zk_rewatched", paths=self.child_paths + self.data_paths,
                          moved=moved_children + list(moved_data))
        if moved_children:
            self.on_change()
        for path, read in moved_data.items():
            self._to_data_listener(path, *read)

    def fire_all(self) -> None:
        """A new session: zkclient's `fireAllEvents`, one event per subscribed path."""
        for path in self.child_paths + self.data_paths:
            self.events.send(f"new session {path}", lambda path=path: self._deliver(path))

    def unheard_on_close(self, parents: list[str]) -> list[str]:
        """Of `parents` (paths whose children our session's ephemerals are), those whose child watch we hold: our
        own close will make the server trigger it, and we will not hear it (kazoo stops reading at close, as
        zkclient's event thread is stopped before the close in 0.8). Recorded, so the cross-check counts it."""
        return [p for p in parents if p in self._armed_children]

    # -- the reads that re-arm -------------------------------------------------------------
    def _rearm_children(self, path: str, **why) -> int | None:
        stat = self.zk.exists(path, watch=self.fired, **why)
        if stat is not None:
            try:
                _, stat = self.zk.get_children(path, watch=self.fired, include_data=True, **why)
                self._armed_children.add(path)
            except NoNodeError:  # gone between the two reads: the exists watch will tell
                stat = None
        return self._seen_stat(path, stat, data=False)

    def _rearm_data(self, path: str, **why) -> tuple[bytes | None, object]:
        """`exists` + `getData`, both watched: (data, stat), or (None, None) if there is no node."""
        data, stat = None, self.zk.exists(path, watch=self.fired, **why)
        if stat is not None:
            try:
                data, stat = self.zk.get(path, watch=self.fired, **why)
            except NoNodeError:  # gone between the two reads: the exists watch will tell
                data, stat = None, None
        self._seen_stat(path, stat, data=True)
        return data, stat

    def _seen_stat(self, path: str, stat, *, data: bool) -> int | None:
        self._seen[path] = None if stat is None else (stat.mzxid if data else stat.pzxid)
        return self._seen[path]
