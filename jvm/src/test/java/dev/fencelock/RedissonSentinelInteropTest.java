package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson in Sentinel mode and fencelock's {@code redis+sentinel://} on one master and one name: both find the same
 * master through the sentinels, neither holds while the other does, and each side's waiter is woken by the other's
 * release (far sooner than the 30 s lease, so by pub/sub on the master, not by expiry).
 */
@Timeout(60)
class RedissonSentinelInteropTest {
    private static final long WAKE_BOUND_MS = 2_000;

    private static RedissonClient redisson;
    private static FencelockClient fencelock;

    @BeforeAll
    static void connect() {
        String url = Services.url("FENCELOCK_TEST_SENTINEL");
        // redis+sentinel://h1:p1,h2:p2,h3:p3/<master name>
        String rest = url.substring(url.indexOf("://") + 3);
        String master = rest.substring(rest.indexOf('/') + 1).replaceAll("\\?.*$", "");
        Config config = new Config();
        var sentinels = config.useSentinelServers().setMasterName(master).setCheckSentinelsList(false)
                .setMasterConnectionMinimumIdleSize(1).setMasterConnectionPoolSize(4)
                .setSlaveConnectionMinimumIdleSize(1).setSlaveConnectionPoolSize(2)
                .setSubscriptionConnectionMinimumIdleSize(1);
        for (String host : rest.substring(0, rest.indexOf('/')).split(",")) {
            sentinels.addSentinelAddress("redis://" + host);
        }
        redisson = Redisson.create(config);
        fencelock = FencelockClient.connect(url);
    }

    @AfterAll
    static void close() {
        Redissons.close(redisson, fencelock);
    }

    private static void awaitWaiterOn(String name) throws InterruptedException {
        Redissons.awaitWaiterOn(redisson, name);
    }

    @Test
    void redissonWaitsForOurLockAndIsWokenByOurRelease() throws Exception {
        String name = Services.unique("sentinel-interop-a");
        RLock rlock = redisson.getLock(name);
        Lease lease = fencelock.lock(name);
        assertFalse(rlock.tryLock(), "Redisson must not get a lock fencelock holds");
        CompletableFuture<Long> got = CompletableFuture.supplyAsync(() -> {
            rlock.lock(); // taken and given back on this one thread, as RLock wants
            long at = System.nanoTime();
            rlock.unlock();
            return at;
        });
        awaitWaiterOn(name);
        long released = System.nanoTime();
        lease.release();
        long wokenMs = TimeUnit.NANOSECONDS.toMillis(got.get(10, TimeUnit.SECONDS) - released);
        assertTrue(wokenMs < WAKE_BOUND_MS, "Redisson was woken " + wokenMs + " ms after our release");
    }

    @Test
    void weWaitForRedissonsLockAndAreWokenByItsUnlock() throws Exception {
        String name = Services.unique("sentinel-interop-b");
        RLock rlock = redisson.getLock(name);
        rlock.lock();
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
}
