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
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
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

    /** The longest a spawned acquire may take before its {@code join} fails (the Rust runner's step bound). */
    private static final long STEP_BOUND_MS = 60_000;

    @TempDir
    static Path tmp;

    record Scenario(String name, List<String> unless, List<String> requires, JsonArray steps) {}

    static List<Scenario> scenarios() throws IOException {
        Path dir = Services.repoRoot().resolve("tests/conformance");
        List<Scenario> out = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path p : files.filter(f -> f.toString().endsWith(".json")).sorted().toList()) {
                JsonObject o = JsonParser.parseString(Files.readString(p, StandardCharsets.UTF_8)).getAsJsonObject();
                out.add(new Scenario(o.get("name").getAsString(), Run.strings(o, "unless"), Run.strings(o, "requires"),
                        o.getAsJsonArray("steps")));
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
                    sc.name() + " does not apply to " + label + " (unless: " + sc.unless() + ", requires: "
                            + sc.requires() + ")");
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
            if (cap.rwLock()) out.add("rw_lock");
            if (cap.semaphore()) out.add("semaphore");
            if (cap.election()) out.add("election");
            return out;
        }
    }

    static String run(Scenario sc, String url, String unreachable) {
        List<String> flags = flags(url);
        if (sc.unless().stream().anyMatch(flags::contains) || !flags.containsAll(sc.requires())) {
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
        /** An election's name, for the clean check: no leader left. */
        static final Hold LEADER = new Hold("leader", 0, "election");

        /** An {@code observe} step's subscription and its listener's reports, taken by {@code expect_observed}. */
        record Watch(LeaderSubscription subscription, BlockingQueue<Object> reports) {}

        final String url;
        final String unreachable;
        final String prefix;
        final Map<String, FencelockClient> clients = new HashMap<>();
        final Map<String, Lease> leases = new HashMap<>();
        /** Every name the scenario used, with the kind of hold it was first used for (the clean check differs). */
        final Map<String, Hold> names = new LinkedHashMap<>();
        /** When the previous and the current step began: {@code min_elapsed_ms} counts from the previous one. */
        private long previousStart = System.nanoTime();
        private long currentStart = previousStart;
        /** Acquires started with {@code spawn}, awaited by {@code join}. */
        final Map<String, CompletableFuture<Lease>> tasks = new HashMap<>();
        final Map<String, Watch> watches = new HashMap<>();

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
            String op = step.get("op").getAsString();
            Hold hold = op.equals("lock") || op.equals("try_lock") ? hold(step)
                    : op.equals("expect_leader") || op.equals("observe") ? LEADER : Hold.MUTEX;
            if (!(hold.kind().equals("permit") && hold.permits() == 0)) {
                names.putIfAbsent(name, hold);
            }
            return name;
        }

        /** The kind of hold a lock step asks for: {@code kind} read, write, permit (of {@code permits}) or leader. */
        static Hold hold(JsonObject step) {
            String kind = step.has("kind") ? step.get("kind").getAsString() : "lock";
            return switch (kind) {
                case "lock" -> Hold.MUTEX;
                case "read" -> Hold.READ;
                case "write" -> Hold.WRITE;
                case "permit" -> Hold.permit(step.get("permits").getAsLong());
                case "leader" -> LEADER;
                default -> throw new AssertionError("unknown kind " + kind);
            };
        }

        /** One acquire of the step's kind through the public API (a campaign with {@code value}); null if busy. */
        static Lease acquire(FencelockClient c, String name, Hold hold, LockOptions o, boolean once, byte[] value) {
            return switch (hold.kind()) {
                case "leader" -> {
                    FencelockElection election = c.election(name);
                    yield once ? election.tryCampaign(value, o).orElse(null) : election.campaign(value, o);
                }
                case "read" -> once ? c.readWriteLock(name).tryRead(o).orElse(null) : c.readWriteLock(name).read(o);
                case "write" -> once ? c.readWriteLock(name).tryWrite(o).orElse(null) : c.readWriteLock(name).write(o);
                case "permit" -> {
                    FencelockSemaphore sem = c.semaphore(name, (int) hold.permits());
                    yield once ? sem.tryAcquire(o).orElse(null) : sem.acquire(o);
                }
                default -> once ? c.tryLock(name, o).orElse(null) : c.lock(name, o);
            };
        }

        /** The value a step campaigns or proclaims with: {@code value} (UTF-8), or {@code value_len} bytes 'v'. */
        static byte[] value(JsonObject step) {
            if (step.has("value_len")) {
                byte[] v = new byte[step.get("value_len").getAsInt()];
                java.util.Arrays.fill(v, (byte) 'v');
                return v;
            }
            return (step.has("value") ? step.get("value").getAsString() : "").getBytes(StandardCharsets.UTF_8);
        }

        static Leadership leadership(Lease lease) {
            if (lease instanceof Leadership l) {
                return l;
            }
            throw new StepFailed(lease + " is no leadership");
        }

        /** A leader read or observed against the step: {@code none}, or {@code value} and {@code term_of}. */
        void checkLeader(JsonObject step, Optional<LeaderInfo> leader) {
            if (step.has("none") && step.get("none").getAsBoolean()) {
                if (leader.isPresent()) {
                    throw new StepFailed("leader of term " + leader.get().term() + ", expected none");
                }
                return;
            }
            LeaderInfo l = leader.orElseThrow(() -> new StepFailed("no leader, expected one"));
            if (step.has("value") && !l.valueString().equals(step.get("value").getAsString())) {
                throw new StepFailed("leader value \"" + l.valueString() + "\", expected " + step.get("value"));
            }
            if (step.has("term_of") && l.term() != lease(step, "term_of").fence()) {
                throw new StepFailed("leader term " + l.term() + ", expected " + lease(step, "term_of").fence()
                        + ", the term of " + step.get("term_of"));
            }
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

        /** Runs one step, again and again within {@code eventually_ms} until it meets its expectations. */
        void step(JsonObject step) {
            previousStart = currentStart;
            currentStart = System.nanoTime();
            if (!step.has("eventually_ms")) {
                stepOnce(step);
                return;
            }
            long bound = step.get("eventually_ms").getAsLong();
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(bound);
            while (true) {
                try {
                    stepOnce(step);
                    return;
                } catch (StepFailed f) {
                    if (System.nanoTime() >= deadline) {
                        throw new StepFailed("not within " + bound + " ms: " + f.getMessage());
                    }
                    sleep(20); // a bounded retry for a state another task reaches (a spawned writer now waiting)
                }
            }
        }

        void stepOnce(JsonObject step) {
            String op = step.get("op").getAsString();
            if (op.equals("connect") && step.has("url") && step.get("url").getAsString().equals("$UNREACHABLE")
                    && unreachable == null) {
                return; // this backend has no such address (memory://)
            }
            List<ErrorKind> want = expectedErrors(step);
            long started = System.nanoTime();
            LockException error = null;
            try {
                op(op, step);
            } catch (LockException e) {
                error = e;
            }
            Duration within = ms(step, "within_ms");
            Duration elapsed = Duration.ofNanos(System.nanoTime() - started);
            // expect_lost and expect_observed wait up to the bound themselves.
            if (within != null && !op.equals("expect_lost") && !op.equals("expect_observed")
                    && elapsed.compareTo(within) > 0) {
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

        static List<String> strings(JsonObject step, String field) {
            List<String> out = new ArrayList<>();
            if (step.has(field)) {
                for (JsonElement e : step.getAsJsonArray(field)) {
                    out.add(e.getAsString());
                }
            }
            return out;
        }

        private void op(String op, JsonObject step) {
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
                    Hold hold = hold(step);
                    boolean once = op.equals("try_lock");
                    LockOptions opts = o;
                    byte[] value = value(step);
                    if (step.has("spawn")) {
                        tasks.put(step.get("spawn").getAsString(),
                                CompletableFuture.supplyAsync(() -> acquire(c, name, hold, opts, once, value)));
                        return;
                    }
                    settle(step, acquire(c, name, hold, opts, once, value));
                }
                case "join" -> {
                    CompletableFuture<Lease> task = tasks.remove(step.get("task").getAsString());
                    Lease lease;
                    try {
                        lease = task.get(STEP_BOUND_MS, TimeUnit.MILLISECONDS);
                    } catch (ExecutionException e) {
                        if (e.getCause() instanceof LockException le) {
                            throw le;
                        }
                        throw new StepFailed("the spawned acquire failed: " + e.getCause());
                    } catch (TimeoutException | InterruptedException e) {
                        throw new StepFailed("the spawned acquire did not finish: " + e);
                    }
                    settle(step, lease);
                }
                case "expect_slot" -> {
                    int mine = slot(lease(step, "lease"));
                    if (step.has("eq") && mine != slot(lease(step, "eq"))) {
                        throw new StepFailed("slot " + mine + " is not the slot of " + step.get("eq"));
                    }
                    if (step.has("ne") && mine == slot(lease(step, "ne"))) {
                        throw new StepFailed("slot " + mine + " is also the slot of " + step.get("ne"));
                    }
                    if (step.has("below") && mine >= step.get("below").getAsLong()) {
                        throw new StepFailed("slot " + mine + " is not below " + step.get("below"));
                    }
                }
                case "expect_available" -> {
                    String name = name(step);
                    int n = client(step).semaphore(name, step.get("permits").getAsInt()).available();
                    if (step.has("count") && n != step.get("count").getAsInt()) {
                        throw new StepFailed(n + " permits available, expected " + step.get("count"));
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
                case "proclaim" -> leadership(lease(step, "lease")).proclaim(value(step));
                case "resign" -> leadership(lease(step, "lease")).resign();
                case "expect_leader" -> checkLeader(step, client(step).election(name(step)).leader());
                case "observe" -> {
                    BlockingQueue<Object> reports = new LinkedBlockingQueue<>();
                    LeaderSubscription s = client(step).election(name(step)).observe(new LeaderListener() {
                        @Override
                        public void onChange(Optional<LeaderInfo> leader) {
                            reports.add(leader);
                        }

                        @Override
                        public void onError(LockException error) {
                            reports.add(error);
                        }
                    });
                    watches.put(step.get("as").getAsString(), new Watch(s, reports));
                }
                case "expect_observed" -> {
                    Watch w = watches.get(step.get("observer").getAsString());
                    long bound = step.has("within_ms") ? step.get("within_ms").getAsLong() : 10_000;
                    Object report;
                    try {
                        report = w.reports().poll(bound, TimeUnit.MILLISECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new StepFailed("interrupted");
                    }
                    if (report == null) {
                        throw new StepFailed("no change observed within " + bound + " ms");
                    }
                    if (report instanceof LockException e) {
                        throw new StepFailed("observe failed: " + e);
                    }
                    @SuppressWarnings("unchecked")
                    Optional<LeaderInfo> leader = (Optional<LeaderInfo>) report;
                    checkLeader(step, leader);
                }
                default -> throw new AssertionError("unknown op " + op);
            }
        }

        /** Checks an acquire's outcome against the step ({@code expect}, {@code min_elapsed_ms}); keeps it {@code as}. */
        private void settle(JsonObject step, Lease lease) {
            boolean busyExpected = step.has("expect") && step.get("expect").getAsString().equals("busy");
            if (lease != null && busyExpected) {
                lease.release();
                throw new StepFailed("acquired, expected busy");
            }
            if (lease == null && !busyExpected) {
                throw new StepFailed("busy, expected to acquire");
            }
            if (lease == null) {
                return;
            }
            Duration minElapsed = ms(step, "min_elapsed_ms");
            // From the previous step's start: the hold this one waits out was written after it.
            Duration elapsed = Duration.ofNanos(System.nanoTime() - previousStart);
            if (minElapsed != null && elapsed.compareTo(minElapsed) < 0) {
                throw new StepFailed("acquired " + elapsed + " after the previous step began, sooner than " + minElapsed);
            }
            if (step.has("as")) {
                leases.put(step.get("as").getAsString(), lease);
            } else {
                lease.release();
            }
        }

        private static int slot(Lease lease) {
            return lease.slot().orElseThrow(() -> new StepFailed("lease " + lease.name() + " has no slot"));
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
                tasks.values().forEach(t -> t.cancel(true));
                names.forEach((name, hold) -> checkFree(checker, name, hold));
            }
        }

        /**
         * Per kind: a mutex is free, a read-write lock gives its write lock, a semaphore has every permit, an election
         * has no leader.
         */
        private static void checkFree(FencelockClient checker, String name, Hold hold) {
            switch (hold.kind()) {
                case "read", "write" -> {
                    try {
                        Lease w = checker.readWriteLock(name).tryWrite(LockOptions.defaults()).orElse(null);
                        if (w == null) {
                            throw new StepFailed("read-write lock " + name + " left held");
                        }
                        w.release();
                    } catch (LockException e) {
                        if (e.kind() != ErrorKind.UNSUPPORTED) {
                            throw e;
                        }
                    }
                }
                case "leader" -> {
                    try {
                        Optional<LeaderInfo> leader = checker.election(name).leader();
                        if (leader.isPresent()) {
                            throw new StepFailed("election " + name + " left a leader of term "
                                    + leader.get().term());
                        }
                    } catch (LockException e) {
                        if (e.kind() != ErrorKind.UNSUPPORTED) {
                            throw e;
                        }
                    }
                }
                case "permit" -> {
                    try {
                        int n = checker.semaphore(name, (int) hold.permits()).available();
                        if (n != hold.permits()) {
                            throw new StepFailed("semaphore " + name + " left " + n + " of " + hold.permits());
                        }
                    } catch (LockException e) {
                        if (e.kind() != ErrorKind.UNSUPPORTED && e.kind() != ErrorKind.INVALID_ARGUMENT) {
                            throw e;
                        }
                    }
                }
                default -> {
                    LockInfo info = checker.inspect(name);
                    if (info.held()) {
                        throw new StepFailed(name + " left held by " + info.holder().get());
                    }
                }
            }
        }

        void close() {
            watches.values().forEach(w -> w.subscription().close());
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
