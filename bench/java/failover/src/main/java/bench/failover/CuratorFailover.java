package bench.failover;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.RetryOneTime;

/**
 * Curator's {@link LeaderLatch} through the failover loop of fencelock-bench's figure 6: each round starts a leader
 * JVM (this class with {@code --child}) whose session timeout is the TTL, waits for its "leading" line, starts the
 * standby's latch here, SIGKILLs the leader ({@link Process#destroyForcibly}) and times the standby's
 * {@code await()} on {@link System#nanoTime}.
 *
 * <pre>
 *   CuratorFailover --zk HOST:PORT[,…][/chroot] --name /PATH --ttl-ms 2000 --kills 10 [--hold-spread-ms 2000]
 *                   [--child]
 * </pre>
 *
 * Output (stdout): "note &lt;text&gt;" lines, then "result failover_ns=&lt;n&gt;,&lt;n&gt;,…". A child exits when
 * its stdin closes, so an interrupted driver leaves no leader behind.
 */
public final class CuratorFailover {
    /** Bounds a fresh leader's start: JVM, session, uncontested latch. */
    private static final long STARTUP_SECONDS = 60;

    private CuratorFailover() {}

    public static void main(String[] argv) throws Exception {
        String zk = null;
        String name = null;
        long ttlMs = 2000;
        int kills = 10;
        long spreadMs = 0;
        boolean child = false;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--child" -> child = true;
                case "--zk" -> zk = argv[++i];
                case "--name" -> name = argv[++i];
                case "--ttl-ms" -> ttlMs = Long.parseLong(argv[++i]);
                case "--kills" -> kills = Integer.parseInt(argv[++i]);
                case "--hold-spread-ms" -> spreadMs = Long.parseLong(argv[++i]);
                default -> {
                    System.err.println("usage: CuratorFailover --zk HOSTS --name /PATH [--ttl-ms T] [--kills N]"
                            + " [--hold-spread-ms S] [--child]");
                    System.exit(2);
                }
            }
        }
        if (zk == null || name == null || kills < 1) {
            System.err.println("CuratorFailover: --zk, --name and --kills ≥ 1 are needed");
            System.exit(2);
        }
        if (child) {
            child(zk, name, ttlMs);
        } else {
            driver(zk, name, ttlMs, kills, spreadMs);
        }
    }

    private static CuratorFramework connect(String zk, long ttlMs) throws InterruptedException {
        int session = (int) ttlMs;
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(zk)
                .sessionTimeoutMs(session)
                // Curator warns when the connection timeout exceeds the session's.
                .connectionTimeoutMs(Math.min(session, 15_000))
                .retryPolicy(new RetryOneTime(200))
                .build();
        client.start();
        if (!client.blockUntilConnected((int) STARTUP_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("Curator could not connect to " + zk);
        }
        return client;
    }

    /** The session timeout the server granted (it clamps the asked one to 2–20 ticks). */
    private static int negotiated(CuratorFramework client) throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionTimeout();
    }

    /** The leader: lead, say so, hold until killed or orphaned. */
    private static void child(String zk, String name, long ttlMs) throws Exception {
        CuratorFramework client = connect(zk, ttlMs);
        LeaderLatch latch = new LeaderLatch(client, name, "leader");
        latch.start();
        if (!latch.await(STARTUP_SECONDS, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the leader did not lead within " + STARTUP_SECONDS + " s");
        }
        System.out.println("leading");
        System.out.flush();
        while (System.in.read() != -1) {
            // Stdin closes only when the driver is gone.
        }
        Runtime.getRuntime().halt(0);
    }

    private static void driver(String zk, String name, long ttlMs, int kills, long spreadMs) throws Exception {
        CuratorFramework client = connect(zk, ttlMs);
        List<Long> samples = new ArrayList<>();
        for (int round = 1; round <= kills; round++) {
            Process leader = startLeader(zk, name, ttlMs);
            // An offset, not a synchronisation: round i (from 1) waits spread·(2i−1)/(2·kills), as fencelock-bench's
            // does, so the kills do not phase-lock to the server's session-expiry ticks.
            Thread.sleep(spreadMs * (2L * round - 1) / (2L * kills));
            LeaderLatch standby = new LeaderLatch(client, name, "standby");
            standby.start();
            // As on fencelock's side, no wait for the standby to queue first: the dead leader's node outlives the
            // kill by its session timeout, so the standby is waiting long before it can win.
            long killedAt = System.nanoTime();
            leader.destroyForcibly(); // SIGKILL
            boolean led = standby.await(10 * ttlMs + STARTUP_SECONDS * 1000, TimeUnit.MILLISECONDS);
            long ledAt = System.nanoTime();
            if (!led) {
                throw new IllegalStateException("round " + round + ": the standby did not lead");
            }
            samples.add(ledAt - killedAt);
            standby.close(); // resigns: deletes its node
            leader.waitFor();
        }
        System.out.println("note session timeout asked " + ttlMs + " ms, negotiated " + negotiated(client)
                + " ms (the driver's; each leader asks the same)");
        StringJoiner joined = new StringJoiner(",");
        samples.forEach(s -> joined.add(Long.toString(s)));
        System.out.println("result failover_ns=" + joined);
        client.close();
    }

    /** Starts a leader JVM and waits for its "leading" line. */
    private static Process startLeader(String zk, String name, long ttlMs) throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                CuratorFailover.class.getName(), "--child", "--zk", zk, "--name", name, "--ttl-ms",
                Long.toString(ttlMs))
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> line = CompletableFuture.supplyAsync(() -> {
            try {
                return out.readLine();
            } catch (IOException e) {
                return null;
            }
        });
        String got;
        try {
            got = line.get(STARTUP_SECONDS, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            p.destroyForcibly();
            throw new IllegalStateException("the leader did not lead within " + STARTUP_SECONDS + " s");
        }
        if (!"leading".equals(got)) {
            p.destroyForcibly();
            throw new IllegalStateException("the leader printed " + got + ", expected \"leading\"");
        }
        return p;
    }
}
