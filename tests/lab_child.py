"""A lab process for the leak tests: starts ZooKeeper, then ends the way it is told.

    python tests/lab_child.py BACKEND SERVERS ENDING

ENDING is `exit` (returns normally), `raise` (an exception escapes), or `wait`
(prints READY and waits to be signalled by the test: SIGINT, SIGTERM, SIGKILL).
"""

import sys
import threading

from lab_cluster.zk import provision


def main(backend: str, servers: int, ending: str) -> None:
    zk = provision(servers=servers, backend=backend)
    print(f"READY {zk.connect}", flush=True)
    if ending == "raise":
        raise RuntimeError("an experiment failed half-way")
    if ending == "wait":
        threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
