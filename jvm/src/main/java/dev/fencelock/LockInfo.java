package dev.fencelock;

import java.time.Duration;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * What {@link FencelockClient#inspect} sees of a lock.
 *
 * @param holder the holder id ({@code <client uuid>:<owner>}), if held
 * @param remaining the holder's remaining time to live, if the backend reports it
 * @param lastToken the last fencing token handed out for the name, if any
 */
public record LockInfo(Optional<String> holder, Optional<Duration> remaining, OptionalLong lastToken) {
    /** Whether someone holds the lock. */
    public boolean held() {
        return holder.isPresent();
    }
}
