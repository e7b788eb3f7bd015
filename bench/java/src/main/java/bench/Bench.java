package bench;

import dev.fencelock.FencelockClient;
import dev.fencelock.Lease;
import dev.fencelock.LockOptions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.retry.RetryOneTime;
import org.redisson.Redisson;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * fencelock from Java next to the JVM's usual locks on the same servers, in one process:
 *
 * <ol>
 *   <li>uncontended acquire+release on Redis, fencelock alone (for the Java/Rust ratio against fencelock-bench);
 *   <li>uncontended acquire+release, one thread, after a 1 s warm-up per side, in four alternating slices per side
 *       (fencelock, peer, fencelock, peer), so load from elsewhere falls on both: on Redis against Redisson's RLock,
 *       on ZooKeeper against Curator's InterProcessMutex; on Redis also against Redisson's RFairLock, the peer of
 *       fencelock's default fair queue;
 *   <li>contended hand-off: 8 worker threads on one lock, each asking again as soon as it has released; gap = the
 *       next acquire's return − the previous holder's instant before release. fencelock workers have a client each
 *       (so contention goes through the server); Redisson's share one RedissonClient and Curator's one
 *       CuratorFramework (each worker a separate lock owner on the server all the same). On Redis against both
 *       Redisson's RLock (every unlock wakes every waiter) and its RFairLock (an unlock wakes the queue's head).
 *   <li>the read-write lock and the semaphore: (a) 8 threads loop a read hold + release of one name, against the
 *       peer's read lock (Redisson's RReadWriteLock, Curator's InterProcessReadWriteLock) and against fencelock's
 *       own mutex taken the same way (which takes turns where reads share); (b) one thread's permit acquire +
 *       release of a 4-permit semaphore, against the peer's (Redisson's RPermitExpirableSemaphore, Curator's
 *       InterProcessSemaphoreV2) and against fencelock's mutex. All in alternating slices, like 1b.
 * </ol>
 *
 * Prints a table per backend and {@code key=value} lines for bench/java/run.sh.
 */
public final class Bench {
    /** Warm-up per side before timing: long enough for the JIT to compile the hot path. */
    private static final long WARMUP_NANOS = 1_000_000_000L;
    private static final int WORKERS = 8;

    private Bench() {}

