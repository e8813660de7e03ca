"""`bench hostile`: tens of thousands of seeded hostile frames at a running broker's two listeners.

One broker process with every plug-in the lab's families use (the group
coordinator, RocketMQ's and TubeMQ's services) on a real ZooKeeper, topic `t`
of two partitions. The frames come from `hostile_frames.py`, one `Random` per
listener seeded from `--seed`, so a run is replayed exactly:

- the JSON listener gets `--frames` frames from `lab_frame`, on one connection
  at a time (a new one after each the server closes or keeps);
- the Kafka listener gets `--frames` frames from `kafka_frame`, likewise.

Each frame's outcome is one of:

- `answered`: an answer came (its error counted); an UNKNOWN_SERVER_ERROR is
  also counted as a `handler_error` (a handler broke on the input);
- `closed`: the server closed the connection, as it must for a frame it
  cannot trust (broken JSON framing; a Kafka request that does not decode or
  is not served); a Kafka close whose logged reason is "failed in the lab" is
  a `handler_error`;
- `held`: no answer within `--patience-s` for a request held by design
  (JoinGroup, SyncGroup, a Fetch waiting for data) or never answered by
  design (a Produce with acks=0);
- `abandoned`: the frame's size promised more bytes than were sent, and the
  client went away (the server must see the connection end inside a frame);
- `hang`: no answer within `--patience-s` otherwise: a failure.

Every 1,000 frames and at the end the broker process is checked alive
(`crashes`: it died) and its resident memory and thread count sampled; at the
end both listeners must still serve a well-formed request (JSON Metadata,
Kafka ApiVersions and Metadata through kafka-python's classes). The figures
go to `--out` (default `benchmarks/hostile_input.json`). A benchmark: it
writes what it saw; nothing here asserts.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from kazoo.client import KazooClient
from rich.console import Console

from experiments.bench.hostile_frames import HELD_BY_DESIGN, kafka_frame, kafka_seeds, lab_frame
from experiments.engine.environment import lab_commit, machine
from experiments.engine.families import BROKER_PLUGINS
from lab_cluster.broker.admin import BrokerProcess, create_topic, wait_for_metadata
from lab_cluster.cleanup import make_temp_dir, remove_temp_dir
from lab_cluster.kafka_listener.messages import SERVED
from lab_cluster.kafka_listener.server import MAX_REQUEST_BYTES
from lab_cluster.ports import LOOPBACK
from lab_cluster.wire import MAX_FRAME_BYTES, WireClient, recv_exactly
from lab_cluster.zk import provision

BROKER_CONFIG = {"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
SAMPLE_EVERY = 1000


def add_parser(sub) -> None:
    p = sub.add_parser("hostile", help="seeded hostile frames at a broker's two listeners: crashes, hangs, memory")
    p.add_argument("--frames", type=int, default=25_000, help="frames per listener (default 25,000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--patience-s", type=float, default=2.0, help="how long a frame's answer is awaited")
    p.add_argument("--backend", help="ZooKeeper backend (default: LAB_ZK_BACKEND or auto)")
    p.add_argument("--out", default="benchmarks/hostile_input.json")
    p.set_defaults(run=run)


class _Target:
    """One listener, one connection at a time: `send(frame)` -> (outcome, detail)."""

    def __init__(self, port: int, patience_s: float, read_answer):
        self.port, self.patience_s, self.read_answer = port, patience_s, read_answer
        self.sock: socket.socket | None = None

    def send(self, frame: bytes, *, then_go: bool = False) -> tuple[str, object]:
        """`then_go`: the frame is cut short; the sender goes away after it (`abandoned`), as a client that
        crashed mid-write would, and the server is left to see the connection end inside a frame."""
        if self.sock is None:
            self.sock = socket.create_connection((LOOPBACK, self.port), timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(self.patience_s)
        try:
            self.sock.sendall(frame)
            if then_go:
                self.close()
                return "abandoned", None
            answer = self.read_answer(self.sock)
        except TimeoutError:
            self.close()
            return "timeout", None
        except OSError:  # reset by the server while we wrote or read: it closed the connection
            self.close()
            return "closed", None
        if answer is None:
            self.close()
            return "closed", None
        return "answered", answer

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _read_lab_answer(sock: socket.socket) -> dict | None:
    """The answer on the lab's wire, past any frame the server pushed unasked (RocketMQ's notifications to a
    channel that sent HEART_BEAT)."""
    while True:
        head = recv_exactly(sock, 4)
        if not head or len(head) < 4:
            return None
        body = recv_exactly(sock, struct.unpack(">I", head)[0])
        answer = json.loads(body) if body else None
        if answer is None or "push" not in answer:
            return answer


def _read_kafka_answer(sock: socket.socket) -> bytes | None:
    head = recv_exactly(sock, 4)
    if not head or len(head) < 4:
        return None
    return recv_exactly(sock, struct.unpack(">i", head)[0])


def _proc_figures(pid: int) -> dict | None:
    """{rss_mib, threads} of a live process, None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip().startswith("Z"):
        return None
    return {"rss_mib": round(int(fields["VmRSS"].split()[0]) / 1024, 1), "threads": int(fields["Threads"])}


