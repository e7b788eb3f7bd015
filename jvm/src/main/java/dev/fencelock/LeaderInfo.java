package dev.fencelock;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An election's leader as {@link FencelockElection#leader()} and its observers see it. Equal when value and term are.
 *
 * @param value the value the leader campaigned or last proclaimed with (empty if none)
 * @param term the leadership's term: its fencing token, higher than every earlier leader's of the election
 */
public record LeaderInfo(byte[] value, long term) {
    /** The value as UTF-8 text. */
    public String valueString() {
        return new String(value, StandardCharsets.UTF_8);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof LeaderInfo l && l.term == term && Arrays.equals(l.value, value);
    }

    @Override
    public int hashCode() {
        return 31 * Long.hashCode(term) + Arrays.hashCode(value);
    }

    @Override
    public String toString() {
        return "LeaderInfo[term=" + term + ", value=" + value.length + " bytes]";
    }

    /** What {@code Native.leader} and {@code observerNext} report: {@code found} 1 or 0, the term, the value. */
    static java.util.Optional<LeaderInfo> of(long found, long term, byte[] value) {
        return found == 0 ? java.util.Optional.empty()
                : java.util.Optional.of(new LeaderInfo(value == null ? new byte[0] : value, term));
    }
}
