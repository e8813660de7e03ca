#!/usr/bin/env bash
# Set the lab up on a fresh machine: a virtual environment with the packages,
# Java if it is missing, and with --docker a Docker engine and the ZooKeeper image.
#
#   scripts/setup.sh            # .venv + packages (+ Java when missing and we are root)
#   scripts/setup.sh --docker   # the same, then a Docker engine and the local image
#
# It is safe to run again: what is already there is reused.
set -euo pipefail
cd "$(dirname "$0")/.."

want_docker=0
for arg in "$@"; do
  case "$arg" in
    --docker) want_docker=1 ;;
    *) echo "usage: scripts/setup.sh [--docker]" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_install() {
  command -v apt-get >/dev/null || { echo "apt-get is not available to install: $*" >&2; return 1; }
  if [ ! -f /tmp/.rebalance-lab-apt-updated ]; then as_root apt-get update -qq && touch /tmp/.rebalance-lab-apt-updated; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# 1. Java (the embedded ZooKeeper and Spark both run on it).
if [ -z "${JAVA_HOME:-}" ] && ! command -v java >/dev/null 2>&1; then
  echo "setup: Java is missing; installing Debian's openjdk-17-jre-headless"
  apt_install openjdk-17-jre-headless || echo "setup: could not install Java; the embedded backend will say so" >&2
fi

# 2. Python packages in .venv.
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
if [ ! -f .venv/.installed ] || [ pyproject.toml -nt .venv/.installed ]; then
  echo "setup: installing the lab and its dependencies into .venv (pyspark is large: a few minutes the first time)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch .venv/.installed
fi

# 3. Docker engine and image, on request.
if [ "$want_docker" = 1 ]; then
  scripts/docker-engine.sh
  docker/build-image.sh
fi
echo "setup: done"
