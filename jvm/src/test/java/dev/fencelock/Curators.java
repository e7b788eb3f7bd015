package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;

/** What the Curator interop tests share: a Curator client on the test ZooKeeper, and closing. */
final class Curators {
    private Curators() {}

    /** Curator on {@code url} (a {@code zk://} URL), connected. */
    static CuratorFramework connect(String url) throws InterruptedException {
        CuratorFramework curator =
                CuratorFrameworkFactory.newClient(Services.hostPort(url), 30_000, 10_000, new RetryOneTime(200));
        curator.start();
        assertTrue(curator.blockUntilConnected(20, TimeUnit.SECONDS), "Curator connects to " + url);
        return curator;
    }

    /** Closes whichever of them were opened. */
    static void close(CuratorFramework curator, FencelockClient fencelock) {
        if (fencelock != null) {
            fencelock.close();
        }
        if (curator != null) {
            curator.close();
        }
    }
}
