#!/usr/bin/env bash
# Make sure a Docker engine answers: install Debian's docker.io if dockerd is
# missing, and start it the way this environment needs (no bridge network, no
# iptables; containers use host networking), logging to .lab/dockerd.log.
set -euo pipefail
cd "$(dirname "$0")/.."

if docker info >/dev/null 2>&1; then
  echo "docker-engine: an engine answers; reusing it"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "docker-engine: no engine answers and this is not root, so none can be started here." >&2
  echo "  Start Docker yourself, or use LAB_ZK_BACKEND=embedded (tests marked 'docker' then skip)." >&2
  exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker-engine: installing Debian's docker.io"
  [ -f /tmp/.rebalance-lab-apt-updated ] || { apt-get update -qq && touch /tmp/.rebalance-lab-apt-updated; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
mkdir -p .lab
echo "docker-engine: starting dockerd --bridge=none --iptables=false (log: .lab/dockerd.log)"
nohup dockerd --bridge=none --iptables=false --ip6tables=false >.lab/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then echo "docker-engine: engine is up"; exit 0; fi
  sleep 1
done
echo "docker-engine: dockerd did not answer within 60 s; its log ends with:" >&2
tail -n 20 .lab/dockerd.log >&2
exit 1
