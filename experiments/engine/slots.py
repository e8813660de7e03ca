"""How many timing-sensitive trials may run at once on one machine.

A trial measures convergence times and counts messages; two trials sharing a
small machine's cores would each measure the other's load. So each Spark task
takes one of `slots` machine-wide slots before it starts its trial: a lock file
in the machine's temp directory, held with `flock` (the kernel releases it if
the task dies). With one slot trials run one after another on each machine
however many cores Spark has; `--trials-per-machine K` allows K (the CLI's
default is `profiles.TRIALS_PER_MACHINE`, 3: on 2 cores the tour starved no host
at 4). On a Spark cluster each worker machine has its own slots.

Usage::

    with machine_slot(1):
        run_trial(spec, trial_dir)
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

SLOT_DIR = Path(tempfile.gettempdir()) / "rebalance-lab-slots"


@contextmanager
def machine_slot(slots: int = 1, poll_s: float = 0.2):
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    while True:
        for i in range(max(1, slots)):
            fd = os.open(SLOT_DIR / f"slot-{i}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield i
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        time.sleep(poll_s)
