package lab.real;

import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Arrays;
import java.util.Map;

/**
 * Runs a server's own `main` unchanged, and says READY once its port accepts connections: the lab's process
 * protocol (`lab_cluster/processes.py`) for a server that does not speak it (Kafka's `kafka.Kafka`).
 *
 * Arguments: <port> <main class> <its arguments>... The server's own shutdown hook handles SIGTERM; if its
 * main returns or throws before the port opens, this exits with status 1 (the parent shows the log).
 */
public final class ReadyWhenListening {
    private ReadyWhenListening() {}

    public static void main(String[] argv) throws Exception {
        int port = Integer.parseInt(argv[0]);
        Method main = Class.forName(argv[1]).getMethod("main", String[].class);
        String[] rest = Arrays.copyOfRange(argv, 2, argv.length);
        Thread server = new Thread(() -> {
            try {
                main.invoke(null, (Object) rest);
            } catch (ReflectiveOperationException e) {
                e.getCause().printStackTrace();
                Runtime.getRuntime().halt(1);
            }
        }, "main-" + argv[1]);
        server.start();
        while (!listening(port)) {
            if (!server.isAlive()) System.exit(1);
            Thread.sleep(100);
        }
        Lines.ready(Map.of("port", port));
        server.join();
    }

    private static boolean listening(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 200);
            return true;
        } catch (IOException e) {
            return false;
        }
    }
}
