package dev.fencelock;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.util.UUID;

/** Test servers from the FENCELOCK_TEST_* variables that scripts/services.sh writes (public for jvm/micrometer). */
public final class Services {
    private Services() {}

    /**
     * The URL in {@code var}; a missing one fails the test under FENCELOCK_REQUIRE_SERVICES=1 (CI), else skips it.
     */
    public static String url(String var) {
        String url = System.getenv(var);
        if (url != null && !url.isEmpty()) {
            return url;
        }
        if ("1".equals(System.getenv("FENCELOCK_REQUIRE_SERVICES"))) {
            fail(var + " is not set but FENCELOCK_REQUIRE_SERVICES=1: start the servers with scripts/services.sh");
        }
        assumeTrue(false, var + " is not set (run through scripts/test.sh or source a services env)");
        return null;
    }

    /** The URL in {@code var}, or null if unset (for tables that list every backend). */
    public static String optional(String var) {
        String url = System.getenv(var);
        return url == null || url.isEmpty() ? null : url;
    }

    public static String redis() {
        return url("FENCELOCK_TEST_REDIS");
    }

    public static String zk() {
        return url("FENCELOCK_TEST_ZK");
    }

    /** {@code host:port} of a {@code scheme://host:port} URL. */
    public static String hostPort(String url) {
        return url.substring(url.indexOf("://") + 3).replaceAll("/.*$", "");
    }

    /** A fresh SQLite database under {@code dir}. */
    public static String sqlite(Path dir) {
        return "sqlite:" + dir.resolve("locks.db");
    }

    /** A name no other test run uses. */
    public static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().replace("-", "");
    }

    /** The repository root (surefire passes it; else the parent of the working directory jvm/). */
    public static Path repoRoot() {
        String root = System.getenv("FENCELOCK_REPO_ROOT");
        return (root != null ? Path.of(root) : Path.of("..")).toAbsolutePath().normalize();
    }
}
