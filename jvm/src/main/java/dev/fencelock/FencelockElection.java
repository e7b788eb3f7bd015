package dev.fencelock;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A leader election on one name (DESIGN.md §4b): at most one leader at a time, each with a value (up to 65536 bytes)
 * and a term that rises with every new leader. A campaign waits up to {@code options.timeout()} while another leads
 * and returns a {@link Leadership}, a {@link Lease} whose fencing token is the term; a campaign that times out, is
 * interrupted or whose future is cancelled leaves no candidate behind. {@link #observe} reports every change.
 *
 * <pre>{@code
 * FencelockElection election = client.election("scheduler");
 * try (LeaderSubscription watch = election.observe(leader -> System.out.println("now " + leader))) {
 *     try (Leadership lead = election.campaign("node-1", LockOptions.defaults())) {
 *         lead.proclaim("node-1, ready");
 *     }
 * }
 * }</pre>
 *
 * {@code UNSUPPORTED} on first use if the backend has no elections ({@link Capability#election()}).
 */
public final class FencelockElection {
    private final FencelockClient client;
    private final String name;

    FencelockElection(FencelockClient client, String name) {
        this.client = client;
        this.name = name;
    }

    /** The election's name. */
    public String name() {
        return name;
    }

    /** Campaigns with {@code value}, waiting up to {@code options.timeout()} ({@code TIMEOUT}) while another leads. */
    public Leadership campaign(byte[] value, LockOptions options) {
        byte[] v = checked(name, value);
        if (Threads.currentIsVirtual()) {
            return Call.awaitCancellable(start(v, options, false, Function.identity(), Lease::abandon),
                    "campaign in election " + FencelockClient.quote(name));
        }
        return here(v, options, false);
    }

    /** {@link #campaign(byte[], LockOptions)} with {@code value} in UTF-8. */
    public Leadership campaign(String value, LockOptions options) {
        return campaign(utf8(name, value), options);
    }

    /** {@link #campaign(String, LockOptions)} with the default options, waiting as long as it takes. */
    public Leadership campaign(String value) {
        return campaign(value, LockOptions.defaults());
    }

    /** One attempt: the leadership, or empty while another leads. */
    public Optional<Leadership> tryCampaign(byte[] value, LockOptions options) {
        byte[] v = checked(name, value);
        if (Threads.currentIsVirtual()) {
            return Call.awaitCancellable(start(v, options, true, Optional::ofNullable, FencelockElection::abandon),
                    "try campaign in election " + FencelockClient.quote(name));
        }
        return Optional.ofNullable(here(v, options, true));
    }

    /** {@link #tryCampaign(byte[], LockOptions)} with {@code value} in UTF-8. */
    public Optional<Leadership> tryCampaign(String value, LockOptions options) {
        return tryCampaign(utf8(name, value), options);
    }

    /**
     * {@link #campaign(byte[], LockOptions)} without blocking; cancelling the future withdraws the candidate (nothing
     * is left behind, and a leadership won meanwhile is resigned).
     */
    public CompletableFuture<Leadership> campaignAsync(byte[] value, LockOptions options) {
        byte[] v = checked(name, value);
        return Call.publish(start(v, options, false, Function.identity(), Lease::abandon), Lease::abandon);
    }

    /** {@link #campaignAsync(byte[], LockOptions)} with {@code value} in UTF-8. */
    public CompletableFuture<Leadership> campaignAsync(String value, LockOptions options) {
        return campaignAsync(utf8(name, value), options);
    }

    /** {@link #tryCampaign(byte[], LockOptions)} without blocking. */
    public CompletableFuture<Optional<Leadership>> tryCampaignAsync(byte[] value, LockOptions options) {
        byte[] v = checked(name, value);
        return Call.publish(start(v, options, true, Optional::ofNullable, FencelockElection::abandon),
                FencelockElection::abandon);
    }

    /** The current leader's value and term, or empty when nobody leads. */
    public Optional<LeaderInfo> leader() {
        return Call.await(client.call(p -> Call.start((a, b, t, d) -> LeaderInfo.of(a, b, d), null,
                c -> Native.leader(p, name, c))));
    }

    /**
     * A pull observer of this election: {@link ElectionObserver#next} gives every change, in order, starting with the
     * current leader (or none). Close it when done.
     */
    public ElectionObserver observer() {
        return new ElectionObserver(client, name);
    }

    /**
     * Calls {@code listener} for every change of leader, in order, starting with the current one: a new leader, a
     * proclaimed value, or empty when nobody leads; a term lower than one already reported never follows it. The
     * first read happens in this call, so a bad name or a backend without elections throws here. The listener then
     * runs on the common pool, one call at a time; {@link LeaderSubscription#close()} stops it. An outage is
     * reported to {@link LeaderListener#onError} and the observation goes on; any other error ({@code CLOSED} when
     * the client closes) is reported once and ends it.
     */
    public LeaderSubscription observe(LeaderListener listener) {
        if (listener == null) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT,
                    "election " + FencelockClient.quote(name) + ": the listener must not be null");
        }
        ElectionObserver observer = observer();
        Optional<LeaderInfo> first;
        try {
            first = observer.next();
        } catch (LockException e) {
            observer.close();
            throw e;
        }
        return LeaderSubscription.start(observer, listener, first);
    }

    /** A campaign on this platform thread (the blocking fast path); null if {@code once} found another leading. */
    private Leadership here(byte[] value, LockOptions options, boolean once) {
        LockOptions o = options == null ? LockOptions.defaults() : options;
        String owner = o.ownerForCaller();
        long lease = client.call(p -> Native.campaignBlocking(p, name, value, o.ttlMillis(),
                once ? -1 : o.timeoutMillis(), o.watchdog(), owner, o.fairCode(), once, true));
        return lease == 0 ? null : new Leadership(client, lease, name, Native.leaseFence(lease));
    }

    /** A campaign as a native task; {@code result} wraps the leadership (null while another leads). */
    private <T> CompletableFuture<T> start(byte[] value, LockOptions options, boolean once,
            Function<Leadership, T> result, Consumer<T> discard) {
        LockOptions o = options == null ? LockOptions.defaults() : options;
        String owner = o.ownerForCaller();
        return client.call(p -> Call.start(
                (a, term, t, d) -> result.apply(a == 0 ? null : new Leadership(client, a, name, term)), discard,
                c -> Native.campaign(p, name, value, o.ttlMillis(), once ? -1 : o.timeoutMillis(), o.watchdog(),
                        owner, o.fairCode(), once, c)));
    }

    private static void abandon(Optional<Leadership> won) {
        won.ifPresent(Lease::abandon);
    }

    /** A value as the native layer takes it: null is {@code INVALID_ARGUMENT}; its size is core's to check. */
    static byte[] checked(String name, byte[] value) {
        if (value == null) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT,
                    "election " + FencelockClient.quote(name) + ": the value must not be null");
        }
        return value;
    }

    static byte[] utf8(String name, String value) {
        if (value == null) {
            throw new LockException(ErrorKind.INVALID_ARGUMENT,
                    "election " + FencelockClient.quote(name) + ": the value must not be null");
        }
        return value.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public String toString() {
        return "FencelockElection[" + FencelockClient.quote(name) + "]";
    }
}
