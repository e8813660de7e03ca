package lab.real.kafka08;

import lab.real.Lines;

import java.io.FileInputStream;
import java.io.IOException;
import java.util.Map;
import java.util.Properties;

import kafka.server.KafkaConfig;
import kafka.server.KafkaServerStartable;

/**
 * One Kafka 0.8.2.2 broker, as `kafka.Kafka` starts it, that says when it is up: `READY {"broker_id", "port"}`
 * on stdout once `startup()` has returned (it has registered under `/brokers/ids`), which is what the lab's
 * process handling waits for (`lab_cluster/processes.py`). SIGTERM runs the broker's own shutdown (a
 * controlled shutdown, as 0.8.2.2's `controlled.shutdown.enable` default says).
 *
 * Argument: the broker's properties file.
 */
public final class Broker {
    private Broker() {}

    public static void main(String[] argv) throws IOException {
        if (argv.length < 1) {
            System.err.println("usage: Broker <server.properties>");
            System.exit(2);
        }
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(argv[0])) {
            props.load(in);
        }
        KafkaServerStartable server = new KafkaServerStartable(new KafkaConfig(props));
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdown, "broker-stop"));
        server.startup();
        Lines.ready(Map.of("broker_id", Integer.parseInt(props.getProperty("broker.id")),
                "port", Integer.parseInt(props.getProperty("port"))));
        server.awaitShutdown();
    }
}
