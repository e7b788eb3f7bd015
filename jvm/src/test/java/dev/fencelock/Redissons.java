package dev.fencelock;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** What the Redisson interop tests share: a small client on the test Redis, waiting for its waiters, closing. */
final class Redissons {
    private Redissons() {}

    /** Redisson on {@code FENCELOCK_TEST_REDIS}, with few connections. */
    static RedissonClient single() {
        Config config = new Config();
        config.useSingleServer().setAddress(Services.redis()).setConnectionMinimumIdleSize(1).setConnectionPoolSize(4)
                .setSubscriptionConnectionMinimumIdleSize(1);
        return Redisson.create(config);
    }

    /** Waits (bounded) until someone subscribes to lock {@code name}'s channel, i.e. a waiter is parked on pub/sub. */
    static void awaitWaiterOn(RedissonClient redisson, String name) throws InterruptedException {
        String channel = "redisson_lock__channel:{" + name + "}";
        ApiTest.awaitTrue(() -> redisson.getTopic(channel).countSubscribers() > 0, "a waiter subscribes to " + channel);
    }

    /** Closes whichever of them were opened. */
    static void close(RedissonClient redisson, FencelockClient... clients) {
        for (FencelockClient c : clients) {
            if (c != null) {
                c.close();
            }
        }
        if (redisson != null) {
            redisson.shutdown();
        }
    }
}
