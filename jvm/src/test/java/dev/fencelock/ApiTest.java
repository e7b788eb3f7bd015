package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Java idioms over real backends: try-with-resources, the Lock interface, interrupts, futures, misuse, exit. */
@Timeout(60)
class ApiTest {
    @TempDir
    Path tmp;

    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(10));

    @Test
    void fairReachesTheBackend() throws Exception {
        String name = Services.unique("fair");
        try (FencelockClient client = FencelockClient.connect("memory://" + name)) {
            // The memory backend's waiters race: arrival order is refused on every path that takes options.
            LockOptions fair = SHORT.withFair(true);
            assertEquals(ErrorKind.UNSUPPORTED, assertThrows(LockException.class, () -> client.lock(name, fair)).kind());
            assertEquals(ErrorKind.UNSUPPORTED,
                    assertThrows(LockException.class, () -> client.tryLock(name, fair)).kind());
            ExecutionException async = assertThrows(ExecutionException.class,
                    () -> client.lockAsync(name, fair).get(10, TimeUnit.SECONDS));
            assertEquals(ErrorKind.UNSUPPORTED, ((LockException) async.getCause()).kind());
            try (Lease lease = client.lock(name, SHORT.withFair(false))) {
                assertTrue(lease.isValid());
            }
            assertFalse(client.inspect(name).held());
            assertEquals(null, LockOptions.defaults().fair());
        }
        // SQLite queues its waiters: both orders are served.
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            try (Lease lease = client.lock(name, SHORT.withFair(true))) {
                assertTrue(lease.isValid());
            }
            try (Lease lease = client.lock(name, SHORT.withFair(false))) {
                assertTrue(lease.isValid());
            }
        }
    }

    @Test
    void tryWithResourcesReleasesAndTokensRise() {
        String name = Services.unique("twr");
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            long first;
            try (Lease lease = client.lock(name, SHORT)) {
                first = lease.fence();
                assertTrue(lease.isValid());
                assertTrue(client.inspect(name).held());
                assertEquals(Optional.empty(), client.tryLock(name, SHORT.withOwner("someone-else")));
            }
            assertFalse(client.inspect(name).held());
            try (Lease again = client.tryLock(name, SHORT.withOwner("someone-else")).orElseThrow()) {
                assertTrue(again.fence() > first, again.fence() + " > " + first);
            }
            assertEquals(0, client.localEntries());
        }
    }

    @Test
    void theDefaultOwnerIsTheCallingThread() throws Exception {
        String name = Services.unique("owner");
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            try (Lease outer = client.lock(name, SHORT); Lease inner = client.lock(name, SHORT)) {
                assertEquals(outer.fence(), inner.fence(), "a second lock on the same thread reenters");
                CompletableFuture<Optional<Lease>> other = CompletableFuture.supplyAsync(() -> client.tryLock(name));
                assertEquals(Optional.empty(), other.get(10, TimeUnit.SECONDS), "another thread is another owner");
            }
            assertFalse(client.inspect(name).held(), "released when every hold is");
        }
    }

    @Test
    void theLockInterfaceIsReentrantPerThread() throws Exception {
        String name = Services.unique("mutex");
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            Lock lock = client.mutex(name, SHORT);
            lock.lock();
            lock.lock();
            assertTrue(lock.tryLock());
            CompletableFuture<Boolean> other = CompletableFuture.supplyAsync(() -> {
                Lock theirs = client.mutex(name);
                try {
                    return theirs.tryLock(200, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
            });
            assertFalse(other.get(10, TimeUnit.SECONDS), "held by this thread");
            CompletableFuture<Throwable> stranger = CompletableFuture.supplyAsync(() -> {
                try {
                    lock.unlock();
                    return null;
                } catch (Throwable t) {
                    return t;
                }
            });
            assertTrue(stranger.get(10, TimeUnit.SECONDS) instanceof IllegalMonitorStateException);
            lock.unlock();
            lock.unlock();
            assertTrue(client.inspect(name).held(), "one hold is left");
            lock.unlock();
            assertFalse(client.inspect(name).held());
            assertThrows(IllegalMonitorStateException.class, lock::unlock);
            assertThrows(UnsupportedOperationException.class, lock::newCondition);
            LockException e = assertThrows(LockException.class, () -> client.mutex(name, SHORT.withOwner("x")));
            assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind());
        }
    }

    @Test
    void mutualExclusionAcrossThreads() throws Exception {
        String name = Services.unique("threads");
        try (FencelockClient client = FencelockClient.connect(Services.redis())) {
            AtomicInteger inside = new AtomicInteger();
            AtomicInteger max = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                threads.add(new Thread(() -> {
                    Lock lock = client.mutex(name, SHORT);
                    for (int j = 0; j < 5; j++) {
                        lock.lock();
                        try {
                            max.accumulateAndGet(inside.incrementAndGet(), Math::max);
                            Thread.yield();
                            inside.decrementAndGet();
                        } finally {
                            lock.unlock();
                        }
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join(30_000);
                assertFalse(t.isAlive());
            }
            assertEquals(1, max.get());
            assertEquals(0, client.localEntries());
        }
    }

    /**
     * The README's promise: a virtual thread waiting for a lock parks in Java and never pins its carrier. jvm/run-tests.sh
     * runs this again on a JDK with virtual threads (the suite itself runs on 17, where it is skipped) with
     * {@code fencelock.requireVirtualThreads=true} and two carriers, so a pinned waiter would starve the rest.
     */
    @Test
    void virtualThreadsParkInJava() throws Exception {
        boolean required = Boolean.getBoolean("fencelock.requireVirtualThreads");
        if (Runtime.version().feature() < 21) {
            assertFalse(required, "fencelock.requireVirtualThreads is set but this is Java " + Runtime.version());
            assumeTrue(false, "virtual threads need Java 21+, this is " + Runtime.version());
        }
        if (required) {
            assertEquals("2", System.getProperty("jdk.virtualThreadScheduler.parallelism"), "two carriers");
        }
        String name = Services.unique("virtual");
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            AtomicInteger inside = new AtomicInteger();
            AtomicInteger max = new AtomicInteger();
            AtomicInteger done = new AtomicInteger();
            // Thread.startVirtualThread (21+) through reflection: this code compiles for Java 17.
            java.lang.reflect.Method start = Thread.class.getMethod("startVirtualThread", Runnable.class);
            Lease held = client.lock(name, SHORT.withOwner("platform-holder"));
            List<Thread> waiters = new ArrayList<>();
            // Far more waiters than carriers: were any pinned in native code, the others could not even start.
            for (int i = 0; i < 32; i++) {
                waiters.add((Thread) start.invoke(null, (Runnable) () -> {
                    Lock lock = client.mutex(name, SHORT);
                    lock.lock();
                    try {
                        max.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        inside.decrementAndGet();
                    } finally {
                        lock.unlock();
                    }
                    done.incrementAndGet();
                }));
            }
            // Every waiter is parked (a thread in native code would be RUNNABLE), and its carrier is free: one more
            // virtual thread still runs at once.
            awaitTrue(() -> waiters.stream().allMatch(t -> t.getState() == Thread.State.WAITING
                    || t.getState() == Thread.State.TIMED_WAITING), "all 32 waiters park");
            CountDownLatch ran = new CountDownLatch(1);
            start.invoke(null, (Runnable) ran::countDown);
            assertTrue(ran.await(10, TimeUnit.SECONDS), "a virtual thread ran while 32 waited for the lock");
            assertEquals(0, done.get(), "nobody took the lock while it was held");
            held.release();
            for (Thread t : waiters) {
                t.join(30_000);
                assertFalse(t.isAlive(), "a waiter is still waiting after the release");
            }
            assertEquals(32, done.get());
            assertEquals(1, max.get());
        }
    }

    @Test
    void anInterruptedWaiterLeavesNoLockBehind() throws Exception {
        String name = Services.unique("interrupt");
        try (FencelockClient client = FencelockClient.connect(Services.redis());
                FencelockClient waiterClient = FencelockClient.connect(Services.redis())) {
            Lease held = client.lock(name, SHORT);
            AtomicReference<Throwable> outcome = new AtomicReference<>();
            CountDownLatch started = new CountDownLatch(1);
            Thread waiter = new Thread(() -> {
                Lock lock = waiterClient.mutex(name, SHORT);
                started.countDown();
                try {
                    lock.lockInterruptibly();
                    outcome.set(new AssertionError("acquired while held"));
                } catch (Throwable t) {
                    outcome.set(t);
                }
            });
            waiter.start();
            started.await();
            awaitTrue(() -> waiterClient.localEntries() == 1, "the waiter queues");
            waiter.interrupt();
            waiter.join(10_000);
            assertTrue(outcome.get() instanceof InterruptedException, String.valueOf(outcome.get()));
            awaitTrue(() -> waiterClient.localEntries() == 0, "the cancelled acquire leaves no queue entry");
            held.release();
            assertFalse(client.inspect(name).held(), "the waiter took nothing after its interrupt");

            // client.lock: CANCELLED, interrupt flag kept.
            Lease again = client.lock(name, SHORT);
            AtomicReference<Object> seen = new AtomicReference<>();
            Thread locker = new Thread(() -> {
                try {
                    waiterClient.lock(name, SHORT);
                    seen.set("acquired");
                } catch (LockException e) {
                    seen.set(e.kind() + " interrupted=" + Thread.currentThread().isInterrupted());
                }
            });
            locker.start();
            awaitTrue(() -> waiterClient.localEntries() == 1, "the second waiter queues");
            locker.interrupt();
            locker.join(10_000);
            assertEquals("CANCELLED interrupted=true", seen.get());
            again.release();
            awaitTrue(() -> waiterClient.localEntries() == 0, "no queue entry left");
            assertFalse(client.inspect(name).held());
        }
    }

    @Test
    void futuresCompleteOffTheRuntimeAndCancel() throws Exception {
        String name = Services.unique("async");
        try (FencelockClient client = FencelockClient.connect(Services.redis());
                FencelockClient other = FencelockClient.connect(Services.redis())) {
            Lease lease = client.lockAsync(name, SHORT).get(10, TimeUnit.SECONDS);
            String thread = other.tryLockAsync(name, SHORT)
                    .thenApply(busy -> busy.isEmpty() + " " + Thread.currentThread().getName())
                    .get(10, TimeUnit.SECONDS);
            assertTrue(thread.startsWith("true "), thread);
            assertFalse(thread.contains("fencelock-worker"), "user callbacks must not run on runtime threads: " + thread);
            CompletableFuture<Lease> waiting = other.lockAsync(name, SHORT);
            awaitTrue(() -> other.localEntries() == 1, "the async waiter queues");
            assertTrue(waiting.cancel(true));
            awaitTrue(() -> other.localEntries() == 0, "cancelling the future cancels the acquire");
            lease.releaseAsync().get(10, TimeUnit.SECONDS);
            assertFalse(client.inspect(name).held());
            // A blocking call from a callback is fine: it runs on the common pool.
            String chained = client.lockAsync(name, SHORT).thenApply(l -> {
                l.renew(Duration.ofSeconds(5));
                l.close();
                return "renewed and released";
            }).get(10, TimeUnit.SECONDS);
            assertEquals("renewed and released", chained);
            assertFalse(client.inspect(name).held());
        }
    }

    @Test
    void lostFiresWhenTheRecordIsTaken() throws Exception {
        String name = Services.unique("lost");
        try (FencelockClient client = FencelockClient.connect(Services.redis());
                FencelockClient thief = FencelockClient.connect(Services.redis())) {
            Lease victim = client.lock(name, LockOptions.defaults().withTtl(Duration.ofMillis(600)));
            CompletableFuture<Void> lost = victim.lost();
            assertFalse(lost.isDone());
            assertTrue(thief.forceRelease(name));
            try (Lease theirs = thief.lock(name, SHORT.withTimeout(Duration.ofSeconds(3)))) {
                lost.get(3, TimeUnit.SECONDS);
                assertTrue(victim.isLost());
                // Core's reason, and a LOCK_LOST error that names the lock and backend as fields.
                assertTrue(victim.lostReason().isPresent(), "a lost lease has core's reason");
                LockException renewed = assertThrows(LockException.class, victim::renew);
                assertEquals(java.util.Optional.of(name), renewed.lock());
                assertEquals(java.util.Optional.of(client.url()), renewed.backend());
                assertTrue(renewed.getMessage().contains(victim.lostReason().get()), renewed.getMessage());
                assertEquals(ErrorKind.LOCK_LOST, assertThrows(LockException.class, victim::renew).kind());
                assertEquals(ErrorKind.LOCK_LOST, assertThrows(LockException.class, victim::release).kind());
                assertTrue(theirs.isValid());
                assertTrue(theirs.fence() > victim.fence());
            }
        }
    }

    @Test
    void fencedWritesRejectStaleTokens() {
        String resource = Services.unique("fence");
        try (FencelockClient client = FencelockClient.connect(Services.redis())) {
            Fence fence = client.fence(resource);
            assertEquals(0, fence.read().token());
            // A granted token: registers refuse tokens from before their store's start (no made-up small ones).
            long token;
            try (Lease lease = client.lock(resource)) {
                token = lease.fence();
            }
            fence.write(token, "ten".getBytes(StandardCharsets.UTF_8));
            fence.write(token, "ten again".getBytes(StandardCharsets.UTF_8));
            LockException e = assertThrows(LockException.class, () -> fence.write(token - 1, new byte[0]));
            assertEquals(ErrorKind.FENCED, e.kind());
            assertFalse(e.retryable());
            FenceValue v = fence.read();
            assertEquals(token, v.token());
            assertArrayEquals("ten again".getBytes(StandardCharsets.UTF_8), v.value());
        }
    }

    @Test
    void hugeDurationsAreRefusedOrWaitForeverNeverOverflow() {
        String name = Services.unique("huge");
        try (FencelockClient client = FencelockClient.connect(Services.sqlite(tmp))) {
            Duration huge = Duration.ofSeconds(Long.MAX_VALUE);
            try (Lease lease = client.lock(name, SHORT.withTimeout(huge))) {
                LockException e = assertThrows(LockException.class, () -> lease.renew(huge));
                assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind(), e.getMessage());
                assertTrue(e.getMessage().contains("ttl"), e.getMessage());
                ExecutionException async = assertThrows(ExecutionException.class, () -> lease.renewAsync(huge).get());
                assertEquals(ErrorKind.INVALID_ARGUMENT, ((LockException) async.getCause()).kind());
                lease.renew(Duration.ofSeconds(10));
                assertTrue(lease.isValid(), "a refused renewal leaves the lease as it was");
            }
            LockException e = assertThrows(LockException.class, () -> client.lock(name, SHORT.withTtl(huge)));
            assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind(), e.getMessage());
            assertFalse(client.inspect(name).held(), "nothing left behind");
        }
    }

    @Test
    void misuseGivesErrorsNotCrashes() {
        String name = Services.unique("misuse");
        FencelockClient client = FencelockClient.connect(Services.sqlite(tmp));
        Lease lease = client.lock(name, SHORT);
        Fence fence = client.fence("r");
        Lock mutex = client.mutex(name);
        lease.release();
        assertEquals(ErrorKind.NOT_HELD, assertThrows(LockException.class, lease::release).kind());
        assertEquals(ErrorKind.NOT_HELD, assertThrows(LockException.class, lease::renew).kind());
        lease.close(); // already released: a no-op
        assertFalse(lease.isValid());
        assertEquals(Duration.ZERO, lease.remaining());
        assertTrue(lease.fence() > 0, "the fence stays readable");
        Lease held = client.lock(name, SHORT);
        client.close();
        client.close();
        for (Runnable r : List.<Runnable>of(() -> client.lock(name), () -> client.tryLock(name), () -> client.id(),
                () -> fence.read(), () -> mutex.lock(), () -> client.inspect(name))) {
            assertEquals(ErrorKind.CLOSED, assertThrows(LockException.class, r::run).kind());
        }
        // close released the lease it held; the lease's own calls say CLOSED.
        assertEquals(ErrorKind.CLOSED, assertThrows(LockException.class, held::renew).kind());
        assertEquals(ErrorKind.CLOSED, assertThrows(LockException.class, held::release).kind());
        assertEquals(ErrorKind.INVALID_ARGUMENT, assertThrows(LockException.class,
                () -> FencelockClient.connect("bogus://nowhere")).kind());
        try (FencelockClient c = FencelockClient.connect(Services.sqlite(tmp))) {
            for (String bad : new String[] {"", "a\0b", "n".repeat(513), null}) {
                LockException e = assertThrows(LockException.class, () -> c.lock(bad, SHORT));
                assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind(), e.getMessage());
            }
            LockException e = assertThrows(LockException.class,
                    () -> c.lock(name, LockOptions.defaults().withTtl(Duration.ZERO)));
            assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind(), e.getMessage());
            assertTrue(e.getMessage().contains("ttl"), e.getMessage());
        }
    }

    @Test
    void aDroppedLeaseIsReleasedByTheCleaner() throws Exception {
        String name = Services.unique("cleaner");
        try (FencelockClient client = FencelockClient.connect(Services.redis())) {
            lockAndDrop(client, name);
            assertTrue(client.inspect(name).held());
            // The Cleaner frees the native lease once the Lease is unreachable; the core then releases the record.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (client.inspect(name).held()) {
                assertTrue(System.nanoTime() < deadline, "a dropped lease was not released");
                System.gc();
                Thread.sleep(20);
            }
            assertEquals(0, client.localEntries());
        }
    }

    private static void lockAndDrop(FencelockClient client, String name) {
        assertTrue(client.lock(name, SHORT.withOwner("dropped")).fence() > 0);
    }

    @Test
    void anUnreachableServerIsRetryable() {
        LockException e = assertThrows(LockException.class, () -> FencelockClient.connect("redis://127.0.0.1:1"));
        assertEquals(ErrorKind.UNAVAILABLE, e.kind());
        assertTrue(e.retryable());
        assertTrue(e.lock().isEmpty());
    }

    @Test
    void errorCodesFollowTheTable() {
        String[] names = {"TIMEOUT", "LOCK_LOST", "NOT_HELD", "FENCED", "UNAVAILABLE", "INVALID_ARGUMENT",
            "UNSUPPORTED", "CLOSED", "CANCELLED", "INTERNAL"};
        for (int i = 0; i < names.length; i++) {
            ErrorKind k = ErrorKind.valueOf(names[i]);
            assertEquals(i + 1, k.code());
            assertEquals(k, ErrorKind.fromCode(i + 1));
            assertEquals(k == ErrorKind.TIMEOUT || k == ErrorKind.UNAVAILABLE, k.retryable());
            // The Java copy of the table (for errors made in Java) cannot drift from core's.
            assertEquals(Native.kindRetryable(k.code()), k.retryable(), k.name());
        }
    }

    @Test
    void mainReturningEndsTheProcess() throws Exception {
        // The runtime threads that reported results (and a pending lost signal) are JVM daemon threads.
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), ExitProbe.class.getName(),
                Services.redis(), Services.unique("exit")).redirectErrorStream(true).start();
        boolean exited = p.waitFor(30, TimeUnit.SECONDS);
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!exited) {
            p.destroyForcibly();
        }
        assertTrue(exited, "the JVM did not exit after main returned: " + out);
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("probe: fence "), out);
    }

    @Test
    void theJarLoaderNamesThePlatform() {
        assertEquals("linux-x86_64", NativeLoader.classifier());
        assertNotEquals("", FencelockClient.connect(Services.sqlite(tmp)).id());
    }

    interface Check {
        boolean ok();
    }

    /** Waits for a condition another thread makes true, polling with a deadline (no event exists for it). */
    static void awaitTrue(Check check, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!check.ok()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(5);
        }
    }

    static <T> T get(CompletableFuture<T> f) throws InterruptedException, ExecutionException {
        return f.get();
    }
}
