package lab.real.rocketmq49;

import lab.real.Lines;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;

/**
 * RocketMQ 4.9.7's name server, as `NamesrvStartup` makes it (`NamesrvController` on a `NamesrvConfig` and a
 * `NettyServerConfig`), with its files in the trial's directory; `READY {"port"}` once it listens. SIGTERM runs
 * its own shutdown.
 *
 * Arguments: <port> <home directory>
 */
public final class NameServer {
    private NameServer() {}

    public static void main(String[] argv) throws Exception {
        // as `NamesrvStartup` does first: the protocol version every request carries (the name server reads a
        // registration by it)
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        int port = Integer.parseInt(argv[0]);
        Path home = Path.of(argv[1]);
        Files.createDirectories(home);
        NamesrvConfig config = new NamesrvConfig();
        config.setKvConfigPath(home.resolve("kvConfig.json").toString());
        config.setConfigStorePath(home.resolve("namesrv.properties").toString());
        NettyServerConfig server = new NettyServerConfig();
        server.setListenPort(port);
        NamesrvController controller = new NamesrvController(config, server);
        if (!controller.initialize()) {
            System.err.println("the name server did not initialize");
            System.exit(1);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(controller::shutdown, "namesrv-stop"));
        controller.start();
        Lines.ready(Map.of("port", port));
        Thread.currentThread().join();
    }
}
