package lab.real.rocketmq49;

import lab.real.Lines;

import java.io.FileInputStream;
import java.util.Map;
import java.util.Properties;

import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.BrokerPathConfigHelper;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * One RocketMQ 4.9.7 broker, as `BrokerStartup` makes it: its properties set on `BrokerConfig`,
 * `NettyServerConfig` and `MessageStoreConfig` by RocketMQ's own `MixAll.properties2Object`, then
 * `BrokerController.initialize()` and `start()`, which registers it with the name server before it returns;
 * then `READY {"port"}`. As `BrokerStartup` does, its HA port is its listen port + 1 (its fast port, listen port
 * - 2, is the controller's own doing). SIGTERM runs its own shutdown.
 *
 * Argument: the broker's properties file.
 */
public final class Broker {
    private Broker() {}

    public static void main(String[] argv) throws Exception {
        // as `BrokerStartup` does first: the protocol version every request carries (the name server reads a
        // registration by it)
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(argv[0])) {
            props.load(in);
        }
        BrokerConfig broker = new BrokerConfig();
        NettyServerConfig server = new NettyServerConfig();
        NettyClientConfig client = new NettyClientConfig();
        MessageStoreConfig store = new MessageStoreConfig();
        MixAll.properties2Object(props, broker);
        MixAll.properties2Object(props, server);
        MixAll.properties2Object(props, client);
        MixAll.properties2Object(props, store);
        store.setHaListenPort(server.getListenPort() + 1);
        BrokerPathConfigHelper.setBrokerConfigPath(argv[0]);  // `-c`: where a config update is persisted
        BrokerController controller = new BrokerController(broker, server, client, store);
        controller.getConfiguration().registerConfig(props);
        if (!controller.initialize()) {
            System.err.println("the broker did not initialize");
            controller.shutdown();
            System.exit(1);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(controller::shutdown, "broker-stop"));
        controller.start();
        Lines.ready(Map.of("port", server.getListenPort(), "broker", broker.getBrokerName()));
        Thread.currentThread().join();
    }
}
