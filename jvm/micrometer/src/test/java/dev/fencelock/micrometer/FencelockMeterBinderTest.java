package dev.fencelock.micrometer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.fencelock.ClientOptions;
import dev.fencelock.ErrorKind;
import dev.fencelock.Fence;
import dev.fencelock.FencelockClient;
import dev.fencelock.Lease;
import dev.fencelock.LockException;
import dev.fencelock.LockOptions;
import dev.fencelock.MetricFamily;
import dev.fencelock.Services;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The binder against a real {@link SimpleMeterRegistry}, after a scripted workload on a real Redis and on SQLite:
 * one meter per family sample, each reading what the client's families say, plus the series that appear later.
 */
@Timeout(60)
class FencelockMeterBinderTest {
    @TempDir
    Path tmp;

    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(5));

    @ParameterizedTest
    @ValueSource(strings = {"redis", "sqlite"})
    void theMetersReadTheWorkload(String backend) throws Exception {
        String url = backend.equals("redis") ? Services.redis() : Services.sqlite(tmp);
        String name = Services.unique("mm");
        String hot = Services.unique("mm-hot");
        MeterRegistry registry = new SimpleMeterRegistry();
        try (FencelockClient client =
                        FencelockClient.connect(url, ClientOptions.defaults().withMetricsNames(Set.of(hot)));
                FencelockClient other = FencelockClient.connect(url)) {
            // Bound before any use, by a binder nothing else references.
            new FencelockMeterBinder(client, Tags.of("app", "test")).bindTo(registry);
            System.gc();

            try (Lease held = client.lock(name, SHORT)) {
                assertTrue(held.isValid());
                assertEquals(1.0, gauge(registry, "fencelock.active.leases", Map.of()));
                LockException e = assertThrows(LockException.class,
                        () -> client.lock(name, SHORT.withOwner("someone-else").withTimeout(Duration.ofMillis(150))));
                assertEquals(ErrorKind.TIMEOUT, e.kind());
            }
            FunctionTimer timeout = timer(registry, "fencelock.acquire.wait", Map.of("outcome", "timeout"));
            assertEquals(1.0, timeout.count());
            assertTrue(timeout.totalTime(TimeUnit.SECONDS) >= 0.15, timeout.totalTime(TimeUnit.SECONDS) + " s");
            assertEquals(1.0, timer(registry, "fencelock.hold", Map.of()).count());
            assertEquals(0.0, gauge(registry, "fencelock.active.leases", Map.of()));

            Lease taken = client.lock(name, SHORT.withWatchdog(false));
            assertTrue(other.forceRelease(name));
            assertThrows(LockException.class, taken::renew);
            assertThrows(LockException.class, taken::release);
            Lease expiring = client.lock(name, SHORT.withTtl(Duration.ofMillis(200)).withWatchdog(false));
            expiring.lost().get(10, TimeUnit.SECONDS);
            assertThrows(LockException.class, expiring::release);
            Fence fence = client.fence(Services.unique("mm-res"));
            fence.write(expiring.fence() + 1, "new".getBytes(StandardCharsets.UTF_8));
            assertThrows(LockException.class,
                    () -> fence.write(expiring.fence(), "stale".getBytes(StandardCharsets.UTF_8)));
            assertEquals(1.0, counter(registry, "fencelock.lost", Map.of("reason", "taken")));
            assertEquals(1.0, counter(registry, "fencelock.lost", Map.of("reason", "expired")));
            assertEquals(1.0, counter(registry, "fencelock.renewals", Map.of("outcome", "failed")));
            assertEquals(1.0, counter(registry, "fencelock.fence.writes", Map.of("outcome", "refused")));
            assertEquals(2.0, timer(registry, "fencelock.backend.op", Map.of("op", "fence_write", "outcome", "ok"))
                    .count());

            // The opted-in name's series appear once it is used, at the next read of any meter.
            client.lock(hot, SHORT).release();
            assertEquals(0.0, gauge(registry, "fencelock.local.queue.depth", Map.of()));
            assertEquals(1.0, timer(registry, "fencelock.lock.hold", Map.of("lock", hot)).count());

            // Every sample of every family has its meter, reading the same figure, with the labels and the tag.
            int samples = 0;
            for (MetricFamily f : client.metricFamilies()) {
                for (MetricFamily.Sample s : f.samples()) {
                    samples++;
                    Meter meter = find(registry, f, s);
                    switch (f.type()) {
                        case COUNTER -> assertEquals(s.value().getAsDouble(), ((FunctionCounter) meter).count(),
                                f.name() + s.labels());
                        case GAUGE -> assertEquals(s.value().getAsDouble(), ((Gauge) meter).value(),
                                f.name() + s.labels());
                        case HISTOGRAM -> {
                            FunctionTimer t = (FunctionTimer) meter;
                            assertEquals(s.histogram().orElseThrow().count(), (long) t.count(), f.name() + s.labels());
                            assertEquals(s.histogram().orElseThrow().sum(), t.totalTime(TimeUnit.SECONDS), 1e-9);
                        }
                    }
                }
            }
            assertEquals(samples, registry.getMeters().size(), "one meter per sample, no other");
        }
        // A closed client's meters read NaN rather than throwing into the registry.
        assertTrue(Double.isNaN(counter(registry, "fencelock.lost", Map.of("reason", "taken"))));
    }

    @Test
    void labelsWinOverTagsAndNamesFollowMicrometer() {
        assertEquals("fencelock.lost", FencelockMeterBinder.meterName("fencelock_lost_total", "_total"));
        assertEquals("fencelock.acquire.wait",
                FencelockMeterBinder.meterName("fencelock_acquire_wait_seconds", "_seconds"));
        assertEquals("fencelock.active.leases", FencelockMeterBinder.meterName("fencelock_active_leases", ""));
        MeterRegistry registry = new SimpleMeterRegistry();
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            new FencelockMeterBinder(client, Tags.of("backend", "mine", "app", "x")).bindTo(registry);
            Gauge g = registry.get("fencelock.active.leases").gauge();
            assertEquals("sqlite", g.getId().getTag("backend"));
            assertEquals("x", g.getId().getTag("app"));
        }
        assertThrows(NullPointerException.class, () -> new FencelockMeterBinder(null));
    }

    @Test
    void everyRegistryBoundGetsTheSeriesThatAppearLater() {
        MeterRegistry first = new SimpleMeterRegistry();
        MeterRegistry second = new SimpleMeterRegistry();
        try (FencelockClient client =
                FencelockClient.connect(Services.sqlite(tmp), ClientOptions.defaults().withAllMetricsNames())) {
            FencelockMeterBinder binder = new FencelockMeterBinder(client);
            binder.bindTo(first);
            binder.bindTo(second);
            assertEquals(first.getMeters().size(), second.getMeters().size());
            client.lock("later", SHORT).release();
            first.get("fencelock.active.leases").gauge().value(); // a read registers the new series everywhere
            for (MeterRegistry r : List.of(first, second)) {
                assertEquals(1.0, r.get("fencelock.lock.hold").tag("lock", "later").functionTimer().count());
            }
        }
    }

    @Test
    void aPrometheusRegistryExportsCoresFamilyNames() {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            new FencelockMeterBinder(client).bindTo(registry);
            client.lock(Services.unique("prom"), SHORT).release();
            String text = registry.scrape();
            for (MetricFamily f : client.metricFamilies()) {
                List<String> series = f.type() == MetricFamily.Type.HISTOGRAM
                        ? List.of(f.name() + "_count{", f.name() + "_sum{")
                        : List.of(f.name() + "{");
                for (String s : series) {
                    assertTrue(text.contains("\n" + s + "backend=\"sqlite\""), s + " missing:\n" + text);
                }
            }
            assertTrue(text.contains("fencelock_acquire_wait_seconds_count{backend=\"sqlite\",outcome=\"acquired\"} 1"),
                    text);
        }
    }

    private static Meter find(MeterRegistry registry, MetricFamily f, MetricFamily.Sample s) {
        String suffix = switch (f.type()) {
            case COUNTER -> "_total";
            case GAUGE -> "";
            case HISTOGRAM -> "_seconds";
        };
        Meter meter = registry.find(FencelockMeterBinder.meterName(f.name(), suffix)).tags(tags(s.labels())).meter();
        assertNotNull(meter, f.name() + s.labels() + " has no meter");
        return meter;
    }

    private static Iterable<Tag> tags(Map<String, String> labels) {
        Tags tags = Tags.of("app", "test");
        for (Map.Entry<String, String> l : labels.entrySet()) {
            tags = tags.and(l.getKey(), l.getValue());
        }
        return tags;
    }

    private static double counter(MeterRegistry r, String name, Map<String, String> labels) {
        return r.get(name).tags(tags(labels)).functionCounter().count();
    }

    private static double gauge(MeterRegistry r, String name, Map<String, String> labels) {
        return r.get(name).tags(tags(labels)).gauge().value();
    }

    private static FunctionTimer timer(MeterRegistry r, String name, Map<String, String> labels) {
        return r.get(name).tags(tags(labels)).functionTimer();
    }
}
