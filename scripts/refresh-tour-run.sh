#!/usr/bin/env bash
# Refresh the stored tour run that the tests analyse again (tests/data/tour-run/): run the tour with the
# committed code, then keep what its analysis reads (each trial's columnar trace, the trials' results, the
# grid) and what it gave (summary.csv, environment.json with the command, commit and machine).
#
#   scripts/refresh-tour-run.sh            # runs the tour (about 4 min here), then copies
#   scripts/refresh-tour-run.sh RUN_DIR    # copies from a tour run already made (bench harness --run-dir)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=tests/data/tour-run
if [ $# -ge 1 ]; then
  run=$1
else
  if [ -n "$(git status --porcelain -- . ':!tests/data')" ]; then
    echo "refresh-tour-run: commit first; the stored run must come from committed code" >&2
    exit 2
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  run=$work/run
  .venv/bin/python -m experiments reproduce --profile tour --out "$run"
fi
profile=$(.venv/bin/python -c 'import json, sys; print(json.load(open(sys.argv[1]))["profile"])' "$run/environment.json")
if [ "$profile" != tour ] || grep -q '+dirty' "$run/environment.json"; then
  echo "refresh-tour-run: $run is not a tour run of committed code (profile $profile)" >&2
  exit 2
fi
rm -rf "$dest"
mkdir -p "$dest/results"
cp "$run/grid.json" "$run/environment.json" "$run/summary.csv" "$dest/"
# where each trial and its Spark task ran are that machine's paths, not the repository's (the test sets its own),
# and the command's --out is the same: none is kept
.venv/bin/python -c 'import sys, pandas as pd; t = pd.read_parquet(sys.argv[1]); t["trial_dir"] = t["trial"]; t["spark_task_dir"] = None; t.to_parquet(sys.argv[2], index=False)' "$run/results/trials.parquet" "$dest/results/trials.parquet"
.venv/bin/python -c 'import json, re, sys; e = json.load(open(sys.argv[1])); e["command"] = re.sub(r" --out \S+", "", e["command"]); open(sys.argv[1], "w").write(json.dumps(e, indent=1, sort_keys=True) + "\n")' "$dest/environment.json"
for trial in "$run"/trials/*/; do
  name=$(basename "$trial")
  mkdir -p "$dest/trials/$name"
  cp "$trial/traces.parquet" "$dest/trials/$name/"
done
echo "refresh-tour-run: $dest now holds $(ls "$dest/trials" | wc -l) trials of $run ($(du -sh "$dest" | cut -f1))"
