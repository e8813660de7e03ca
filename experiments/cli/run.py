"""`run EXPERIMENT`, `reproduce` and `report RUN_DIR`: the lab's main job.

- `run herd [--designs zookeeper,classic] [--consumers 2,4,8] [--profile tour|standard|full] [--out DIR] [--master URL]
  [--trials-per-machine K] [--backend B] [--host-tasks K]`: the experiment's grid as a Spark job, a progress
  bar per trial, a results table at the end (with `--host-tasks`, each trial's group spread over a barrier
  stage's tasks: `experiments/engine/host_tasks.py`); writes `DIR/summary.csv`, `DIR/results/*.parquet`,
  `DIR/environment.json` and the run's own report, `DIR/REPORT.md`.
- `reproduce [--profile tour|standard|full]`: every experiment of the profile (`engine/profiles.py`; default
  `tour`, the lab's answer in minutes) into a new run directory under `runs/`, its report rendered there, and
  which of the published report's findings held in it (`DIR/findings.csv`). The tour ends with its headline
  figures per design (`report/headline.py`) and the command that checks the rest.
- `run` and `reproduce` first store each experiment's computed part, if it has one (`Experiment.compute`), in
  `DIR/computed/<experiment>/`: derived without a cluster, so before the trials.
- `report RUN_DIR [--publish]`: re-render a run's report from its stored results, running nothing; with
  `--publish`, as the lab's REPORT.md and report/ (`published.py` says when it refuses); a run of one
  experiment's full profile joins them instead, after that experiment's section (`report/full_runs.py`).

No run writes the published REPORT.md: only `--publish` does.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from experiments.catalogue import DESIGNS, EXPERIMENTS, KEEP_TIMELINES, VERSIONS
from experiments.engine import profiles, store
from experiments.engine.families import RENAMED, current_name
from experiments.engine.profiles import STANDARD, TOUR, TRIALS_PER_MACHINE
from experiments.report import published
from lab_cluster.errors import LabError


def add_parsers(sub) -> None:
    run = sub.add_parser("run", help="run one experiment's grid of trials on Spark and store the results")
    run.add_argument("experiment", choices=sorted(EXPERIMENTS))
    _grid_options(run, default_profile=STANDARD)
    run.add_argument("--designs", help=f"comma-separated, among {', '.join(DESIGNS)} (default: every design the "
                                       "experiment runs)")
    run.add_argument("--consumers", help="comma-separated group sizes (default: the profile's)")
    run.add_argument("--partitions", type=int, help="partitions of the topic (default: the profile's)")
    run.add_argument("--seeds", type=int, help="repetitions of each trial (default: the profile's, else 1)")
    run.add_argument("--out", help="run directory or URI (default: runs/<time>-<experiment>-<profile>)")
    run.add_argument("--host-tasks", type=int, default=0,
                     help="spread each trial's group over this many tasks of one Spark barrier stage, on the "
                          "cluster's executors (trials of one shared host; others run as they are); the trials then "
                          "run on the driver, one at a time (default 0: the group's host beside its trial)")
    run.set_defaults(run=run_experiment)
    reproduce = sub.add_parser("reproduce", help="run every experiment, render the run's report, compare its "
                                                 "findings with the published REPORT.md")
    _grid_options(reproduce, default_profile=TOUR)
    reproduce.add_argument("--out", help="run directory (default: runs/<time>-reproduce-<profile>)")
    reproduce.set_defaults(run=run_reproduce)
    report = sub.add_parser("report", help="re-render a run's report from its stored results (--publish: as the "
                                           "lab's REPORT.md)")
    report.add_argument("run_dir", type=Path)
    where = report.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="write the report here (default: RUN_DIR/REPORT.md)")
    where.add_argument("--publish", action="store_true",
                       help="replace the lab's REPORT.md and report/ (refused if a trial failed); a run of one "
                            "experiment's full profile joins them instead (report/full/<experiment>/)")
    report.set_defaults(run=run_report)


def _grid_options(p, default_profile: str) -> None:
    p.add_argument("--profile", choices=[*profiles.PROFILES, *profiles.ALIASES], default=default_profile,
                   help="; ".join(f"{name}: {purpose}" for name, purpose in profiles.PURPOSE.items())
                        + f" (default: {default_profile}; 'quick' is standard's old name)")
    p.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    p.add_argument("--trials-per-machine", type=int, default=TRIALS_PER_MACHINE,
                   help=f"timing-sensitive trials allowed at once per machine (default {TRIALS_PER_MACHINE}: "
                        "on 2 cores the tour starved no host 4 at a time: experiments/engine/profiles.py)")
    p.add_argument("--backend", help="the trials' ZooKeeper backend: auto, embedded, testcontainers or external "
                                     "(default: LAB_ZK_BACKEND, else auto, resolved where each trial runs)")


def _profile(args) -> str:
    """The profile the command names, today's name for an old one (said once on the console)."""
    note = profiles.alias_note(args.profile)
    if note:
        _console().print(f"[yellow]note:[/] {note}")
    return profiles.canonical(args.profile)


