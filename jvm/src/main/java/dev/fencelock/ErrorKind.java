package dev.fencelock;

/** What went wrong: the one error table of every fencelock language (codes 1–10), and whether retrying may help. */
public enum ErrorKind {
    /** {@code lock} waited its timeout while someone else held the lock. */
    TIMEOUT(1, true),
    /** The lease expired, was taken, or could not be renewed in time; only fenced writes are safe now. */
    LOCK_LOST(2, false),
    /** Renew or release of a lease that is no longer ours. */
    NOT_HELD(3, false),
    /** A fenced write carried a token older than one already accepted. */
    FENCED(4, false),
    /** The backend is unreachable, an RPC timed out, or there is no quorum. */
    UNAVAILABLE(5, true),
    /** A bad URL, name, TTL or option. */
    INVALID_ARGUMENT(6, false),
    /** The backend lacks the capability asked for. */
    UNSUPPORTED(7, false),
    /** The client was closed. */
    CLOSED(8, false),
    /** The caller cancelled (a cancelled future, an interrupted thread). */
    CANCELLED(9, false),
    /** A bug or an unexpected reply. */
    INTERNAL(10, false);

    private final int code;
    private final boolean retryable;

    ErrorKind(int code, boolean retryable) {
        this.code = code;
        this.retryable = retryable;
    }

    /** The numeric code shared with C ({@code FENCELOCK_<KIND>}) and the other bindings. */
    public int code() {
        return code;
    }

    /** Whether the same call may succeed if repeated later. */
    public boolean retryable() {
        return retryable;
    }

    /** The kind of {@code code}; {@link #INTERNAL} for a code this version does not know. */
    public static ErrorKind fromCode(int code) {
        for (ErrorKind k : values()) {
            if (k.code == code) {
                return k;
            }
        }
        return INTERNAL;
    }
}