    public static void main(String[] args) throws Exception {
        String redis = null;
        String zk = null;
        double seconds = 3;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--redis" -> redis = args[++i];
                case "--zk" -> zk = args[++i];
                case "--seconds" -> seconds = Double.parseDouble(args[++i]);
                default -> {
                    System.err.println("usage: Bench [--redis URL] [--zk URL] [--seconds N]");
                    System.exit(2);
                }
            }
        }
        long sliceNanos = (long) (seconds * 1e9 / 2);
        if (redis != null) {
            redis(redis, sliceNanos);
        }
        if (zk != null) {
            zookeeper(zk, sliceNanos);
        }
    }

    interface Cycle {
        void run() throws Exception;
    }

    /** Latencies of cycles, in nanoseconds, and the time they took. */
    static final class Sample {
        final List<Long> nanos = new ArrayList<>();
        long elapsed;
        /** Acquisitions per worker, in a hand-off. */
        long[] perWorker = new long[0];

        /** Fewest ÷ most acquisitions per worker. */
        double fairness() {
            long min = Arrays.stream(perWorker).min().orElse(0);
            long max = Arrays.stream(perWorker).max().orElse(0);
            return max == 0 ? 0 : (double) min / max;
        }

        double perSecond() {
            return nanos.size() / (elapsed / 1e9);
        }

        long percentile(double p) {
            long[] sorted = nanos.stream().mapToLong(Long::longValue).sorted().toArray();
            return sorted.length == 0 ? 0 : sorted[Math.min(sorted.length - 1, (int) (p * sorted.length))];
        }
    }

    /** Runs {@code ours} and {@code theirs} in four alternating slices of {@code sliceNanos / 2} each. */
    static Sample[] alternate(Cycle ours, Cycle theirs, long sliceNanos) throws Exception {
        run(ours, new Sample(), WARMUP_NANOS);
        run(theirs, new Sample(), WARMUP_NANOS);
        Sample a = new Sample();
        Sample b = new Sample();
        for (int slice = 0; slice < 4; slice++) {
            run(slice % 2 == 0 ? ours : theirs, slice % 2 == 0 ? a : b, sliceNanos / 2);
        }
        return new Sample[] {a, b};
    }

    private static void run(Cycle cycle, Sample into, long forNanos) throws Exception {
        long start = System.nanoTime();
        long end = start + forNanos;
        long now = start;
        while (now < end) {
            cycle.run();
            long after = System.nanoTime();
            into.nanos.add(after - now);
            now = after;
        }
        into.elapsed += now - start;
    }

    /**
     * Runs {@code ours} and {@code theirs}, each a set of cycles looped by a thread apiece, in four alternating
     * slices of {@code sliceNanos / 2}; a side's sample has every cycle of its threads and the wall time.
     */
    static Sample[] alternateTogether(List<Cycle> ours, List<Cycle> theirs, long sliceNanos) throws Exception {
        together(ours, new Sample(), WARMUP_NANOS);
        together(theirs, new Sample(), WARMUP_NANOS);
        Sample a = new Sample();
        Sample b = new Sample();
        for (int slice = 0; slice < 4; slice++) {
            together(slice % 2 == 0 ? ours : theirs, slice % 2 == 0 ? a : b, sliceNanos / 2);
        }
        return new Sample[] {a, b};
    }

    private static void together(List<Cycle> cycles, Sample into, long forNanos) throws Exception {
        List<Sample> parts = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (Cycle c : cycles) {
            Sample part = new Sample();
            parts.add(part);
            threads.add(new Thread(() -> {
                try {
                    run(c, part, forNanos);
                } catch (Throwable t) {
                    synchronized (failures) {
                        failures.add(t);
                    }
                }
            }));
        }
        long start = System.nanoTime();
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        into.elapsed += System.nanoTime() - start;
        if (!failures.isEmpty()) {
            throw new IllegalStateException("a cycle failed", failures.get(0));
        }
        parts.forEach(p -> into.nanos.addAll(p.nanos));
    }

    /** {@code WORKERS} fencelock clients, one per thread (as separate processes would be); closed by the caller. */
    static List<FencelockClient> clients(String url) {
        List<FencelockClient> clients = new ArrayList<>();
        for (int i = 0; i < WORKERS; i++) {
            clients.add(FencelockClient.connect(url));
        }
        return clients;
    }

    /** Figure 3 on one backend; {@code peerRead} and {@code peerPermit} are the peer's cycles, per thread. */
    static void primitives(String backend, String url, String prefix, String peer, ContenderFactory peerRead,
            Cycle peerPermit, long sliceNanos) throws Exception {
        List<FencelockClient> clients = clients(url);
        try {
            List<Cycle> reads = new ArrayList<>();
            List<Cycle> mutexes = new ArrayList<>();
            List<Cycle> theirs = new ArrayList<>();
            for (int w = 0; w < WORKERS; w++) {
                FencelockClient c = clients.get(w);
                reads.add(() -> c.readWriteLock(prefix + "bench-java-read").read(LockOptions.defaults()).close());
                mutexes.add(() -> c.lock(prefix + "bench-java-read-mutex").close());
                Contender r = peerRead.make(w);
                theirs.add(() -> {
                    r.acquire();
                    r.release();
                });
            }
            Sample[] vsPeer = alternateTogether(reads, theirs, sliceNanos);
            table(backend + ": 3a. 8 threads loop a read hold + release, alternating with " + peer, "fencelock read",
                    peer + " read", vsPeer[0], vsPeer[1]);
            Sample[] vsMutex = alternateTogether(reads, mutexes, sliceNanos);
            table(backend + ": 3a'. the same against fencelock's mutex (8 threads take turns)", "fencelock read",
                    "fencelock mutex", vsMutex[0], vsMutex[1]);
            kv("java_" + backend + "_read_8_cycles", vsPeer[0].perSecond());
            kv("peer_" + backend + "_read_8_cycles", vsPeer[1].perSecond());
            kv("java_" + backend + "_mutex_8_cycles", vsMutex[1].perSecond());

            FencelockClient one = clients.get(0);
            Cycle permit = () -> one.semaphore(prefix + "bench-java-semaphore", 4).acquire().close();
            Sample[] semVsPeer = alternate(permit, peerPermit, sliceNanos);
            table(backend + ": 3b. 1 thread, permit acquire + release (4 permits), alternating with " + peer,
                    "fencelock permit", peer + " permit", semVsPeer[0], semVsPeer[1]);
            Sample[] semVsMutex = alternate(permit, () -> one.lock(prefix + "bench-java-sem-mutex").close(),
                    sliceNanos);
            table(backend + ": 3b'. the same against fencelock's mutex", "fencelock permit", "fencelock mutex",
                    semVsMutex[0], semVsMutex[1]);
            kv("java_" + backend + "_permit_cycles", semVsPeer[0].perSecond());
            kv("peer_" + backend + "_permit_cycles", semVsPeer[1].perSecond());
        } finally {
            clients.forEach(FencelockClient::close);
        }
    }

    /** One worker's acquire and release on the contended lock. */
    interface Contender {
        void acquire() throws Exception;

        void release() throws Exception;
    }

    interface ContenderFactory {
        Contender make(int worker) throws Exception;
    }

    /** Eight workers hand one lock around for {@code nanos}; returns the gaps. */
    static Sample handoff(ContenderFactory factory, long nanos) throws Exception {
        AtomicLong releasedAt = new AtomicLong();
        Sample gaps = new Sample();
        long deadline = System.nanoTime() + nanos;
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        gaps.perWorker = new long[WORKERS];
        for (int w = 0; w < WORKERS; w++) {
            Contender c = factory.make(w);
            int me = w;
            threads.add(new Thread(() -> {
                try {
                    while (System.nanoTime() < deadline) {
                        c.acquire();
                        long got = System.nanoTime();
                        long prev = releasedAt.getAndSet(0);
                        if (prev != 0) {
                            synchronized (gaps) {
                                gaps.nanos.add(got - prev);
                            }
                        }
                        synchronized (gaps) {
                            gaps.perWorker[me]++;
                        }
                        releasedAt.set(System.nanoTime());
                        c.release();
                    }
                } catch (Throwable t) {
                    synchronized (failures) {
                        failures.add(t);
                    }
                }
            }, "bench-worker-" + w));
        }
        long start = System.nanoTime();
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        gaps.elapsed = System.nanoTime() - start;
        if (!failures.isEmpty()) {
            throw new IllegalStateException("a worker failed", failures.get(0));
        }
        return gaps;
    }

    static void redis(String url, long sliceNanos) throws Exception {
        // fencelock alone first, the shape of fencelock-bench's figure 1 (the Java/Rust ratio), before Redisson's
        // threads exist in this process.
        try (FencelockClient client = FencelockClient.connect(url)) {
            Sample alone = new Sample();
            run(() -> client.lock("bench-java-alone").close(), new Sample(), WARMUP_NANOS);
            run(() -> client.lock("bench-java-alone").close(), alone, sliceNanos * 2);
            System.out.println();
            System.out.println("redis (" + url + "): 1a. uncontended acquire+release, 1 thread, fencelock java alone");
            row("figure", "fencelock java", "", "");
            row("cycles/s", fmt("%.0f/s", alone.perSecond()), "", "");
            row("p50 cycle latency", micros(alone.percentile(0.5)), "", "");
            row("p99 cycle latency", micros(alone.percentile(0.99)), "", "");
            kv("java_redis_cycles", alone.perSecond());
        }
        Config config = new Config();
        config.useSingleServer().setAddress(url);
        RedissonClient redisson = Redisson.create(config);
        try (FencelockClient client = FencelockClient.connect(url)) {
            String name = "bench-java-uncontended";
            Lock rlock = redisson.getLock("bench-java-redisson-uncontended");
            Sample[] s = alternate(() -> client.lock(name).close(), () -> {
                rlock.lock();
                rlock.unlock();
            }, sliceNanos);
            table("redis: 1b. uncontended acquire+release, 1 thread, alternating with Redisson", "fencelock java",
                    "Redisson RLock", s[0], s[1]);
            kv("java_redis_alternating_cycles", s[0].perSecond());
            kv("redisson_cycles", s[1].perSecond());
            Lock fair = redisson.getFairLock("bench-java-redisson-fair-uncontended");
            Sample[] f = alternate(() -> client.lock(name).close(), () -> {
                fair.lock();
                fair.unlock();
            }, sliceNanos);
            table("redis: 1c. uncontended acquire+release, 1 thread, alternating with Redisson's fair lock",
                    "fencelock java", "Redisson RFairLock", f[0], f[1]);
            kv("redisson_fair_cycles", f[1].perSecond());

            Sample ours = fencelockHandoff(url, "bench-java-handoff", sliceNanos * 2);
            Sample theirs = handoff(w -> {
                Lock l = redisson.getLock("bench-java-redisson-handoff");
                return new Contender() {
                    public void acquire() {
                        l.lock();
                    }

                    public void release() {
                        l.unlock();
                    }
                };
            }, sliceNanos * 2);
            handoffTable("redis: 2. contended hand-off, 8 threads", "fencelock java", "Redisson RLock", ours,
                    theirs);
            kv("java_redis_handoff_p50_us", ours.percentile(0.5) / 1e3);
            kv("redisson_handoff_p50_us", theirs.percentile(0.5) / 1e3);
            Sample fairOnes = handoff(w -> {
                Lock l = redisson.getFairLock("bench-java-redisson-fair-handoff");
                return new Contender() {
                    public void acquire() {
                        l.lock();
                    }

                    public void release() {
                        l.unlock();
                    }
                };
            }, sliceNanos * 2);
            handoffTable("redis: 2b. contended hand-off, 8 threads, against Redisson's fair lock", "fencelock java",
                    "Redisson RFairLock", ours, fairOnes);
            kv("redisson_fair_handoff_p50_us", fairOnes.percentile(0.5) / 1e3);

            RReadWriteLock rw = redisson.getReadWriteLock("bench-java-redisson-read");
            RPermitExpirableSemaphore sem = redisson.getPermitExpirableSemaphore("bench-java-redisson-semaphore");
            sem.delete();
            sem.trySetPermits(4);
            primitives("redis", url, "", "Redisson", w -> {
                Lock l = rw.readLock();
                return new Contender() {
                    public void acquire() {
                        l.lock();
                    }

                    public void release() {
                        l.unlock();
                    }
                };
            }, () -> sem.release(sem.acquire(30, TimeUnit.SECONDS)), sliceNanos);
        } finally {
            redisson.shutdown();
        }
    }

    static void zookeeper(String url, long sliceNanos) throws Exception {
        String hostPort = url.substring("zk://".length());
        CuratorFramework curator = CuratorFrameworkFactory.newClient(hostPort, new RetryOneTime(200));
        curator.start();
        if (!curator.blockUntilConnected(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("Curator could not connect to " + hostPort);
        }
        try (FencelockClient client = FencelockClient.connect(url)) {
            InterProcessMutex mutex = new InterProcessMutex(curator, "/bench-java-curator-uncontended");
            Sample[] s = alternate(() -> client.lock("/bench-java-uncontended").close(), () -> {
                mutex.acquire();
                mutex.release();
            }, sliceNanos);
            table("zk (" + url + "): 1. uncontended acquire+release, 1 thread", "fencelock java", "Curator IPMutex",
                    s[0], s[1]);
            kv("java_zk_cycles", s[0].perSecond());
            kv("curator_cycles", s[1].perSecond());

            Sample ours = fencelockHandoff(url, "/bench-java-handoff", sliceNanos * 2);
            Sample theirs = handoff(w -> {
                InterProcessMutex m = new InterProcessMutex(curator, "/bench-java-curator-handoff");
                return new Contender() {
                    public void acquire() throws Exception {
                        m.acquire();
                    }

                    public void release() throws Exception {
                        m.release();
                    }
                };
            }, sliceNanos * 2);
            handoffTable("zk: 2. contended hand-off, 8 threads", "fencelock java", "Curator IPMutex", ours, theirs);
            kv("java_zk_handoff_p50_us", ours.percentile(0.5) / 1e3);
            kv("curator_handoff_p50_us", theirs.percentile(0.5) / 1e3);

            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(curator, "/bench-java-curator-semaphore", 4);
            primitives("zk", url, "/", "Curator", w -> {
                // A lock object per thread: Curator's locks are reentrant per thread of one object.
                InterProcessLock m = new InterProcessReadWriteLock(curator, "/bench-java-curator-read").readLock();
                return new Contender() {
                    public void acquire() throws Exception {
                        m.acquire();
                    }

                    public void release() throws Exception {
                        m.release();
                    }
                };
            }, () -> sem.returnLease(sem.acquire()), sliceNanos);
        } finally {
            curator.close();
        }
    }

    /** Hand-off among {@code WORKERS} threads, each on its own fencelock client (as separate processes would be). */
    static Sample fencelockHandoff(String url, String name, long nanos) throws Exception {
        List<FencelockClient> clients = new ArrayList<>();
        try {
            for (int i = 0; i < WORKERS; i++) {
                clients.add(FencelockClient.connect(url));
            }
            return handoff(w -> new Contender() {
                Lease lease;

                public void acquire() {
                    lease = clients.get(w).lock(name);
                }

                public void release() {
                    lease.close();
                }
            }, nanos);
        } finally {
            clients.forEach(FencelockClient::close);
        }
    }

    static void table(String title, String ours, String theirs, Sample a, Sample b) {
        System.out.println();
        System.out.println(title);
        row("figure", ours, theirs, "ratio");
        row("cycles/s", fmt("%.0f/s", a.perSecond()), fmt("%.0f/s", b.perSecond()),
                fmt("%.2f", a.perSecond() / b.perSecond()));
        row("p50 cycle latency", micros(a.percentile(0.5)), micros(b.percentile(0.5)),
                fmt("%.2f", (double) a.percentile(0.5) / b.percentile(0.5)));
        row("p99 cycle latency", micros(a.percentile(0.99)), micros(b.percentile(0.99)),
                fmt("%.2f", (double) a.percentile(0.99) / b.percentile(0.99)));
    }

    static void handoffTable(String title, String ours, String theirs, Sample a, Sample b) {
        System.out.println();
        System.out.println(title);
        row("figure", ours, theirs, "ratio");
        row("acquisitions/s", fmt("%.0f/s", a.perSecond()), fmt("%.0f/s", b.perSecond()),
                fmt("%.2f", a.perSecond() / b.perSecond()));
        row("hand-off gap p50", micros(a.percentile(0.5)), micros(b.percentile(0.5)),
                fmt("%.2f", (double) a.percentile(0.5) / b.percentile(0.5)));
        row("hand-off gap p99", micros(a.percentile(0.99)), micros(b.percentile(0.99)),
                fmt("%.2f", (double) a.percentile(0.99) / b.percentile(0.99)));
        row("fairness min/max", fmt("%.2f", a.fairness()), fmt("%.2f", b.fairness()), "");
    }

    static void row(String... cells) {
        System.out.printf(Locale.ROOT, "  %-24s %16s %16s %8s%n", (Object[]) Arrays.copyOf(cells, 4));
    }

    static String micros(long nanos) {
        return nanos >= 1_000_000 ? fmt("%.2f ms", nanos / 1e6) : fmt("%.0f µs", nanos / 1e3);
    }

    static String fmt(String f, Object... args) {
        return String.format(Locale.ROOT, f, args);
    }

    static void kv(String key, double value) {
        System.out.printf(Locale.ROOT, "result %s=%.1f%n", key, value);
    }
}
