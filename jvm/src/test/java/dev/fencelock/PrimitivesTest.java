package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Read-write locks and semaphores in Java's idioms (DESIGN.md §4b): {@code ReadWriteLock} owned per thread, lease
 * methods with try-with-resources, the async twins, slots, and the errors. The scenarios of tests/conformance run in
 * {@link ConformanceTest} on every backend that claims the kinds.
 */
@Timeout(60)
class PrimitivesTest {
    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(10));

    private static FencelockClient memory() {
        return FencelockClient.connect("memory://" + Services.unique("primitives"));
    }

    @Test
    void theReadWriteLockInterfaceSharesReadsPerThread() throws Exception {
        try (FencelockClient client = memory()) {
            assertTrue(client.capability().rwLock() && client.capability().semaphore());
            ReadWriteLock rw = client.readWriteLock(Services.unique("rw"), SHORT);
            rw.readLock().lock();
            // Another thread reads beside us, but cannot write.
            CompletableFuture<Boolean> reader = CompletableFuture.supplyAsync(() -> {
                boolean got = rw.readLock().tryLock();
                if (got) {
                    rw.readLock().unlock();
                }
                return got;
            });
            assertTrue(reader.get(10, TimeUnit.SECONDS), "readers share");
            CompletableFuture<Boolean> writer = CompletableFuture.supplyAsync(() -> rw.writeLock().tryLock());
            assertFalse(writer.get(10, TimeUnit.SECONDS), "a writer waits for the reader");
            // An upgrade is refused, never a deadlock.
            LockException up = assertThrows(LockException.class, () -> rw.writeLock().lock());
            assertEquals(ErrorKind.INVALID_ARGUMENT, up.kind());
            assertTrue(up.getMessage().contains("upgrade"), up.getMessage());
            rw.readLock().unlock();
            assertThrows(IllegalMonitorStateException.class, () -> rw.readLock().unlock());
            // A downgrade: the writer takes the read lock and keeps it after letting the write hold go.
            Lock write = rw.writeLock();
            assertTrue(write.tryLock(5, TimeUnit.SECONDS));
            rw.readLock().lock();
            write.unlock();
            CompletableFuture<Boolean> after = CompletableFuture.supplyAsync(() -> rw.writeLock().tryLock());
            assertFalse(after.get(10, TimeUnit.SECONDS), "the downgraded read hold stays");
            rw.readLock().unlock();
            assertEquals(0, client.localEntries());
        }
    }

    @Test
    void leaseMethodsFenceByEpoch() throws Exception {
        try (FencelockClient client = memory()) {
            FencelockReadWriteLock rw = client.readWriteLock(Services.unique("epoch"));
            long epoch;
            try (Lease a = rw.read(SHORT.withOwner("a")); Lease b = rw.tryRead(SHORT.withOwner("b")).orElseThrow()) {
                epoch = a.fence();
                assertEquals(epoch, b.fence(), "readers of one epoch share its token");
                assertEquals(Optional.empty(), rw.tryWrite(SHORT.withOwner("w")));
                assertTrue(a.slot().isEmpty());
            }
            try (Lease w = rw.writeAsync(SHORT.withOwner("w")).get(10, TimeUnit.SECONDS)) {
                assertTrue(w.fence() > epoch, w.fence() + " > " + epoch);
                assertEquals(Optional.empty(), rw.tryRead(SHORT.withOwner("a")));
                ExecutionException late = assertThrows(ExecutionException.class,
                        () -> rw.readAsync(SHORT.withOwner("a").withTimeout(Duration.ofMillis(200))).get(10,
                                TimeUnit.SECONDS));
                assertEquals(ErrorKind.TIMEOUT, ((LockException) late.getCause()).kind());
            }
        }
    }

    @Test
    void permitsHaveSlotsWithTheirOwnTokens() throws Exception {
        try (FencelockClient client = memory()) {
            String name = Services.unique("sem");
            FencelockSemaphore pool = client.semaphore(name, 2);
            assertEquals(2, pool.available());
            Lease one = pool.acquire(SHORT.withOwner("one"));
            Lease two = pool.acquireAsync(SHORT.withOwner("two")).get(10, TimeUnit.SECONDS);
            int slot = one.slot().orElseThrow();
            assertNotEquals(slot, two.slot().orElseThrow());
            assertTrue(slot >= 0 && slot < 2);
            assertEquals(0, pool.available());
            assertEquals(Optional.empty(), pool.tryAcquire(SHORT.withOwner("three")));
            LockException other = assertThrows(LockException.class,
                    () -> client.semaphore(name, 3).tryAcquire(SHORT.withOwner("three")));
            assertEquals(ErrorKind.INVALID_ARGUMENT, other.kind());
            assertTrue(other.getMessage().contains("2 permits") && other.getMessage().contains("3"),
                    other.getMessage());
            long before = one.fence();
            one.close();
            try (Lease three = pool.acquire(SHORT.withOwner("three"))) {
                assertEquals(slot, three.slot().orElseThrow(), "the freed slot");
                assertTrue(three.fence() > before, "the slot's token rose");
            }
            two.close();
            assertEquals(2, pool.available());
            assertEquals(slot, one.slot().orElseThrow(), "readable after release");
        }
    }

    @Test
    void badPermitsAndMissingKindsAreNamed() {
        try (FencelockClient client = memory()) {
            for (int bad : new int[] {0, -1}) {
                LockException e = assertThrows(LockException.class, () -> client.semaphore("s", bad).acquire(SHORT));
                assertEquals(ErrorKind.INVALID_ARGUMENT, e.kind());
                assertTrue(e.getMessage().contains(String.valueOf(bad)), e.getMessage());
            }
        }
    }

    /** Redlock has no semaphore: the error says so. */
    @Test
    void aBackendWithoutTheKindSaysSo() {
        try (FencelockClient client = FencelockClient.connect(Services.url("FENCELOCK_TEST_REDLOCK"))) {
            assertFalse(client.capability().semaphore());
            LockException e = assertThrows(LockException.class, () -> client.semaphore("s", 2).acquire(SHORT));
            assertEquals(ErrorKind.UNSUPPORTED, e.kind());
            assertTrue(e.getMessage().contains("semaphores"), e.getMessage());
        }
    }
}
