package dev.fencelock;

import java.util.Optional;

/** What {@link FencelockElection#observe(LeaderListener)} calls, one call at a time, in order. */
@FunctionalInterface
public interface LeaderListener {
    /** A change: the new leader (a new term, or a proclaimed value under the same term), or empty when nobody leads. */
    void onChange(Optional<LeaderInfo> leader);

    /**
     * The observation failed: an outage ({@link LockException#retryable()}: it goes on), or a final error such as
     * {@code CLOSED}, after which no call follows. By default logged as a warning.
     */
    default void onError(LockException error) {
        System.getLogger(LeaderListener.class.getName()).log(System.Logger.Level.WARNING,
                "observing an election failed" + (error.retryable() ? " (it goes on)" : ""), error);
    }
}
