package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code client.metrics()} and {@code metricFamilies()} move as a scripted workload says they must, on a real Redis
 * and on SQLite; lock names become series only when opted in; metrics off records nothing; bad options are refused.
 */
@Timeout(60)
class MetricsTest {
    @TempDir
    Path tmp;

    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(5));

    private String url(String backend) {
        return backend.equals("redis") ? Services.redis() : Services.sqlite(tmp);
    }

    /** Polls {@code client}'s metrics until {@code cond} holds, for at most 10 s. */
    static FencelockMetrics eventually(FencelockClient client, String what, Predicate<FencelockMetrics> cond)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            FencelockMetrics m = client.metrics();
            if (cond.test(m)) {
                return m;
            }
            if (System.nanoTime() > deadline) {
                fail(what + " never held: " + m);
            }
            Thread.sleep(5);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis", "sqlite"})
    void aScriptedWorkloadMovesTheMetrics(String backend) throws Exception {
        String url = url(backend);
        String name = Services.unique("m");
        String hot = Services.unique("m-hot");
        try (FencelockClient a = FencelockClient.connect(url, ClientOptions.defaults().withMetricsNames(Set.of(hot)));
                FencelockClient b = FencelockClient.connect(url)) {
            FencelockMetrics fresh = a.metrics();
            assertEquals(backend, fresh.backend());
            assertTrue(fresh.enabled());
            assertEquals(0, fresh.acquireWait().get("acquired").count());
            assertEquals(Set.of("acquired", "busy", "timeout", "cancelled", "error"), fresh.acquireWait().keySet());
            assertEquals(20, fresh.holdTime().buckets().size());
            assertEquals(Double.POSITIVE_INFINITY, fresh.holdTime().buckets().get(19).le());

            // acquired on a; busy and timeout on b while a holds it.
            Lease lease = a.lock(name, SHORT);
            assertEquals(1, a.metrics().acquireWait().get("acquired").count());
            assertEquals(1, a.metrics().activeLeases());
            assertEquals(Optional.empty(), b.tryLock(name, SHORT));
            LockException timeout = assertThrows(LockException.class,
                    () -> b.lock(name, SHORT.withTimeout(Duration.ofMillis(150))));
            assertEquals(ErrorKind.TIMEOUT, timeout.kind());
            FencelockMetrics m = b.metrics();
            assertEquals(1, m.acquireWait().get("busy").count());
            assertEquals(1, m.acquireWait().get("timeout").count());
            assertTrue(m.acquireWait().get("timeout").sum() >= 0.15, m.acquireWait().get("timeout").toString());
            assertEquals(0, m.localQueueDepth());

            // A waiting call is in the queue depth; cancelling it counts as cancelled.
            CompletableFuture<Lease> waiter = b.lockAsync(name, SHORT);
            eventually(b, "one call waiting", x -> x.localQueueDepth() == 1);
            waiter.cancel(true);
            assertThrows(CancellationException.class, waiter::join);
            eventually(b, "the cancelled call counted",
                    x -> x.acquireWait().get("cancelled").count() == 1 && x.localQueueDepth() == 0);

            // An explicit renewal and a release end one hold.
            lease.renew();
            lease.release();
            m = a.metrics();
            assertEquals(1, m.renewals().get("ok"));
            assertEquals(0, m.activeLeases());
            assertEquals(1, m.holdTime().count());
            assertEquals(1, m.backendOps().get("release").get("ok").count());
            assertEquals(1, m.backendOps().get("renew").get("ok").count());

            // taken: b force-releases, a's next renewal finds the record gone.
            Lease taken = a.lock(name, SHORT.withWatchdog(false));
            assertTrue(b.forceRelease(name));
            assertEquals(ErrorKind.LOCK_LOST, assertThrows(LockException.class, taken::renew).kind());
            m = a.metrics();
            assertEquals(1, m.lost().get("taken"));
            assertEquals(1, m.renewals().get("failed"));
            assertEquals(0, m.activeLeases());
            assertThrows(LockException.class, taken::release, "the lost lease still leaves this thread's hold");

            // expired: watchdog off, the TTL passes.
            Lease expiring = a.lock(name, LockOptions.defaults().withTtl(Duration.ofMillis(200)).withWatchdog(false));
            expiring.lost().get(10, TimeUnit.SECONDS);
            assertEquals(1, a.metrics().lost().get("expired"));
            assertThrows(LockException.class, expiring::release);

            // A stale fenced write is refused and counted; the refusal is still the backend's answer.
            Fence fence = a.fence(Services.unique("m-res"));
            fence.write(expiring.fence() + 1, "new".getBytes(StandardCharsets.UTF_8));
            assertEquals(ErrorKind.FENCED, assertThrows(LockException.class,
                    () -> fence.write(expiring.fence(), "stale".getBytes(StandardCharsets.UTF_8))).kind());
            m = a.metrics();
            assertEquals(1, m.fenceWrites().get("ok"));
            assertEquals(1, m.fenceWrites().get("refused"));
            assertEquals(2, m.backendOps().get("fence_write").get("ok").count());

            // Only the opted-in name has series of its own.
            a.lock(hot, SHORT).release();
            m = a.metrics();
            assertEquals(Set.of(hot), m.names().keySet());
            assertEquals(1, m.names().get(hot).acquireWait().get("acquired").count());
            assertEquals(1, m.names().get(hot).holdTime().count());
            assertEquals(Map.of(), b.metrics().names(), "b opted in no name");

            // The families carry the same figures, every series labelled with the backend.
            List<MetricFamily> families = a.metricFamilies();
            Map<String, MetricFamily> byName =
                    families.stream().collect(Collectors.toMap(MetricFamily::name, f -> f));
            assertEquals(Set.of("fencelock_acquire_wait_seconds", "fencelock_hold_seconds", "fencelock_active_leases",
                    "fencelock_renewals_total", "fencelock_lost_total", "fencelock_fence_writes_total",
                    "fencelock_local_queue_depth", "fencelock_backend_op_seconds",
                    "fencelock_lock_acquire_wait_seconds", "fencelock_lock_hold_seconds",
                    "fencelock_lock_active_leases", "fencelock_lock_lost_total", "fencelock_lock_local_queue_depth"),
                    byName.keySet());
            assertTrue(families.stream().flatMap(f -> f.samples().stream())
                    .allMatch(s -> backend.equals(s.labels().get("backend"))));
            assertEquals(MetricFamily.Type.COUNTER, byName.get("fencelock_lost_total").type());
            assertEquals(1.0, sample(byName, "fencelock_lost_total", Map.of("reason", "taken")).value().getAsDouble());
            assertEquals(MetricFamily.Type.HISTOGRAM, byName.get("fencelock_backend_op_seconds").type());
            assertEquals(m.backendOps().get("fence_write").get("ok"),
                    sample(byName, "fencelock_backend_op_seconds", Map.of("op", "fence_write", "outcome", "ok"))
                            .histogram().orElseThrow());
            assertEquals(1, sample(byName, "fencelock_lock_hold_seconds", Map.of("lock", hot)).histogram()
                    .orElseThrow().count());
        }
    }

    /** The one sample of {@code family} whose labels include {@code labels}. */
    static MetricFamily.Sample sample(Map<String, MetricFamily> families, String family, Map<String, String> labels) {
        List<MetricFamily.Sample> found = families.get(family).samples().stream()
                .filter(s -> s.labels().entrySet().containsAll(labels.entrySet())).toList();
        assertEquals(1, found.size(), family + labels + " in " + families.get(family));
        return found.get(0);
    }

    @Test
    void metricsOffRecordsNothing() {
        try (FencelockClient client =
                FencelockClient.connect(Services.sqlite(tmp), ClientOptions.defaults().withMetrics(false))) {
            client.lock("off", SHORT).release();
            FencelockMetrics m = client.metrics();
            assertFalse(m.enabled());
            assertEquals(0, m.acquireWait().get("acquired").count());
            assertEquals(0, m.holdTime().count());
            assertTrue(m.backendOps().values().stream().flatMap(o -> o.values().stream())
                    .allMatch(h -> h.count() == 0));
            assertTrue(client.metricFamilies().stream().flatMap(f -> f.samples().stream())
                    .allMatch(s -> s.value().orElse(0) == 0 && s.histogram().map(h -> h.count() == 0).orElse(true)));
        }
    }

    @Test
    void allNamesKeepEveryNameExactlyAsWritten() {
        // Quotes, backslashes, a newline and non-ASCII survive core's JSON and the reader.
        String odd = "odd \"name\" \\ é ✓\n" + Services.unique("");
        String plain = Services.unique("plain");
        try (FencelockClient client =
                FencelockClient.connect(Services.sqlite(tmp), ClientOptions.defaults().withAllMetricsNames())) {
            client.lock(plain, SHORT).release();
            client.lock(odd, SHORT).release();
            assertEquals(Set.of(plain, odd), client.metrics().names().keySet());
            assertEquals(Set.of(plain, odd),
                    client.metricFamilies().stream().filter(f -> f.name().equals("fencelock_lock_hold_seconds"))
                            .flatMap(f -> f.samples().stream()).map(s -> s.labels().get("lock"))
                            .collect(Collectors.toSet()));
        }
    }

    @Test
    void badMetricsNamesAreRefusedWithTheirReason() {
        ClientOptions d = ClientOptions.defaults();
        assertThrows(NullPointerException.class, () -> d.withMetricsNames(null));
        Set<String> withNull = new HashSet<>();
        withNull.add(null);
        for (Set<String> bad : List.of(Set.of(""), Set.of("a\0b"), Set.of("x".repeat(513)), withNull)) {
            LockException e = assertThrows(LockException.class, () -> d.withMetricsNames(bad));
            assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind(), e.getMessage());
            assertTrue(e.getMessage().contains("metricsNames"), e.getMessage());
        }
        assertEquals(Set.of("x".repeat(512)), d.withMetricsNames(Set.of("x".repeat(512))).metricsNames());
        assertEquals(Set.of(), d.withMetricsNames(Set.of("a")).withAllMetricsNames().metricsNames());
        assertTrue(d.withMetricsNames(Set.of("a")).withAllMetricsNames().allMetricsNames());
        assertFalse(d.withAllMetricsNames().withMetricsNames(Set.of("a")).allMetricsNames());
        assertEquals("ClientOptions[metrics=true, metricsNames=[a, b]]",
                d.withMetricsNames(Set.of("b", "a")).toString());
        // The Java limit is core's: a name one byte longer than it is not a lock name there either.
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            assertEquals(ErrorKind.INVALID_ARGUMENT, assertThrows(LockException.class,
                    () -> client.tryLock("x".repeat(ClientOptions.MAX_NAME_BYTES + 1))).kind());
            client.tryLock("x".repeat(ClientOptions.MAX_NAME_BYTES)).orElseThrow().release();
        }
    }

    @Test
    void connectAsyncTakesTheOptionsToo() throws Exception {
        try (FencelockClient client = FencelockClient.connectAsync(Services.sqlite(tmp),
                ClientOptions.defaults().withMetrics(false)).get(10, TimeUnit.SECONDS)) {
            assertFalse(client.metrics().enabled());
        }
        assertThrows(NullPointerException.class, () -> FencelockClient.connect(Services.sqlite(tmp), null));
    }

    @Test
    void theReaderReadsJsonAndRefusesAnotherShape() {
        assertEquals(Map.of("a", List.of(1L, 2.5, true, "x\u00e9\"\n"), "b", Map.of()),
                MetricsJson.parse(" {\"a\": [1, 2.5, true, \"x\\u00e9\\\"\\n\"], \"b\": {}} "));
        assertEquals(java.util.Arrays.asList(null, -3L, 1e-4), MetricsJson.parse("[null,-3,1e-4]"));
        for (String bad : List.of("{\"a\":1", "[1 2]", "{\"a\" 1}", "tru", "\"open", "[1,]x", "[] []",
                "\"ab\\", "\"\\u12\"", "")) {
            LockException e = assertThrows(LockException.class, () -> MetricsJson.parse(bad), bad);
            assertEquals(ErrorKind.INTERNAL, e.kind(), e.getMessage());
        }
        LockException e = assertThrows(LockException.class, () -> MetricsJson.metrics("{\"backend\":\"x\"}"));
        assertEquals(ErrorKind.INTERNAL, e.kind());
        assertTrue(e.getMessage().contains("no field enabled"), e.getMessage());
    }

    @Test
    void aClosedClientHasNoMetrics() {
        FencelockClient client = FencelockClient.connect(Services.sqlite(tmp));
        client.close();
        assertEquals(ErrorKind.CLOSED, assertThrows(LockException.class, client::metrics).kind());
        assertEquals(ErrorKind.CLOSED, assertThrows(LockException.class, client::metricFamilies).kind());
    }
}
