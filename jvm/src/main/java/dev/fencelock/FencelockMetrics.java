package dev.fencelock;

import java.util.List;
import java.util.Map;

/**
 * A client's metrics at one moment ({@link FencelockClient#metrics()}), as core records them for every language.
 * Counters count from the client's creation; maps are sorted by key and keyed as core names things.
 *
 * @param backend the backend's scheme ({@code redis}, {@code sqlite}, …), every series' {@code backend} label
 * @param enabled whether the client records at all ({@link ClientOptions#withMetrics})
 * @param acquireWait time spent in {@code lock}/{@code tryLock} by outcome: {@code acquired}, {@code busy} (a
 *     {@code tryLock} that found it held), {@code timeout}, {@code cancelled}, {@code error}
 * @param holdTime time from grant to release or loss
 * @param activeLeases grants held now (reentrant holds of one owner count once)
 * @param renewals backend renewals by outcome: {@code ok}, {@code failed}
 * @param lost leases lost while held, by reason: {@code expired}, {@code taken}, {@code unreachable}
 * @param fenceWrites fenced writes by outcome: {@code ok}, {@code refused} (a stale token), {@code error}
 * @param localQueueDepth {@code lock} calls of this client still waiting
 * @param backendOps backend round trips by operation ({@code acquire}, {@code renew}, {@code release},
 *     {@code force_release}, {@code inspect}, {@code fence_write}, {@code fence_read}) and outcome ({@code ok} when
 *     the backend answered, refusals included; {@code error} when it did not)
 * @param names per-lock figures, only for names opted in ({@link ClientOptions#withMetricsNames}); names past the
 *     cap are summed under {@code _other}
 */
public record FencelockMetrics(String backend, boolean enabled, Map<String, Histogram> acquireWait,
        Histogram holdTime, long activeLeases, Map<String, Long> renewals, Map<String, Long> lost,
        Map<String, Long> fenceWrites, long localQueueDepth, Map<String, Map<String, Histogram>> backendOps,
        Map<String, NameMetrics> names) {

    /**
     * Durations in fixed buckets.
     *
     * @param count observations so far
     * @param sum their sum, in seconds
     * @param buckets cumulative counts by upper bound, the last one {@code +Inf} (Prometheus's {@code le})
     */
    public record Histogram(long count, double sum, List<Bucket> buckets) {}

    /**
     * One cumulative bucket.
     *
     * @param le the upper bound in seconds, {@link Double#POSITIVE_INFINITY} for the last
     * @param count observations at or below it
     */
    public record Bucket(double le, long count) {}

    /**
     * One lock name's figures.
     *
     * @param acquireWait time spent in {@code lock}/{@code tryLock} by outcome (the keys of
     *     {@link FencelockMetrics#acquireWait})
     * @param holdTime time from grant to release or loss
     * @param activeLeases grants of this name held now
     * @param lost losses of this name, any reason
     * @param localQueueDepth calls waiting for this name
     */
    public record NameMetrics(Map<String, Histogram> acquireWait, Histogram holdTime, long activeLeases, long lost,
            long localQueueDepth) {}
}
