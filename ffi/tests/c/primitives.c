/* What the C ABI adds to read-write locks and semaphores beyond the JSON scenarios (tests/conformance/rw_*.json and
 * semaphore_*.json, which conformance.c runs), on the backend URL argv[1]: a mode that is neither side, the slot of a
 * lease of another kind and of NULL, a NULL out-parameter, and the capability flags agreeing with what the backend
 * does. With argv[2] = "require" the backend must have both kinds. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static void unique(char *buf, size_t len, const char *base) {
    snprintf(buf, len, "c-%s-%d-%lld", base, (int)getpid(), now_ms());
}

static void primitives(const char *url, bool require_all) {
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &c), FENCELOCK_OK);
    if (!c) return;
    fencelock_capability caps;
    CHECK_STATUS(fencelock_client_capability(c, &caps), FENCELOCK_OK);
    CHECK(!require_all || (caps.rw_lock && caps.semaphore));
    char name[128];
    unique(name, sizeof name, "rw");

    /* The flag says what the backend does: a read hold, or UNSUPPORTED naming the kind. */
    fencelock_lease *r = NULL;
    fencelock_status s = fencelock_try_rw_lock(c, name, FENCELOCK_READ, NULL, &r);
    CHECK_STATUS(s, caps.rw_lock ? FENCELOCK_OK : FENCELOCK_UNSUPPORTED);
    if (!caps.rw_lock) CHECK_ERROR_MENTIONS("read-write locks");
    if (r) {
        CHECK(fencelock_lease_slot(r) == -1); /* a read hold has no slot */
        CHECK_STATUS(fencelock_lease_release(r), FENCELOCK_OK);
        fencelock_lease_free(r);
    }
    /* A mode that is neither side, whatever the backend. */
    fencelock_lease *bad = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_rw_lock(c, name, 7, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    CHECK_ERROR_MENTIONS("FENCELOCK_READ");

    unique(name, sizeof name, "sem");
    uint32_t count = 99;
    s = fencelock_semaphore_available(c, name, 2, &count);
    CHECK_STATUS(s, caps.semaphore ? FENCELOCK_OK : FENCELOCK_UNSUPPORTED);
    if (!caps.semaphore) CHECK_ERROR_MENTIONS("semaphores");
    CHECK(count == (caps.semaphore ? 2u : 0u));
    CHECK_STATUS(fencelock_semaphore_available(c, name, 2, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out_count");
    if (caps.semaphore) {
        bad = (fencelock_lease *)1;
        CHECK_STATUS(fencelock_semaphore_acquire(c, name, 0, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
        CHECK(bad == NULL);
        CHECK_ERROR_MENTIONS("not 0");
    }
    fencelock_client_free(c);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [require]\n", argv[0]);
        return 2;
    }
    CHECK(fencelock_lease_slot(NULL) == -1);
    primitives(argv[1], argc > 2 && strcmp(argv[2], "require") == 0);
    return report("primitives");
}
