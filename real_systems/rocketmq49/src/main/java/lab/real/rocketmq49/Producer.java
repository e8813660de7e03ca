package lab.real.rocketmq49;

import lab.real.Lines;
import lab.real.Trace;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

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
 * Arguments: --bootstrap <name server host:port> --topic T --partitions P [--rate R] --trial-dir D [--trial ID]
 * [--design NAME]
 */
public final class Producer {
    private static final long INTERVAL_MS = 50;

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
        MessageQueue[] queues = new MessageQueue[partitions];
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            List<MessageQueue> all = producer.fetchPublishMessageQueues(topic);
            if (all.size() == partitions) {
                layout.learn(all);
                for (MessageQueue mq : all) queues[layout.partition(mq)] = mq;
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                System.err.println("producer: the route of " + topic + " has " + all.size() + " queues, not " + partitions);
                System.exit(1);
            }
            Thread.sleep(200);
        }
        AtomicLong produced = new AtomicLong();
        CountDownLatch stopped = new CountDownLatch(1);
        Thread sender = new Thread(() -> {
            long[] sequence = new long[partitions];
            double owed = 0;
            long next = System.nanoTime();
            try {
                while (stopped.getCount() > 0) {
                    next += INTERVAL_MS * 1_000_000L;
                    long wait = (next - System.nanoTime()) / 1_000_000L;
                    if (wait > 0 && stopped.await(wait, java.util.concurrent.TimeUnit.MILLISECONDS)) break;
                    owed += rate * INTERVAL_MS / 1000.0;
                    int count = (int) owed;
                    owed -= count;
                    for (int p = 0; p < partitions; p++) {
                        for (int k = 0; k < count; k++) {
                            String value = topic + "/" + p + "/" + sequence[p]++;
                            send(producer, trace, produced, queues[p], p, value);
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
