"""REPORT.md, rendered from a run's stored results and nothing else.

`render(run_dir, out)` reads `summary.csv`, `environment.json`,
`configs.json` and `grid.json` (the trial specs, for the config overrides) of a
run directory (see `engine/store.py`), `timelines.csv`/`marks.csv` and the
experiments' computed parts (`computed/`) where the run has them, copies the
source files to `<out's folder>/report/` (with the full-profile runs stored
beside them, `full_runs.py`), and writes the
Markdown: a header, the environment, each experiment's section in the
catalogue's order (`catalogue/__init__.py`; each draws its figures, matplotlib,
headless, into `report/figures/`), the real Kafka clients beside the lab's
consumer (`real_clients.py`), the designs compared, the failed trials and the
cross-check. The real systems (`real_systems/`) are set beside the lab's designs in a part of their own
(`beside.py`); the experiments' sections and the first screen show the lab's designs.
Every number
in it comes from those files; rendering the same run twice gives the same
REPORT.md, which is what `python -m experiments report RUN_DIR` does. By
default a run's report goes inside the run directory (`RUN_DIR/REPORT.md`,
`RUN_DIR/report/`); only publishing (`published.py`) writes the lab's own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from experiments.catalogue import EXPERIMENTS
from experiments.engine import profiles, store
from experiments.engine.experiment import StoredRun
from experiments.engine.finding import Finding, by_id
from experiments.engine.steps import MEMBERSHIP_CHANGES
from experiments.report.beside import beside_section, first_screen_sentence, without_real
from experiments.report.compare import designs_compared
from experiments.report.front import front
from experiments.report.parts import Section, anchor, table
from experiments.report.real_clients import real_clients_section
from lab_cluster.errors import LabError

SOURCES = ("summary.csv", "environment.json", "configs.json", "grid.json")
#: written by runs with fault experiments: the timelines' data
TIMELINE_SOURCES = ("timelines.csv", "marks.csv")



def load(run_dir: Path) -> tuple[pd.DataFrame, dict, dict, list[dict]]:
    missing = [name for name in SOURCES if not (run_dir / name).exists()]
    if missing:
        raise LabError(f"{run_dir} is not a run directory with stored results: {', '.join(missing)} missing.",
                       "Give the directory a `run` or `reproduce` wrote (it holds summary.csv), or run one.")
    from experiments.engine.families import current_name
    from experiments.report.published import missing_columns, read_summary

    summary = read_summary(run_dir / "summary.csv")
    absent = missing_columns(summary)
    if absent:
        raise LabError(f"{run_dir / 'summary.csv'} was written by an older version of the lab: it has no "
                       f"{', '.join(absent)}.", "Render it with the lab's commit it records (environment.json), "
                       "or run the experiments again with this one.")
    configs = {current_name(design): config for design, config in
               json.loads((run_dir / "configs.json").read_text()).items()}
    grid = [{**spec, "design": current_name(spec["design"])}
            for spec in json.loads((run_dir / "grid.json").read_text())]
    return summary, json.loads((run_dir / "environment.json").read_text()), configs, grid


def checked_findings(summary: pd.DataFrame, computed: dict[str, dict[str, pd.DataFrame]] | None = None
                     ) -> list[tuple[str, Finding]]:
    """(experiment, finding) for every finding the report states, checked on `summary`'s trials of that
    experiment (and on its stored computed part, `computed[experiment]`, if it has one); experiments the
    summary has no trial of are left out. Ids are unique per experiment."""
    computed = computed or {}
    return [(name, finding) for name, experiment in EXPERIMENTS.items() if (summary.experiment == name).any()
            for finding in by_id(experiment.check(summary[summary.experiment == name],
                                                  computed.get(name))).values()]


def render(run_dir: Path, out: Path | None = None, full_dir: Path | None = None) -> Path:
    """Render `run_dir`'s report into `out` (default: `run_dir/REPORT.md`), its figures and sources into
    the `report/` folder beside it, with the full-profile runs stored in `full_dir` (default: `run_dir/full`;
    `full_runs.py`) after their experiments' sections."""
    from experiments.report import full_runs

    out = out or run_dir / "REPORT.md"
    full_dir = full_dir or run_dir / full_runs.FULL
    summary, env, configs, grid = load(run_dir)
    report_dir = out.parent / "report"
    figures = report_dir / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    have_timelines = all((run_dir / name).exists() for name in TIMELINE_SOURCES)
    if run_dir.resolve() != report_dir.resolve():
        for name in SOURCES + (TIMELINE_SOURCES if have_timelines else ()):
            shutil.copyfile(run_dir / name, report_dir / name)
    timelines = tuple(pd.read_csv(run_dir / name) for name in TIMELINE_SOURCES) if have_timelines else None
    computed = store.read_computed(run_dir)
    if run_dir.resolve() != report_dir.resolve():
        shutil.rmtree(report_dir / store.COMPUTED, ignore_errors=True)  # no other run's tables may stay beside ours
        if computed:
            shutil.copytree(run_dir / store.COMPUTED, report_dir / store.COMPUTED)
    full_runs.copy_runs(full_dir, report_dir)
    full_sections = full_runs.sections(report_dir / full_runs.FULL, report_dir, out.parent)
    run = StoredRun(env, configs, grid, figures, out.parent, timelines, computed)
    lab = without_real(summary)  # the sections and the first screen: the lab's designs; the real ones beside them
    sections, full_sections_after = [], {}
    for name, experiment in EXPERIMENTS.items():
        rows = (summary if experiment.with_real else lab)
        rows = rows[rows.experiment == name]
        if not rows.empty:
            sections.append(experiment.render_section(rows, run))
            full_sections_after[sections[-1].title] = full_sections.get(name, "")
    full_herd = full_runs.summary_of(report_dir / full_runs.FULL, "herd")
    appendices = [_environment(env)]
    for section in sections:
        appendices += [section.appendix_section(), full_sections_after[section.title]]
    appendices += [beside_section(summary, figures, out.parent), real_clients_section(lab), designs_compared(lab),
                   _failures(summary), _cross_check(summary)]
    parts = [front(lab, figures, out.parent, full_herd, also=first_screen_sentence(summary)),
             _contents(sections, appendices), _header(env, summary),
             *(s.body() for s in sections), "# Appendices", *appendices]
    _findings_file(summary, computed, report_dir)
    out.write_text("\n\n".join(p.strip() for p in parts if p) + "\n")
    return out


