"""Finding a group's coordinator: one FindCoordinator request, and the wait for an answer that names one.

Any broker answers FindCoordinator for any group: the coordinator is the
leader of `__consumer_offsets` partition `partitionFor(group)`
(`coordinator/coordinator.py: partition_for`). Until that topic exists and has a leader the
answer is COORDINATOR_NOT_AVAILABLE, which a client retries. The consumer asks
once per lookup (`consumer.py: CoordinatorLink`, which also handles the
fatal errors); the trial runner, the benchmark and the tests, which only need
the address, wait with `wait_for_coordinator`.
"""

from __future__ import annotations

import time

from lab_cluster.wire import ErrorCode, WireClient


def find_coordinator(host: str, port: int, group: str, client_id: str, timeout_s: float = 5) -> dict:
    """One FindCoordinator to the broker at host:port: its answer (`error_code`, `node_id`, `host`, `port`).

    Raises ConnectionError when the broker cannot be reached."""
    client = WireClient(host, port, client_id=client_id, timeout_s=timeout_s)
    try:
        return client.request("FindCoordinator", group_id=group)
    finally:
        client.close()


def wait_for_coordinator(brokers: list[tuple[str, int]], group: str, client_id: str, within_s: float = 60,
                         retry_s: float = 0.2) -> tuple[int, str, int]:
    """(node id, host, port) of the group's coordinator, asking the brokers in turn until one names it.

    Raises TimeoutError, with the last answer, if none does within `within_s`."""
    deadline = time.monotonic() + within_s
    last: object = "no broker answered"
    while True:
        for host, port in brokers:
            try:
                answer = find_coordinator(host, port, group, client_id)
            except ConnectionError as exc:
                last = exc
                continue
            if ErrorCode(answer.get("error_code", 0)) is ErrorCode.NONE:
                return answer["node_id"], answer["host"], int(answer["port"])
            last = answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for {group} within {within_s:.0f} s: {last}")
        time.sleep(retry_s)
