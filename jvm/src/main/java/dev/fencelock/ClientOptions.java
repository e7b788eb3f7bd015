package dev.fencelock;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Objects;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * How a {@link FencelockClient} records metrics. Immutable; {@code with…} methods return a changed copy:
 * {@code ClientOptions.defaults().withMetricsNames(Set.of("orders"))}.
 */
public final class ClientOptions {
    /** Longest lock name in UTF-8 bytes: core's {@code MAX_NAME_BYTES} (a test keeps the two equal). */
    static final int MAX_NAME_BYTES = 512;

    private static final ClientOptions DEFAULTS = new ClientOptions(true, false, Collections.emptySortedSet(), 0);

    private final boolean metrics;
    private final boolean allMetricsNames;
    private final SortedSet<String> metricsNames;
    private final long connectTimeoutMs;

    private ClientOptions(boolean metrics, boolean allMetricsNames, SortedSet<String> metricsNames,
            long connectTimeoutMs) {
        this.metrics = metrics;
        this.allMetricsNames = allMetricsNames;
        this.metricsNames = metricsNames;
        this.connectTimeoutMs = connectTimeoutMs;
    }

    /** Metrics on, no lock name as a label. */
    public static ClientOptions defaults() {
        return DEFAULTS;
    }

    /** Record metrics ({@link FencelockClient#metrics()}); default on, off makes every recording hook a branch. */
    public ClientOptions withMetrics(boolean on) {
        return new ClientOptions(on, allMetricsNames, metricsNames, connectTimeoutMs);
    }

    /**
     * Gives these lock names series of their own (the {@code lock} label); other names stay in the client-wide
     * series only. An empty set means none, the default: lock names are unbounded, metric series should not be.
     */
    public ClientOptions withMetricsNames(Set<String> names) {
        Objects.requireNonNull(names, "names");
        SortedSet<String> copy = new TreeSet<>();
        for (String name : names) {
            copy.add(checkName(name));
        }
        return new ClientOptions(metrics, false, Collections.unmodifiableSortedSet(copy), connectTimeoutMs);
    }

    /** Gives every lock name series of its own, up to 1000 names; later ones share the series {@code _other}. */
    public ClientOptions withAllMetricsNames() {
        return new ClientOptions(metrics, true, Collections.emptySortedSet(), connectTimeoutMs);
    }

    /** A connect timeout in ms (0: the default), for tests that expect no answer. */
    ClientOptions withConnectTimeoutMillis(long ms) {
        return new ClientOptions(metrics, allMetricsNames, metricsNames, ms);
    }

    public boolean metrics() {
        return metrics;
    }

    /** Whether every lock name gets series ({@link #withAllMetricsNames()}). */
    public boolean allMetricsNames() {
        return allMetricsNames;
    }

    /** The lock names that get series of their own, sorted; empty with none or all. */
    public Set<String> metricsNames() {
        return metricsNames;
    }

    long connectTimeoutMillis() {
        return connectTimeoutMs;
    }

    /** The names for {@code Native.connect}: null for none. */
    String[] metricsNamesArray() {
        return metricsNames.isEmpty() ? null : metricsNames.toArray(new String[0]);
    }

    /** A name that could be a lock's (DESIGN.md §5: 1–512 bytes, no NUL), else {@code INVALID_ARGUMENT}. */
    private static String checkName(String name) {
        if (name == null) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT, "metricsNames must not contain null");
        }
        int bytes = name.getBytes(StandardCharsets.UTF_8).length;
        if (bytes == 0 || bytes > MAX_NAME_BYTES || name.indexOf('\0') >= 0) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT, "metricsNames: " + FencelockClient.quote(name)
                    + " is not a lock name (1–" + MAX_NAME_BYTES + " bytes without NUL, got " + bytes + " bytes)");
        }
        return name;
    }

    @Override
    public String toString() {
        return "ClientOptions[metrics=" + metrics + ", metricsNames="
                + (allMetricsNames ? "all" : metricsNames.isEmpty() ? "none" : metricsNames) + "]";
    }
}
