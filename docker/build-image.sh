#!/usr/bin/env bash
# Build the lab's ZooKeeper image without any image registry.
#
#   docker/build-image.sh [--force]
#
# 1. docker/build-base.sh makes a Debian base image with debootstrap (reused when present).
# 2. The ZooKeeper jars come from the pyspark wheel in .venv (or ZOOKEEPER_HOME):
#    the same jars, and so the same server version, as the embedded backend.
# 3. docker/Dockerfile adds Debian's OpenJDK 17 and the official image's conventions.
#
# The image is tagged $LAB_ZK_IMAGE (default zookeeper:3.9, the official image's
# name, so that a machine that can pull runs the real one with the same code).
# An image already present under that tag is reused unless --force is given.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."

image="${LAB_ZK_IMAGE:-zookeeper:3.9}"
base="${LAB_BASE_IMAGE:-lab/debian:bookworm}"
force=0
[ "${1:-}" = "--force" ] && force=1

if [ "$force" = 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "build-image: $image is present; reusing it (--force rebuilds)"
  exit 0
fi

"$here/build-base.sh" "$base"

python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
ctx=$(mktemp -d /tmp/lab-image-context.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/lib"
"$python" - "$ctx/lib" <<'PY'
import shutil, sys
from lab_cluster.zk.distribution import find_distribution
dist = find_distribution()
for jar in dist.classpath:
    shutil.copy(jar, sys.argv[1])
print(f"build-image: {len(dist.classpath)} jars of {dist.describe()}")
PY
version=$(ls "$ctx/lib" | sed -nE 's/^zookeeper-([0-9]+\.[0-9]+\.[0-9]+)\.jar$/\1/p' | head -n 1)
cp "$here/Dockerfile" "$here/docker-entrypoint.sh" "$here/zkServer.sh" "$here/log4j2.properties" "$ctx/"
chmod +x "$ctx/docker-entrypoint.sh" "$ctx/zkServer.sh"

echo "build-image: building $image (ZooKeeper $version) on $base"
# Host networking: the engine runs with --bridge=none, and apt inside the build
# needs to reach the same mirror the base was bootstrapped from.
DOCKER_BUILDKIT=0 docker build --network host --build-arg "BASE_IMAGE=$base" --build-arg "ZK_VERSION=$version" \
  -t "$image" "$ctx" >"$ctx/build.log" 2>&1 || { echo "build-image: docker build failed:" >&2; tail -n 30 "$ctx/build.log" >&2; exit 1; }
echo "build-image: built $image"
