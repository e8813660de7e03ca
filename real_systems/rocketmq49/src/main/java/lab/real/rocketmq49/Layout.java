package lab.real.rocketmq49;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The lab's partition number of a RocketMQ message queue, and back.
 *
 * The lab's `rocketmq` design lays partition p of the topic on broker (p mod B) + 1 of its B brokers and keeps
 * p as the queue's id. RocketMQ numbers each broker's queues 0..n-1, so the trial gives broker `broker-b` the
 * partitions p with p mod B = b - 1 as its queues 0, 1, ... in order: queue q of the i-th broker (the brokers
 * that hold the topic, by name) is partition q * B + i. Sorted as RocketMQ sorts queues (topic, broker name,
 * queue id), the queues come in the order of the lab design's, so the same strategy gives the same shares.
 * B is learnt from the topic's whole queue list (a route, or an allocation's `mqAll`): with fewer partitions
 * than brokers only the first P brokers hold one queue each, and the formula still holds.
 */
final class Layout {
    private final String topic;
    private volatile List<String> brokers = List.of();
    private final Map<MessageQueue, Integer> cache = new ConcurrentHashMap<>();

    Layout(String topic) {
        this.topic = topic;
    }

    String topic() {
        return topic;
    }

    /** Learn the brokers from the topic's whole queue list (a later, longer list replaces it). */
    void learn(Collection<MessageQueue> all) {
        TreeSet<String> names = new TreeSet<>();
        for (MessageQueue mq : all) {
            if (mq.getTopic().equals(topic)) names.add(mq.getBrokerName());
        }
        if (names.size() > brokers.size()) {
            brokers = List.copyOf(names);
            cache.clear();
        }
    }

    boolean known() {
        return !brokers.isEmpty();
    }

    /** The partition of queue `queueId` of `brokerName`, or -1 if the layout does not know that broker yet. */
    int partition(String brokerName, int queueId) {
        List<String> b = brokers;
        int i = b.indexOf(brokerName);
        return i < 0 ? -1 : queueId * b.size() + i;
    }

    int partition(MessageQueue mq) {
        return cache.computeIfAbsent(mq, q -> partition(q.getBrokerName(), q.getQueueId()));
    }

    /** How many queues broker i (0-based, of `brokers`) holds of `partitions`: the p with p mod brokers = i. */
    static int queuesOf(int i, int brokers, int partitions) {
        return i >= partitions ? 0 : (partitions - i + brokers - 1) / brokers;
    }

    static List<List<Object>> named(String topic, Collection<Integer> partitions) {
        List<List<Object>> out = new ArrayList<>();
        for (int p : new TreeSet<>(partitions)) out.add(List.of(topic, p));
        return out;
    }
}
