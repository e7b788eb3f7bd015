package dev.fencelock;

import java.time.Duration;

/** Run by ApiTest in a child JVM: use the library, leave a lost signal pending, never close, return from main. */
public final class ExitProbe {
    private ExitProbe() {}

    public static void main(String[] args) throws Exception {
        FencelockClient client = FencelockClient.connect(args[0]);
        Lease lease = client.lock(args[1], LockOptions.defaults().withTtl(Duration.ofSeconds(5)));
        lease.lost(); // a runtime task keeps waiting for this
        System.out.println("probe: fence " + lease.fence());
        client.lockAsync(args[1] + "-async").get().release();
    }
}