def _json_listener(broker: BrokerProcess, frames: int, seed: int, patience_s: float, samples: list) -> dict:
    rng, target = random.Random(seed), _Target(broker.port, patience_s, _read_lab_answer)
    outcomes, errors, hangs, broke = Counter(), Counter(), [], []
    for i in range(frames):
        frame, well_framed = lab_frame(rng)
        api = json.loads(frame[4:]).get("api") if well_framed else None
        declared = struct.unpack(">I", frame[:4])[0]
        outcome, answer = target.send(frame, then_go=len(frame) - 4 < declared <= MAX_FRAME_BYTES)
        if outcome == "answered":
            errors[answer.get("error", "?")] += 1
            if answer.get("error") == "UNKNOWN_SERVER_ERROR":
                broke.append({"frame": i, "message": answer.get("message", "")[:200], "request": frame[4:404].decode()})
            if not well_framed:  # the server answers a broken frame INVALID_REQUEST, then closes
                target.close()
        elif outcome == "timeout":
            if well_framed and api in HELD_BY_DESIGN:
                outcome = "held"
            else:
                outcome = "hang"
                hangs.append({"frame": i, "api": api if well_framed else "(a broken frame)"})
        outcomes[outcome] += 1
        if (i + 1) % SAMPLE_EVERY == 0:
            samples.append({"listener": "json", "frames": i + 1, **(_proc_figures(broker.pid) or {"dead": True})})
    target.close()
    return {"frames": frames, "outcomes": dict(outcomes), "answers_by_error": dict(errors.most_common()),
            "handler_errors": errors.get("UNKNOWN_SERVER_ERROR", 0), "handler_error_examples": broke[:10],
            "hangs": len(hangs), "hang_examples": hangs[:10]}


def _kafka_listener(broker: BrokerProcess, frames: int, seed: int, patience_s: float, samples: list) -> dict:
    rng, target = random.Random(seed), _Target(broker.kafka_port, patience_s, _read_kafka_answer)
    seeds = kafka_seeds()
    outcomes, hangs = Counter(), []
    for i in range(frames):
        frame = kafka_frame(rng, seeds)
        declared = struct.unpack(">i", frame[:4])[0]
        key = struct.unpack(">h", frame[4:6])[0] if len(frame) >= 6 else None
        api = SERVED[key].name if key in SERVED else None
        outcome, _ = target.send(frame, then_go=len(frame) - 4 < declared <= MAX_REQUEST_BYTES)
        if outcome == "timeout":
            if api in HELD_BY_DESIGN or _acks_zero(frame):
                outcome = "held"
            else:
                outcome = "hang"
                hangs.append({"frame": i, "api": api, "bytes": frame.hex()[:400]})
        outcomes[outcome] += 1
        if (i + 1) % SAMPLE_EVERY == 0:
            samples.append({"listener": "kafka", "frames": i + 1, **(_proc_figures(broker.pid) or {"dead": True})})
    target.close()
    return {"frames": frames, "outcomes": dict(outcomes), "hangs": len(hangs), "hang_examples": hangs[:10]}


def _acks_zero(frame: bytes) -> bool:
    """Whether a Kafka frame is a Produce with acks=0, which Kafka never answers."""
    key, version = struct.unpack(">hh", frame[4:8]) if len(frame) >= 8 else (None, None)
    if key != 0 or not SERVED[0].serves(version):
        return False
    try:
        return SERVED[0].decode(frame[4:], version)[0].acks == 0
    except Exception:  # noqa: BLE001 - a frame that does not decode is not one
        return False


