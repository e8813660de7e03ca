"""Static membership (KIP-345) on the client side, without a broker: Kafka 3.6's ConsumerCoordinator rules.

The consumer is never started: its requests go to a `Coordinator` stand-in
that records them and answers as told, so these tests see exactly what the
consumer sends (`group_instance_id` included) and what it does with each
answer. That it works against real brokers (a restart without a rebalance,
the old process fenced) is left to an end-to-end test.
"""

import pytest

from lab_cluster.errors import LabError
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode as E
from modern_coord import FAMILY
from modern_coord.config import ConsumerConfig, group_instance_id_problem
from modern_coord.consumer import ModernConsumer
from modern_coord.coordinator_link import ConsumerFailed
from modern_coord.error_policy import ErrorAction, commit_retriable, error_action, rejoins_at_once
from modern_coord.member import NO_GENERATION, ClassicMemberState, Generation, RebalanceListener

BASE = {"group.id": "g", "bootstrap.servers": "127.0.0.1:9"}


def config(**props) -> ConsumerConfig:
    return ConsumerConfig.from_dict({**BASE, **{k.replace("_", "."): v for k, v in props.items()}})


# -- group.instance.id ---------------------------------------------------------------------------------------

def test_without_group_instance_id_the_member_is_dynamic_as_in_java():
    c = config()
    assert c.group_instance_id is None and not c.is_static
    assert c.as_record()["group.instance.id"] is None  # consumer_start records it with the rest of the config
    assert config(group_instance_id=None).group_instance_id is None  # Java's null: the default


def test_a_valid_group_instance_id_makes_a_static_member_and_names_its_default_client_id():
    for ok in ("web-1", "a.b_c-D9", "x" * 249, "..."):
        assert config(group_instance_id=ok).is_static, ok
    assert config(group_instance_id="web-1").client_id == "consumer-g-web-1"  # Java's maybeOverrideClientId
    assert config(group_instance_id="web-1", client_id="c1").client_id == "c1"


