package dev.fencelock;

/**
 * The kind of hold an acquire asks for, as the native layer names it (bindings/bridge {@code hold_kind}): a mutex,
 * either side of a read-write lock, or a permit of a semaphore of {@code permits} permits.
 */
record Hold(String kind, long permits, String label) {
    static final Hold MUTEX = new Hold("lock", 0, "mutex");
    static final Hold READ = new Hold("read", 0, "read lock");
    static final Hold WRITE = new Hold("write", 0, "write lock");

    static Hold permit(long permits) {
        return new Hold("permit", permits, "semaphore");
    }
}
