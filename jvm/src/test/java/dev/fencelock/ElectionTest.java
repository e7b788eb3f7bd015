package dev.fencelock;

import static dev.fencelock.ApiTest.awaitTrue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Elections in Java's idioms (DESIGN.md §4b): {@link Leadership} as a lease with try-with-resources, the async twins
 * and their cancellation, the pull {@link ElectionObserver} and the {@link LeaderListener}, and bad input. Each
 * backend test runs on memory, SQLite and every served backend whose variable is set; the shared scenarios of
 * tests/conformance/election_*.json run in {@link ConformanceTest}.
 */
@Timeout(120)
class ElectionTest {
    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(10));
    /** How long a report or a spawned campaign may take before the test fails. */
    private static final long BOUND_S = 10;
    /** Core's MAX_VALUE_BYTES, which its errors name. */
    private static final int MAX_VALUE = 64 * 1024;

    @TempDir
    static Path tmp;

    /** A URL every client of one test shares: a backend label, or the FENCELOCK_TEST_* variable of a served one. */
    private static String url(String backend) {
        return switch (backend) {
            case "memory" -> "memory://" + Services.unique("election");
            case "sqlite" -> Services.sqlite(tmp);
            default -> Services.url(backend);
        };
    }

    /** A listener queueing its reports (an {@code Optional<LeaderInfo>} or a {@link LockException}). */
    static final class Reports implements LeaderListener {
        final BlockingQueue<Object> queue = new LinkedBlockingQueue<>();

        @Override
        public void onChange(Optional<LeaderInfo> leader) {
            queue.add(leader);
        }

        @Override
        public void onError(LockException error) {
            queue.add(error);
        }

        @SuppressWarnings("unchecked")
        Optional<LeaderInfo> next() throws InterruptedException {
            Object r = queue.poll(BOUND_S, TimeUnit.SECONDS);
            assertNotNull(r, "no report within " + BOUND_S + " s");
            if (r instanceof LockException e) {
                throw new AssertionError("observe failed", e);
            }
            return (Optional<LeaderInfo>) r;
        }

        /** The next report that is not {@link #unwritten}. */
        Optional<LeaderInfo> nextLeader() throws InterruptedException {
            Optional<LeaderInfo> r = next();
            return unwritten(r) ? next() : r;
        }
    }

    /**
     * Whether a report is a new leader seen before its value: where the backend's records keep no values (SQL,
     * Redis) the value is written just after the grant, and core's {@code leader()} reports the term with an empty
     * value in between, which observe reports as a change of its own.
     */
    static boolean unwritten(Optional<LeaderInfo> report) {
        return report.isPresent() && report.get().value().length == 0;
    }

    static Optional<LeaderInfo> leader(String value, long term) {
        return Optional.of(new LeaderInfo(value.getBytes(StandardCharsets.UTF_8), term));
    }

    @ParameterizedTest
    @ValueSource(strings = {"memory", "sqlite", "FENCELOCK_TEST_REDIS", "FENCELOCK_TEST_ETCD", "FENCELOCK_TEST_ZK",
        "FENCELOCK_TEST_POSTGRES", "FENCELOCK_TEST_MYSQL"})
    void campaignProclaimResign(String backend) throws Exception {
        String url = url(backend);
        String name = Services.unique("lead");
        try (FencelockClient a = FencelockClient.connect(url); FencelockClient b = FencelockClient.connect(url)) {
            assertTrue(a.capability().election(), url + " has elections");
            FencelockElection ea = a.election(name);
            FencelockElection eb = b.election(name);
            assertEquals(name, ea.name());
            assertEquals(Optional.empty(), eb.leader());
            long term;
            try (Leadership lead = ea.campaign("a1", SHORT)) {
                term = lead.term();
                assertEquals(lead.fence(), term, "the term is the fencing token");
                assertTrue(lead.isValid());
                assertEquals(Optional.empty(), eb.tryCampaign("b", SHORT));
                assertEquals(leader("a1", term), eb.leader());
                lead.proclaim("a2");
                assertEquals("a2", eb.leader().orElseThrow().valueString());
                assertEquals(term, eb.leader().orElseThrow().term(), "proclaim keeps the term");
                lead.proclaimAsync(new byte[] {0, 1, 2}).get(BOUND_S, TimeUnit.SECONDS);
                assertEquals(Optional.of(new LeaderInfo(new byte[] {0, 1, 2}, term)), ea.leader());
                // A waiting candidate takes over when the leader resigns, with a higher term.
                CompletableFuture<Leadership> next = eb.campaignAsync("b", SHORT);
                lead.resign();
                assertFalse(lead.isValid());
                assertEquals(term, lead.term(), "readable after resign");
                assertEquals(ErrorKind.NOT_HELD, assertThrows(LockException.class, () -> lead.proclaim("x")).kind());
                try (Leadership second = next.get(BOUND_S, TimeUnit.SECONDS)) {
                    assertTrue(second.term() > term, second.term() + " > " + term);
                    assertEquals(leader("b", second.term()), ea.leader());
                    assertTrue(second.toString().contains("term=" + second.term()), second.toString());
                }
            }
            assertEquals(Optional.empty(), ea.leader());
            Leadership third = ea.tryCampaignAsync("c".getBytes(StandardCharsets.UTF_8), SHORT)
                    .get(BOUND_S, TimeUnit.SECONDS).orElseThrow();
            third.resignAsync().get(BOUND_S, TimeUnit.SECONDS);
            assertEquals(Optional.empty(), eb.leader());
            assertEquals(0, a.localEntries() + b.localEntries());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"memory", "sqlite", "FENCELOCK_TEST_REDIS", "FENCELOCK_TEST_ETCD", "FENCELOCK_TEST_ZK",
        "FENCELOCK_TEST_POSTGRES", "FENCELOCK_TEST_MYSQL"})
    void observeReportsEveryChangeInOrder(String backend) throws Exception {
        String url = url(backend);
        String name = Services.unique("observe");
        try (FencelockClient a = FencelockClient.connect(url); FencelockClient b = FencelockClient.connect(url)) {
            Reports reports = new Reports();
            try (LeaderSubscription watch = b.election(name).observe(reports);
                    ElectionObserver pull = b.election(name).observer()) {
                assertTrue(watch.isActive());
                assertEquals(Optional.empty(), reports.next(), "first the current state: nobody leads");
                assertEquals(Optional.empty(), pull.next());
                LockException quiet = assertThrows(LockException.class, () -> pull.next(Duration.ofMillis(100)));
                assertEquals(ErrorKind.TIMEOUT, quiet.kind());
                assertTrue(quiet.getMessage().contains(name), quiet.getMessage());
                Leadership lead = a.election(name).campaign("a1", SHORT);
                assertEquals(leader("a1", lead.term()), reports.nextLeader());
                Optional<LeaderInfo> pulled = pull.next(Duration.ofSeconds(BOUND_S));
                if (unwritten(pulled)) {
                    pulled = pull.next(Duration.ofSeconds(BOUND_S));
                }
                assertEquals(leader("a1", lead.term()), pulled, "the change a timed-out next waited for is not lost");
                lead.proclaim("a2");
                assertEquals(leader("a2", lead.term()), reports.next());
                lead.resign();
                assertEquals(Optional.empty(), reports.next(), "no leader after the resign");
                try (Leadership second = a.election(name).campaign("c", SHORT)) {
                    LeaderInfo now = reports.nextLeader().orElseThrow();
                    assertEquals("c", now.valueString());
                    assertTrue(now.term() > lead.term());
                }
                assertEquals(Optional.empty(), reports.next());
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"memory", "sqlite", "FENCELOCK_TEST_REDIS", "FENCELOCK_TEST_ETCD", "FENCELOCK_TEST_ZK",
        "FENCELOCK_TEST_POSTGRES", "FENCELOCK_TEST_MYSQL"})
    void aCancelledCampaignLeavesNoCandidate(String backend) throws Exception {
        String url = url(backend);
        String name = Services.unique("cancel");
        try (FencelockClient a = FencelockClient.connect(url); FencelockClient b = FencelockClient.connect(url);
                FencelockClient c = FencelockClient.connect(url)) {
            Leadership lead = a.election(name).campaign("a", SHORT);
            CompletableFuture<Leadership> waiting = b.election(name).campaignAsync("b", SHORT);
            awaitTrue(() -> b.localEntries() == 1, "the candidate waits");
            assertTrue(waiting.cancel(true));
            awaitTrue(() -> b.localEntries() == 0, "cancelling the future withdraws the candidate");
            // An interrupted blocking campaign is withdrawn too.
            AtomicReference<Throwable> outcome = new AtomicReference<>();
            Thread blocked = new Thread(() -> {
                try {
                    b.election(name).campaign("blocked", SHORT).close();
                } catch (Throwable t) {
                    outcome.set(t);
                }
            });
            blocked.start();
            awaitTrue(() -> b.localEntries() == 1, "the blocking candidate waits");
            blocked.interrupt();
            blocked.join(TimeUnit.SECONDS.toMillis(BOUND_S));
            assertEquals(ErrorKind.CANCELLED, assertInstanceOf(LockException.class, outcome.get()).kind());
            awaitTrue(() -> b.localEntries() == 0, "the interrupted campaign leaves no queue entry");
            lead.resign();
            assertEquals(Optional.empty(), c.election(name).leader(), "no withdrawn candidate took over");
            try (Leadership fresh = c.election(name).tryCampaign("c", SHORT).orElseThrow()) {
                assertTrue(fresh.term() > lead.term());
            }
        }
    }

    @Test
    void badInputIsInvalidArgument() throws Exception {
        try (FencelockClient client = FencelockClient.connect("memory://" + Services.unique("bad"))) {
            FencelockElection e = client.election(Services.unique("e"));
            byte[] tooBig = new byte[MAX_VALUE + 1];
            for (Executable bad : new Executable[] {
                () -> e.campaign((byte[]) null, SHORT),
                () -> e.campaign((String) null, SHORT),
                () -> e.tryCampaign((byte[]) null, SHORT),
                () -> e.campaignAsync((String) null, SHORT),
                () -> e.observe(null),
                () -> client.election("").campaign("x", SHORT),
                () -> client.election(null).campaign("x", SHORT),
                () -> client.election("").leader(),
                () -> client.election("").observe(leader -> {}),
            }) {
                assertEquals(ErrorKind.INVALID_ARGUMENT, assertThrows(LockException.class, bad).kind());
            }
            for (Executable big : new Executable[] {
                () -> e.campaign(tooBig, SHORT), () -> e.tryCampaign(tooBig, SHORT),
            }) {
                LockException err = assertThrows(LockException.class, big);
                assertEquals(ErrorKind.INVALID_ARGUMENT, err.kind());
                assertTrue(err.getMessage().contains("65536") && err.getMessage().contains("65537"), err.getMessage());
            }
            ExecutionException async = assertThrows(ExecutionException.class,
                    () -> e.campaignAsync(tooBig, SHORT).get(BOUND_S, TimeUnit.SECONDS));
            assertEquals(ErrorKind.INVALID_ARGUMENT, ((LockException) async.getCause()).kind());
            assertEquals(Optional.empty(), e.leader(), "a refused campaign leaves nothing");
            try (Leadership lead = e.campaign(new byte[MAX_VALUE], SHORT)) {
                assertEquals(MAX_VALUE, e.leader().orElseThrow().value().length);
                assertEquals(ErrorKind.INVALID_ARGUMENT,
                        assertThrows(LockException.class, () -> lead.proclaim(tooBig)).kind());
                assertEquals(ErrorKind.INVALID_ARGUMENT,
                        assertThrows(LockException.class, () -> lead.proclaim((String) null)).kind());
            }
            assertEquals(0, client.localEntries());
        }
    }

    @Test
    void aListenerCanCloseItsOwnSubscriptionAndClosingTheClientEndsIt() throws Exception {
        String url = "memory://" + Services.unique("listener");
        String name = Services.unique("e");
        try (FencelockClient a = FencelockClient.connect(url)) {
            FencelockClient b = FencelockClient.connect(url);
            // Closing from inside the listener: that call is the last.
            CompletableFuture<LeaderSubscription> self = new CompletableFuture<>();
            BlockingQueue<Optional<LeaderInfo>> once = new LinkedBlockingQueue<>();
            LeaderSubscription closing = b.election(name).observe(leader -> {
                once.add(leader);
                self.join().close();
            });
            self.complete(closing);
            assertEquals(Optional.empty(), once.poll(BOUND_S, TimeUnit.SECONDS));
            awaitTrue(() -> !closing.isActive(), "the listener closed its subscription");
            // A closed subscription is never called again, while an open one sees the change.
            Reports open = new Reports();
            try (LeaderSubscription watch = b.election(name).observe(open);
                    Leadership lead = a.election(name).campaign("a", SHORT)) {
                assertEquals(Optional.empty(), open.next());
                assertEquals("a", open.nextLeader().orElseThrow().valueString());
                assertTrue(once.isEmpty(), "a closed subscription reported " + once);
                // Closing the client ends the observation with one CLOSED report.
                b.close();
                Object last = open.queue.poll(BOUND_S, TimeUnit.SECONDS);
                assertEquals(ErrorKind.CLOSED, assertInstanceOf(LockException.class, last).kind());
                awaitTrue(() -> !watch.isActive(), "a final error ends the subscription");
                assertTrue(lead.isValid());
            }
            assertEquals(ErrorKind.CLOSED,
                    assertThrows(LockException.class, () -> b.election(name).observe(leader -> {})).kind());
        }
    }
}
