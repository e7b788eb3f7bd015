package dev.fencelock;

import java.util.concurrent.CompletableFuture;

/**
 * The leadership of one election (DESIGN.md §4b): a {@link Lease} — TTL, watchdog, lost signal, renew, release,
 * try-with-resources — whose fencing token is the {@link #term()}. {@link #proclaim} changes the leader's value
 * without losing the term; {@link #resign()} (or {@link #close()}) releases it and the next candidate takes over.
 *
 * <pre>{@code
 * try (Leadership lead = client.election("scheduler").campaign(myAddress, LockOptions.defaults())) {
 *     client.fence("schedule").write(lead.term(), plan);
 * }
 * }</pre>
 */
public final class Leadership extends Lease {
    private final FencelockClient client;

    Leadership(FencelockClient client, long ptr, String name, long term) {
        super(ptr, name, term);
        this.client = client;
    }

    /** The term: this leadership's fencing token, higher than every earlier leader's. Readable after resigning. */
    public long term() {
        return fence();
    }

    /**
     * Replaces the leader's value, keeping the term. {@code NOT_HELD} after a resign, {@code LOCK_LOST} if the
     * leadership was lost, {@code INVALID_ARGUMENT} for a null value or one over 65536 bytes.
     */
    public void proclaim(byte[] value) {
        Call.await(proclaimStart(value));
    }

    /** {@link #proclaim(byte[])} with {@code value} in UTF-8. */
    public void proclaim(String value) {
        proclaim(FencelockElection.utf8(name(), value));
    }

    /** {@link #proclaim(byte[])} without blocking. */
    public CompletableFuture<Void> proclaimAsync(byte[] value) {
        return Call.publish(proclaimStart(value), null);
    }

    /** Gives the leadership up: {@link #release()}. */
    public void resign() {
        release();
    }

    /** {@link #resign()} without blocking. */
    public CompletableFuture<Void> resignAsync() {
        return releaseAsync();
    }

    private CompletableFuture<Void> proclaimStart(byte[] value) {
        byte[] v = FencelockElection.checked(name(), value);
        return client.call(c -> call(l -> Call.start((a, b, t, d) -> null, null,
                k -> Native.proclaim(c, name(), l, v, k))));
    }

    @Override
    public String toString() {
        return "Leadership[" + FencelockClient.quote(name()) + ", term=" + term() + (released() ? ", resigned]" : "]");
    }
}
