package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A fencelock election beside Curator's {@code LeaderLatch} on the same ZooKeeper path, both ways: never both lead,
 * each side's waiting candidate takes over when the other lets go, and {@code leader()} reports a latch's participant
 * id as the leader's value.
 */
@Timeout(90)
class CuratorElectionInteropTest extends Curators {
    private static final LockOptions SHORT = LockOptions.defaults().withTtl(Duration.ofSeconds(30));

    @Test
    void aCuratorLeaderKeepsOursOutAndItsCloseLetsOursLead() throws Exception {
        String path = "/" + Services.unique("interop-curator-latch-a");
        FencelockElection ours = fencelock.election(path);
        // Closed by the test, not by try-with-resources (a second close throws); Curator's close after the class
        // removes its node if the test fails first.
        LeaderLatch latch = new LeaderLatch(curator, path, "curator-one");
        latch.start();
        assertTrue(latch.await(20, TimeUnit.SECONDS), "the latch leads an empty election");
        assertEquals(Optional.empty(), ours.tryCampaign("ours", SHORT), "no leadership of ours beside Curator's");
        assertEquals("curator-one", ours.leader().orElseThrow().valueString(), "the latch's id is the value");
        CompletableFuture<Leadership> waiting = ours.campaignAsync("ours", SHORT.withTimeout(Duration.ofSeconds(20)));
        assertFalse(waiting.isDone());
        latch.close();
        try (Leadership lead = waiting.get(20, TimeUnit.SECONDS)) {
            assertEquals(ElectionTest.leader("ours", lead.term()), ours.leader(), "ours leads once the latch closed");
            try (LeaderLatch second = new LeaderLatch(curator, path, "curator-two")) {
                second.start();
                assertFalse(second.await(300, TimeUnit.MILLISECONDS), "a new latch waits while we lead");
                assertFalse(second.hasLeadership());
            }
        }
    }

    @Test
    void ourLeaderKeepsCuratorOutAndOurResignLetsItLead() throws Exception {
        String path = "/" + Services.unique("interop-curator-latch-b");
        FencelockElection ours = fencelock.election(path);
        Leadership lead = ours.campaign("ours", SHORT);
        try (LeaderLatch latch = new LeaderLatch(curator, path, "curator-one")) {
            latch.start();
            assertFalse(latch.await(300, TimeUnit.MILLISECONDS), "Curator must not lead while we do");
            assertFalse(latch.hasLeadership());
            assertEquals("ours", ours.leader().orElseThrow().valueString());
            lead.resign();
            assertTrue(latch.await(20, TimeUnit.SECONDS), "Curator's waiting latch leads after our resign");
            assertEquals(Optional.empty(), ours.tryCampaign("again", SHORT), "and keeps ours out");
            LeaderInfo theirs = ours.leader().orElseThrow();
            assertEquals("curator-one", theirs.valueString());
            assertTrue(theirs.term() > lead.term(), "the latch's term follows ours: " + theirs.term());
        }
        assertEquals(Optional.empty(), ours.leader(), "nobody leads once the latch closed");
    }
}
