package lab.real;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * One actor's trace, in the lab's format (`lab_cluster/trace.py`): `<trial_dir>/traces/<actor>.jsonl`, one JSON
 * object per event, `ts_ns` on CLOCK_MONOTONIC (Java's `System.nanoTime` on Linux, the clock Python's
 * `time.monotonic_ns` reads), opened by `trace_open` and closed by `trace_close`.
 *
 * Every event is written and flushed at once: a killed consumer keeps what it recorded up to its death.
 */
public final class Trace implements AutoCloseable {
    private static final Set<String> TOP_LEVEL = Set.of("topic", "partition", "offset", "path", "generation",
            "member", "error");

    private final BufferedWriter out;
    private final Map<String, Object> base = new LinkedHashMap<>();
    private long events;
    private boolean closed;

    public Trace(Path trialDir, String trial, String design, String actor) {
        try {
            Path dir = trialDir.resolve("traces");
            Files.createDirectories(dir);
            out = Files.newBufferedWriter(dir.resolve(actor + ".jsonl"), StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        base.put("trial", trial);
        base.put("design", design);
        base.put("actor", actor);
        record("trace_open", Map.of("pid", ProcessHandle.current().pid()));
    }

    /** Append one event now. */
    public synchronized void record(String kind, Map<String, ?> fields) {
        if (closed) return;  // an event from a thread that outlived its consumer's close: nothing to add
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("ts_ns", System.nanoTime());
        event.put("wall_ms", System.currentTimeMillis());
        event.putAll(base);
        event.put("kind", kind);
        Map<String, Object> extra = new TreeMap<>();  // sorted, as the Python recorder sorts them
        fields.forEach((k, v) -> {
            if (TOP_LEVEL.contains(k)) event.put(k, v);
            else extra.put(k, v);
        });
        if (!extra.isEmpty()) event.put("fields", Json.encode(extra));
        events++;
        try {
            out.write(Json.encode(event));
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public synchronized void close() {
        if (closed) return;
        record("trace_close", Map.of("events", events + 1));
        closed = true;
        try {
            out.close();
        } catch (IOException ignored) {
            // the events are flushed already
        }
    }
}
