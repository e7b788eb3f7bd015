package dev.fencelock;

/** Every fencelock failure. Unchecked; branch on {@link #kind()}, not on the message. */
public class LockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorKind kind;
    private final String detail;
    private final String lock;
    private final String backend;
    private final boolean retryable;

    /** An error of {@code kind}. */
    public LockException(ErrorKind kind, String message) {
        this(kind, message, null);
    }

    /** An error of {@code kind} caused by {@code cause}. */
    public LockException(ErrorKind kind, String message, Throwable cause) {
        this(kind, message, null, null, kind.retryable(), cause);
    }

    // Thrown by the native library and built from native results: the core error's fields (code of DESIGN.md §5).
    LockException(int code, String message, String lock, String backend, boolean retryable) {
        this(ErrorKind.fromCode(code), message, lock, backend, retryable, null);
    }

    private LockException(ErrorKind kind, String message, String lock, String backend, boolean retryable,
            Throwable cause) {
        super(kind + ": " + message, cause);
        this.kind = kind;
        this.detail = message;
        this.lock = lock;
        this.backend = backend;
        this.retryable = retryable;
    }

    /** The same error with this thread's stack, {@code cause} its cause. */
    LockException rethrown(Throwable cause) {
        return new LockException(kind, detail, lock, backend, retryable, cause);
    }

    /** What went wrong. */
    public ErrorKind kind() {
        return kind;
    }

    /** The message without the kind prefix. */
    String detail() {
        return detail;
    }

    /** The lock the error is about, if there is one. */
    public java.util.Optional<String> lock() {
        return java.util.Optional.ofNullable(lock);
    }

    /** The backend it came from, as its URL without secrets, if known. */
    public java.util.Optional<String> backend() {
        return java.util.Optional.ofNullable(backend);
    }

    /** Whether the same call may succeed if repeated later ({@code TIMEOUT}, {@code UNAVAILABLE}), as core says. */
    public boolean retryable() {
        return retryable;
    }
}
