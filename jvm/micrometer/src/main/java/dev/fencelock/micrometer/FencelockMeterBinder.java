package dev.fencelock.micrometer;

import dev.fencelock.ErrorKind;
import dev.fencelock.FencelockClient;
import dev.fencelock.LockException;
import dev.fencelock.MetricFamily;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Registers a {@link FencelockClient}'s metrics with a Micrometer registry, one meter per sample of
 * {@link FencelockClient#metricFamilies()} (core's one mapping; nothing is re-derived here), tagged with the
 * sample's labels and the given tags:
 *
 * <ul>
 *   <li>a counter family becomes {@link FunctionCounter}s, a gauge family {@link Gauge}s;
 *   <li>a histogram family (durations in seconds) becomes {@link FunctionTimer}s of its count and sum: Micrometer's
 *       meter for timings counted elsewhere. Micrometer has no meter for buckets counted elsewhere, so the buckets
 *       stay in {@code metricFamilies()} and core's Prometheus text.
 * </ul>
 *
 * Names follow Micrometer's convention, each family's name with {@code _} as {@code .}, without the {@code _total}
 * of counters and the {@code _seconds} of timers (registries add their own): {@code fencelock_lost_total} is
 * {@code fencelock.lost}, which a Prometheus registry exports as {@code fencelock_lost_total} again.
 *
 * <pre>{@code
 * new FencelockMeterBinder(client, Tags.of("app", "billing")).bindTo(registry);
 * }</pre>
 *
 * Every read of a meter reads the client's current figures. Series that appear later (a lock name opted in with
 * {@code ClientOptions.withMetricsNames} is first used) are registered at the next read of any of these meters, so
 * they show from the next scrape on. Once the client is closed, counters, gauges and timer sums read NaN and timer
 * counts 0.
 */
public final class FencelockMeterBinder implements MeterBinder {
    private final FencelockClient client;
    private final Tags tags;
    /** The samples already registered with each registry bound. */
    private final Map<MeterRegistry, Set<Key>> bound = new HashMap<>();

    /** A family's sample: what one meter reads. */
    private record Key(String family, Map<String, String> labels) {}

    /** Binds {@code client}'s metrics, tagged with their labels only. */
    public FencelockMeterBinder(FencelockClient client) {
        this(client, Tags.empty());
    }

    /** Binds {@code client}'s metrics, tagged with their labels and {@code tags} (a label wins over a tag). */
    public FencelockMeterBinder(FencelockClient client, Iterable<Tag> tags) {
        this.client = Objects.requireNonNull(client, "client");
        this.tags = Tags.of(Objects.requireNonNull(tags, "tags"));
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        Objects.requireNonNull(registry, "registry");
        List<MetricFamily> families = client.metricFamilies();
        synchronized (bound) {
            bound.putIfAbsent(registry, new HashSet<>());
        }
        register(families);
    }

    /** Registers the samples of {@code families} no registry bound has yet. */
    private void register(List<MetricFamily> families) {
        synchronized (bound) {
            bound.forEach((registry, registered) -> {
                for (MetricFamily f : families) {
                    for (MetricFamily.Sample s : f.samples()) {
                        Key key = new Key(f.name(), s.labels());
                        if (registered.add(key)) {
                            register(registry, f, key);
                        }
                    }
                }
            });
        }
    }

    // The functions capture this binder, so the meters hold it strongly: Micrometer keeps only a weak reference to
    // a meter's state object, and `new FencelockMeterBinder(client).bindTo(registry)` keeps no other.
    private void register(MeterRegistry registry, MetricFamily f, Key key) {
        Tags meterTags = tags;
        for (Map.Entry<String, String> label : key.labels().entrySet()) {
            meterTags = meterTags.and(label.getKey(), label.getValue());
        }
        switch (f.type()) {
            case COUNTER -> FunctionCounter.builder(meterName(f.name(), "_total"), this, b -> value(key))
                    .description(f.help()).tags(meterTags).register(registry);
            case GAUGE -> Gauge.builder(meterName(f.name(), ""), this, b -> value(key)).description(f.help())
                    .tags(meterTags).strongReference(true).register(registry);
            case HISTOGRAM -> FunctionTimer.builder(meterName(f.name(), "_seconds"), this, b -> count(key),
                    b -> sum(key), TimeUnit.SECONDS).description(f.help()).tags(meterTags).register(registry);
        }
    }

    /** {@code fencelock_lost_total} → {@code fencelock.lost}: Micrometer's form, the registry's suffix dropped. */
    static String meterName(String family, String suffix) {
        String base = family.endsWith(suffix) ? family.substring(0, family.length() - suffix.length()) : family;
        return base.replace('_', '.');
    }

    private double value(Key key) {
        MetricFamily.Sample s = current(key);
        return s == null ? Double.NaN : s.value().orElse(Double.NaN);
    }

    private long count(Key key) {
        MetricFamily.Sample s = current(key);
        return s == null || s.histogram().isEmpty() ? 0 : s.histogram().get().count();
    }

    private double sum(Key key) {
        MetricFamily.Sample s = current(key);
        return s == null || s.histogram().isEmpty() ? Double.NaN : s.histogram().get().sum();
    }

    /** The sample of {@code key} now, registering any new series on the way; null once the client is closed. */
    private MetricFamily.Sample current(Key key) {
        List<MetricFamily> families;
        try {
            families = client.metricFamilies();
        } catch (LockException e) {
            if (e.kind() == ErrorKind.CLOSED) {
                return null;
            }
            throw e;
        }
        register(families);
        for (MetricFamily f : families) {
            if (f.name().equals(key.family())) {
                for (MetricFamily.Sample s : f.samples()) {
                    if (s.labels().equals(key.labels())) {
                        return s;
                    }
                }
            }
        }
        return null;
    }
}
