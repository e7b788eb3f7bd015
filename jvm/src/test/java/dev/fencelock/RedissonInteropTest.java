package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * A fencelock Redis lock and Redisson's RLock / RFencedLock on the same name, against the real Redisson from Maven
 * Central: neither holds while the other does, each side's waiter is woken by the other's release (within a bound far
 * below the 30 s lease, so by the pub/sub message, not by expiry), and fence tokens rise across both.
 */
@Timeout(60)
class RedissonInteropTest {
    /** Far below the holders' 30 s leases: a waiter that took longer was not woken by the release. */
    private static final long WAKE_BOUND_MS = 2_000;

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

    private static void awaitWaiterOn(String name) throws InterruptedException {
        Redissons.awaitWaiterOn(redisson, name);
    }

    @Test
    void fencelockHoldsRedissonWaitsAndIsWokenByOurRelease() throws Exception {
        String name = Services.unique("interop-redisson-a");
        RLock rlock = redisson.getLock(name);
        Lease lease = fencelock.lock(name);
        assertFalse(rlock.tryLock(), "Redisson must not get a lock fencelock holds");
        assertTrue(rlock.isLocked(), "Redisson sees the record fencelock wrote");

        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        CompletableFuture<Long> redissonGot = new CompletableFuture<>();
        Thread waiter = new Thread(() -> {
            rlock.lock(); // RLock belongs to this thread: lock and unlock here
            redissonGot.complete(System.nanoTime());
            holding.countDown();
            try {
                letGo.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                rlock.unlock();
            }
        });
        waiter.start();
        awaitWaiterOn(name);
        assertFalse(redissonGot.isDone());
        long released = System.nanoTime();
        lease.release();
        long got = redissonGot.get(10, TimeUnit.SECONDS);
        long wokenMs = TimeUnit.NANOSECONDS.toMillis(got - released);
        assertTrue(wokenMs < WAKE_BOUND_MS, "Redisson was woken " + wokenMs + " ms after our release");
        holding.await();
        assertEquals(Optional.empty(), fencelock.tryLock(name), "fencelock must not get a lock Redisson holds");
        letGo.countDown();
        waiter.join(10_000);
        try (Lease after = fencelock.tryLock(name).orElseThrow()) {
            assertTrue(after.fence() > lease.fence());
        }
    }

    @Test
    void redissonHoldsFencelockWaitsAndIsWokenByItsUnlock() throws Exception {
        String name = Services.unique("interop-redisson-b");
        RLock rlock = redisson.getLock(name);
        rlock.lock(); // Redisson's watchdog lease (30 s)
        try {
            assertEquals(Optional.empty(), fencelock.tryLock(name), "fencelock must not get a lock Redisson holds");
            CompletableFuture<Lease> waiting = fencelock.lockAsync(name, LockOptions.defaults());
            awaitWaiterOn(name);
            assertFalse(waiting.isDone());
            long unlocked = System.nanoTime();
            rlock.unlock();
            try (Lease lease = waiting.get(10, TimeUnit.SECONDS)) {
                long wokenMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - unlocked);
                assertTrue(wokenMs < WAKE_BOUND_MS, "fencelock was woken " + wokenMs + " ms after Redisson's unlock");
                assertFalse(rlock.tryLock(), "Redisson must not get a lock fencelock holds");
            }
        } finally {
            if (rlock.isHeldByCurrentThread()) {
                rlock.unlock();
            }
        }
        assertFalse(rlock.isLocked(), "nothing left held");
    }

    @Test
    void fencedLockTokensRiseAcrossBoth() throws Exception {
        String name = Services.unique("interop-fenced");
        RFencedLock fenced = redisson.getFencedLock(name);
        List<Long> tokens = new ArrayList<>();
        for (int round = 0; round < 3; round++) {
            try (Lease lease = fencelock.lock(name)) {
                tokens.add(lease.fence());
                // tryLockAndGetToken() without a wait time waited for the lock in Redisson 3.52.0; ask for no wait.
                assertEquals(null, fenced.tryLockAndGetToken(0, TimeUnit.MILLISECONDS),
                        "Redisson's fenced lock must not get a held lock");
                assertFalse(fenced.tryLock(), "nor through its RLock face");
            }
            Long token = fenced.lockAndGetToken();
            try {
                tokens.add(token);
                assertEquals(Optional.empty(), fencelock.tryLock(name), "fencelock must not get a held lock");
            } finally {
                fenced.unlock();
            }
        }
        for (int i = 1; i < tokens.size(); i++) {
            assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens must rise across both clients: " + tokens);
        }
        assertEquals(tokens.get(tokens.size() - 1), fencelock.inspect(name).lastToken().getAsLong(),
                "one counter: fencelock reads the token Redisson handed out last");
        // A waiting RFencedLock is woken by our release too.
        Lease lease = fencelock.lock(name);
        CompletableFuture<Long> got = CompletableFuture.supplyAsync(() -> {
            Long t = fenced.lockAndGetToken(Duration.ofSeconds(10).toMillis(), TimeUnit.MILLISECONDS);
            fenced.unlock();
            return t;
        });
        awaitWaiterOn(name);
        lease.release();
        assertTrue(got.get(10, TimeUnit.SECONDS) > lease.fence());
    }
}
