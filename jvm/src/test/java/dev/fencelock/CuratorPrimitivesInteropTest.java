package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * fencelock's read-write lock and semaphore beside Curator's InterProcessReadWriteLock and InterProcessSemaphoreV2 on
 * the same paths, both ways: a writer of either side keeps the other's readers out, readers of both share, and the
 * leases both sides hold together never exceed N (each side's waiter is woken by the other's release).
 */
@Timeout(90)
class CuratorPrimitivesInteropTest extends Curators {
    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(30));

    /** Runs {@code body} on a thread of its own (Curator's locks belong to their thread) and waits for it. */
    private static <T> T onThread(Callable<T> body) throws Exception {
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

    private static int children(String path) {
        try {
            return curator.getChildren().forPath(path).size();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Whether Curator's read or write lock can be had at once (released again if so). */
    private static boolean curatorGets(InterProcessReadWriteLock rw, boolean write) throws Exception {
        return onThread(() -> {
            InterProcessMutex side = write ? rw.writeLock() : rw.readLock();
            boolean got = side.acquire(300, TimeUnit.MILLISECONDS);
            if (got) {
                side.release();
            }
            return got;
        });
    }

    @Test
    void aCuratorWriterExcludesOurReadersAndItsReleaseLetsThemIn() throws Exception {
        String path = "/" + Services.unique("interop-curator-rw-a");
        InterProcessReadWriteLock theirs = new InterProcessReadWriteLock(curator, path);
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        Thread writer = new Thread(() -> {
            try {
                theirs.writeLock().acquire();
                holding.countDown();
                letGo.await();
                theirs.writeLock().release();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        writer.start();
        assertTrue(holding.await(10, TimeUnit.SECONDS));
        FencelockReadWriteLock ours = fencelock.readWriteLock(path);
        assertEquals(Optional.empty(), ours.tryRead(SHORT.withOwner("r")), "a Curator writer keeps our readers out");
        assertEquals(Optional.empty(), ours.tryWrite(SHORT.withOwner("w")), "and our writers");
        CompletableFuture<dev.fencelock.Lease> reading =
                ours.readAsync(SHORT.withOwner("r").withTimeout(Duration.ofSeconds(20)));
        letGo.countDown();
        writer.join(10_000);
        try (dev.fencelock.Lease read = reading.get(20, TimeUnit.SECONDS)) {
            assertTrue(read.isValid(), "our waiting reader got in after Curator's release");
            assertTrue(curatorGets(theirs, false), "a Curator reader shares with ours");
            assertFalse(curatorGets(theirs, true), "a Curator writer must not write while we read");
        }
    }

    @Test
    void ourWriterExcludesCuratorReadersAndOurReleaseLetsThemIn() throws Exception {
        String path = "/" + Services.unique("interop-curator-rw-b");
        InterProcessReadWriteLock theirs = new InterProcessReadWriteLock(curator, path);
        FencelockReadWriteLock ours = fencelock.readWriteLock(path);
        dev.fencelock.Lease write = ours.write(SHORT.withOwner("w"));
        assertFalse(curatorGets(theirs, false), "Curator must not read while we write");
        assertFalse(curatorGets(theirs, true), "Curator must not write while we write");
        CompletableFuture<Boolean> curatorRead = new CompletableFuture<>();
        CountDownLatch done = new CountDownLatch(1);
        Thread reader = new Thread(() -> {
            try {
                boolean got = theirs.readLock().acquire(20, TimeUnit.SECONDS);
                curatorRead.complete(got);
                done.await();
                if (got) {
                    theirs.readLock().release();
                }
            } catch (Exception e) {
                curatorRead.completeExceptionally(e);
            }
        });
        reader.start();
        ApiTest.awaitTrue(() -> children(path) == 2, "Curator's reader queued behind our writer");
        write.close();
        assertTrue(curatorRead.get(20, TimeUnit.SECONDS), "Curator's waiting reader got in after our release");
        try (dev.fencelock.Lease read = ours.read(SHORT.withOwner("r").withTimeout(Duration.ofSeconds(5)))) {
            assertTrue(read.isValid(), "readers of both share");
            assertEquals(Optional.empty(), ours.tryWrite(SHORT.withOwner("w")), "no writer of ours beside them");
        }
        done.countDown();
        reader.join(10_000);
        assertTrue(curatorGets(theirs, true), "free again for Curator");
    }

    @Test
    void leasesOfBothSidesNeverExceedN() throws Exception {
        String path = "/" + Services.unique("interop-curator-sem-a");
        FencelockSemaphore ours = fencelock.semaphore(path, 2);
        InterProcessSemaphoreV2 theirs = new InterProcessSemaphoreV2(curator, path, 2);
        dev.fencelock.Lease mine = ours.acquire(SHORT.withOwner("a"));
        Lease theirLease = theirs.acquire(5, TimeUnit.SECONDS);
        assertNotNull(theirLease, "Curator gets the second lease");
        assertNull(theirs.acquire(300, TimeUnit.MILLISECONDS), "no third lease for Curator");
        assertEquals(Optional.empty(), ours.tryAcquire(SHORT.withOwner("b")), "nor for us: 2 are out");
        assertEquals(0, ours.available());
        CompletableFuture<dev.fencelock.Lease> waiting =
                ours.acquireAsync(SHORT.withOwner("b").withTimeout(Duration.ofSeconds(20)));
        theirs.returnLease(theirLease);
        try (dev.fencelock.Lease second = waiting.get(20, TimeUnit.SECONDS)) {
            assertTrue(second.slot().isPresent(), "our waiter got the lease Curator returned");
            assertNull(theirs.acquire(300, TimeUnit.MILLISECONDS), "still 2 out");
        }
        mine.close();
        var both = theirs.acquire(2, 5, TimeUnit.SECONDS);
        assertNotNull(both, "every lease back, as Curator sees it");
        theirs.returnAll(both);
    }

    @Test
    void curatorWaitersAreWokenByOurRelease() throws Exception {
        String path = "/" + Services.unique("interop-curator-sem-b");
        FencelockSemaphore ours = fencelock.semaphore(path, 2);
        InterProcessSemaphoreV2 theirs = new InterProcessSemaphoreV2(curator, path, 2);
        dev.fencelock.Lease one = ours.acquire(SHORT.withOwner("a"));
        dev.fencelock.Lease two = ours.acquire(SHORT.withOwner("b"));
        assertTrue(one.slot().isPresent() && two.slot().isPresent() && !one.slot().equals(two.slot()));
        assertNull(theirs.acquire(300, TimeUnit.MILLISECONDS), "Curator counts our two leases");
        CompletableFuture<Lease> curatorGot = CompletableFuture.supplyAsync(() -> {
            try {
                return theirs.acquire(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        two.close();
        Lease theirLease = curatorGot.get(20, TimeUnit.SECONDS);
        assertNotNull(theirLease, "Curator's waiter got the lease we released");
        assertEquals(Optional.empty(), ours.tryAcquire(SHORT.withOwner("c")), "2 out: none for us");
        theirs.returnLease(theirLease);
        one.close();
        assertEquals(2, ours.available());
    }
}
