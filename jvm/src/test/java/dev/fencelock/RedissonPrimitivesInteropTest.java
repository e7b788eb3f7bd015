package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;

/**
 * fencelock's read-write lock and semaphore beside Redisson's RReadWriteLock and RPermitExpirableSemaphore on the
 * same names, both ways: a writer of either side excludes the other's readers and writers, readers of both share,
 * and the permits both sides hold together never exceed N.
 */
@Timeout(60)
class RedissonPrimitivesInteropTest {
    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(30));

    private static RedissonClient redisson;
    private static FencelockClient fencelock;

    @BeforeAll
    static void connect() {
        redisson = Redissons.single();
        fencelock = FencelockClient.connect(Services.redis());
    }

    @AfterAll
    static void close() {
        Redissons.close(redisson, fencelock);
    }

    /** Runs {@code body} on a thread of its own (Redisson's locks belong to their thread) and waits for it. */
    private static <T> T onThread(java.util.concurrent.Callable<T> body) throws Exception {
        CompletableFuture<T> out = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                out.complete(body.call());
            } catch (Throwable e) {
                out.completeExceptionally(e);
            }
        });
        t.start();
        return out.get(30, TimeUnit.SECONDS);
    }

    @Test
    void aRedissonWriterExcludesOurReadersAndItsUnlockLetsThemIn() throws Exception {
        String name = Services.unique("interop-rw-a");
        RReadWriteLock theirs = redisson.getReadWriteLock(name);
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        Thread writer = new Thread(() -> {
            theirs.writeLock().lock(30, TimeUnit.SECONDS);
            holding.countDown();
            try {
                letGo.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                theirs.writeLock().unlock();
            }
        });
        writer.start();
        assertTrue(holding.await(10, TimeUnit.SECONDS));
        FencelockReadWriteLock ours = fencelock.readWriteLock(name);
        assertEquals(Optional.empty(), ours.tryRead(SHORT.withOwner("r")), "a Redisson writer keeps our readers out");
        assertEquals(Optional.empty(), ours.tryWrite(SHORT.withOwner("w")), "and our writers");
        CompletableFuture<Lease> reading = ours.readAsync(SHORT.withOwner("r").withTimeout(Duration.ofSeconds(20)));
        letGo.countDown();
        writer.join(10_000);
        try (Lease read = reading.get(20, TimeUnit.SECONDS)) {
            assertTrue(read.isValid(), "our waiting reader got in after Redisson's unlock");
        }
    }

    @Test
    void ourWriterExcludesRedissonAndReadersOfBothShare() throws Exception {
        String name = Services.unique("interop-rw-b");
        RReadWriteLock theirs = redisson.getReadWriteLock(name);
        FencelockReadWriteLock ours = fencelock.readWriteLock(name);
        try (Lease write = ours.write(SHORT.withOwner("w"))) {
            assertTrue(write.isValid());
            assertFalse(onThread(() -> theirs.readLock().tryLock()), "Redisson must not read while we write");
            assertFalse(onThread(() -> theirs.writeLock().tryLock()), "Redisson must not write while we write");
        }
        try (Lease read = ours.read(SHORT.withOwner("r"))) {
            assertTrue(onThread(() -> {
                boolean got = theirs.readLock().tryLock();
                if (got) {
                    theirs.readLock().unlock();
                }
                return got;
            }), "readers of both share the lock");
            assertFalse(onThread(() -> theirs.writeLock().tryLock()), "Redisson must not write while we read");
            assertTrue(read.isValid());
        }
        assertTrue(onThread(() -> {
            boolean got = theirs.writeLock().tryLock();
            if (got) {
                theirs.writeLock().unlock();
            }
            return got;
        }), "free again for Redisson");
    }

    @Test
    void permitsOfBothSidesNeverExceedN() throws Exception {
        String name = Services.unique("interop-sem");
        FencelockSemaphore ours = fencelock.semaphore(name, 2);
        RPermitExpirableSemaphore theirs = redisson.getPermitExpirableSemaphore(name);
        Lease mine = ours.acquire(SHORT.withOwner("a"));
        assertEquals(1, theirs.availablePermits(), "Redisson counts our permit");
        String theirPermit = theirs.tryAcquire(0, 30, TimeUnit.SECONDS);
        assertNotNull(theirPermit, "Redisson gets the second permit");
        assertNull(theirs.tryAcquire(0, 30, TimeUnit.SECONDS), "no third permit for Redisson");
        assertEquals(Optional.empty(), ours.tryAcquire(SHORT.withOwner("b")), "nor for us: 2 are out");
        assertEquals(0, ours.available());
        CompletableFuture<Lease> waiting = ours.acquireAsync(SHORT.withOwner("b").withTimeout(Duration.ofSeconds(20)));
        theirs.release(theirPermit);
        try (Lease second = waiting.get(20, TimeUnit.SECONDS)) {
            assertTrue(second.slot().isPresent(), "our waiter got the permit Redisson released");
            assertNull(theirs.tryAcquire(0, 30, TimeUnit.SECONDS), "still 2 out");
        }
        mine.close();
        assertEquals(2, theirs.availablePermits(), "every permit back, as Redisson sees it");
    }
}
