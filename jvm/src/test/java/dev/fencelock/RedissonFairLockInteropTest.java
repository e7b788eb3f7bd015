package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * fencelock's fair Redis queue and Redisson's RFairLock on the same name share one FIFO queue (list
 * {@code redisson_lock_queue:{name}}, deadlines in {@code redisson_lock_timeout:{name}}): whoever queued first is served
 * first, and each side's release wakes the other side's head on its own channel, within a bound far below the 30 s
 * leases.
 */
@Timeout(60)
class RedissonFairLockInteropTest {
    private static final long WAKE_BOUND_MS = 2_000;

    private static RedissonClient redisson;
    /** Two clients: within one client, contenders for a name queue locally and reach Redis one at a time. */
    private static FencelockClient first;
    private static FencelockClient second;

    @BeforeAll
    static void connect() {
        redisson = Redissons.single();
        first = FencelockClient.connect(Services.redis() + "?fair=true");
        second = FencelockClient.connect(Services.redis() + "?fair=true");
    }

    @AfterAll
    static void close() {
        Redissons.close(redisson, first, second);
    }

    private static java.util.List<String> queue(String name) {
        return redisson.<String>getList("redisson_lock_queue:{" + name + "}", StringCodec.INSTANCE).readAll();
    }

    /** Waits (bounded) until {@code name}'s queue holds {@code n} waiters. */
    private static void awaitQueued(String name, int n) throws InterruptedException {
        ApiTest.awaitTrue(() -> queue(name).size() == n, n + " waiters queue on " + name);
    }

    /** A thread that takes Redisson's fair lock, reports when, and holds it until {@code letGo}. */
    private static Thread redissonWaiter(RLock fair, CompletableFuture<Long> got, CountDownLatch letGo) {
        Thread t = new Thread(() -> {
            fair.lock(); // an RLock belongs to its thread: lock and unlock here
            got.complete(System.nanoTime());
            try {
                letGo.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                fair.unlock();
            }
        });
        t.start();
        return t;
    }

    @Test
    void aRedissonFairWaiterQueuedFirstIsServedBeforeOurs() throws Exception {
        String name = Services.unique("interop-fair-a");
        RLock fair = redisson.getFairLock(name);
        Lease held = first.lock(name);
        assertFalse(fair.tryLock(), "Redisson's fair lock must not get a lock fencelock holds");

        CompletableFuture<Long> redissonGot = new CompletableFuture<>();
        CountDownLatch letGo = new CountDownLatch(1);
        Thread redissonThread = redissonWaiter(fair, redissonGot, letGo);
        awaitQueued(name, 1);
        CompletableFuture<Lease> ours = second.lockAsync(name, LockOptions.defaults());
        awaitQueued(name, 2);
        assertTrue(queue(name).get(1).startsWith(second.id() + ":"), "ours queued behind Redisson's: " + queue(name));

        long released = System.nanoTime();
        held.release();
        long wokenMs = TimeUnit.NANOSECONDS.toMillis(redissonGot.get(10, TimeUnit.SECONDS) - released);
        assertTrue(wokenMs < WAKE_BOUND_MS, "Redisson's head was woken " + wokenMs + " ms after our release");
        assertFalse(ours.isDone(), "ours is behind Redisson's in the queue");
        assertEquals(Optional.empty(), first.tryLock(name), "fencelock must not get a lock Redisson holds");

        long unlocked = System.nanoTime();
        letGo.countDown();
        try (Lease lease = ours.get(10, TimeUnit.SECONDS)) {
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - unlocked);
            assertTrue(ms < WAKE_BOUND_MS, "ours was woken " + ms + " ms after Redisson's unlock");
            assertTrue(lease.fence() > held.fence());
        }
        redissonThread.join(10_000);
        assertEquals(java.util.List.of(), queue(name), "nobody left queued");
    }

    @Test
    void ourWaiterQueuedFirstIsServedBeforeARedissonFairWaiter() throws Exception {
        String name = Services.unique("interop-fair-b");
        RLock fair = redisson.getFairLock(name);
        CompletableFuture<Long> holderGot = new CompletableFuture<>();
        CountDownLatch letHolderGo = new CountDownLatch(1);
        Thread holder = redissonWaiter(fair, holderGot, letHolderGo);
        holderGot.get(10, TimeUnit.SECONDS);
        assertEquals(Optional.empty(), first.tryLock(name), "fencelock must not get a lock Redisson holds");

        CompletableFuture<Lease> ours = first.lockAsync(name, LockOptions.defaults());
        awaitQueued(name, 1);
        CompletableFuture<Long> redissonGot = new CompletableFuture<>();
        CountDownLatch letGo = new CountDownLatch(1);
        Thread redissonThread = redissonWaiter(redisson.getFairLock(name), redissonGot, letGo);
        awaitQueued(name, 2);

        long unlocked = System.nanoTime();
        letHolderGo.countDown();
        Lease lease = ours.get(10, TimeUnit.SECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - unlocked);
        assertTrue(ms < WAKE_BOUND_MS, "ours, the head, was woken " + ms + " ms after Redisson's unlock");
        assertFalse(redissonGot.isDone(), "Redisson's waiter is behind ours");

        long released = System.nanoTime();
        lease.release();
        long wokenMs = TimeUnit.NANOSECONDS.toMillis(redissonGot.get(10, TimeUnit.SECONDS) - released);
        assertTrue(wokenMs < WAKE_BOUND_MS, "Redisson's waiter was woken " + wokenMs + " ms after our release");
        letGo.countDown();
        holder.join(10_000);
        redissonThread.join(10_000);
        assertFalse(fair.isLocked(), "nothing left held");
    }
}
