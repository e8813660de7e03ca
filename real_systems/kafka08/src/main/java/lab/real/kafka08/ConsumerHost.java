package lab.real.kafka08;

import lab.real.HostArgs;
import lab.real.Json;
import lab.real.Lines;
import lab.real.Trace;

import java.lang.reflect.Field;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import kafka.consumer.Consumer;
import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

/**
 * N members of one group, each Kafka 0.8.2.2's own `ZookeeperConsumerConnector`, in one JVM: the lab's consumer
 * host (`lab_cluster/consumer_host.py`) for the real thing, with the same arguments and the same output.
 *
 * It prints `READY {"consumers": [...]}` once every member has been started (its connector made and its stream
 * asked for: `createMessageStreams` registers the member and rebalances once before it returns), then one state
 * line per change (`{"actor", "state", "gave_up", "partitions"}`, `MemberSnapshot.line`); SIGTERM shuts every
 * connector down at once (0.8's `shutdown`: fetchers stopped, offsets committed, session closed).
 *
 * Each member gets one stream (`streams` 1, as the lab's design), read by a thread that records every message
 * as `processed`; its trace is `<trial_dir>/traces/<actor>.jsonl`. What the connector does inside is read from
 * its own log (`Observer`).
 *
 * Arguments: --address ZK --group G --topic T --count N --trial-dir D --name c [--first K] [--trial ID]
 * [--design NAME] [--config key=value]...
 */
public final class ConsumerHost {
    private ConsumerHost() {}

    public static void main(String[] argv) throws Exception {
        HostArgs args = HostArgs.parse(argv);
        String zk = args.get("address");
        int slash = zk.indexOf('/');
        Observer observer = new Observer(slash < 0 ? "" : zk.substring(slash));
        observer.install();

        List<Member> members = new ArrayList<>();
        Map<String, Runnable> stops = new LinkedHashMap<>();
        for (String actor : args.actors()) {
            Properties props = new Properties();
            props.putAll(args.config);
            props.setProperty("group.id", args.get("group"));
            props.setProperty("zookeeper.connect", zk);
            props.setProperty("consumer.id", actor);
            Member m = new Member(actor, props, args.get("topic"), args.trialDir(), args.trial(),
                    args.design("real-kafka-0.8.2.2"), observer);
            members.add(m);
            stops.put(actor, m::stop);
        }
        CountDownLatch stopped = HostArgs.stopAllOnShutdown(stops);
        List<String> idents = new ArrayList<>();
        for (Member m : members) {
            m.start();
            idents.add(m.consumerIdString);
        }
        Lines.ready(Map.of("consumers", idents));
        stopped.await();
    }


    /** One member: its connector, its stream's thread, its state as the trial runner reads it. */
    static final class Member implements Observer.Sink {
        final String actor;
        final String consumerIdString;
        private final Properties props;
        private final String topic;
        private final Trace trace;
        private final Observer observer;
        private final TreeSet<Integer> owned = new TreeSet<>();
        private String state = "starting";
        private boolean gaveUp;
        private ConsumerConnector connector;
        private final long processingMs;

        Member(String actor, Properties props, String topic, Path trialDir, String trial, String design,
               Observer observer) {
            this.actor = actor;
            this.props = props;
            this.topic = topic;
            this.observer = observer;
            this.consumerIdString = props.getProperty("group.id") + "_" + actor;
            Object processing = props.remove("lab.processing.ms");  // the lab's own knob, not 0.8's
            this.processingMs = processing == null ? 0 : Long.parseLong(String.valueOf(processing));
            this.trace = new Trace(trialDir, trial, design, actor);
        }

