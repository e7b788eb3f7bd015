package dev.fencelock;

/** Every fencelock failure. Unchecked; branch on {@link #kind()}, not on the message. */
public class LockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorKind kind;
    private final String detail;

    /** An error of {@code kind}. */
    public LockException(ErrorKind kind, String message) {
        this(kind, message, null);
    }

    /** An error of {@code kind} caused by {@code cause}. */
    public LockException(ErrorKind kind, String message, Throwable cause) {
        super(kind + ": " + message, cause);
        this.kind = kind;
        this.detail = message;
    }

    // Thrown by the native library and built from native results: the code of DESIGN.md §5.
    LockException(int code, String message) {
        this(ErrorKind.fromCode(code), message);
    }

    /** What went wrong. */
    public ErrorKind kind() {
        return kind;
    }

    /** The message without the kind prefix. */
    String detail() {
        return detail;
    }

    /** Whether the same call may succeed if repeated later ({@code TIMEOUT}, {@code UNAVAILABLE}). */
    public boolean retryable() {
        return kind.retryable();
    }
}