def _kafka_closes(trial_dir: Path) -> tuple[Counter, list[str]]:
    """The broker's recorded reasons for closing Kafka connections, by kind, and those that were a handler's."""
    kinds, failed = Counter(), []
    for path in (trial_dir / "traces").glob("broker-1*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            event = json.loads(line)
            if event["kind"] == "kafka_connection_closed":
                reason = json.loads(event["fields"])["reason"]
                if "failed in the lab" in reason:
                    failed.append(reason[:200])
                kinds["failed in the lab" if "failed in the lab" in reason
                      else "malformed" if "malformed" in reason
                      else "not served" if "not served" in reason
                      else "framing"] += 1
    return kinds, failed


def _still_serving(broker: BrokerProcess) -> dict:
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

    served = {}
    try:
        client = WireClient(LOOPBACK, broker.port, timeout_s=10)
        served["json_metadata"] = "t" in client.call("Metadata")["topics"]
        client.close()
    except (ConnectionError, OSError) as exc:
        served["json_metadata"] = f"failed: {exc}"
    for name, request, response, version in (("kafka_api_versions", ApiVersionsRequest[0](), ApiVersionsResponse, 0),
                                             ("kafka_metadata", MetadataRequest[1](topics=None), MetadataResponse, 1)):
        request.with_header(correlation_id=7, client_id="bench")
        try:
            with socket.create_connection((LOOPBACK, broker.kafka_port), timeout=10) as sock:
                sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
                body = _read_kafka_answer(sock)
            decoded = response.decode(body, version=version, header=True)
            served[name] = decoded.error_code == 0 if hasattr(decoded, "error_code") else \
                any(t.name == "t" for t in decoded.topics)
        except (OSError, ValueError, TypeError) as exc:
            served[name] = f"failed: {exc}"
    return served


def run(args) -> int:
    console = Console()
    trial_dir = make_temp_dir("bench-hostile")
    samples: list[dict] = []
    try:
        with provision(servers=1, backend=args.backend) as zk:
            admin = KazooClient(hosts=zk.connect, timeout=10)
            admin.start(timeout=30)
            broker = BrokerProcess(1, zk.connect, trial_dir, plugins=BROKER_PLUGINS, config=BROKER_CONFIG)
            try:
                create_topic(admin, "t", 2, [1], replication_factor=1)
                wait_for_metadata(admin, "t", 2)
                before = _proc_figures(broker.pid)
                t0 = time.perf_counter()
                json_side = _json_listener(broker, args.frames, args.seed, args.patience_s, samples)
                console.print(f"JSON listener: {json_side['outcomes']}")
                kafka_side = _kafka_listener(broker, args.frames, args.seed, args.patience_s, samples)
                wall_s = time.perf_counter() - t0
                console.print(f"Kafka listener: {kafka_side['outcomes']}")
                time.sleep(1.0)  # the last closes reach the broker's trace
                after = _proc_figures(broker.pid)
                serving = _still_serving(broker) if after else {}
                closes, failed = _kafka_closes(trial_dir)
                kafka_side["closes_by_reason"] = dict(closes)
                kafka_side["handler_error_examples"] = sorted(set(failed))[:10]
                kafka_side["handler_errors"] = kafka_side["closes_by_reason"].get("failed in the lab", 0)
                log = (trial_dir / "proc" / "broker-1.log").read_text(errors="replace")
            finally:
                broker.stop()
                admin.stop()
                admin.close()
            zk_info = {"zk_backend": zk.backend, "zk_version": zk.version}
    finally:
        remove_temp_dir(trial_dir)
    doc = {"benchmark": "hostile input", "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "lab_commit": lab_commit(), "machine": machine(), **zk_info, "seed": args.seed,
           "frames_per_listener": args.frames,
           "patience_s": args.patience_s, "wall_s": round(wall_s, 1),
           "frames_per_s": round(2 * args.frames / wall_s),
           "crashes": 0 if after else 1,
           "hangs": json_side["hangs"] + kafka_side["hangs"],
           "handler_errors": json_side["handler_errors"] + kafka_side["handler_errors"],
           "tracebacks_in_broker_log": log.count("Traceback"),
           "still_serving": serving, "broker_before": before, "broker_after": after,
           "json_listener": json_side, "kafka_listener": kafka_side, "samples": samples}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(f"{2 * args.frames:,} frames in {wall_s:.0f} s: crashes {doc['crashes']}, hangs {doc['hangs']}, "
                  f"handler errors {doc['handler_errors']}, broker RSS {before['rss_mib']} -> "
                  f"{after['rss_mib'] if after else '?'} MiB, threads {before['threads']} -> "
                  f"{after['threads'] if after else '?'}, still serving {serving}")
    console.print(f"written to {out}")
    return 0
