package dev.fencelock;

import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.Consumer;

/**
 * One native operation in flight, as a {@link CompletableFuture}. Cancelling the future aborts the native task (the
 * core's futures are cancel-safe: a cancelled acquire leaves no lock behind); a result that arrives after the caller
 * gave up (a lease, a client) is handed to {@code discard}, which frees it without blocking.
 */
final class Call<T> extends Completion {
    /** Builds the result from what the native task reported. */
    interface Result<T> {
        T of(long a, long b, String text, byte[] data);
    }

    /** Starts the native task reporting to {@code c}; returns its task handle. */
    interface Starter {
        long start(Completion c);
    }

    private final CompletableFuture<T> future = new CompletableFuture<>();
    private final Result<T> result;
    private final Consumer<T> discard;

    private Call(Result<T> result, Consumer<T> discard) {
        this.result = result;
        this.discard = discard;
    }

    /** Starts an operation; the future completes on a runtime thread, so only fencelock code may depend on it. */
    static <T> CompletableFuture<T> start(Result<T> result, Consumer<T> discard, Starter starter) {
        Call<T> call = new Call<>(result, discard);
        long task = starter.start(call);
        call.future.whenComplete((v, e) -> {
            if (call.future.isCancelled()) {
                Native.taskCancel(task);
            }
            Native.taskFree(task);
        });
        return call.future;
    }

    @Override
    void done(long a, long b, String text, byte[] data) {
        T value;
        try {
            value = result.of(a, b, text, data);
        } catch (RuntimeException e) {
            future.completeExceptionally(e);
            return;
        }
        if (!future.complete(value) && value != null && discard != null) {
            discard.accept(value);
        }
    }

    @Override
    void fail(int code, String message, String lock, String backend, boolean retryable) {
        future.completeExceptionally(new LockException(code, message, lock, backend, retryable));
    }

    /**
     * The future handed to users: it completes on the common pool, so their callbacks (which may call blocking
     * fencelock methods) never run on a runtime thread; cancelling it cancels {@code inner}.
     */
    static <T> CompletableFuture<T> publish(CompletableFuture<T> inner, Consumer<T> discard) {
        CompletableFuture<T> out = new CompletableFuture<>();
        inner.whenCompleteAsync((v, e) -> {
            if (e != null) {
                out.completeExceptionally(e instanceof CompletionException && e.getCause() != null ? e.getCause() : e);
            } else if (!out.complete(v) && v != null && discard != null) {
                discard.accept(v);
            }
        });
        out.whenComplete((v, e) -> {
            if (out.isCancelled()) {
                inner.cancel(false);
            }
        });
        return out;
    }

    /** Waits for {@code f} whatever interrupts come (they stay set on the thread). */
    static <T> T await(CompletableFuture<T> f) {
        try {
            return f.join();
        } catch (CompletionException e) {
            throw rethrow(e.getCause());
        } catch (CancellationException e) {
            throw new LockException(ErrorKind.CANCELLED, "the operation was cancelled", e);
        }
    }

    /** Waits for {@code f}; an interrupt cancels it and throws {@code CANCELLED}, leaving the interrupt flag set. */
    static <T> T awaitCancellable(CompletableFuture<T> f, String what) {
        try {
            return awaitInterruptibly(f);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LockException(ErrorKind.CANCELLED, what + ": the waiting thread was interrupted", e);
        }
    }

    /** Waits for {@code f}; an interrupt cancels it (nothing is left held) and throws {@link InterruptedException}. */
    static <T> T awaitInterruptibly(CompletableFuture<T> f) throws InterruptedException {
        try {
            return f.get();
        } catch (InterruptedException e) {
            f.cancel(false);
            throw e;
        } catch (ExecutionException e) {
            throw rethrow(e.getCause());
        } catch (CancellationException e) {
            throw new LockException(ErrorKind.CANCELLED, "the operation was cancelled", e);
        }
    }

    /** A failure from another thread, rethrown with this thread's stack (the original as its cause). */
    private static RuntimeException rethrow(Throwable cause) {
        if (cause instanceof LockException le) {
            return le.rethrown(le);
        }
        if (cause instanceof RuntimeException re) {
            return re;
        }
        if (cause instanceof Error err) {
            throw err;
        }
        return new LockException(ErrorKind.INTERNAL, String.valueOf(cause), cause);
    }
}
