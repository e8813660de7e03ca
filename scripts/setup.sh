#!/usr/bin/env bash
# Set the lab up on a fresh machine: a virtual environment with the packages,
# Java if it is missing, the real systems' jars (Maven), and with --docker a Docker engine and the ZooKeeper image.
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

# 3. The real systems (real_systems/pom.xml): their jars from Maven Central and the lab's drivers for them.
#    Without Maven or the registry they are unavailable, and say so when a trial asks for one; the rest runs.
if [ ! -f real_systems/.built ] || [ -n "$(find real_systems -name '*.java' -newer real_systems/.built -o -name pom.xml -newer real_systems/.built | head -1)" ]; then
  if command -v mvn >/dev/null 2>&1; then
    echo "setup: building the real systems' drivers (Maven fetches their jars the first time)"
    if mvn -q -B -f real_systems/pom.xml package >/tmp/rebalance-lab-maven.log 2>&1; then
      touch real_systems/.built
    else
      echo "setup: Maven could not build real_systems/pom.xml (its log: /tmp/rebalance-lab-maven.log);" \
           "the real systems are unavailable, everything else runs" >&2
    fi
  else
    echo "setup: Maven is not installed; the real systems (real_systems/) are unavailable, everything else runs" >&2
  fi
fi

# 4. Docker engine and image, on request.
if [ "$want_docker" = 1 ]; then
  scripts/docker-engine.sh
  docker/build-image.sh
fi
echo "setup: done"