@pytest.mark.parametrize("bad, why", [
    ("", "must be non-empty"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("x" * 250, "longer than the max allowed length 249"),
    ("web 1", "characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("web/1", "characters other than ASCII alphanumerics"),
    ("wéb", "characters other than ASCII alphanumerics"),
])
def test_group_instance_id_is_refused_by_kafkas_rules_with_a_clear_message(bad, why):
    with pytest.raises(LabError, match="group.instance.id") as refused:
        config(group_instance_id=bad)
    assert why in str(refused.value) and "dynamic member" in str(refused.value)
    assert group_instance_id_problem(bad) is not None


def test_an_invalid_group_instance_id_is_listed_with_the_other_problems():
    with pytest.raises(LabError) as refused:
        config(group_instance_id="a b", session_timeout_ms=1000)
    assert "group.instance.id" in str(refused.value) and "heartbeat.interval.ms" in str(refused.value)


# -- the error policy ----------------------------------------------------------------------------------------

def test_fenced_instance_id_is_fatal_on_every_request_that_names_the_instance():
    for api in ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit"):
        assert error_action(api, E.FENCED_INSTANCE_ID) is ErrorAction.FATAL, api
    assert error_action("FindCoordinator", E.FENCED_INSTANCE_ID) is ErrorAction.RETRY  # never answered so
    assert error_action("OffsetFetch", E.FENCED_INSTANCE_ID) is ErrorAction.RETRY  # carries no instance id
    assert error_action("LeaveGroup", E.FENCED_INSTANCE_ID) is ErrorAction.PROCEED  # the member has left anyway
    assert not rejoins_at_once("fenced_instance_id") and not commit_retriable(E.FENCED_INSTANCE_ID)


def test_the_error_table_in_the_docstring_has_the_fenced_instance_row():
    import modern_coord.error_policy as module

    row = next(line.split() for line in module.__doc__.splitlines() if line.strip().startswith("FENCED_INSTANCE_ID"))
    assert row == ["FENCED_INSTANCE_ID", "retry", "fatal", "fatal", "***", "fatal", "***", "retry"]


# -- the requests ---------------------------------------------------------------------------------------------

class Coordinator:
    """Stands in for the coordinator's connection: records each request, answers from `answers[api]` (a list
    consumed in order; the last one repeats), NONE if none is given."""

    def __init__(self, **answers):
        self.sent: list[tuple[str, dict]] = []
        self.answers = {api: list(a) for api, a in answers.items()}

    def request(self, api, version=1, *, timeout_s=None, **body):
        self.sent.append((api, body))
        queue = self.answers.get(api) or [{}]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return {"error_code": 0, **answer}

    def close(self, retire=False):
        pass

    def apis(self):
        return [api for api, _ in self.sent]

    def bodies(self, api):
        return [body for a, body in self.sent if a == api]


class Revocations(RebalanceListener):
    def __init__(self):
        self.revoked = []

    def on_partitions_revoked(self, partitions):
        self.revoked.append(list(partitions))


def member(tmp_path, coordinator: Coordinator, instance: str | None = "i-1", **props) -> ModernConsumer:
    """A consumer never started, its poll loop's and heartbeat thread's connections both `coordinator`."""
    cfg = config(client_id="c1", **({"group_instance_id": instance} if instance else {}), **props)
    consumer = ModernConsumer(cfg, ["t"], TraceRecorder(tmp_path, trial="t", design="classic", actor="c1"),
                              name="c1", listener=Revocations())
    consumer._coordinator = ("127.0.0.1", 9)
    consumer._coord_client = consumer._hb_client = coordinator
    consumer.events = []
    record = consumer.trace.record
    consumer.trace.record = lambda kind, **f: consumer.events.append((kind, f)) or record(kind, **f)
    return consumer


def stable(consumer: ModernConsumer, member_id="i-1-a", generation=3, partitions=(("t", 0),)) -> ModernConsumer:
    """As if it had joined and synced: STABLE in `generation`, with positions ahead of its commits."""
    consumer.member_id = member_id
    consumer.generation = Generation(generation, member_id, "range")
    consumer.state = ClassicMemberState.STABLE
    consumer._rejoin_reason = None
    consumer._assignment = list(partitions)
    consumer._positions = {tp: 10 for tp in partitions}
    consumer._committed = {tp: 5 for tp in partitions}
    return consumer


JOINED = {"member_id": "i-1-5f0c", "generation_id": 4, "leader": "i-0-77aa", "protocol_name": "range",
          "members": []}


def test_a_static_member_joins_with_no_member_id_and_its_instance_id_and_is_answered_its_id_at_once(tmp_path):
    coordinator = Coordinator(JoinGroup=[JOINED], SyncGroup=[{"assignment": {"partitions": [["t", 1]]}}],
                              OffsetFetch=[{"offsets": [{"topic": "t", "partition": 1, "offset": 7}]}])
    consumer = member(tmp_path, coordinator)
    assert consumer._join_and_sync() == "ok"
    assert coordinator.apis() == ["JoinGroup", "SyncGroup", "OffsetFetch"]  # no MEMBER_ID_REQUIRED round
    join, = coordinator.bodies("JoinGroup")
    assert join["member_id"] == "" and join["group_instance_id"] == "i-1"
    sync, = coordinator.bodies("SyncGroup")
    assert sync["member_id"] == "i-1-5f0c" and sync["group_instance_id"] == "i-1" and sync["generation_id"] == 4
    assert sync["assignments"] == []  # the coordinator named another leader (a restart while Stable): a follower
    assert consumer.member_id == "i-1-5f0c" and consumer.state is ClassicMemberState.STABLE
    assert consumer.assignment() == [("t", 1)]


def test_heartbeat_and_commit_carry_the_instance_id(tmp_path):
    coordinator = Coordinator()
    consumer = stable(member(tmp_path, coordinator))
    consumer._heartbeat_step(consumer.heartbeat._next_due_ms)
    assert consumer._commit_positions("auto-commit") is E.NONE
    heartbeat, = coordinator.bodies("Heartbeat")
    commit, = coordinator.bodies("OffsetCommit")
    assert heartbeat["group_instance_id"] == commit["group_instance_id"] == "i-1"
    assert (heartbeat["member_id"], heartbeat["generation_id"]) == (commit["member_id"], commit["generation_id"]) \
        == ("i-1-a", 3)


def test_a_dynamic_member_sends_a_null_instance_id_as_java_does(tmp_path):
    coordinator = Coordinator(JoinGroup=[JOINED], SyncGroup=[{"assignment": {"partitions": []}}])
    consumer = member(tmp_path, coordinator, instance=None)
    assert consumer._join_and_sync() == "ok"
    stable(consumer)
    consumer._heartbeat_step(consumer.heartbeat._next_due_ms)
    consumer._commit_positions("auto-commit")
    assert coordinator.apis() == ["JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit"]
    assert all(body["group_instance_id"] is None for _, body in coordinator.sent)


# -- fenced: the consumer stops ---------------------------------------------------------------------------------

def fenced():
    return {"error_code": int(E.FENCED_INSTANCE_ID)}


@pytest.mark.parametrize("api", ["JoinGroup", "SyncGroup"])
def test_a_fenced_join_or_sync_stops_the_consumer(tmp_path, api):
    answers = {"JoinGroup": [JOINED], "SyncGroup": [{"assignment": {"partitions": []}}]}
    answers[api] = [fenced()]
    consumer = member(tmp_path, Coordinator(**answers))
    with pytest.raises(ConsumerFailed, match=f"{api}: FENCED_INSTANCE_ID"):
        consumer._join_and_sync()


def test_a_fenced_heartbeat_fails_the_heartbeat_thread_and_the_poll_loop_stops_the_consumer(tmp_path):
    coordinator = Coordinator(Heartbeat=[fenced()])
    consumer = stable(member(tmp_path, coordinator))
    consumer._heartbeat_step(consumer.heartbeat._next_due_ms)
    assert consumer._heartbeat_failure == "Heartbeat: FENCED_INSTANCE_ID"
    assert consumer._rejoin_reason is not None  # Java's resetStateOnResponseError: the fetch round stops
    # the thread is disabled: no more heartbeats
    consumer._heartbeat_step(consumer.heartbeat._next_due_ms + 10_000)
    assert coordinator.apis() == ["Heartbeat"]
    # the poll loop raises it at its next turn, and stops as on any fatal error: no commit, no LeaveGroup
    consumer._poll_loop()
    assert consumer.error == "Heartbeat: FENCED_INSTANCE_ID" and consumer.snapshot().gave_up
    assert ("consumer_failed", {"member": "i-1-a", "reason": "Heartbeat: FENCED_INSTANCE_ID"}) in consumer.events
    assert coordinator.apis() == ["Heartbeat"]
    assert consumer.listener.revoked == [[("t", 0)]] and consumer.state is ClassicMemberState.UNJOINED


def test_a_fenced_heartbeat_for_a_generation_already_left_is_ignored(tmp_path):
    consumer = stable(member(tmp_path, Coordinator()), generation=5)
    consumer._handle_heartbeat_response(E.FENCED_INSTANCE_ID, Generation(4, "i-1-a", "range"))
    assert consumer._heartbeat_failure is None and consumer._rejoin_reason is None
    assert consumer.events[-1] == ("heartbeat", {"member": "i-1-a", "generation": 4, "error": "FENCED_INSTANCE_ID",
                                                 "ignored": True})


def test_a_fenced_commit_stops_the_consumer_and_is_recorded_as_fenced(tmp_path):
    consumer = stable(member(tmp_path, Coordinator(OffsetCommit=[fenced()])))
    with pytest.raises(ConsumerFailed, match="OffsetCommit: FENCED_INSTANCE_ID"):
        consumer._commit_positions("auto-commit")
    commit = next(f for kind, f in consumer.events if kind == "commit")
    assert commit["outcome"] == "fenced" and commit["error"] == "FENCED_INSTANCE_ID"


def test_a_fenced_commit_for_a_generation_already_left_fails_without_stopping_the_consumer(tmp_path):
    """Java's OffsetCommitResponseHandler: with the generation changed, CommitFailedException (or
    RebalanceInProgressException), not FencedInstanceIdException."""
    consumer = stable(member(tmp_path, Coordinator(OffsetCommit=[fenced()])))
    sent_under = consumer.generation
    consumer.generation = Generation(4, "i-1-b", "range")  # it has moved on meanwhile
    error = consumer._handle_commit_response(fenced(), {("t", 0): 10}, sent_under, "auto-commit")
    assert error is E.FENCED_INSTANCE_ID and consumer._rejoin_reason is None and consumer._reset is None
    assert next(f for kind, f in consumer.events if kind == "commit")["outcome"] == "fenced"


# -- leaving ---------------------------------------------------------------------------------------------------

def test_a_static_member_stops_with_a_commit_and_a_revocation_and_no_leave_group(tmp_path):
    """Java's close: maybeAutoCommitOffsetsSync, onLeavePrepare, then maybeLeaveGroup, which only a dynamic
    member (isDynamicMember) sends."""
    coordinator = Coordinator()
    consumer = stable(member(tmp_path, coordinator))
    consumer._leave()
    assert coordinator.apis() == ["OffsetCommit"]
    assert consumer.listener.revoked == [[("t", 0)]]
    assert consumer.generation == NO_GENERATION and consumer.state is ClassicMemberState.UNJOINED
    assert not any(kind == "leave" for kind, _ in consumer.events)


def test_a_dynamic_member_still_sends_leave_group_when_it_stops(tmp_path):
    coordinator = Coordinator(LeaveGroup=[{}])
    consumer = stable(member(tmp_path, coordinator, instance=None), member_id="c1-a")
    consumer._leave()
    assert coordinator.apis() == ["OffsetCommit", "LeaveGroup"]
    assert coordinator.bodies("LeaveGroup")[0]["member_id"] == "c1-a"


def test_a_commit_fenced_while_stopping_does_not_raise_and_sends_no_leave_group(tmp_path):
    coordinator = Coordinator(OffsetCommit=[fenced()])
    consumer = stable(member(tmp_path, coordinator))
    consumer._leave()  # Java's close logs a failed auto-commit and goes on
    assert coordinator.apis() == ["OffsetCommit"] and consumer.listener.revoked == [[("t", 0)]]


def test_on_max_poll_interval_a_static_member_sends_no_leave_group_but_resets_and_rejoins(tmp_path):
    """Java's maybeLeaveGroup on a poll timeout: no LeaveGroup for a static member, but
    resetGenerationOnLeaveGroup all the same (generation and member id), and a rejoin."""
    coordinator = Coordinator()
    consumer = stable(member(tmp_path, coordinator, max_poll_interval_ms=1000))
    consumer._heartbeat_step(consumer.heartbeat.last_poll_ms + 1000)
    assert coordinator.apis() == []
    assert consumer.generation == NO_GENERATION and consumer.member_id == ""
    assert consumer.state is ClassicMemberState.UNJOINED
    assert consumer._rejoin_reason == "consumer poll timeout has expired"
    assert [kind for kind, _ in consumer.events][:2] == ["poll_timeout", "generation_reset"]
    # the next JoinGroup: no member id, its instance id (the coordinator gives the instance a new member id)
    coordinator.answers["JoinGroup"] = [JOINED]
    coordinator.answers["SyncGroup"] = [{"assignment": {"partitions": [["t", 0]]}}]
    coordinator.answers["OffsetFetch"] = [{"offsets": [{"topic": "t", "partition": 0, "offset": 5}]}]
    assert consumer._join_and_sync() == "ok"
    join, = coordinator.bodies("JoinGroup")
    assert join["member_id"] == "" and join["group_instance_id"] == "i-1"


def test_on_max_poll_interval_a_dynamic_member_still_sends_leave_group(tmp_path):
    coordinator = Coordinator(LeaveGroup=[{}])
    consumer = stable(member(tmp_path, coordinator, instance=None, max_poll_interval_ms=1000), member_id="c1-a")
    consumer._heartbeat_step(consumer.heartbeat.last_poll_ms + 1000)
    assert coordinator.apis() == ["LeaveGroup"] and consumer.member_id == ""


def test_the_familys_stop_text_says_a_static_member_does_not_leave():
    assert "LeaveGroup" in FAMILY.stops_by and "group.instance.id" in FAMILY.stops_by
