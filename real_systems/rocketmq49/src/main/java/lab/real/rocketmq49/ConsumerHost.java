package lab.real.rocketmq49;

import lab.real.HostArgs;
import lab.real.Json;
import lab.real.Lines;
import lab.real.Trace;

import java.lang.reflect.Method;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * N members of one group, each RocketMQ 4.9.7's own `DefaultMQPushConsumer` (CLUSTERING), in one JVM: the lab's
 * consumer host (`lab_cluster/consumer_host.py`) for the real thing, with the same arguments and output.
 *
 * Each member is its own client: `instanceName` = its actor name, so its client id is `127.0.0.1@<actor>` and it
 * gets its own `MQClientInstance` (its own channels, heartbeats, rebalance service), as each of the lab design's
 * consumers has. The VIP channel is off (the brokers' fast port is not the lab's to reach). It prints `READY
 * {"consumers": [client ids]}` once every member has started, then one state line (`MemberSnapshot.line`) per
 * allocation of the lab's topic and per state change; SIGTERM shuts every member down at once (RocketMQ's
 * `shutdown`: offsets persisted, UNREGISTER_CLIENT to every broker).
 *
 * What a member does is observed, not changed (`Observer`): its allocation strategy is RocketMQ's own, wrapped
 * in a delegate that records each allocation; its RPC hook records the requests it sends and the pushes it
 * receives. Its listener records every message it is handed as `processed`.
 *
 * Config (`--config key=value`): `group.id` (the host's `--group` wins), `namesrvAddr` (the host's `--address`),
 * `consumeFromWhere`, `allocateMessageQueueStrategy` (AllocateMessageQueueAveragely, ...ByCircle),
 * `messageListener` (concurrently, orderly), `rocketmq.client.rebalance.waitInterval` (RocketMQ reads it as a
 * system property, once per JVM), `lab.processing.ms` (the application's time per message), and any other
 * setter of `DefaultMQPushConsumer` by its property name (`persistConsumerOffsetInterval`, `pullBatchSize`, ...).
 *
 * Arguments: --address NAMESRV --group G --topic T --count N --trial-dir D --name c [--first K] [--trial ID]
 * [--design NAME] [--family F] [--config key=value]...
 */
public final class ConsumerHost {
    private ConsumerHost() {}

    public static void main(String[] argv) throws Exception {
        HostArgs args = HostArgs.parse(argv);
        Map<String, String> config = args.config;
        String wait = config.remove("rocketmq.client.rebalance.waitInterval");
        if (wait != null) System.setProperty("rocketmq.client.rebalance.waitInterval", wait);
        Layout layout = new Layout(args.get("topic"));
        List<Member> members = new ArrayList<>();
        Map<String, Runnable> stops = new LinkedHashMap<>();
        for (String actor : args.actors()) {
            Member m = new Member(actor, args.get("group"), args.get("address"), new LinkedHashMap<>(config), layout,
                    args.trialDir(), args.trial(), args.design("real-rocketmq-4.9"));
            members.add(m);
            stops.put(actor, m::stop);
        }
        CountDownLatch stopped = HostArgs.stopAllOnShutdown(stops);
        List<String> idents = new ArrayList<>();
        for (Member m : members) {
            m.start();
            idents.add(m.clientId);
        }
        Lines.ready(Map.of("consumers", idents));
        stopped.await();
    }

    static void usage(String problem) {
        HostArgs.usage(problem);
    }

    /** One member: its consumer, its trace, its share as its last allocation of the lab's topic gave it. */
    static final class Member {
        final String actor;
        final String clientId;
        private final Trace trace;
        private final Layout layout;
        private final DefaultMQPushConsumer consumer;
        private final Observer observer;
        private final Map<String, Object> shown = new LinkedHashMap<>();
        private final long processingMs;
        private TreeSet<Integer> owned = new TreeSet<>();
        private String view;
        private String state = "CREATE_JUST";
        private int rebalances;

        Member(String actor, String group, String namesrv, Map<String, String> config, Layout layout, Path trialDir,
               String trial, String design) {
            this.actor = actor;
            this.layout = layout;
            config.remove("group.id");
            config.remove("namesrvAddr");
            String processing = config.remove("lab.processing.ms");
            this.processingMs = processing == null ? 0 : Long.parseLong(processing);
            String listener = config.remove("messageListener");
            String strategyName = config.remove("allocateMessageQueueStrategy");
            AllocateMessageQueueStrategy own = "AllocateMessageQueueAveragelyByCircle".equals(strategyName)
                    ? new AllocateMessageQueueAveragelyByCircle() : new AllocateMessageQueueAveragely();
            if (strategyName != null && !strategyName.equals(own.getClass().getSimpleName())) {
                usage("allocateMessageQueueStrategy " + strategyName + " is not one the lab runs");
            }
            this.trace = new Trace(trialDir, trial, design, actor);
            this.observer = new Observer(this, layout);
            consumer = new DefaultMQPushConsumer(group, observer, new Recording(own));
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName(actor);
            consumer.setClientIP("127.0.0.1");
            consumer.setVipChannelEnabled(false);
            consumer.setMessageModel(MessageModel.CLUSTERING);
            for (Map.Entry<String, String> e : config.entrySet()) set(e.getKey(), e.getValue());
            this.clientId = consumer.buildMQClientId();
            shown.put("consumerGroup", group);
            shown.put("namesrvAddr", namesrv);
            shown.put("instanceName", consumer.getInstanceName());
            shown.put("clientIP", consumer.getClientIP());
            shown.put("messageModel", consumer.getMessageModel().name());
            shown.put("consumeFromWhere", consumer.getConsumeFromWhere().name());
            shown.put("allocateMessageQueueStrategy", own.getClass().getSimpleName());
            shown.put("messageListener", listener == null ? "concurrently" : listener);
            shown.put("heartbeatBrokerInterval", consumer.getHeartbeatBrokerInterval());
            shown.put("pollNameServerInterval", consumer.getPollNameServerInterval());
            shown.put("persistConsumerOffsetInterval", consumer.getPersistConsumerOffsetInterval());
            shown.put("rocketmq.client.rebalance.waitInterval",
                    Long.getLong("rocketmq.client.rebalance.waitInterval", 20000));
            shown.put("pullBatchSize", consumer.getPullBatchSize());
            shown.put("consumeMessageBatchMaxSize", consumer.getConsumeMessageBatchMaxSize());
            shown.put("vipChannelEnabled", consumer.isVipChannelEnabled());
            shown.put("lab.processing.ms", processingMs);
            for (Map.Entry<String, String> e : config.entrySet()) shown.putIfAbsent(e.getKey(), e.getValue());
            if ("orderly".equals(listener)) {
                consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                    for (MessageExt m : msgs) processed(context.getMessageQueue(), m);
                    return ConsumeOrderlyStatus.SUCCESS;
                });
            } else if (listener == null || listener.equals("concurrently")) {
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                    for (MessageExt m : msgs) processed(context.getMessageQueue(), m);
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
            } else {
                usage("messageListener is concurrently or orderly, not " + listener);
            }
        }

        /** A config key as `DefaultMQPushConsumer`'s setter of that property (int, long, boolean, enum, String). */
        private void set(String key, String value) {
            String setter = "set" + Character.toUpperCase(key.charAt(0)) + key.substring(1);
            for (Method m : DefaultMQPushConsumer.class.getMethods()) {
                if (!m.getName().equals(setter) || m.getParameterCount() != 1) continue;
                Class<?> type = m.getParameterTypes()[0];
                try {
                    Object arg;
                    if (type == int.class) arg = Integer.parseInt(value);
                    else if (type == long.class) arg = Long.parseLong(value);
                    else if (type == boolean.class) arg = Boolean.parseBoolean(value);
                    else if (type == ConsumeFromWhere.class) arg = ConsumeFromWhere.valueOf(value);
                    else if (type == String.class) arg = value;
                    else continue;
                    m.invoke(consumer, arg);
                    return;
                } catch (ReflectiveOperationException | IllegalArgumentException e) {
                    usage("cannot set " + key + "=" + value + ": " + e);
                }
            }
            usage("DefaultMQPushConsumer has no setting " + key);
        }

        void start() throws Exception {
            trace.record("consumer_start", Map.of("member", clientId, "config", shown, "topics", List.of(layout.topic())));
            consumer.subscribe(layout.topic(), "*");
            consumer.start();
            changed("RUNNING");
        }

        void stop() {
            observer.stopping = true;
            consumer.shutdown();
            synchronized (this) {
                trace.record("revoked", Map.of("member", clientId, "partitions", Layout.named(layout.topic(), owned),
                        "why", "shutdown"));
                owned = new TreeSet<>();
            }
            changed("SHUTDOWN_ALREADY");
            trace.record("consumer_stop", Map.of("member", clientId));
            trace.close();
        }

        /** The name of the broker at `addr`, from this member's own route table (null: not in it yet). */
        String brokerNameOf(String addr) {
            MQClientInstance factory = consumer.getDefaultMQPushConsumerImpl().getmQClientFactory();
            if (factory == null) return null;
            for (TopicRouteData route : factory.getTopicRouteTable().values()) {
                for (BrokerData b : route.getBrokerDatas()) {
                    if (b.getBrokerAddrs().containsValue(addr)) return b.getBrokerName();
                }
            }
            return null;
        }

        void event(String kind, Map<String, Object> fields) {
            Map<String, Object> all = new LinkedHashMap<>(fields);
            all.putIfAbsent("member", clientId);
            trace.record(kind, all);
        }

        private void processed(MessageQueue mq, MessageExt m) {
            Map<String, Object> f = new LinkedHashMap<>();
            f.put("topic", mq.getTopic());
            f.put("partition", layout.partition(mq));
            f.put("offset", m.getQueueOffset());
            f.put("member", clientId);
            trace.record("processed", f);
            if (processingMs > 0) {
                try {
                    Thread.sleep(processingMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        private synchronized void changed(String next) {
            if (!next.equals(state)) trace.record("consumer_state", Map.of("member", clientId, "state", next));
            state = next;
            Map<String, Object> snapshot = new LinkedHashMap<>();
            snapshot.put("actor", actor);
            snapshot.put("state", state);
            snapshot.put("gave_up", false);
            snapshot.put("partitions", new ArrayList<>(owned));
            Lines.print(Json.encode(snapshot));
        }

        /** One allocation of the lab's topic, as RocketMQ's own strategy computed it: traced as the lab's
         * `rocketmq` design traces a rebalance of the topic (`rocketmq_client/consumer.py: do_rebalance`). */
        private void allocated(List<MessageQueue> mqAll, List<String> cidAll, List<MessageQueue> share,
                               String broker, Throwable failed) {
            synchronized (this) {
                rebalances++;
                if (failed != null) {
                    event("rebalance_end", Map.of("rebalance", rebalances,
                            "outcome", "allocate failed: " + failed));
                    return;
                }
                TreeSet<Integer> next = new TreeSet<>();
                for (MessageQueue mq : share) next.add(layout.partition(mq));
                TreeSet<Integer> gone = new TreeSet<>(owned);
                gone.removeAll(next);
                if (!gone.isEmpty()) {
                    event("revoked", Map.of("partitions", Layout.named(layout.topic(), gone)));
                }
                String nextView = String.join(",", cidAll);
                if (!next.equals(owned) || !nextView.equals(view)) {
                    Map<String, Object> f = new LinkedHashMap<>();
                    f.put("partitions", Layout.named(layout.topic(), next));
                    f.put("view", nextView);
                    f.put("broker", broker);
                    f.put("rebalance", rebalances);
                    f.put("skipped", List.of());
                    event("assigned", f);
                }
                owned = next;
                view = nextView;
                event("rebalance_end", Map.of("rebalance", rebalances, "outcome", "ok"));
            }
            changed(state);
        }

        /** RocketMQ's strategy, unchanged, and a record of what it gave for the lab's topic. */
        final class Recording implements AllocateMessageQueueStrategy {
            private final AllocateMessageQueueStrategy own;

            Recording(AllocateMessageQueueStrategy own) {
                this.own = own;
            }

            @Override
            public List<MessageQueue> allocate(String group, String currentCID, List<MessageQueue> mqAll,
                                               List<String> cidAll) {
                boolean ours = mqAll != null && !mqAll.isEmpty() && mqAll.get(0).getTopic().equals(layout.topic());
                if (!ours) return own.allocate(group, currentCID, mqAll, cidAll);  // the %RETRY% topic
                layout.learn(mqAll);
                String broker = observer.idListBroker();
                synchronized (Member.this) {
                    event("rebalance_begin", Map.of("rebalance", rebalances + 1));
                }
                List<MessageQueue> share;
                try {
                    share = own.allocate(group, currentCID, mqAll, cidAll);
                } catch (RuntimeException e) {
                    allocated(mqAll, cidAll, null, broker, e);
                    throw e;
                }
                allocated(mqAll, cidAll, share == null ? List.of() : share, broker, null);
                return share;
            }

            @Override
            public String getName() {
                return own.getName();
            }
        }
    }
}
