package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.KeeperException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A fencelock ZooKeeper lock and Curator's InterProcessMutex on the same path, against the real Curator from Maven
 * Central: neither holds while the other does, and each side's waiter is woken by the other's release (by the
 * watch on its predecessor node; the holders' sessions stay alive, so nothing else could free the lock). With digest
 * credentials in the URL, fencelock's nodes are creator-only: Curator with the same credentials still shares the lock,
 * Curator without them is refused.
 */
@Timeout(60)
class CuratorInteropTest extends Curators {
    private static final long WAKE_BOUND_MS = 2_000;

    /** Waits (bounded) until the lock path has {@code n} contender nodes. */
    private static void awaitContenders(String path, int n) throws InterruptedException {
        ApiTest.awaitTrue(() -> children(path).size() == n, n + " contenders under " + path);
    }

    private static List<String> children(String path) {
        try {
            return curator.checkExists().forPath(path) == null ? List.of() : curator.getChildren().forPath(path);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void fencelockHoldsCuratorWaitsAndIsWokenByOurRelease() throws Exception {
        String path = "/" + Services.unique("interop-curator-a");
        InterProcessMutex mutex = new InterProcessMutex(curator, path);
        Lease lease = fencelock.lock(path);
        assertFalse(mutex.acquire(0, TimeUnit.MILLISECONDS), "Curator must not get a lock fencelock holds");

        CountDownLatch letGo = new CountDownLatch(1);
        CompletableFuture<Long> curatorGot = new CompletableFuture<>();
        Thread waiter = new Thread(() -> {
            try {
                mutex.acquire(); // InterProcessMutex belongs to this thread: acquire and release here
                curatorGot.complete(System.nanoTime());
                letGo.await();
                mutex.release();
            } catch (Exception e) {
                curatorGot.completeExceptionally(e);
            }
        });
        waiter.start();
        awaitContenders(path, 2);
        long released = System.nanoTime();
        lease.release();
        long wokenMs = TimeUnit.NANOSECONDS.toMillis(curatorGot.get(10, TimeUnit.SECONDS) - released);
        assertTrue(wokenMs < WAKE_BOUND_MS, "Curator was woken " + wokenMs + " ms after our release");
        assertEquals(Optional.empty(), fencelock.tryLock(path), "fencelock must not get a lock Curator holds");
        letGo.countDown();
        waiter.join(10_000);
        awaitContenders(path, 0);
        try (Lease after = fencelock.tryLock(path).orElseThrow()) {
            assertTrue(after.fence() > lease.fence(), "czxid tokens rise");
        }
    }

    @Test
    void withTheSameDigestCredentialsCuratorSharesTheLockAndOthersAreRefused() throws Exception {
        String hostPort = Services.hostPort(Services.zk());
        String root = "/" + Services.unique("interop-curator-auth");
        String path = root + "/lock";
        CuratorFramework authed = CuratorFrameworkFactory.builder().connectString(hostPort).sessionTimeoutMs(30_000)
                .connectionTimeoutMs(10_000).retryPolicy(new RetryOneTime(200))
                .authorization("digest", "app:app-pw".getBytes(StandardCharsets.UTF_8)).build();
        authed.start();
        try (FencelockClient owner = FencelockClient.connect("zk://app:app-pw@" + hostPort)) {
            assertTrue(authed.blockUntilConnected(20, TimeUnit.SECONDS), "Curator connects to " + hostPort);
            Lease lease = owner.lock(path);
            InterProcessMutex mutex = new InterProcessMutex(authed, path);
            assertFalse(mutex.acquire(0, TimeUnit.MILLISECONDS), "Curator must not get a lock fencelock holds");
            InterProcessMutex anonymous = new InterProcessMutex(curator, path);
            assertThrows(KeeperException.NoAuthException.class, () -> anonymous.acquire(0, TimeUnit.MILLISECONDS),
                    "Curator without the credentials cannot queue in a creator-only directory");
            lease.release();
            assertTrue(mutex.acquire(10, TimeUnit.SECONDS), "Curator with the same credentials gets the lock");
            assertEquals(Optional.empty(), owner.tryLock(path), "fencelock must not get a lock Curator holds");
            mutex.release();
            try (Lease after = owner.tryLock(path).orElseThrow()) {
                assertTrue(after.fence() > lease.fence(), "czxid tokens rise");
            }
        } finally {
            authed.delete().deletingChildrenIfNeeded().forPath(root);
            authed.close();
        }
    }

    @Test
    void curatorHoldsFencelockWaitsAndIsWokenByItsRelease() throws Exception {
        String path = "/" + Services.unique("interop-curator-b");
        InterProcessMutex mutex = new InterProcessMutex(curator, path);
        mutex.acquire();
        try {
            assertEquals(Optional.empty(), fencelock.tryLock(path), "fencelock must not get a lock Curator holds");
            CompletableFuture<Lease> waiting = fencelock.lockAsync(path, LockOptions.defaults());
            awaitContenders(path, 2);
            assertFalse(waiting.isDone());
            long released = System.nanoTime();
            mutex.release();
            try (Lease lease = waiting.get(10, TimeUnit.SECONDS)) {
                long wokenMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released);
                assertTrue(wokenMs < WAKE_BOUND_MS, "fencelock was woken " + wokenMs + " ms after Curator's release");
                assertFalse(mutex.acquire(0, TimeUnit.MILLISECONDS), "Curator must not get a lock fencelock holds");
            }
        } finally {
            if (mutex.isOwnedByCurrentThread()) {
                mutex.release();
            }
        }
        awaitContenders(path, 0);
    }
}
