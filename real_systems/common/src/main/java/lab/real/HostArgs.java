package lab.real;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * The lab's consumer-host arguments (`lab_cluster/consumer_host.py`), read the same way by every real system's
 * host: `--address A --group G --topic T --count N --trial-dir D --name c [--first K] [--trial ID]
 * [--design NAME] [--config key=value]...`; the `-D...` owner mark the parent adds is skipped. A wrong argument
 * is a one-line message on stderr and exit status 2, never a trace.
 */
public final class HostArgs {
    private static final List<String> REQUIRED = List.of("address", "group", "topic", "count", "trial-dir", "name");

    private final Map<String, String> args = new LinkedHashMap<>();
    /** Every `--config key=value`, in order. */
    public final Map<String, String> config = new LinkedHashMap<>();

    private HostArgs() {}

    public static HostArgs parse(String[] argv) {
        HostArgs h = new HostArgs();
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (a.startsWith("-D") || a.startsWith("--rebalance.lab.owner")) continue;  // the parent's leak marker
            if (!a.startsWith("--") || i + 1 >= argv.length) usage("unexpected argument " + a);
            String value = argv[++i];
            if (a.equals("--config")) {
                int eq = value.indexOf('=');
                if (eq < 1) usage("--config takes key=value, not " + value);
                h.config.put(value.substring(0, eq), value.substring(eq + 1));
            } else {
                h.args.put(a.substring(2), value);
            }
        }
        for (String required : REQUIRED) {
            if (!h.args.containsKey(required)) usage("--" + required + " is required");
        }
        return h;
    }

    public String get(String name) {
        return args.get(name);
    }

    public String trial() {
        return args.getOrDefault("trial", "adhoc");
    }

    public String design(String otherwise) {
        return args.getOrDefault("design", otherwise);
    }

    public Path trialDir() {
        return Path.of(args.get("trial-dir"));
    }

    /** The members' actor names, as the lab's host names them: `c1..cN`, from `--first K` on, or the name alone. */
    public List<String> actors() {
        int count = Integer.parseInt(args.get("count"));
        int first = Integer.parseInt(args.getOrDefault("first", "0"));
        String name = args.get("name");
        List<String> out = new ArrayList<>();
        for (int i = 0; i < count; i++) out.add(first > 0 ? name + (first + i) : count == 1 ? name : name + (i + 1));
        return out;
    }

    /**
     * On SIGTERM, stop every member at once (the group sees one departure, as the lab's host stops its
     * consumers), each on a thread named after it, and wait for each (30 s at most); the latch is counted down
     * when all have stopped.
     */
    public static CountDownLatch stopAllOnShutdown(Map<String, Runnable> stops) {
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            List<Thread> threads = new ArrayList<>();
            stops.forEach((actor, stop) -> {
                Thread t = new Thread(stop, actor + "-stop");
                t.start();
                threads.add(t);
            });
            for (Thread t : threads) {
                try {
                    t.join(30_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            stopped.countDown();
        }, "host-stop"));
        return stopped;
    }

    public static void usage(String problem) {
        System.err.println("consumer host: " + problem);
        System.exit(2);
    }
}
