package lab.real.kafka08;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.log4j.AppenderSkeleton;
import org.apache.log4j.ConsoleAppender;
import org.apache.log4j.PatternLayout;
import org.apache.log4j.Level;
import org.apache.log4j.Logger;
import org.apache.log4j.spi.LoggingEvent;

/**
 * What Kafka 0.8.2.2's consumer says it does, turned into the lab's trace events, without changing a line of it.
 *
 * 0.8.2.2's `ZookeeperConsumerConnector` has no rebalance listener (that came in 0.8.3), so the driver listens
 * where the connector and its ZooKeeper client speak: their log4j loggers.
 *
 * - `kafka.consumer` at INFO: every line of a connector starts with its `[<group>_<consumer.id>], ` (its
 *   `logIdent`), which names the member. A rebalance try is `begin rebalancing consumer X try #i` ... `end
 *   rebalancing consumer X try #i`; in between, `Releasing partition ownership` (the member lets go of all it
 *   owned: `revoked`), `<thread> attempting to claim partition P` (the assignor's decision, `PartitionAssignor`),
 *   `<thread> successfully owned partition P` and `waiting for the partition ownership to be deleted: P` (an
 *   owner conflict). A try succeeded when every partition it meant to claim was claimed and no exception was
 *   logged: then `assigned` with those partitions (an empty share too).
 * - `org.apache.zookeeper.ClientCnxn` at DEBUG: every reply (`Reading reply ... header:: xid,type ... request::
 *   'path,...`) is a `zk_read` or `zk_write` with ZooKeeper's operation and path, recorded on the reply rather
 *   than the send (less than a round trip apart on loopback); a `setData` of `/consumers/<g>/offsets/<t>/<p>`
 *   that succeeded is that offset's `commit`; `Got WatchedEvent ... path:...` is a `zk_watch_fired`. The
 *   client's threads are named after the thread that created it (`c3-SendThread(...)`), and the host creates
 *   each member's connector on a thread named after it; after a session expires zkclient makes the new
 *   ZooKeeper client on its own event thread, whose name the host registers for the member (`watchThread`).
 */
final class Observer extends AppenderSkeleton {
    interface Sink {
        void event(String kind, Map<String, Object> fields);

        void tryEnded(boolean succeeded, List<Integer> partitions);

        void revoked();

        void gaveUp(String why);
    }

    private static final Pattern IDENT = Pattern.compile("^\\[([^\\]]+)\\], (.*)$", Pattern.DOTALL);
    private static final Pattern BEGIN = Pattern.compile("begin rebalancing consumer \\S+ try #(\\d+)");
    private static final Pattern END = Pattern.compile("end rebalancing consumer \\S+ try #(\\d+)");
    //: the assignor's line, without the connector's prefix: "<group>_<consumer.id>-<stream> attempting to claim ..."
    private static final Pattern CLAIM = Pattern.compile("^(\\S+)-\\d+ attempting to claim partition (\\d+)");
    private static final Pattern OWNED = Pattern.compile("\\S+ successfully owned partition (\\d+) for topic (\\S+)");
    private static final Pattern CONFLICT = Pattern.compile("waiting for the partition ownership to be deleted: (\\d+)");
    private static final Pattern REPLY = Pattern.compile(
            "Reading reply sessionid:0x\\w+, packet:: .*?header:: -?\\d+,(-?\\d+)\\s+replyHeader:: -?\\d+,-?\\d+,(-?\\d+)"
                    + "\\s+request:: '([^,]*)(?:,#([0-9a-fA-F]*))?", Pattern.DOTALL);
    private static final Pattern WATCH = Pattern.compile("Got WatchedEvent state:(\\w+) type:(\\w+) path:(\\S+) for");
    private static final Pattern OFFSET_PATH = Pattern.compile("^/consumers/[^/]+/offsets/([^/]+)/(\\d+)$");
    private static final Map<Integer, String> OPS = Map.of(1, "create", 2, "delete", 3, "exists", 4, "getData",
            5, "setData", 8, "getChildren", 12, "getChildren2");

    /** One rebalance try of one member, as its log tells it. */
    private static final class Attempt {
        final List<Integer> meant = new ArrayList<>();
        final List<Integer> claimed = new ArrayList<>();
        boolean failed;
    }

    private final String chroot;
    private final Map<String, Sink> byConsumerId = new ConcurrentHashMap<>();  // "<group>_<id>" -> member
    private final Map<String, Sink> byThreadPrefix = new ConcurrentHashMap<>();  // "c3" -> member
    private final Map<Sink, Attempt> attempts = new ConcurrentHashMap<>();

    Observer(String chroot) {
        this.chroot = chroot;
    }

    /** Listen to the connectors' and the ZooKeeper client's loggers (and send nothing else of theirs anywhere). */
    void install() {
        Logger root = Logger.getRootLogger();  // the rest of what they log: warnings and worse, to the host's log
        root.setLevel(Level.WARN);
        root.addAppender(new ConsoleAppender(new PatternLayout("[%d] %p %m (%c)%n"), "System.err"));
        Logger kafka = Logger.getLogger("kafka.consumer");
        kafka.setLevel(Level.INFO);
        kafka.addAppender(this);
        Logger zk = Logger.getLogger("org.apache.zookeeper.ClientCnxn");
        zk.setLevel(Level.DEBUG);
        zk.setAdditivity(false);  // its DEBUG lines are many: they become events, not log lines
        zk.addAppender(this);
    }

