package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared scenarios of tests/conformance/ on every backend, interpreted step by step as core/tests/conformance.rs
 * and the Python and Node runners do, through the Java API. Prints one matrix row per backend.
 */
class ConformanceTest {
    /** (label, variable, an address of that backend where nothing answers): the runners' BACKENDS table. */
    private static final String[][] SERVED = {
        {"redis", "FENCELOCK_TEST_REDIS", "redis://127.0.0.1:1"},
        {"redis-tls", "FENCELOCK_TEST_REDIS_SECURE", "rediss://127.0.0.1:1"},
        {"redlock", "FENCELOCK_TEST_REDLOCK", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"},
        {"redis_cluster", "FENCELOCK_TEST_REDIS_CLUSTER", "redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"},
        {"redis_sentinel", "FENCELOCK_TEST_SENTINEL", "redis+sentinel://127.0.0.1:1/fencelock-master"},
        {"etcd", "FENCELOCK_TEST_ETCD", "etcd://127.0.0.1:1"},
        {"postgres", "FENCELOCK_TEST_POSTGRES", "postgres://postgres@127.0.0.1:1/fencelock_test"},
        {"mysql", "FENCELOCK_TEST_MYSQL", "mysql://root@127.0.0.1:1/fencelock_test"},
        {"zk", "FENCELOCK_TEST_ZK", "zk://127.0.0.1:1"},
    };

    private static final Map<String, List<String>> MATRIX = new LinkedHashMap<>();

    @TempDir
    static Path tmp;

    record Scenario(String name, List<String> unless, JsonArray steps) {}

    static List<Scenario> scenarios() throws IOException {
        Path dir = Services.repoRoot().resolve("tests/conformance");
        List<Scenario> out = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path p : files.filter(f -> f.toString().endsWith(".json")).sorted().toList()) {
                JsonObject o = JsonParser.parseString(Files.readString(p, StandardCharsets.UTF_8)).getAsJsonObject();
                List<String> unless = new ArrayList<>();
                if (o.has("unless")) {
                    o.getAsJsonArray("unless").forEach(e -> unless.add(e.getAsString()));
                }
                out.add(new Scenario(o.get("name").getAsString(), unless, o.getAsJsonArray("steps")));
            }
        }
        return out;
    }

    @Test
    void thereAreScenarios() throws IOException {
        assertTrue(scenarios().size() >= 9, "scenarios in tests/conformance: " + scenarios().size());
    }

    @TestFactory
    Stream<DynamicNode> everyScenarioOnEveryBackend() throws IOException {
        List<Scenario> all = scenarios();
        List<DynamicNode> backends = new ArrayList<>();
        backends.add(backend("memory", () -> "memory://" + Services.unique("conformance"), null, all));
        backends.add(backend("sqlite", () -> Services.sqlite(Files.createTempDirectory(tmp, "sqlite")),
                "sqlite:/nonexistent-dir/fencelock/locks.db", all));
        for (String[] b : SERVED) {
            backends.add(backend(b[0], () -> Services.url(b[1]), b[2], all));
        }
        return backends.stream();
    }

    interface UrlSource {
        String get() throws Exception;
    }

    private static DynamicContainer backend(String label, UrlSource url, String unreachable, List<Scenario> all) {
        return DynamicContainer.dynamicContainer(label, all.stream().map(sc -> DynamicTest.dynamicTest(sc.name(), () -> {
            List<String> row;
            synchronized (MATRIX) {
                row = MATRIX.computeIfAbsent(label, k -> new ArrayList<>());
            }
            String result = "FAIL";
            try {
                result = run(sc, url.get(), unreachable);
            } finally {
                synchronized (MATRIX) {
                    row.add(sc.name() + "=" + result);
                }
            }
            org.junit.jupiter.api.Assumptions.assumeTrue(!result.equals("skip"),
                    sc.name() + " does not apply to " + label + " (unless: " + sc.unless() + ")");
        })));
    }

    /** Keeps the matrix in target/conformance-matrix.txt; jvm/run-tests.sh prints it (Maven runs quiet). */
    @AfterAll
    static void printMatrix() throws IOException {
        List<String> lines = new ArrayList<>();
        MATRIX.forEach((label, row) -> lines.add(
                "conformance matrix row: java × " + label + ": " + String.join(" ", row.stream().sorted().toList())));
        Files.write(Path.of("target", "conformance-matrix.txt"), lines, StandardCharsets.UTF_8);
    }

    static List<String> flags(String url) {
        try (FencelockClient c = FencelockClient.connect(url)) {
            Capability cap = c.capability();
            List<String> out = new ArrayList<>();
            if (cap.fencing()) out.add("fencing");
            if (cap.nativeWait()) out.add("native_wait");
            if (cap.fair()) out.add("fair");
            if (cap.sessionBound()) out.add("session_bound");
            return out;
        }
    }

    /** Read-write locks and semaphores are not in this binding yet (issue 18): their scenarios are skipped. */
    static boolean needsKinds(Scenario sc) {
        for (JsonElement e : sc.steps()) {
            JsonObject st = e.getAsJsonObject();
            String op = st.get("op").getAsString();
            if (st.has("kind") || op.equals("join") || op.equals("expect_slot") || op.equals("expect_available")) {
                return true;
            }
        }
        return false;
    }

    static String run(Scenario sc, String url, String unreachable) {
        List<String> flags = flags(url);
        if (needsKinds(sc) || sc.unless().stream().anyMatch(flags::contains)) {
            return "skip";
        }
        Run run = new Run(url, unreachable, Services.unique("conformance/" + sc.name()));
        try {
            int i = 0;
            for (JsonElement e : sc.steps()) {
                i++;
                try {
                    run.step(e.getAsJsonObject());
                } catch (StepFailed f) {
                    throw new AssertionError("step " + i + " " + e + ": " + f.getMessage(), f);
                }
            }
            run.checkClean();
        } finally {
            run.close();
        }
        return "pass";
    }

    static final class StepFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        StepFailed(String message) {
            super(message);
        }
    }

    /** The state of one scenario run. */
    static final class Run {
        final String url;
        final String unreachable;
        final String prefix;
        final Map<String, FencelockClient> clients = new HashMap<>();
        final Map<String, Lease> leases = new HashMap<>();
        final List<String> names = new ArrayList<>();

        Run(String url, String unreachable, String prefix) {
            this.url = url;
            this.unreachable = unreachable;
            this.prefix = prefix;
        }

        String name(JsonObject step) {
            if (step.has("name_len")) {
                return "n".repeat(step.get("name_len").getAsInt());
            }
            String label = step.has("name") ? step.get("name").getAsString() : "L";
            if (label.isEmpty() || label.contains("\0")) {
                return label;
            }
            String name = prefix + "/" + label;
            if (!names.contains(name)) {
                names.add(name);
            }
            return name;
        }

        FencelockClient client(JsonObject step) {
            return clients.get(step.get("client").getAsString());
        }

        Lease lease(JsonObject step, String key) {
            return leases.get(step.get(key).getAsString());
        }

        static Duration ms(JsonObject step, String key) {
            return step.has(key) ? Duration.ofMillis(step.get(key).getAsLong()) : null;
        }

        static List<ErrorKind> expectedErrors(JsonObject step) {
            List<ErrorKind> out = new ArrayList<>();
            JsonElement want = step.get("expect_error");
            if (want == null) {
                return out;
            }
            if (want.isJsonArray()) {
                want.getAsJsonArray().forEach(k -> out.add(ErrorKind.valueOf(k.getAsString())));
            } else {
                out.add(ErrorKind.valueOf(want.getAsString()));
            }
            return out;
        }

        void step(JsonObject step) {
            String op = step.get("op").getAsString();
            if (op.equals("connect") && step.has("url") && step.get("url").getAsString().equals("$UNREACHABLE")
                    && unreachable == null) {
                return; // this backend has no such address (memory://)
            }
            List<ErrorKind> want = expectedErrors(step);
            long started = System.nanoTime();
            LockException error = null;
            try {
                op(op, step, started);
            } catch (LockException e) {
                error = e;
            }
            Duration within = ms(step, "within_ms");
            Duration elapsed = Duration.ofNanos(System.nanoTime() - started);
            if (within != null && !op.equals("expect_lost") && elapsed.compareTo(within) > 0) {
                throw new StepFailed("took " + elapsed + ", more than " + within);
            }
            if (error == null && !want.isEmpty()) {
                throw new StepFailed("succeeded, expected " + want);
            }
            if (error != null && want.isEmpty()) {
                throw new StepFailed("failed: " + error);
            }
            if (error != null && !want.contains(error.kind())) {
                throw new StepFailed("failed with " + error.kind() + " (" + error.getMessage() + "), expected " + want);
            }
            if (error != null) {
                checkMentions(step, error);
            }
        }

        /** {@code mentions} must be in the message; no {@code not_mentions} in its message, toString, fields or cause. */
        private static void checkMentions(JsonObject step, LockException error) {
            for (String word : strings(step, "mentions")) {
                if (!error.getMessage().contains(word)) {
                    throw new StepFailed("the error does not mention " + word + ": " + error.getMessage());
                }
            }
            List<String> texts = new ArrayList<>(List.of(error.getMessage(), error.toString(),
                    String.valueOf(error.lock()), String.valueOf(error.backend())));
            for (Throwable cause = error.getCause(); cause != null; cause = cause.getCause()) {
                texts.add(cause.toString());
            }
            for (String word : strings(step, "not_mentions")) {
                for (String text : texts) {
                    if (text.contains(word)) {
                        throw new StepFailed("the error mentions " + word + ": " + text);
                    }
                }
            }
        }

        private static List<String> strings(JsonObject step, String field) {
            List<String> out = new ArrayList<>();
            if (step.has(field)) {
                for (JsonElement e : step.getAsJsonArray(field)) {
                    out.add(e.getAsString());
                }
            }
            return out;
        }

        private void op(String op, JsonObject step, long started) {
            switch (op) {
                case "connect" -> {
                    String u = step.has("url") ? step.get("url").getAsString() : url;
                    if (u.equals("$UNREACHABLE")) {
                        u = unreachable;
                    }
                    long connectMs = step.has("connect_timeout_ms") ? step.get("connect_timeout_ms").getAsLong() : 0;
                    clients.put(step.get("client").getAsString(), FencelockClient.connect(u, connectMs));
                }
                case "close" -> client(step).close();
                case "lock", "try_lock" -> {
                    String name = name(step);
                    LockOptions o = LockOptions.defaults()
                            .withTtl(Duration.ofMillis(step.has("ttl_ms") ? step.get("ttl_ms").getAsLong() : 30000))
                            .withWatchdog(!step.has("watchdog") || step.get("watchdog").getAsBoolean());
                    // The other runners' default owner is "none" (each call its own); the scenarios give one where
                    // reentrancy matters, so a call without one gets a fresh owner here too.
                    o = o.withOwner(step.has("owner") ? step.get("owner").getAsString() : Services.unique("call"));
                    if (step.has("timeout_ms")) {
                        o = o.withTimeout(ms(step, "timeout_ms"));
                    }
                    if (step.has("fair")) {
                        o = o.withFair(step.get("fair").getAsBoolean());
                    }
                    FencelockClient c = client(step);
                    Lease lease = op.equals("lock") ? c.lock(name, o) : c.tryLock(name, o).orElse(null);
                    boolean busyExpected = step.has("expect") && step.get("expect").getAsString().equals("busy");
                    if (lease != null && busyExpected) {
                        throw new StepFailed("acquired, expected busy");
                    }
                    if (lease == null && !busyExpected) {
                        throw new StepFailed("busy, expected to acquire");
                    }
                    if (lease != null) {
                        Duration minElapsed = ms(step, "min_elapsed_ms");
                        Duration elapsed = Duration.ofNanos(System.nanoTime() - started);
                        if (minElapsed != null && elapsed.compareTo(minElapsed) < 0) {
                            throw new StepFailed("acquired after " + elapsed + ", sooner than " + minElapsed);
                        }
                        if (step.has("as")) {
                            leases.put(step.get("as").getAsString(), lease);
                        } else {
                            lease.release();
                        }
                    }
                }
                case "release" -> lease(step, "lease").release();
                case "renew" -> {
                    Lease lease = lease(step, "lease");
                    Duration ttl = ms(step, "ttl_ms");
                    if (ttl == null) {
                        lease.renew();
                    } else {
                        lease.renew(ttl);
                    }
                    Duration minRemaining = ms(step, "min_remaining_ms");
                    if (minRemaining != null && lease.remaining().compareTo(minRemaining) < 0) {
                        throw new StepFailed("remaining " + lease.remaining() + " < " + minRemaining + " after renew");
                    }
                }
                case "expect_token" -> {
                    long a = lease(step, "lease").fence();
                    String rel = step.has("gt") ? "gt" : "eq";
                    long b = lease(step, rel).fence();
                    if (!(rel.equals("gt") ? a > b : a == b)) {
                        throw new StepFailed("token " + a + " is not " + rel + " " + b);
                    }
                }
                case "pause" -> sleep(step.get("ms").getAsLong());
                case "expect_lost" -> {
                    long bound = step.get("within_ms").getAsLong();
                    try {
                        lease(step, "lease").lost().get(bound, TimeUnit.MILLISECONDS);
                    } catch (TimeoutException e) {
                        throw new StepFailed("lost did not fire within " + bound + " ms");
                    } catch (InterruptedException | ExecutionException e) {
                        throw new StepFailed("lost failed: " + e);
                    }
                }
                case "expect_not_lost" -> {
                    Lease lease = lease(step, "lease");
                    if (lease.lost().isDone() || lease.isLost() || !lease.isValid()) {
                        throw new StepFailed("lease lost=" + lease.isLost() + " valid=" + lease.isValid());
                    }
                }
                case "force_release" -> client(step).forceRelease(name(step));
                case "expect_free", "expect_held" -> {
                    LockInfo info = client(step).inspect(name(step));
                    if (info.held() != op.equals("expect_held")) {
                        throw new StepFailed(op + ": holder is " + info.holder());
                    }
                }
                case "fence_write", "fence_read" -> {
                    Fence fence = client(step).fence(prefix + "/" + step.get("resource").getAsString());
                    long token = step.has("token_of") ? lease(step, "token_of").fence() : step.get("token").getAsLong();
                    byte[] value = (step.has("value") ? step.get("value").getAsString() : "")
                            .getBytes(StandardCharsets.UTF_8);
                    if (op.equals("fence_write")) {
                        fence.write(token, value);
                    } else {
                        FenceValue got = fence.read();
                        if (got.token() != token || !java.util.Arrays.equals(got.value(), value)) {
                            throw new StepFailed("read (" + got.token() + ", " + new String(got.value(),
                                    StandardCharsets.UTF_8) + "), expected (" + token + ", "
                                    + new String(value, StandardCharsets.UTF_8) + ")");
                        }
                    }
                }
                default -> throw new AssertionError("unknown op " + op);
            }
        }

        /** After the scenario: nothing may be left held, locally or on the backend. */
        void checkClean() {
            for (Lease lease : leases.values()) {
                try {
                    lease.close();
                } catch (LockException ignored) {
                    // lost or released: nothing to release
                }
            }
            try (FencelockClient checker = FencelockClient.connect(url)) {
                for (FencelockClient c : clients.values()) {
                    if (c.localEntries() != 0) {
                        throw new StepFailed(c.localEntries() + " local queue entries left");
                    }
                }
                for (String name : names) {
                    LockInfo info = checker.inspect(name);
                    if (info.held()) {
                        throw new StepFailed(name + " left held by " + info.holder().get());
                    }
                }
            }
        }

        void close() {
            for (FencelockClient c : clients.values()) {
                c.close();
            }
        }

        private static void sleep(long ms) {
            try {
                Thread.sleep(ms); // the subject of a `pause` step: letting TTLs and watchdogs run
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new StepFailed("interrupted");
            }
        }
    }
}