def _findings_file(summary: pd.DataFrame, computed: dict, report_dir: Path) -> Path:
    """`findings.csv` beside the report's sources: every finding it states, whether it held and on what evidence,
    the file a reproduction is compared with (`python -m experiments compare RUN_DIR`)."""
    rows = [(name, f.id, f.claim, f.holds, f.evidence) for name, f in checked_findings(summary, computed)]
    path = report_dir / "findings.csv"
    pd.DataFrame(rows, columns=["experiment", "finding", "claim", "holds", "evidence"]).to_csv(path, index=False)
    return path


def _contents(sections: list[Section], appendices: list[str]) -> str:
    """Two lines: the sections, then the appendices (each part's own `## ` heading), each a link."""
    headings = [p.strip().splitlines()[0][3:] for p in appendices if p and p.strip().startswith("## ")]
    return ("**Sections:** " + " · ".join(f"[{s.title}]({anchor(s.title)})" for s in sections)
            + "\n\n**Appendices:** " + " · ".join(f"[{h}]({anchor(h)})" for h in headings))


def _header(env: dict, summary: pd.DataFrame) -> str:
    return f"""Generated by `python -m experiments report` from the stored results of one run
(`report/summary.csv`, `report/environment.json`, `report/configs.json`,
`report/grid.json`, and `report/findings.csv`: every finding and whether it held); no number here is typed
by hand. The run: `{env.get('command', '?')}`, profile `{profiles.of_run(env)}`. Every metric is defined
in `docs/metrics.md` and computed from the trial traces with Spark SQL (`experiments/metrics.py`). To set
a reproduction beside it: `python -m experiments compare RUN_DIR`.{_old_names(summary)}"""


def _old_names(summary: pd.DataFrame) -> str:
    """A sentence for a run stored before the designs took Kafka's names: its trial ids keep the old ones."""
    from experiments.engine.families import RENAMED

    ids = " ".join(summary.trial.unique())
    old = [(o, n) for o, n in RENAMED.items() if f"-{o}-" in ids]
    if not old:
        return ""
    return (" The run was stored before the designs took Kafka's names; its trial ids keep the old ones ("
            + ", ".join(f"`{o}` is `{n}`" for o, n in old) + ").")


def _environment(env: dict) -> str:
    machine = env.get("machine", {})
    rows = [("date (UTC)", env.get("date")), ("ZooKeeper backend", env.get("zk_backend")),
            ("ZooKeeper version", env.get("zk_version")), ("Spark", f"{env.get('spark_version')} "
                                                                    f"({env.get('spark_master')})"),
            ("Python", env.get("python_version")), ("platform", env.get("platform")),
            ("CPU", f"{machine.get('cpu', '?')} ({env.get('cpu_count')} cores)"),
            ("memory", f"{machine.get('mem_gib', machine.get('memory_gib', '?'))} GiB")]
    if "lab_commit" in env:  # runs stored before it was recorded have none
        rows.append(("lab commit", f"`{env['lab_commit']}`"))
    if "experiment_versions" in env:  # likewise
        rows.append(("experiment versions", ", ".join(f"{n} {v}" for n, v in env["experiment_versions"].items())))
    return "## Environment\n\n" + table(["", ""], rows)


def _failures(summary: pd.DataFrame) -> str:
    failed = summary[summary.status != "ok"].drop_duplicates("trial")
    if failed.empty:
        return "## Failed trials\n\nNone: every trial ran to the end, its traces were complete, and it converged."
    rows = [(r.trial, r.status, r.reason) for r in failed.itertuples()]
    return ("## Failed trials\n\nThese trials are left out of every table and figure above: `failed`, they did not "
            "run to a complete, converged end; `invalid`, they did, but the lab's own load starved a consumer host "
            "(`experiments/overhead.py`), so their figures may not be the design's.\n\n"
            + table(["trial", "status", "why"], rows))


def _cross_check(summary: pd.DataFrame) -> str:
    ok = summary[summary.status == "ok"]
    if ok.empty:
        return ""
    judged = ok[ok.change.isin(MEMBERSHIP_CHANGES)]
    agree = (judged.client_notifications + judged.client_unheard.fillna(0) == judged.server_notifications).sum()
    return f"""## Cross-check with the servers

Around every change the runner read every ZooKeeper server's `mntr`; in the
changes of membership alone ({", ".join(MEMBERSHIP_CHANGES)}) the clients' recorded watch
notifications (with those a stopping ZooKeeper-era consumer's own session close
triggers and it does not hear, which it records) equal the watchers the
servers triggered in {agree} of
{len(judged)} changes (a disagreement fails the trial; around a pause or a cut
the victim's session expires with notifications the server triggered and the
client never received, so those windows are not judged), and the clients'
recorded requests never exceed the packets the servers received (
{int(ok.client_requests.sum()):,} requests recorded, {int(ok.server_packets_received.sum()):,} packets
received, which also counts pings and brokers' requests)."""
