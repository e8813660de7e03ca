#!/bin/bash
# A stand-in for Apache ZooKeeper's bin/zkServer.sh with the part the official
# image uses: `start-foreground` runs QuorumPeerMain on $ZOOCFGDIR/zoo.cfg with
# $JVMFLAGS, logging to the console (so `docker logs` shows the server log).
ZOOBINDIR="$(cd "$(dirname "$0")" && pwd)"
ZOOHOME="$(dirname "$ZOOBINDIR")"
ZOOCFG="${ZOOCFGDIR:-/conf}/zoo.cfg"
case "${1:-}" in
  start-foreground)
    exec java ${JVMFLAGS:-} -Djava.net.preferIPv4Stack=true \
      "-Dzookeeper.log.dir=${ZOO_LOG_DIR:-/logs}" \
      "-Dlog4j2.configurationFile=$ZOOHOME/conf/log4j2.properties" \
      -cp "$ZOOHOME/lib/*" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOOCFG" ;;
  version)
    ls "$ZOOHOME"/lib/zookeeper-[0-9]*.jar | sed -E 's/.*zookeeper-([0-9.]+)\.jar/Apache ZooKeeper, version \1/' ;;
  *)
    echo "Usage: zkServer.sh {start-foreground|version} (this image runs the server in the foreground only)" >&2
    exit 2 ;;
esac