def _int_list(text: str | None, what: str) -> list[int] | None:
    if not text:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise LabError(f"{what} {text!r} is not a comma-separated list of integers.", f"Example: {what} 2,4,8.") \
            from None
    if not values or min(values) < 1:
        raise LabError(f"{what} {text!r} must list positive integers.", f"Example: {what} 2,4,8.")
    return values


def _designs(text: str | None, experiment, profile: str) -> tuple[str, ...]:
    """The designs `--designs` names, each one the experiment runs; none given: every one the profile runs."""
    if text is None:
        return experiment.designs_in(profile) if experiment.runs_in(profile) else experiment.designs
    given = [d.strip() for d in text.split(",") if d.strip()]
    for old in (d for d in given if d in RENAMED):
        _console().print(f"[yellow]note:[/] design {old!r} is now called {RENAMED[old]!r}; it still works")
    designs = tuple(current_name(d) for d in given)
    unknown = [d for d in designs if d not in experiment.designs]
    if not designs or unknown:
        raise LabError(f"--designs {text!r}: {experiment.name} has no design(s) {unknown}.",
                       f"Use one or more of {', '.join(experiment.designs)}, comma-separated.")
    return designs


def _new_run_dir(label: str) -> str:
    return str(Path("runs") / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{label}")


def _fresh_out(out: str) -> str:
    """`out`, refused if it is a local directory that already holds a run: a trial run into it again would
    append its traces to the earlier trial's of the same name, and the analysis would judge the two runs as one
    (each change seen twice, none converged)."""
    local = store.local_path(out)
    if local is not None and ((local / "grid.json").exists() or (local / "trials").exists()):
        raise LabError(f"{out} already holds a run (its grid.json or trials/); a new run must start in a "
                       "directory of its own.", "Give --out a new directory, or leave --out out for a new "
                       "runs/<time>-... directory; remove the old one first if you mean to replace it.")
    return out


def _console() -> Console:
    """Rich's console. Written to a file or a CI log (not a terminal) rich assumes 80 columns and cuts the
    results table to `leg…`, `fai…`; there it is 160 wide unless COLUMNS says otherwise."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=160)
    return console


def run_grid_with_progress(specs, run_uri: str, master: str, trials_per_machine: int, profile: str,
                           backend: str | None = None):
    """Run `specs` on Spark with a progress bar per trial, analyse, record the environment; returns the summary."""
    from experiments.engine.environment import environment, lab_commit
    from experiments.engine.harness import analyse, run_grid
    from lab_cluster.spark import local_session
    from lab_cluster.zk import BackendRequest

    commit = lab_commit()  # the code the trials run: read before, so a commit made during the run is not taken
    console = _console()
    zk_backend = BackendRequest.from_environment(backend)
    spark = local_session(_local_master(master, trials_per_machine))
    console.print(f"[bold]{len(specs)} trials[/] on Spark {spark.version} ({spark.sparkContext.master}), "
                  f"{trials_per_machine} at a time per machine, ZooKeeper backend {zk_backend.backend} -> {run_uri}")
    with Progress(TextColumn("{task.description}", justify="left"), BarColumn(), TextColumn("{task.fields[phase]}"),
                  TimeElapsedColumn(), console=console) as progress:
        phases = {s.trial_id: s.phases for s in specs}
        bars = {trial: progress.add_task(trial, total=n, phase="waiting", start=False) for trial, n in phases.items()}

        def show(states: dict[str, dict]) -> None:
            for trial, state in states.items():
                progress.start_task(bars[trial])
                progress.update(bars[trial], completed=state["done"], phase=state["phase"])

        results = run_grid(spark, specs, run_uri, trials_per_machine=trials_per_machine, zk_backend=zk_backend,
                           on_progress=show)
        for row in results.itertuples():
            progress.update(bars[row.trial], completed=phases[row.trial],
                            phase=row.status if row.status == "ok" else f"FAILED: {row.reason[:60]}")
    console.print("analysing the traces with Spark SQL ...")
    summary = analyse(spark, run_uri, specs, results, timelines_for=KEEP_TIMELINES)
    local = store.local_path(run_uri)
    if local is not None:
        env = environment(spark, summary, profile, "python -m experiments " + shlex.join(sys.argv[1:]),
                          commit=commit, experiment_versions=VERSIONS)
        (local / "environment.json").write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")
    _print_table(console, summary)
    return summary


def _local_master(master: str | None, trials_per_machine: int) -> str | None:
    """The master to start: the one given, else `spark-submit`'s (None), else local with a task slot per core, or
    per trial where more trials may run at once than there are cores (each trial is one task, mostly waiting).

    >>> _local_master("spark://h:7077", 8), _local_master(None, 1), _local_master(None, 64)
    ('spark://h:7077', 'local[*]', 'local[64]')
    """
    if master or "PYSPARK_GATEWAY_PORT" in os.environ:
        return master
    return f"local[{trials_per_machine}]" if trials_per_machine > (os.cpu_count() or 1) else "local[*]"


def _print_table(console: Console, summary) -> None:
    from experiments.report.parts import cell

    table = Table(title="per change (docs/metrics.md)")
    columns = [("design", "design"), ("consumers", "N"), ("change", "change"), ("status", "status"),
               ("notifications_per_change", "notif."), ("zk_requests_per_change", "ZK req."),
               ("broker_requests_per_change", "broker req."), ("rebalance_attempts", "attempts"),
               ("owner_conflicts", "conflicts"), ("convergence_ms", "conv. ms"),
               ("unowned_partition_s", "unowned p-s")]
    for _, label in columns:
        table.add_column(label)
    for row in summary.itertuples():
        table.add_row(*[cell(getattr(row, c)) for c, _ in columns])
    console.print(table)
    failed = summary[summary.status != "ok"].drop_duplicates("trial")
    for row in failed.itertuples():
        console.print(f"[red]{row.status}[/] {row.trial}: {row.reason}")


def store_computed(experiments, profile: str, run_uri: str) -> None:
    """Each experiment's computed part (`Experiment.compute`), if it has one, into the run (`store.write_computed`):
    no cluster, so before the trials."""
    for experiment in experiments:
        if experiment.compute is not None:
            tables = experiment.compute(profile)
            store.write_computed(run_uri, experiment.name, tables)
            _console().print(f"computed {experiment.name}: {', '.join(tables)} -> "
                             f"{store.join(run_uri, store.COMPUTED, experiment.name)}")


def run_experiment(args) -> int:
    experiment = EXPERIMENTS[args.experiment]
    profile = _profile(args)
    specs = experiment.specs(profile, _designs(args.designs, experiment, profile),
                             consumers=_int_list(args.consumers, "--consumers"), partitions=args.partitions,
                             seeds=args.seeds)
    specs = spread_over_tasks(specs, args.host_tasks)
    out = _fresh_out(args.out or _new_run_dir(f"{args.experiment}-{profile}"))
    store_computed([experiment], profile, out)
    summary = run_grid_with_progress(specs, out, args.master, args.trials_per_machine, profile, args.backend)
    console = _console()
    console.print(f"results: {out}/summary.csv")
    if store.local_path(out) is not None:
        _report_and_findings(console, Path(out), summary)
    return _trials_verdict(console, summary)


def spread_over_tasks(specs, tasks: int) -> list:
    """`specs` with each shared host's group spread over `tasks` barrier tasks (at most one per member);
    trials whose members have processes of their own (`layout="spread"`) are left as they are.

    >>> from experiments.engine.trial import TrialSpec
    >>> [s.host_tasks for s in spread_over_tasks([TrialSpec("herd", "classic", 1, 4), TrialSpec("herd", "classic",
    ...     8, 8), TrialSpec("zombie", "classic", 2, 4, layout="spread", steps=("pause",))], 2)]
    [1, 2, 0]
    """
    if tasks < 0:
        raise LabError(f"--host-tasks {tasks}: a number of tasks is 0 or more.", "Use 0 (no spread), 2, 4, ...")
    if not tasks:
        return list(specs)
    return [replace(s, host_tasks=min(tasks, s.consumers)) if s.layout == "shared" else s for s in specs]


def run_reproduce(args) -> int:
    profile = _profile(args)
    experiments = [e for e in EXPERIMENTS.values() if e.runs_in(profile)]
    specs = [spec for experiment in experiments for spec in experiment.specs(profile)]
    out = _fresh_out(args.out or _new_run_dir(f"reproduce-{profile}"))
    if store.local_path(out) is None:
        raise LabError(f"reproduce renders its report into {out}, which must be a local directory.",
                       "Give --out a local path, or use `run` for a remote results location.")
    store_computed(experiments, profile, out)
    summary = run_grid_with_progress(specs, out, args.master, args.trials_per_machine, profile, args.backend)
    console = _console()
    outcomes = _report_and_findings(console, Path(out), summary)
    if profile == TOUR:
        _tour_closing(console, summary, outcomes)
    return _trials_verdict(console, summary)


def _tour_closing(console: Console, summary, outcomes) -> None:
    """What the tour showed: the headline figures per design, the published findings it checked (by id), and the
    command that checks the rest, with its time as measured here."""
    from experiments.report.headline import COLUMNS, headline
    from experiments.report.parts import cell

    figures = headline(summary).set_index("design")
    table = Table(title="what the tour showed")
    table.add_column("per design")
    for design in figures.index:
        table.add_column(design, justify="right", no_wrap=True)
    for column, label in COLUMNS:
        table.add_row(label, *[cell(figures.loc[design, column]) for design in figures.index])
    console.print(table)
    checked = [o for o in outcomes if o.published and o.here is not None]
    held = [f"{o.experiment}/{o.finding}" for o in checked if o.here]
    console.print(f"published findings this tour checked and reproduced ({len(held)} of {len(checked)}): "
                  + (", ".join(held) or "none"))
    console.print(f"the rest, every design in every experiment: {standard_command()}")


def standard_command() -> str:
    """The command that reproduces the whole published report, with its wall time as `bench harness` last
    measured it here (`benchmarks/harness.json`), if it has."""
    from experiments.bench.harness import measured_reproduction

    command = f"python -m experiments reproduce --profile {STANDARD}"
    figure = measured_reproduction(STANDARD)
    if figure is None:
        return command
    # the grid grows with the lab: a figure measured on fewer trials says so, rather than pass for today's grid
    trials = sum(len(e.specs(STANDARD)) for e in EXPERIMENTS.values() if e.runs_in(STANDARD))
    then = figure.get("trials")
    grown = f"; the grid has {trials} trials now" if then and then != trials else ""
    return (f"{command} (about {figure['seconds'] / 60:.0f} min here for {then or 'its'} trials, "
            f"{figure['trials_per_machine']} at a time: benchmarks/harness.json, {figure['taken_at'][:10]}{grown})")


def _report_and_findings(console: Console, run_dir: Path, summary) -> list:
    """Render the run's own report in its directory, then say which of the published findings it reproduced
    (returned: `published.Outcome`s of the experiments it ran)."""
    from experiments.report.render import render

    report = render(run_dir)
    every = published.compare(summary, store.read_computed(run_dir))
    outcomes = [o for o in every if o.experiment in set(summary.experiment)]
    findings = published.save(outcomes, run_dir)
    _print_findings(console, outcomes)
    # the verdict counts the published findings of experiments the run left out too, as not checked here
    console.print(f"[bold]{published.verdict(every)}[/] (this run's findings: {findings})")
    console.print(f"this run's report: {report}  (the published one, {_shown(published.REPORT)}, is unchanged)")
    # two reports of one grid never match line for line (timings differ): compare the claims and headline figures
    console.print(f"compare it, finding by finding and figure by figure: python -m experiments compare {run_dir}")
    refused = published.refusals(run_dir)
    if refused:
        console.print("it cannot be published: " + "; ".join(refused))
    else:
        console.print(f"publish it: python -m experiments report {run_dir} --publish")
    return outcomes


def _print_findings(console: Console, outcomes) -> None:
    if not outcomes:
        return
    mark = {True: "[green]holds[/]", False: "[red]does not hold[/]", None: "–"}
    table = Table(title="findings: this run beside the published report")
    for column in ("experiment", "finding", "claim", "published", "this run"):
        table.add_column(column, overflow="fold")
    for o in outcomes:
        table.add_row(o.experiment, o.finding, o.claim, mark[o.published], mark[o.here])
    console.print(table)


def _trials_verdict(console: Console, summary) -> int:
    """0 when every trial ended ok; else 1, after saying how many failed and the first reason."""
    trials = summary.drop_duplicates("trial")
    failed = trials[trials.status != "ok"]
    if failed.empty:
        return 0
    console.print(f"[red]{len(failed)} of {len(trials)} trials failed or were invalid[/] "
                  f"(first: {failed.trial.iloc[0]}: "
                  f"{failed.reason.iloc[0]})")
    return 1


def _shown(path: Path) -> str:
    """`path` relative to the working directory where it is below it (shorter to read and to paste)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run_report(args) -> int:
    from experiments.report.render import render

    if args.publish:
        report = published.publish(args.run_dir)
        _console().print(f"published {_shown(report)} and {_shown(published.SOURCES)}/ from {args.run_dir}")
        return 0
    out = args.out or args.run_dir / "REPORT.md"
    if out.resolve() == published.REPORT.resolve() or published.is_published_sources(out.parent):
        raise LabError(f"{out} would overwrite the published report (REPORT.md and report/), which only --publish "
                       "replaces.",
                       f"Run `python -m experiments report {args.run_dir} --publish`, or give --out another path.")
    report = render(args.run_dir, out)
    _console().print(f"rendered {report} from {args.run_dir}")
    return 0
