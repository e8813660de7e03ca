"""KIP-848's coordinator side, alone, on a fake clock: every epoch rule, reconciliation step and timeout.

The group's topic `t` has 4 partitions; the server assignor is Kafka's `uniform` (the default).
A `Client` here is a well-behaved member: it owns what its last answer assigned it, and says so.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modern_coord.coordinator.consumer_group import ConsumerGroupMemberState
from modern_coord.coordinator.coordinator import CoordinatorConfig, GroupCoordinator, MemoryStore
from modern_coord.coordinator.scheduler import FakeClock, Scheduler

G, T, PARTITIONS = "g", "t", 4
SESSION, INTERVAL, REBALANCE = 10_000, 1_000, 20_000
ALL = {(T, p) for p in range(PARTITIONS)}


def _config(**kw):
    return CoordinatorConfig(offsets_topic_num_partitions=1, group_consumer_heartbeat_interval_ms=INTERVAL,
                             group_consumer_min_heartbeat_interval_ms=INTERVAL,
                             group_consumer_session_timeout_ms=SESSION,
                             group_consumer_min_session_timeout_ms=SESSION, **kw)


class Harness:
    def __init__(self, store=None, **config):
        self.clock = FakeClock()
        self.timers = Scheduler(self.clock)
        self.events = []
        self.store = store or MemoryStore()
        self.coord = GroupCoordinator(self.store, _config(**config), scheduler=self.timers,
                                      on_event=lambda k, **f: self.events.append((k, f)),
                                      topic_partitions=lambda topic: PARTITIONS if topic == T else 0)
        self.coord.load_partition(0, self.store.records.get(0, []))

    def advance(self, ms):
        self.clock.advance(ms)
        self.timers.run_due()

    def hb(self, member_id="", epoch=0, owned=None, topics=None, instance=None, rebalance=-1, assignor=None,
           **extra):
        if epoch == 0:
            owned = [] if owned is None else owned
            topics = [T] if topics is None else topics
            rebalance = REBALANCE if rebalance == -1 else rebalance
        request = {"group_id": G, "member_id": member_id, "member_epoch": epoch, "instance_id": instance,
                   "rebalance_timeout_ms": rebalance, "subscribed_topic_names": topics, "server_assignor": assignor,
                   "topic_partitions": None if owned is None else _rows(owned), **extra}
        return self.coord.consumer.heartbeat(request)

    def member(self, member_id):
        return self.coord.consumer.groups[G].members[member_id]

    @property
    def group(self):
        return self.coord.consumer.groups[G]

    def commit(self, member_id, epoch, offset=5):
        return self.coord.commit_offsets({"group_id": G, "member_id": member_id, "generation_id": epoch,
                                          "offsets": [{"topic": T, "partition": 0, "offset": offset}]})


def _rows(parts):
    return [{"topic": T, "partitions": sorted(p for t, p in parts if t == T)}] if parts else []


def _assigned(response):
    rows = (response.get("assignment") or {}).get("topic_partitions", [])
    return {(r["topic"], p) for r in rows for p in r["partitions"]}


class Client:
    """A member that does what the protocol asks: it owns its last assignment and reports it."""

    def __init__(self, h: Harness, instance=None):
        self.h, self.instance = h, instance
        self.member_id, self.epoch, self.owned = "", 0, set()

    def join(self):
        r = self.h.hb(epoch=0, instance=self.instance)
        assert r["error"] == "NONE", r
        return self._take(r)

    def beat(self):
        r = self.h.hb(self.member_id, self.epoch, owned=self.owned, instance=self.instance)
        assert r["error"] == "NONE", r
        return self._take(r)

    def _take(self, r):
        self.member_id, self.epoch = r["member_id"], r["member_epoch"]
        if r["assignment"] is not None:
            self.owned = _assigned(r)  # revoke what is not listed, take what is new
        return r


# -- joining ------------------------------------------------------------------------------------------
def test_the_first_member_gets_an_id_epoch_one_and_every_partition_and_the_brokers_interval():
    h = Harness()
    r = h.hb()
    assert r["error"] == "NONE" and r["member_id"] and r["member_epoch"] == 1
    assert r["heartbeat_interval_ms"] == INTERVAL
    assert _assigned(r) == ALL
    assert h.group.group_epoch == h.group.assignment_epoch == 1 and h.group.state.value == "Stable"
    # nothing changed: the next heartbeat carries no assignment and writes nothing
    written = len(h.store.records[0])
    again = h.hb(r["member_id"], 1)
    assert again["error"] == "NONE" and again["assignment"] is None and again["member_epoch"] == 1
    assert len(h.store.records[0]) == written


@pytest.mark.parametrize("request_fields, error", [
    ({"member_epoch": 0, "rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided"),
    ({"member_epoch": 0, "subscribed_topic_names": []}, "SubscribedTopicNames must be set"),
    ({"member_epoch": 0, "topic_partitions": [{"topic": T, "partitions": [0]}]}, "TopicPartitions must be empty"),
    ({"member_epoch": 0, "topic_partitions": None}, "TopicPartitions must be empty"),
    ({"member_epoch": 3, "member_id": ""}, "MemberId can't be empty"),
    ({"member_epoch": -2, "member_id": "m", "instance_id": None}, "InstanceId can't be null"),
    ({"member_epoch": -3, "member_id": "m"}, "MemberEpoch is invalid"),
    ({"member_epoch": 0, "instance_id": ""}, "InstanceId can't be empty"),
    ({"member_epoch": 0, "topic_partitions": [{"topic": T}]}, "topic_partitions must be"),
    ({"member_epoch": "1"}, "member_epoch"),
    ({"member_epoch": 0, "subscribed_topic_regex": "t.*"}, "SubscribedTopicRegex is not supported"),
])
def test_a_malformed_heartbeat_is_refused_with_invalid_request(request_fields, error):
    h = Harness()
    base = {"group_id": G, "member_id": "", "member_epoch": 0, "rebalance_timeout_ms": REBALANCE,
            "subscribed_topic_names": [T], "topic_partitions": []}
    r = h.coord.consumer.heartbeat({**base, **request_fields})
    assert r["error"] == "INVALID_REQUEST" and error in r["message"], r
    assert G not in h.coord.consumer.groups


def test_an_empty_topic_regex_means_no_regex_as_librdkafka_sends_it():
    r = Harness().hb(subscribed_topic_regex="")  # Kafka 4.0 reads "" as no regex subscription
    assert r["error"] == "NONE" and r["member_epoch"] == 1


def test_an_empty_group_id_is_an_invalid_request():
    r = Harness().coord.consumer.heartbeat({"group_id": "", "member_id": "", "member_epoch": 0})
    assert r["error"] == "INVALID_REQUEST" and r["message"] == "GroupId can't be empty." and r["member_epoch"] == 0


def test_a_full_heartbeat_gets_the_assignment_even_when_it_did_not_change():
    h = Harness()
    a = Client(h)
    a.join()
    assert h.hb(a.member_id, 1, owned=ALL)["assignment"] is None
    full = h.hb(a.member_id, 1, owned=ALL, topics=[T], rebalance=REBALANCE)
    assert _assigned(full) == ALL


def test_a_full_group_refuses_a_new_member_but_not_its_members():
    h = Harness(group_consumer_max_size=1)
    a = Client(h)
    a.join()
    r = h.hb()
    assert r["error"] == "GROUP_MAX_SIZE_REACHED" and len(h.group.members) == 1
    assert h.hb(a.member_id, 1, owned=ALL)["error"] == "NONE"


def test_an_unknown_server_assignor_is_refused():
    r = Harness().hb(assignor="sticky")
    assert r["error"] == "UNSUPPORTED_ASSIGNOR" and "uniform, range" in r["message"]


def test_a_joiner_gets_only_released_partitions_and_the_old_owner_keeps_its_epoch_until_it_revokes():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join()
    assert a.owned == ALL
    b.join()  # group epoch 2; b's target partitions are still a's
    assert h.group.group_epoch == 2 and b.epoch == 2 and b.owned == set()
    assert h.member(b.member_id).state is ConsumerGroupMemberState.UNRELEASED_PARTITIONS
    r = a.beat()  # a must revoke first: it stays in epoch 1 and is told only what it keeps
    kept = _assigned(r)
    assert r["member_epoch"] == 1 and len(kept) == 2
    assert h.member(a.member_id).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    moving = ALL - kept
    assert h.member(a.member_id).pending_revocation == moving
    assert _assigned(b.beat()) == set() and b.owned == set()  # still held by a: b waits
    r = a.beat()  # it reports owning only `kept`: the revocation is acknowledged
    assert r["member_epoch"] == 2 and h.member(a.member_id).state is ConsumerGroupMemberState.STABLE
    assert b.beat()["member_epoch"] == 2 and b.owned == moving
    assert h.group.state.value == "Stable"


def test_a_member_that_does_not_say_what_it_owns_is_assumed_to_own_it_still():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join()
    a.beat()
    h.hb(a.member_id, 1, owned=None)  # no topic_partitions: unknown, so still owned
    assert h.member(a.member_id).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS


# -- the epoch rules ------------------------------------------------------------------------------------
def test_a_larger_epoch_than_the_members_is_fenced():
    h = Harness()
    a = Client(h)
    a.join()
    r = h.hb(a.member_id, a.epoch + 1, owned=a.owned)
    assert r["error"] == "FENCED_MEMBER_EPOCH" and "greater member epoch" in r["message"]


def _member_at_epoch_two():
    """a was at epoch 1 owning everything; b joined and a moved to epoch 2, keeping half."""
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join()
    a.beat(), a.beat()
    assert a.epoch == 2 and h.member(a.member_id).previous_member_epoch == 1
    return h, a


def test_the_previous_epoch_is_accepted_when_what_it_owns_is_in_its_assignment():
    h, a = _member_at_epoch_two()
    r = h.hb(a.member_id, 1, owned=a.owned)  # the answer that bumped it was lost
    assert r["error"] == "NONE" and r["member_epoch"] == 2


@pytest.mark.parametrize("owned", ["all", None])
def test_the_previous_epoch_is_fenced_when_it_owns_more_than_its_assignment_or_does_not_say(owned):
    h, a = _member_at_epoch_two()
    r = h.hb(a.member_id, 1, owned=ALL if owned == "all" else None)
    assert r["error"] == "FENCED_MEMBER_EPOCH" and "smaller member epoch" in r["message"]


def test_an_epoch_older_than_the_previous_is_fenced():
    h, a = _member_at_epoch_two()
    h.group.put(h.member(a.member_id).with_epoch(3))  # previous 2, current 3
    assert h.hb(a.member_id, 1, owned=set())["error"] == "FENCED_MEMBER_EPOCH"


def test_an_unknown_member_or_group_is_told_so():
    h = Harness()
    assert h.hb("nobody", 3, owned=set())["error"] == "GROUP_ID_NOT_FOUND"
    Client(h).join()
    assert h.hb("nobody", 3, owned=set())["error"] == "UNKNOWN_MEMBER_ID"


def test_a_fenced_member_rejoins_with_epoch_zero_and_its_old_id():
    h = Harness()
    a = Client(h)
    a.join()
    h.advance(SESSION)  # silent: fenced
    assert h.hb(a.member_id, a.epoch, owned=a.owned)["error"] == "UNKNOWN_MEMBER_ID"
    r = h.hb(a.member_id, 0)
    assert r["error"] == "NONE" and r["member_id"] == a.member_id and _assigned(r) == ALL


# -- leaving, sessions, rebalance timeouts --------------------------------------------------------------
def test_leaving_with_epoch_minus_one_frees_the_partitions_and_bumps_the_group_epoch():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join(), a.beat(), a.beat(), b.beat()
    r = h.hb(a.member_id, -1)
    assert r["error"] == "NONE" and r["member_epoch"] == -1
    assert a.member_id not in h.group.members and h.group.group_epoch == 3
    assert b.beat()["member_epoch"] == 3 and b.owned == ALL


def test_a_session_expiry_fences_the_member_and_the_others_take_its_partitions():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join(), a.beat(), a.beat(), b.beat()
    h.advance(SESSION - 1)
    b.beat()  # b's session restarts; a's does not
    h.advance(1)
    assert a.member_id not in h.group.members and b.member_id in h.group.members
    assert ("member_expired", {"group": G, "member": a.member_id, "session_timeout_ms": SESSION}) in h.events
    assert b.beat()["member_epoch"] == 3 and b.owned == ALL


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join()
    h.hb(a.member_id, 1, owned=ALL)  # told to revoke; it never acknowledges
    assert h.member(a.member_id).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    waited = 0
    while waited < REBALANCE - 1:  # it keeps heartbeating, owning everything: its session stays alive
        step = min(INTERVAL, REBALANCE - 1 - waited)
        h.advance(step)
        waited += step
        h.hb(a.member_id, 1, owned=ALL)
        b.beat()
    assert a.member_id in h.group.members  # REBALANCE (20 s) is longer than the session (10 s): not the session
    h.advance(1)
    assert a.member_id not in h.group.members
    assert b.beat()["member_epoch"] == 3 and b.owned == ALL
    assert h.hb(a.member_id, 1, owned=ALL)["error"] == "UNKNOWN_MEMBER_ID"


# -- static members -----------------------------------------------------------------------------------
def test_a_static_member_that_left_with_minus_two_comes_back_with_its_partitions_and_no_new_group_epoch():
    h = Harness()
    a, b = Client(h, instance="i-a"), Client(h, instance="i-b")
    a.join(), b.join(), a.beat(), a.beat(), b.beat()
    epoch, owned = h.group.group_epoch, set(a.owned)
    r = h.hb(a.member_id, -2, instance="i-a")
    assert r["error"] == "NONE" and r["member_epoch"] == -2
    assert h.member(a.member_id).member_epoch == -2 and h.member(a.member_id).assigned == owned
    b.beat()
    assert b.owned == ALL - owned
    c = Client(h)  # a newcomer: the group epoch moves, yet a's partitions (held at epoch -2) go to nobody
    c.join()
    for _ in range(2):
        b.beat(), c.beat()
    assert not (c.owned | b.owned) & owned
    epoch = h.group.group_epoch
    back = Client(h, instance="i-a")
    r = back.join()
    # no rebalance: it gets at once what its instance is still targeted (the newcomer may have been given some)
    assert r["member_id"] != a.member_id and h.group.group_epoch == epoch
    assert back.owned and back.owned <= owned and back.owned == h.group.target[back.member_id]
    assert a.member_id not in h.group.members
    # the old process is fenced by instance id
    assert h.hb(a.member_id, a.epoch, owned=owned, instance="i-a")["error"] == "FENCED_INSTANCE_ID"


def test_a_static_member_whose_instance_is_still_held_gets_unreleased_instance_id():
    h = Harness()
    Client(h, instance="i-a").join()
    r = h.hb(epoch=0, instance="i-a")
    assert r["error"] == "UNRELEASED_INSTANCE_ID"


def test_a_static_member_that_left_temporarily_is_removed_when_its_session_expires():
    h = Harness()
    a, b = Client(h, instance="i-a"), Client(h)
    a.join(), b.join(), a.beat(), a.beat(), b.beat()
    h.hb(a.member_id, -2, instance="i-a")
    for _ in range(SESSION // INTERVAL):
        h.advance(INTERVAL)
        b.beat()
    assert a.member_id not in h.group.members and b.owned == ALL


# -- offsets ------------------------------------------------------------------------------------------
def test_commits_are_fenced_by_member_epoch():
    h, a = _member_at_epoch_two()
    assert h.commit(a.member_id, 2)["error"] == "NONE"
    assert h.commit(a.member_id, 1)["error"] == "STALE_MEMBER_EPOCH"
    assert h.commit(a.member_id, 3)["error"] == "STALE_MEMBER_EPOCH"
    assert h.commit("nobody", 2)["error"] == "UNKNOWN_MEMBER_ID"
    assert h.commit("", -1)["error"] == "UNKNOWN_MEMBER_ID"  # an admin commit only to an empty group
    assert h.coord.offsets[G][(T, 0)] == 5
    stale = h.coord.fetch_offsets({"group_id": G, "member_id": a.member_id, "member_epoch": 1})
    assert stale["error"] == "STALE_MEMBER_EPOCH"
    assert h.coord.fetch_offsets({"group_id": G})["offsets"] == [{"topic": T, "partition": 0, "offset": 5}]


def test_an_empty_consumer_group_takes_an_admin_commit():
    h = Harness()
    a = Client(h)
    a.join()
    h.hb(a.member_id, -1)
    assert h.commit("", -1)["error"] == "NONE"


# -- one group id, one kind ---------------------------------------------------------------------------
def test_a_classic_join_to_an_empty_consumer_group_turns_it_into_a_classic_group():
    h = Harness()
    a = Client(h)
    a.join()
    h.hb(a.member_id, -1)
    box = []
    h.coord.join_group({"group_id": G, "member_id": "", "session_timeout_ms": 10_000, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": {"topics": [T]}}]}, box.append)
    assert box[0]["error"] == "MEMBER_ID_REQUIRED" and G not in h.coord.consumer.groups and G in h.coord.groups


def test_a_classic_join_to_a_consumer_group_and_a_heartbeat_to_a_live_classic_group_are_refused():
    """A stated departure: Kafka 4.0 would migrate the group between the two kinds (online migration)."""
    h = Harness()
    Client(h).join()
    box = []
    h.coord.join_group({"group_id": G, "member_id": "", "session_timeout_ms": 10_000, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": {"topics": [T]}}]}, box.append)
    assert box[0]["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    other = Harness(group_initial_rebalance_delay_ms=0)
    first = []
    join = {"group_id": G, "member_id": "", "session_timeout_ms": 10_000, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": {"topics": [T]}}]}
    other.coord.join_group(join, first.append)
    other.coord.join_group({**join, "member_id": first[0]["member_id"]}, first.append)
    assert other.hb()["error"] == "GROUP_ID_NOT_FOUND"


# -- failover ------------------------------------------------------------------------------------------
def test_a_new_coordinator_reloads_the_group_and_its_members_go_on_with_their_epochs():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join(), a.beat()  # a in UNREVOKED_PARTITIONS at epoch 1
    successor = Harness(store=h.store)
    assert successor.group.group_epoch == 2
    assert successor.member(a.member_id).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    a.h = b.h = successor
    a.beat()  # the revocation is acknowledged to the new coordinator
    assert a.epoch == 2 and b.beat()["member_epoch"] == 2 and a.owned | b.owned == ALL and not (a.owned & b.owned)


def test_a_reloaded_group_restarts_every_session_and_revocation_deadline():
    h = Harness()
    a, b = Client(h), Client(h)
    a.join(), b.join()
    h.hb(a.member_id, 1, owned=ALL)  # a must revoke; nobody heartbeats after the failover
    successor = Harness(store=h.store)
    successor.advance(SESSION - 1)
    assert set(successor.group.members) == {a.member_id, b.member_id}
    successor.advance(1)
    assert not successor.group.members


def test_a_reloaded_member_that_must_revoke_is_fenced_at_its_rebalance_timeout():
    h = Harness()
    a = Client(h)
    r = h.hb(epoch=0, rebalance=SESSION // 2)
    a.member_id, a.epoch, a.owned = r["member_id"], r["member_epoch"], _assigned(r)
    Client(h).join()
    h.hb(a.member_id, a.epoch, owned=ALL)
    assert h.member(a.member_id).state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS
    successor = Harness(store=h.store)
    successor.advance(SESSION // 2 - 1)
    assert a.member_id in successor.group.members
    successor.advance(1)
    assert a.member_id not in successor.group.members and len(successor.group.members) == 1


def test_a_consumer_session_timeout_outside_its_bounds_is_a_config_error():
    with pytest.raises(ValueError, match="group.consumer.session.timeout.ms=6000 is outside"):
        CoordinatorConfig.from_properties({"group.consumer.session.timeout.ms": "6000"})
    with pytest.raises(ValueError, match="group.consumer.assignors"):
        CoordinatorConfig.from_properties({"group.consumer.assignors": "sticky"})
    ok = CoordinatorConfig.from_properties({"group.consumer.session.timeout.ms": "6000",
                                            "group.consumer.min.session.timeout.ms": "6000",
                                            "group.consumer.heartbeat.interval.ms": "1000",
                                            "group.consumer.min.heartbeat.interval.ms": "1000"})
    assert (ok.group_consumer_session_timeout_ms, ok.group_consumer_heartbeat_interval_ms) == (6000, 1000)


# -- the invariant, over any sequence -----------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "beat", "beat", "beat", "expire"]),
                          st.integers(0, 4)), min_size=1, max_size=40))
def test_no_partition_is_ever_owned_by_two_members(steps):
    """Whatever joins, leaves, heartbeats and expiries happen, the members' owned sets never overlap, and once
    everyone has heartbeated enough the group is stable with every partition owned once."""
    h = Harness()
    clients: list[Client] = []
    for action, k in steps:
        live = [c for c in clients if c.member_id in h.group.members] if G in h.coord.consumer.groups else []
        if action == "join" or not live:
            c = Client(h)
            c.join()
            clients.append(c)
        elif action == "leave":
            c = live[k % len(live)]
            h.hb(c.member_id, -1)
            c.owned = set()
        elif action == "expire":
            c = live[k % len(live)]
            for other in live:
                if other is not c:
                    other.beat()
            h.advance(SESSION - 1)
            for other in live:
                if other is not c:
                    other.beat()
            h.advance(1)
            c.owned = set()  # a fenced member gives everything up (onPartitionsLost)
        else:
            live[k % len(live)].beat()
        owners = [c.owned for c in clients if c.owned]
        assert sum(map(len, owners)) == len(set().union(*owners)) if owners else True
    live = [c for c in clients if c.member_id in h.group.members] or [Client(h)]
    if not live[0].member_id:
        live[0].join()
    for _ in range(3):
        for c in live:
            c.beat()
    assert h.group.state.value == "Stable"
    owned = [p for c in live for p in c.owned]
    assert sorted(owned) == sorted(ALL)
