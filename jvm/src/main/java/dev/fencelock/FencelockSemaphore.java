package dev.fencelock;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A semaphore of leased permits on one name (DESIGN.md §4b): at most {@link #permits()} holds at once across every
 * client, and every client of the name must use the same number ({@code INVALID_ARGUMENT} naming both otherwise).
 * A permit is a {@link Lease} (TTL, watchdog, lost signal), so a crashed holder's permit comes back after its TTL;
 * {@link Lease#slot()} is its slot 0…permits−1, and its token is that slot's own rising counter, so a resource
 * partitioned by slot is fenced like a mutex.
 *
 * <pre>{@code
 * try (Lease permit = client.semaphore("gpu-pool", 4).acquire(LockOptions.defaults())) {
 *     client.fence("gpu-" + permit.slot().getAsInt()).write(permit.fence(), job);
 * }
 * }</pre>
 */
public final class FencelockSemaphore {
    private final FencelockClient client;
    private final String name;
    private final int permits;

    FencelockSemaphore(FencelockClient client, String name, int permits) {
        this.client = client;
        this.name = name;
        this.permits = permits;
    }

    /** The semaphore's name. */
    public String name() {
        return name;
    }

    /** The number of permits it was opened with. */
    public int permits() {
        return permits;
    }

    private Hold hold() {
        return Hold.permit(permits);
    }

    /** A permit, waiting up to {@code options.timeout()} while all are held. */
    public Lease acquire(LockOptions options) {
        return client.hold(name, hold(), options);
    }

    /** A permit with the default options, waiting as long as it takes. */
    public Lease acquire() {
        return acquire(LockOptions.defaults());
    }

    /** One attempt: a permit, or empty while all are held. */
    public Optional<Lease> tryAcquire(LockOptions options) {
        return client.tryHold(name, hold(), options);
    }

    /** {@link #acquire(LockOptions)} without blocking. */
    public CompletableFuture<Lease> acquireAsync(LockOptions options) {
        return client.holdAsync(name, hold(), options);
    }

    /** Permits nobody holds now. */
    public int available() {
        return Call.await(client.call(p -> Call.start((a, b, t, d) -> (int) a, null,
                c -> Native.available(p, name, permits, c))));
    }

    @Override
    public String toString() {
        return "FencelockSemaphore[" + FencelockClient.quote(name) + ", " + permits + " permits]";
    }
}
