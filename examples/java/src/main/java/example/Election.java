package example;

import dev.fencelock.Fence;
import dev.fencelock.FencelockClient;
import dev.fencelock.FencelockElection;
import dev.fencelock.LeaderSubscription;
import dev.fencelock.Leadership;
import dev.fencelock.LockOptions;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Three candidates take turns as the publisher while a listener reports every change of leader. Each leader writes
 * its feed through a Fence with its term, so a deposed leader that kept running could not overwrite the next one's.
 */
public final class Election {
    /** Per final value of a leader, opened when the listener reports it. */
    private static final ConcurrentHashMap<String, CountDownLatch> SEEN = new ConcurrentHashMap<>();

    private Election() {}

    public static void main(String[] args) throws Exception {
        String url = args.length > 0 ? args[0] : null; // null: FENCELOCK_URL, else sqlite:fencelock.db
        String name = "example-publisher-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        LockOptions options =
                LockOptions.defaults().withTtl(Duration.ofSeconds(10)).withTimeout(Duration.ofSeconds(30));
        try (FencelockClient client = FencelockClient.connect(url);
                FencelockClient watcher = FencelockClient.connect(url)) {
            // Each leader stays until the listener has seen its final value (observing reads every 50 ms); then
            // the last one's resignation is reported as "no leader" after the first report's.
            CountDownLatch vacant = new CountDownLatch(2);
            try (LeaderSubscription changes = watcher.election(name).observe(leader -> {
                String what = leader.map(l -> l.valueString() + " in term " + l.term()).orElse("no leader");
                System.out.println("observed: " + what);
                leader.ifPresentOrElse(l -> seen(l.valueString()).countDown(), vacant::countDown);
            })) {
                List<Long> terms = Collections.synchronizedList(new ArrayList<>());
                List<Thread> candidates = new ArrayList<>();
                for (int i = 0; i < 3; i++) {
                    String host = "host-" + i;
                    Thread t = new Thread(() -> lead(client, name, host, options, terms), host);
                    t.start();
                    candidates.add(t);
                }
                for (Thread t : candidates) {
                    t.join();
                }
                check(terms.size() == 3, "three leaders: " + terms);
                check(terms.equals(terms.stream().sorted().toList()), "every new leader has a higher term: " + terms);
                check(vacant.await(10, TimeUnit.SECONDS), "the listener saw the last leader resign");
                FencelockElection election = client.election(name);
                check(election.leader().equals(Optional.empty()), "nobody leads at the end");
                Fence feed = client.fence(name + "-feed");
                check(feed.read().token() == terms.get(2), "the feed holds the last term's write");
                System.out.println("the feed holds \"" + new String(feed.read().value(), StandardCharsets.UTF_8)
                        + "\", written in term " + terms.get(2));
            }
        }
    }

    /** Campaigns as {@code host}, publishes under its term, proclaims, and resigns when the block ends. */
    private static void lead(FencelockClient client, String name, String host, LockOptions options, List<Long> terms) {
        try (Leadership leadership = client.election(name).campaign(host, options)) {
            client.fence(name + "-feed").write(leadership.term(),
                    ("published by " + host).getBytes(StandardCharsets.UTF_8));
            leadership.proclaim(host + ", done");
            check(seen(host + ", done").await(10, TimeUnit.SECONDS), "the listener saw " + host);
            terms.add(leadership.term());
            System.out.println(host + ": led in term " + leadership.term());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(host + " was interrupted", e);
        }
    }

    /** The latch the listener opens when it reports a leader with {@code value}. */
    private static CountDownLatch seen(String value) {
        return SEEN.computeIfAbsent(value, v -> new CountDownLatch(1));
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
