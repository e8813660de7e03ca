package lab.real.rocketmq49;

import java.util.Map;

import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;

/**
 * Make the trial's topic as `mqadmin updateTopic -b <broker>` does, once per broker (`MQClientAPIImpl.createTopic`,
 * UPDATE_AND_CREATE_TOPIC), each broker with its share of the partitions as its queues (`Layout`); the broker
 * registers the topic with the name server before it answers. Then wait until the name server's route holds
 * every queue (the name server's address is the brokers' own setting, `namesrvAddr`).
 *
 * Run again with more partitions, it grows the topic as `mqadmin updateTopic` with a larger `-w`/`-r` does: each
 * broker replaces its topic config with the larger queue counts (`TopicConfigManager.updateTopicConfig`) and
 * registers it (`registerIncrementBrokerData`); the name server replaces that broker's queue data ("topic
 * changed"). The layout only adds queues at the end of each broker's, so every existing queue keeps its partition.
 *
 * Arguments: <topic> <partitions> <broker host:port>... (in broker order)
 */
public final class Topics {
    private Topics() {}

    public static void main(String[] argv) throws Exception {
        String topic = argv[0];
        int partitions = Integer.parseInt(argv[1]);
        int brokers = argv.length - 2;
        ClientConfig config = new ClientConfig();
        config.setInstanceName("lab-admin");
        config.setClientIP("127.0.0.1");
        config.setVipChannelEnabled(false);
        MQClientInstance instance = MQClientManager.getInstance().getOrCreateMQClientInstance(config);
        MQClientAPIImpl api = instance.getMQClientAPIImpl();
        api.start();
        try {
            String namesrv = api.getBrokerConfig(argv[2], 10_000).getProperty("namesrvAddr");
            api.updateNameServerAddressList(namesrv);
            for (int i = 0; i < brokers; i++) {
                int queues = Layout.queuesOf(i, brokers, partitions);
                if (queues == 0) continue;
                TopicConfig topicConfig = new TopicConfig(topic, queues, queues, 6);  // PERM_READ | PERM_WRITE
                api.createTopic(argv[2 + i], "TBW102", topicConfig, 10_000);
            }
            long deadline = System.currentTimeMillis() + 30_000;
            while (true) {
                int total = 0;
                try {
                    TopicRouteData route = api.getTopicRouteInfoFromNameServer(topic, 3_000);
                    for (QueueData q : route.getQueueDatas()) total += q.getReadQueueNums();
                } catch (Exception e) {
                    total = -1;  // not registered yet
                    if (System.currentTimeMillis() > deadline) e.printStackTrace();
                }
                if (total == partitions) break;
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("the name server's route of " + topic + " holds " + total + " queues, not "
                            + partitions);
                    System.exit(1);
                }
                Thread.sleep(100);
            }
        } finally {
            api.shutdown();
        }
        System.out.println("created " + Map.of("topic", topic, "partitions", partitions));
        System.exit(0);
    }
}
