package example;

import dev.fencelock.ErrorKind;
import dev.fencelock.Fence;
import dev.fencelock.FencelockClient;
import dev.fencelock.Lease;
import dev.fencelock.LockException;
import dev.fencelock.LockOptions;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.locks.Lock;

/** The fencelock Java API in one file: try-with-resources, fenced writes, the Lock interface, errors. */
public final class Locks {
    private Locks() {}

    public static void main(String[] args) {
        String url = args.length > 0 ? args[0] : null; // null: FENCELOCK_URL, else sqlite:fencelock.db
        String name = "example-" + ProcessHandle.current().pid();
        try (FencelockClient client = FencelockClient.connect(url)) {
            Fence orders = client.fence(name + "-orders");

            // A lease, released at the end of the block; its token guards the write.
            long first;
            try (Lease lease = client.lock(name, LockOptions.defaults().withTtl(Duration.ofSeconds(10)))) {
                first = lease.fence();
                orders.write(lease.fence(), "written under lease 1".getBytes(StandardCharsets.UTF_8));
            }

            // A later holder gets a larger token; the earlier one's late write is rejected.
            try (Lease second = client.lock(name)) {
                orders.write(second.fence(), "written under lease 2".getBytes(StandardCharsets.UTF_8));
                try {
                    orders.write(first, "a stale write".getBytes(StandardCharsets.UTF_8));
                    throw new AssertionError("a stale token was accepted");
                } catch (LockException e) {
                    check(e.kind() == ErrorKind.FENCED, "stale write: " + e.kind());
                }
                check(second.fence() > first, "tokens rise");
            }

            // java.util.concurrent.locks.Lock, reentrant per thread.
            Lock mutex = client.mutex(name);
            mutex.lock();
            try {
                mutex.lock(); // reentrant
                mutex.unlock();
                check(!client.tryLock(name, LockOptions.defaults().withOwner("someone-else")).isPresent(),
                        "held while locked");
            } finally {
                mutex.unlock();
            }

            String value = new String(orders.read().value(), StandardCharsets.UTF_8);
            check(value.equals("written under lease 2"), "the register holds " + value);
            System.out.println("fencelock example on " + client.url() + ": ok (" + value + ")");
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
