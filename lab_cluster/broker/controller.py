"""The controller: one broker, elected through `/controller`, that chooses partition leaders.

Kafka 0.8's `KafkaController`, reduced to what the lab needs:

    NOT_CONTROLLER --(/controller is free and our create wins)--> CONTROLLER
    CONTROLLER     --(our session ends)--------------------------> gone (another broker wins)

Every broker watches `/controller`; when the node vanishes (its owner's session
ended: a graceful stop at once, a crash only after the session timeout), each
tries to create it and one wins. The winner bumps `/controller_epoch`, watches
`/brokers/ids` and `/brokers/topics`, and after every change makes sure each
partition is led by a live replica:

- a new topic's partitions get their first live replica as leader;
- a partition whose leader is no longer registered gets the first live replica
  of its assignment, with `leader_epoch` + 1 (Kafka chose from the ISR; with no
  replication in the lab every assigned replica is "in sync");
- a partition with no live replica gets leader -1 until one comes back.

Session state: if this broker's session expires it is no longer the controller
(its `/controller` node is gone); the kazoo watches it set die with the session,
which is why `Broker` restarts with a new session rather than carrying on.
"""

from __future__ import annotations

import json
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from . import zk_layout as L


class Controller:
    def __init__(self, zk: KazooClient, broker_id: int, on_event=None):
        self.zk = zk
        self.broker_id = broker_id
        self.is_controller = False
        self.epoch = 0
        self._lock = threading.RLock()
        self._on_event = on_event or (lambda kind, **fields: None)
        self._watching_topics: set[str] = set()

    def start(self) -> None:
        self.zk.DataWatch(L.CONTROLLER, self._on_controller_node)

    # -- election -----------------------------------------------------------------
    def _on_controller_node(self, data, stat, event=None):
        if data is None and not self.is_controller:
            self._try_to_become_controller()

    def _try_to_become_controller(self) -> None:
        try:
            self.zk.create(L.CONTROLLER, L.controller_data(self.broker_id), ephemeral=True, makepath=True)
        except NodeExistsError:
            return
        with self._lock:
            self.is_controller = True
            self.epoch = self._bump_epoch()
        self._on_event("controller_elected", controller_epoch=self.epoch)
        self.zk.ChildrenWatch(L.BROKER_IDS, lambda ids: self.elect_leaders())
        self.zk.ChildrenWatch(L.BROKER_TOPICS, self._on_topics)

    def _bump_epoch(self) -> int:
        self.zk.ensure_path(L.CONTROLLER_EPOCH)
        while True:
            data, stat = self.zk.get(L.CONTROLLER_EPOCH)
            epoch = int(data or b"0") + 1
            try:
                self.zk.set(L.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:  # another controller raced us: read again
                continue

    def _on_topics(self, topics):
        # A topic's assignment may be written a moment after its node appears.
        for topic in topics:
            if topic not in self._watching_topics:
                self._watching_topics.add(topic)
                self.zk.DataWatch(L.topic_path(topic), lambda data, stat, event=None: self.elect_leaders())
        self.elect_leaders()

    # -- leadership ---------------------------------------------------------------
    def elect_leaders(self) -> None:
        with self._lock:
            if not self.is_controller:
                return
            live = {int(i) for i in self.zk.get_children(L.BROKER_IDS)}
            for topic in self.zk.get_children(L.BROKER_TOPICS):
                try:
                    data, _ = self.zk.get(L.topic_path(topic))
                except NoNodeError:
                    continue
                if not data:
                    continue
                for partition, replicas in L.parse_topic_assignment(data).items():
                    self._ensure_leader(topic, partition, replicas, live)

    def _ensure_leader(self, topic: str, partition: int, replicas: list[int], live: set[int]) -> None:
        path = L.partition_state_path(topic, partition)
        try:
            data, stat = self.zk.get(path)
            state = json.loads(data)
        except NoNodeError:
            state, stat = None, None
        if state is not None and (state["leader"] in live or
                                  (state["leader"] == L.NO_LEADER and not live & set(replicas))):
            return
        alive = [r for r in replicas if r in live]
        leader = alive[0] if alive else L.NO_LEADER
        epoch = state["leader_epoch"] + 1 if state else 0
        new = L.partition_state(leader, epoch, alive, self.epoch)
        if stat is None:
            self.zk.create(path, new, makepath=True)
        else:
            self.zk.set(path, new, version=stat.version)
        self._on_event("leader_elected", topic=topic, partition=partition, leader=leader, leader_epoch=epoch,
                       previous=state["leader"] if state else None)
