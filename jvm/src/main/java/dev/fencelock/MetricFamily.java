package dev.fencelock;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

/**
 * One metric family of {@link FencelockClient#metricFamilies()}: core's mapping of the snapshot, in Prometheus's
 * and OpenMetrics' model. Exporter adapters loop over these rather than over {@link FencelockMetrics}.
 *
 * @param name the full name ({@code fencelock_renewals_total}, {@code fencelock_acquire_wait_seconds})
 * @param help what it measures
 * @param type counter, gauge or histogram
 * @param samples its series, each every label of the family
 */
public record MetricFamily(String name, String help, Type type, List<Sample> samples) {
    /** A family's type. */
    public enum Type {
        COUNTER,
        GAUGE,
        HISTOGRAM
    }

    /**
     * One series: a value for counters and gauges, a histogram (seconds) for histograms.
     *
     * @param labels label names to values, sorted by name
     * @param value the value of a counter or gauge
     * @param histogram the histogram of a histogram family
     */
    public record Sample(Map<String, String> labels, OptionalDouble value,
            Optional<FencelockMetrics.Histogram> histogram) {}
}
