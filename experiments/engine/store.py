"""Where a run's results live: a local directory, or any URI that Spark and pyarrow can both write.

A run directory holds (asv's separation of configuration, results and figures):

    environment.json        the machine, Spark, Python, ZooKeeper backend and version, the profile
    grid.json               the trial specs
    trials/<trial>/         traces/*.jsonl, proc/*.log, progress.json of each trial
    results/changes.parquet one row per (trial, change): every metric, the cross-check, the status
    results/trials.parquet  one row per trial: status, reason, duplicates, gaps
    summary.csv             the two joined, with the trial's identity: what REPORT.md is rendered from
    computed/<experiment>/<table>.csv   an experiment's computed part (`Experiment.compute`), if it has one

Trials write their traces on the machine that runs them. With a local path (or
`file://`) they write straight into the run directory; with another URI
(`hdfs://...`, `s3a://...`) a trial writes to a temp dir and its directory is
copied to the URI with `pyarrow.fs` when it ends, where Spark reads it back.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

#: the folder of a run (and of a rendered report's sources) holding the experiments' computed parts
COMPUTED = "computed"


def local_path(uri: str) -> Path | None:
    """The local path of `uri`, or None if it is remote."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else uri)
    return None


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *parts])


def filesystem(uri: str):
    """(pyarrow filesystem, path) of `uri`: a local path, `file://`, or a URI Spark writes (`s3a://` is pyarrow's
    `s3://`)."""
    from pyarrow import fs

    local = local_path(uri)
    if local is not None:
        return fs.LocalFileSystem(), str(local)
    return fs.FileSystem.from_uri(uri.replace("s3a://", "s3://", 1))


def publish(local_dir: Path, uri: str) -> None:
    """Copy a finished trial's directory to its place under a remote run URI."""
    from pyarrow import fs

    target, path = filesystem(uri)
    fs.copy_files(str(local_dir), path, source_filesystem=fs.LocalFileSystem(), destination_filesystem=target)
    shutil.rmtree(local_dir, ignore_errors=True)


def write_computed(run_uri: str, experiment: str, tables: dict[str, pd.DataFrame]) -> None:
    """Store an experiment's computed tables in the run: `computed/<experiment>/<table>.csv` (written locally,
    then copied to a remote run URI as a trial's directory is)."""
    local = local_path(run_uri)
    folder = local / COMPUTED / experiment if local is not None else Path(tempfile.mkdtemp(prefix="lab-computed-"))
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(folder / f"{name}.csv", index=False)
    if local is None:
        publish(folder, join(run_uri, COMPUTED, experiment))


def read_computed(run_dir: Path) -> dict[str, dict[str, pd.DataFrame]]:
    """{experiment: {table: rows}} of every computed part stored under `run_dir` (empty if none)."""
    root = run_dir / COMPUTED
    if not root.is_dir():
        return {}
    return {folder.name: {path.stem: pd.read_csv(path) for path in sorted(folder.glob("*.csv"))}
            for folder in sorted(root.iterdir()) if folder.is_dir()}
