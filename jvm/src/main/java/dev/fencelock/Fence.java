package dev.fencelock;

import java.util.concurrent.CompletableFuture;

/**
 * A fenced register on the resource side, stored in the client's backend: a write succeeds only if its token is at
 * least the highest accepted so far, so a holder that paused past its lease cannot overwrite a newer holder's work.
 */
public final class Fence {
    private final FencelockClient client;
    private final String resource;

    Fence(FencelockClient client, String resource) {
        this.client = client;
        this.resource = resource;
    }

    /** The resource name. */
    public String resource() {
        return resource;
    }

    /** Stores {@code value} if {@code token} ≥ the highest token accepted (raising it); {@code FENCED} if older. */
    public void write(long token, byte[] value) {
        Call.await(writeStart(token, value));
    }

    /** {@link #write} without blocking. */
    public CompletableFuture<Void> writeAsync(long token, byte[] value) {
        return Call.publish(writeStart(token, value), null);
    }

    /** The highest accepted token and its value; token 0 and an empty value if never written. */
    public FenceValue read() {
        return Call.await(readStart());
    }

    /** {@link #read} without blocking. */
    public CompletableFuture<FenceValue> readAsync() {
        return Call.publish(readStart(), null);
    }

    private CompletableFuture<Void> writeStart(long token, byte[] value) {
        return client.call(p -> Call.start((a, b, t, d) -> null, null,
                c -> Native.fenceWrite(p, resource, token, value, c)));
    }

    private CompletableFuture<FenceValue> readStart() {
        return client.call(p -> Call.start((token, b, t, data) -> new FenceValue(token, data), null,
                c -> Native.fenceRead(p, resource, c)));
    }

    @Override
    public String toString() {
        return "Fence[" + FencelockClient.quote(resource) + "]";
    }
}
