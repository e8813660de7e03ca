#!/usr/bin/env bash
# Build a minimal Debian base image without any image registry.
#
# Why: this lab must run on machines that reach Debian's package mirror but no
# image registry (no Docker Hub). debootstrap builds a Debian root file system
# from the mirror this machine's apt already uses, and `docker import` turns it
# into an image that docker/Dockerfile builds on.
#
# Usage: docker/build-base.sh [TAG]        (default TAG: lab/debian:bookworm)
# Env:   LAB_DEBIAN_SUITE (default: bookworm), LAB_DEBIAN_MIRROR (default: read
#        from /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list).
set -euo pipefail

tag="${1:-lab/debian:bookworm}"
suite="${LAB_DEBIAN_SUITE:-bookworm}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag is present; reusing it"
  exit 0
fi

# The mirror is whatever this machine's apt is configured with: never a host
# name written into the repo.
mirror="${LAB_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
             | awk '{print $2}' | grep -v -- '-security' | head -n 1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(grep -h -E '^deb ' /etc/apt/sources.list 2>/dev/null \
             | awk '{print $2}' | grep -v -- '-security' | head -n 1 || true)
fi
if [ -z "$mirror" ]; then
  echo "error: no Debian mirror found in this machine's apt sources; set LAB_DEBIAN_MIRROR to one." >&2
  exit 2
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing debootstrap from Debian's packages"
    [ -f /tmp/.rebalance-lab-apt-updated ] || { apt-get update -qq && touch /tmp/.rebalance-lab-apt-updated; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  else
    echo "error: debootstrap is missing; install it (apt-get install debootstrap) as root." >&2
    exit 2
  fi
fi

rootfs=$(mktemp -d /tmp/lab-debootstrap.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT

echo "debootstrap $suite (minbase) from this machine's configured mirror into $rootfs"
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
  echo "error: debootstrap failed; its log follows" >&2
  tail -n 30 "$rootfs.log" >&2
  rm -f "$rootfs.log"
  exit 1
}
rm -f "$rootfs.log"
# Keep the image small: package lists and caches are refetched by whoever needs them.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  - "$tag" >/dev/null
echo "built base image $tag"
