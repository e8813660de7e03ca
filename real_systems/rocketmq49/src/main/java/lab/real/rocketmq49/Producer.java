package lab.real.rocketmq49;

import lab.real.Lines;
import lab.real.Trace;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The trial's producer on RocketMQ's own `DefaultMQProducer`: the job of `real_systems/kafka_producer.py`, with
 * its arguments and its trace. Every 50 ms it sends `rate x 0.05` messages to each partition (a message queue,
 * `Layout`), named `"<topic>/<partition>/<sequence>"`, asynchronously to that queue, and records each one its
 * broker stored as `produced` (topic, partition, offset: the queue offset `SendResult` gives, which the consumer
 * sees as `MessageExt.getQueueOffset`). It does not resend (`retryTimesWhenSendAsyncFailed` 0): a failed send is
 * `produce_failed`.
 *
 * Following the topic. It names each send's queue itself (`send(Message, MessageQueue, SendCallback)`), so
 * RocketMQ's own queue selection, which reads the producer's route table (`topicPublishInfoTable`, refreshed from
 * the name server every `pollNameServerInterval`, 30 s), is not used: the queues are the ones it reads itself. It
 * starts with the `--partitions` it is given, and every `ROUTE_REFRESH_MS` asks the name server for the topic's
 * route again (`fetchPublishMessageQueues`): when the route holds more queues (a `grow`: each broker's
 * `writeQueueNums` raised), it writes to the new ones from the next batch on. It is the lab's load, not a system
 * under test: a producer left to RocketMQ's selection would learn of them at its next route refresh, so that a
 * design's delay to process the new queues would be the producer's as much as its own.
 *
 * Arguments: --bootstrap <name server host:port> --topic T --partitions P [--rate R] --trial-dir D [--trial ID]
 * [--design NAME]
 */
public final class Producer {
    private static final long INTERVAL_MS = 50;
    /** How often it asks the name server for the topic's route (and so learns of new queues). */
    private static final long ROUTE_REFRESH_MS = 250;

    private Producer() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                System.err.println("producer: unexpected argument " + argv[i]);
                System.exit(2);
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        String topic = args.get("topic");
        int partitions = Integer.parseInt(args.get("partitions"));
        double rate = Double.parseDouble(args.getOrDefault("rate", "100"));
        Trace trace = new Trace(Path.of(args.get("trial-dir")), args.getOrDefault("trial", "adhoc"),
                args.getOrDefault("design", "cluster"), "producer");
        DefaultMQProducer producer = new DefaultMQProducer("lab-producer");
        producer.setNamesrvAddr(args.get("bootstrap"));
        producer.setInstanceName("lab-producer");
        producer.setClientIP("127.0.0.1");
        producer.setVipChannelEnabled(false);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        producer.start();
        Layout layout = new Layout(topic);
        AtomicReference<MessageQueue[]> queues = new AtomicReference<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            MessageQueue[] first = byPartition(layout, producer.fetchPublishMessageQueues(topic));
            if (first != null && first.length >= partitions) {
                queues.set(first);
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                System.err.println("producer: the route of " + topic + " has " + (first == null ? "no whole set of"
                        : first.length) + " queues, not " + partitions);
                System.exit(1);
            }
            Thread.sleep(200);
        }
        ScheduledExecutorService routes = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "producer-route");
            t.setDaemon(true);
            return t;
        });
        routes.scheduleWithFixedDelay(() -> refresh(producer, layout, queues), ROUTE_REFRESH_MS, ROUTE_REFRESH_MS,
                TimeUnit.MILLISECONDS);
        AtomicLong produced = new AtomicLong();
        CountDownLatch stopped = new CountDownLatch(1);
        Thread sender = new Thread(() -> {
            long[] sequence = new long[0];
            double owed = 0;
            long next = System.nanoTime();
            try {
                while (stopped.getCount() > 0) {
                    next += INTERVAL_MS * 1_000_000L;
                    long wait = (next - System.nanoTime()) / 1_000_000L;
                    if (wait > 0 && stopped.await(wait, TimeUnit.MILLISECONDS)) break;
                    owed += rate * INTERVAL_MS / 1000.0;
                    int count = (int) owed;
                    owed -= count;
                    MessageQueue[] now = queues.get();  // every partition it knows, those of a growth too
                    if (now.length > sequence.length) sequence = Arrays.copyOf(sequence, now.length);
                    for (int p = 0; p < now.length; p++) {
                        for (int k = 0; k < count; k++) {
                            String value = topic + "/" + p + "/" + sequence[p]++;
                            send(producer, trace, produced, now[p], p, value);
                        }
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "producer");
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopped.countDown();
            routes.shutdownNow();
            try {
                sender.join(10_000);
                Thread.sleep(500);  // the last sends' answers (loopback: well under this)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            producer.shutdown();
            trace.record("producer_stopped", Map.of("produced", produced.get()));
            trace.close();
            done.countDown();
        }, "producer-stop"));
        sender.start();
        Lines.ready(Map.of("topic", topic, "rate", rate));
        done.await();
    }

    /**
     * The route's queues by the lab's partition number (`Layout`), or null if they are not partitions 0..n-1 each
     * once: a route read while a growth has reached some brokers and not the others may not be (the next read is).
     */
    static MessageQueue[] byPartition(Layout layout, List<MessageQueue> all) {
        layout.learn(all);
        MessageQueue[] out = new MessageQueue[all.size()];
        for (MessageQueue mq : all) {
            int p = layout.partition(mq);
            if (p < 0 || p >= out.length || out[p] != null) return null;
            out[p] = mq;
        }
        return out;
    }

    /** Ask the name server for the topic's route; if it holds more queues than the producer writes to, take them. */
    private static void refresh(DefaultMQProducer producer, Layout layout, AtomicReference<MessageQueue[]> queues) {
        try {
            MessageQueue[] now = queues.get();
            MessageQueue[] route = byPartition(layout, producer.fetchPublishMessageQueues(now[0].getTopic()));
            if (route != null && route.length > now.length) {
                queues.set(route);
                System.err.println("producer: " + now[0].getTopic() + " has " + route.length + " queues (it wrote to "
                        + now.length + ")");
            }
        } catch (Exception e) {  // the name server did not answer in time: the next period asks again
            System.err.println("producer: the route could not be read: " + e);
        }
    }

    private static void send(DefaultMQProducer producer, Trace trace, AtomicLong produced, MessageQueue mq,
                             int partition, String value) {
        Message message = new Message(mq.getTopic(), value.getBytes(StandardCharsets.UTF_8));
        SendCallback callback = new SendCallback() {
            @Override
            public void onSuccess(SendResult result) {
                Map<String, Object> f = new LinkedHashMap<>();
                f.put("topic", mq.getTopic());
                f.put("partition", partition);
                f.put("offset", result.getQueueOffset());
                f.put("value", value);
                f.put("status", result.getSendStatus().name());
                trace.record("produced", f);
                produced.incrementAndGet();
            }

            @Override
            public void onException(Throwable e) {
                trace.record("produce_failed", Map.of("topic", mq.getTopic(), "partition", partition, "value", value,
                        "error", e.getClass().getSimpleName() + ": " + e.getMessage()));
            }
        };
        try {
            producer.send(message, mq, callback);
        } catch (Exception e) {
            callback.onException(e);
        }
    }
}