    void member(String consumerIdString, String threadName, Sink sink) {
        byConsumerId.put(consumerIdString, sink);
        byThreadPrefix.put(threadName, sink);
    }

    void watchThread(String threadName, Sink sink) {
        byThreadPrefix.put(threadName, sink);
    }

    @Override
    protected void append(LoggingEvent event) {
        String message = String.valueOf(event.getMessage());
        if (event.getLoggerName().startsWith("org.apache.zookeeper")) {
            Sink sink = sinkOfThread(event.getThreadName());
            if (sink != null) zookeeper(sink, message);
            return;
        }
        Matcher m = CLAIM.matcher(message);
        if (m.find()) {  // logged by the assignor (`PartitionAssignor`), which names the claiming thread
            Sink sink = byConsumerId.get(m.group(1));
            Attempt a = sink == null ? null : attempts.get(sink);
            if (a != null) a.meant.add(Integer.parseInt(m.group(2)));
            return;
        }
        m = IDENT.matcher(message);
        if (!m.matches()) return;
        Sink sink = byConsumerId.get(m.group(1));
        if (sink != null) connector(sink, m.group(2), event.getThrowableInformation() != null);
    }

    private Sink sinkOfThread(String thread) {
        int cut = thread.indexOf("-SendThread");
        if (cut < 0) cut = thread.indexOf("-EventThread");
        String creator = cut < 0 ? thread : thread.substring(0, cut);
        return byThreadPrefix.get(creator);
    }

    private void connector(Sink sink, String message, boolean withException) {
        Matcher m;
        if ((m = BEGIN.matcher(message)).find()) {
            attempts.put(sink, new Attempt());
            sink.event("rebalance_begin", Map.of("attempt", Integer.parseInt(m.group(1)) + 1));
        } else if ((m = END.matcher(message)).find()) {
            Attempt a = attempts.remove(sink);
            boolean done = a != null && !a.failed && a.claimed.containsAll(a.meant) && a.meant.containsAll(a.claimed);
            sink.event("rebalance_end", Map.of("attempt", Integer.parseInt(m.group(1)) + 1,
                    "outcome", done ? "done" : "failed"));
            sink.tryEnded(done, a == null ? List.of() : a.claimed);
        } else if (message.startsWith("Releasing partition ownership")) {
            sink.revoked();
        } else if ((m = OWNED.matcher(message)).find()) {
            Attempt a = attempts.get(sink);
            if (a != null) a.claimed.add(Integer.parseInt(m.group(1)));
        } else if ((m = CONFLICT.matcher(message)).find()) {
            Attempt a = attempts.get(sink);
            if (a != null) a.failed = true;
            sink.event("owner_conflict", Map.of("partition", Integer.parseInt(m.group(1))));
        } else if (message.startsWith("exception during rebalance")) {
            Attempt a = attempts.get(sink);
            if (a != null) a.failed = true;
            sink.event("rebalance_error", Map.of("error", "exception during rebalance"));
        } else if (message.startsWith("error during syncedRebalance") || message.contains("can't rebalance after")) {
            sink.gaveUp(message);
        } else if (message.startsWith("ZK expired")) {
            sink.event("session_expired", Map.of());
        } else if (withException) {
            sink.event("zk_event_error", Map.of("error", message));
        }
    }

    private void zookeeper(Sink sink, String message) {
        Matcher m;
        if ((m = REPLY.matcher(message)).find()) {
            String op = OPS.get(Integer.parseInt(m.group(1)));
            if (op == null) return;  // a session's own traffic (ping, auth, close): not a request of the consumer's
            int err = Integer.parseInt(m.group(2));
            String path = clientPath(m.group(3));
            boolean write = op.equals("create") || op.equals("delete") || op.equals("setData");
            sink.event(write ? "zk_write" : "zk_read", err == 0 ? Map.of("op", op, "path", path)
                    : Map.of("op", op, "path", path, "zk_error", err));
            Matcher o = OFFSET_PATH.matcher(path);
            // 0.8's updatePersistentPath: setData, or (the first time, after NoNode) create with the offset
            if ((op.equals("setData") || op.equals("create")) && err == 0 && o.matches() && m.group(4) != null) {
                String value = new String(java.util.HexFormat.of().parseHex(m.group(4)));
                sink.event("commit", Map.of("topic", o.group(1), "partition", Integer.parseInt(o.group(2)),
                        "offset", Long.parseLong(value.trim()), "outcome", "accepted", "why", "zookeeper"));
            }
        } else if ((m = WATCH.matcher(message)).find()) {
            sink.event("zk_watch_fired", Map.of("path", m.group(3), "event_type", m.group(2),
                    "zk_state", m.group(1)));
        }
    }

    private String clientPath(String serverPath) {
        if (chroot.isEmpty() || !serverPath.startsWith(chroot)) return serverPath;
        String rest = serverPath.substring(chroot.length());
        return rest.isEmpty() ? "/" : rest;
    }

    @Override
    public void close() {}

    @Override
    public boolean requiresLayout() {
        return false;
    }
}
