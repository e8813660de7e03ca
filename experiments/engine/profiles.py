"""The grid sizes, named by purpose: `tour`, `standard`, `full`.

Every experiment's grid comes in profiles (`Experiment.profiles`), and a profile
is named for what a user wants from it:

- **tour**: the lab's answer in a few minutes (`reproduce` with no profile). Only
  the experiments and designs that show the mission's answer, each at the
  smallest size its findings can be judged on: the herd of the ZooKeeper era,
  the classic coordinator and KIP-848 at three group sizes; split brain of the
  ZooKeeper era and the coordinator at no lag and the largest lag; the zombie,
  paused and cut off, of both eras. An experiment that has no `tour` entry is
  not in the tour; a `tour` entry names its `designs` and says `why` it is in.
- **standard**: every design in every experiment, the grid the published
  `REPORT.md` comes from (its time here, three trials at a time: `reproduce_standard` in
  `benchmarks/harness.json`; the grid has grown since, see `benchmarks/README.md`).
- **full**: the long grids (N up to 256 in the herd), run one experiment at a
  time and published beside the standard run (`report/full_runs.py`).

`quick` is the standard profile's old name: a command or a stored run that says
`quick` means `standard` (`canonical`), and the CLI says so when given it.
"""

from __future__ import annotations

from lab_cluster.errors import LabError

TOUR, STANDARD, FULL = "tour", "standard", "full"
#: every profile, smallest first (what `--profile` offers)
PROFILES: tuple[str, ...] = (TOUR, STANDARD, FULL)
#: old names that still work: {old: the profile it means now}
ALIASES: dict[str, str] = {"quick": STANDARD}
#: what each profile is for, as the CLI's help says it
PURPOSE = {
    TOUR: "the lab's answer in minutes: the herd, split brain and the zombie on the designs that show it",
    STANDARD: "every design in every experiment: the grid of the published REPORT.md",
    FULL: "one experiment's long grid (N up to 256 in the herd), published beside the standard run",
}
#: trials at once per machine by default (`--trials-per-machine`), chosen by the lab's own host-health measurement
#: (`lab_cluster/host_health.py`: a host is starved when it wakes later than a third of its session timeout, 2 s
#: here). On this 2-core machine the tour's 17 trials ran with no host starved 2, 3 and 4 at a time (the latest
#: wake-up 40, 99 and 117 ms; 282, 229 and 202 s end to end: `benchmarks/tour_trials_at_once.json`), and the
#: standard profile's 105 three at a time (148 ms; `benchmarks/harness.json`). Three keeps a margin below the most
#: measured; a trial mostly waits on its servers' timers, not the CPU.
TRIALS_PER_MACHINE = 3


def canonical(name: str) -> str:
    """The profile `name` means today.

    >>> canonical("quick"), canonical("tour"), canonical("full")
    ('standard', 'tour', 'full')
    """
    name = ALIASES.get(name, name)
    if name not in PROFILES:
        raise LabError(f"There is no profile {name!r}.", f"Use one of {', '.join(PROFILES)}.")
    return name


def alias_note(name: str) -> str | None:
    """What the CLI says when given an old name (None for today's names).

    >>> alias_note("quick")
    "profile 'quick' is now called 'standard' (the same grid); it still works"
    """
    if name in ALIASES:
        return f"profile {name!r} is now called {ALIASES[name]!r} (the same grid); it still works"
    return None


def of_run(env: dict) -> str:
    """The profile a stored run ran (its `environment.json`), by today's name: a run of `quick` ran `standard`.

    >>> of_run({"profile": "quick"}), of_run({})
    ('standard', 'standard')
    """
    name = env.get("profile", STANDARD)
    return ALIASES.get(name, name)