        /** Make the connector on a thread named after the member (its ZooKeeper client's threads inherit the
         * name), ask for one stream, and start the thread that reads it. */
        void start() throws InterruptedException {
            Map<String, Object> shown = new LinkedHashMap<>();
            props.forEach((k, v) -> shown.put(String.valueOf(k), v));
            trace.record("consumer_start", Map.of("member", consumerIdString, "config", shown,
                    "topics", List.of(topic)));
            observer.member(consumerIdString, actor, this);
            Thread starter = new Thread(() -> {
                try {
                    connector = Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
                    watchReconnects();
                    KafkaStream<byte[], byte[]> stream = connector.createMessageStreams(Map.of(topic, 1)).get(topic).get(0);
                    Thread reader = new Thread(() -> read(stream), actor + "-stream");
                    reader.setDaemon(true);
                    reader.start();
                } catch (RuntimeException e) {
                    gaveUp("could not start: " + e);
                }
            }, actor);
            starter.start();
            starter.join();
        }

        /** zkclient makes a new ZooKeeper client on its event thread after a session expires: name it ours. */
        private void watchReconnects() {
            try {
                Field f = connector.getClass().getDeclaredField("underlying");
                f.setAccessible(true);
                Object underlying = f.get(connector);
                for (Field g : underlying.getClass().getDeclaredFields()) {
                    if (g.getType().getName().equals("org.I0Itec.zkclient.ZkClient")) {
                        g.setAccessible(true);
                        Object zkClient = g.get(underlying);
                        Field t = zkClient.getClass().getDeclaredField("_eventThread");
                        t.setAccessible(true);
                        observer.watchThread(((Thread) t.get(zkClient)).getName(), this);
                    }
                }
            } catch (ReflectiveOperationException e) {
                trace.record("zk_event_error", Map.of("error", "cannot follow reconnects: " + e));
            }
        }

        private void read(KafkaStream<byte[], byte[]> stream) {
            ConsumerIterator<byte[], byte[]> it = stream.iterator();
            try {
                while (it.hasNext()) {
                    MessageAndMetadata<byte[], byte[]> m = it.next();
                    trace.record("processed", Map.of("topic", m.topic(), "partition", m.partition(),
                            "offset", m.offset(), "member", consumerIdString + "-0"));
                    if (processingMs > 0) Thread.sleep(processingMs);
                }
            } catch (InterruptedException | RuntimeException e) {
                // the connector shut its queues down: the stream ends
            }
        }

        void stop() {
            ConsumerConnector c = connector;
            if (c != null) c.shutdown();
            trace.record("consumer_stop", Map.of("member", consumerIdString));
            trace.close();
        }

        @Override
        public void event(String kind, Map<String, Object> fields) {
            Map<String, Object> all = new LinkedHashMap<>(fields);
            all.putIfAbsent("member", consumerIdString);
            if (kind.equals("owner_conflict")) all.putIfAbsent("topic", topic);  // 0.8's log line names only the partition
            trace.record(kind, all);
            if (kind.equals("rebalance_begin")) changed("rebalancing");
        }

        @Override
        public synchronized void tryEnded(boolean succeeded, List<Integer> partitions) {
            if (!succeeded) return;
            owned.clear();
            owned.addAll(partitions);
            List<List<Object>> named = new ArrayList<>();
            for (int p : owned) named.add(List.of(topic, p));
            trace.record("assigned", Map.of("member", consumerIdString, "partitions", named));
            changed("consuming");
        }

        @Override
        public synchronized void revoked() {
            List<List<Object>> named = new ArrayList<>();
            for (int p : owned) named.add(List.of(topic, p));
            if (!named.isEmpty()) {
                trace.record("revoked", Map.of("member", consumerIdString, "partitions", named,
                        "why", "releasePartitionOwnership"));
            }
            owned.clear();
        }

        @Override
        public synchronized void gaveUp(String why) {
            // 0.8.2.2 gives up after rebalance.max.retries attempts (ConsumerConfig's default, 4)
            trace.record("rebalance_failed", Map.of("member", consumerIdString, "error", why,
                    "attempts", Integer.parseInt(props.getProperty("rebalance.max.retries", "4"))));
            gaveUp = true;
            changed("failed");
        }

        private synchronized void changed(String next) {
            state = next;
            Map<String, Object> snapshot = new LinkedHashMap<>();
            snapshot.put("actor", actor);
            snapshot.put("state", state);
            snapshot.put("gave_up", gaveUp);
            snapshot.put("partitions", new ArrayList<>(owned));
            Lines.print(Json.encode(snapshot));
        }
    }
}
