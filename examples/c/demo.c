/* fencelock from C: take a lock, guard a write with its fencing token, release.
 * Usage: demo [URL]   (no URL: FENCELOCK_URL, else sqlite:fencelock.db in the working directory) */
#include <stdio.h>

#include "fencelock.h"

static int fail(const char *what, fencelock_status s) {
    fprintf(stderr, "%s failed (status %d): %s\n", what, (int)s, fencelock_last_error());
    return 1;
}

int main(int argc, char **argv) {
    fencelock_client *client = NULL;
    fencelock_status s = fencelock_client_connect(argc > 1 ? argv[1] : NULL, &client);
    if (s != FENCELOCK_OK) return fail("connect", s);

    fencelock_lock_options opts = fencelock_lock_options_default();
    opts.ttl_ms = 10000;
    opts.timeout_ms = 5000;
    fencelock_lease *lease = NULL;
    if ((s = fencelock_lock(client, "orders", &opts, &lease)) != FENCELOCK_OK) {
        fencelock_client_free(client);
        return fail("lock", s);
    }
    uint64_t token = fencelock_lease_fence(lease);
    printf("holding \"orders\" with fence token %llu\n", (unsigned long long)token);

    /* The resource side rejects writes that carry a token older than one it has seen. */
    fencelock_fence *fence = NULL;
    uint64_t stored = 0;
    uint8_t *value = NULL;
    size_t len = 0;
    if ((s = fencelock_client_fence(client, "orders-table", &fence)) != FENCELOCK_OK ||
        (s = fencelock_fence_write(fence, token, (const uint8_t *)"shipped", 7)) != FENCELOCK_OK ||
        (s = fencelock_fence_read(fence, &stored, &value, &len)) != FENCELOCK_OK) {
        fail("fenced write", s);
    } else {
        printf("orders-table = \"%.*s\" at token %llu\n", (int)len, (const char *)value, (unsigned long long)stored);
    }
    fencelock_bytes_free(value, len);
    fencelock_fence_free(fence);

    int rc = 0;
    if ((s = fencelock_lease_release(lease)) != FENCELOCK_OK) rc = fail("release", s);
    fencelock_lease_free(lease);
    fencelock_client_free(client);
    if (rc == 0) printf("released\n");
    return rc;
}
