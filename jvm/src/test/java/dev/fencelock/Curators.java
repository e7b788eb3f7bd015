package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * What the Curator interop tests share: a Curator client and a fencelock client on the test ZooKeeper, opened before
 * a test class and closed after it (test classes run one at a time).
 */
abstract class Curators {
    protected static CuratorFramework curator;
    protected static FencelockClient fencelock;

    @BeforeAll
    static void connect() throws InterruptedException {
        String url = Services.zk();
        curator = connect(url);
        fencelock = FencelockClient.connect(url);
    }

    @AfterAll
    static void close() {
        if (fencelock != null) {
            fencelock.close();
            fencelock = null;
        }
        if (curator != null) {
            curator.close();
            curator = null;
        }
    }

    /** Curator on {@code url} (a {@code zk://} URL), connected. */
    static CuratorFramework connect(String url) throws InterruptedException {
        CuratorFramework c =
                CuratorFrameworkFactory.newClient(Services.hostPort(url), 30_000, 10_000, new RetryOneTime(200));
        c.start();
        assertTrue(c.blockUntilConnected(20, TimeUnit.SECONDS), "Curator connects to " + url);
        return c;
    }
}
