/* Read-write locks and semaphores through the C ABI (DESIGN.md §4b), on the backend URL argv[1]: readers share, a
 * writer excludes, a waiting writer blocks new readers, downgrade works and upgrade is refused, epoch tokens, N
 * permits with the N+1-th busy, slots and their tokens, available(), bad mode and bad permits. A backend that lacks a
 * kind must say so (FENCELOCK_UNSUPPORTED naming it); with argv[2] = "require" it must have both. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static bool require_all;

static void unique(char *buf, size_t len, const char *base) {
    snprintf(buf, len, "c-%s-%d-%lld", base, (int)getpid(), now_ms());
}

/* Whether the backend has the kind `probe` tried; an UNSUPPORTED answer must name `what`. */
static bool supported(fencelock_status probe, const char *what) {
    if (probe != FENCELOCK_UNSUPPORTED) return true;
    CHECK_ERROR_MENTIONS(what);
    CHECK(!require_all);
    printf("  (this backend has no %s: skipped)\n", what);
    return false;
}

static fencelock_lock_options with_owner(const char *owner, uint64_t timeout_ms) {
    fencelock_lock_options o = fencelock_lock_options_default();
    o.owner = owner;
    o.timeout_ms = timeout_ms;
    return o;
}

struct writer {
    fencelock_client *client;
    const char *name;
    fencelock_status status;
    fencelock_lease *lease;
};

static void *write_in_background(void *arg) {
    struct writer *w = arg;
    fencelock_lock_options o = with_owner("writer", 10000);
    w->status = fencelock_rw_lock(w->client, w->name, FENCELOCK_WRITE, &o, &w->lease);
    return NULL;
}

static void rw_lock(const char *url) {
    fencelock_client *a = NULL, *b = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &a), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_connect(url, &b), FENCELOCK_OK);
    if (!a || !b) goto out;
    char name[128];
    unique(name, sizeof name, "rw");
    fencelock_lock_options r1 = with_owner("r1", 0), r2 = with_owner("r2", 0);

    fencelock_lease *ra = NULL, *rb = NULL, *w = (fencelock_lease *)1;
    if (!supported(fencelock_try_rw_lock(a, name, FENCELOCK_READ, &r1, &ra), "read-write locks")) goto out;
    CHECK(ra != NULL);
    /* Readers share, and readers of one epoch share its token. */
    CHECK_STATUS(fencelock_try_rw_lock(b, name, FENCELOCK_READ, &r2, &rb), FENCELOCK_OK);
    CHECK(ra && rb && fencelock_lease_fence(ra) == fencelock_lease_fence(rb));
    CHECK(fencelock_lease_slot(ra) == -1);
    /* A writer is kept out while they read. */
    fencelock_lock_options wo = with_owner("writer", 0);
    CHECK_STATUS(fencelock_try_rw_lock(b, name, FENCELOCK_WRITE, &wo, &w), FENCELOCK_BUSY);
    CHECK(w == NULL);
    /* Upgrade is refused, never a deadlock. */
    fencelock_lease *up = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_rw_lock(a, name, FENCELOCK_WRITE, &r1, &up), FENCELOCK_INVALID_ARGUMENT);
    CHECK(up == NULL);
    CHECK_ERROR_MENTIONS("upgrade");

    /* A waiting writer blocks new readers. */
    struct writer bw = {.client = b, .name = name};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, write_in_background, &bw) == 0);
    fencelock_status late = FENCELOCK_OK;
    fencelock_lock_options r3 = with_owner("r3", 0);
    long long until = now_ms() + 5000;
    fencelock_lease *r3l = NULL;
    while (now_ms() < until) { /* the writer's wait reaches the backend at some point: retry until it shows */
        late = fencelock_try_rw_lock(a, name, FENCELOCK_READ, &r3, &r3l);
        if (late == FENCELOCK_BUSY) break;
        if (r3l) {
            fencelock_lease_release(r3l);
            fencelock_lease_free(r3l);
            r3l = NULL;
        }
        usleep(20 * 1000);
    }
    CHECK_STATUS(late, FENCELOCK_BUSY);
    uint64_t read_epoch = fencelock_lease_fence(ra);
    CHECK_STATUS(fencelock_lease_release(ra), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(rb), FENCELOCK_OK);
    pthread_join(t, NULL);
    CHECK_STATUS(bw.status, FENCELOCK_OK);
    CHECK(bw.lease && fencelock_lease_fence(bw.lease) > read_epoch);

    /* Downgrade: the writer takes the read lock too and keeps it after letting the write hold go. */
    fencelock_lease *down = NULL;
    CHECK_STATUS(fencelock_try_rw_lock(b, name, FENCELOCK_READ, &wo, &down), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(bw.lease), FENCELOCK_OK);
    fencelock_lease *other = NULL;
    CHECK_STATUS(fencelock_try_rw_lock(a, name, FENCELOCK_WRITE, &r1, &other), FENCELOCK_BUSY);
    CHECK_STATUS(fencelock_lease_release(down), FENCELOCK_OK);
    CHECK_STATUS(fencelock_try_rw_lock(a, name, FENCELOCK_WRITE, &r1, &other), FENCELOCK_OK);
    CHECK(other && down && fencelock_lease_fence(other) > fencelock_lease_fence(down));
    CHECK_STATUS(fencelock_lease_release(other), FENCELOCK_OK);

    /* A mode that is neither side. */
    fencelock_lease *bad = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_rw_lock(a, name, 7, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    CHECK_ERROR_MENTIONS("FENCELOCK_READ");
    fencelock_lease_free(ra);
    fencelock_lease_free(rb);
    fencelock_lease_free(bw.lease);
    fencelock_lease_free(down);
    fencelock_lease_free(other);
out:
    fencelock_client_free(a);
    fencelock_client_free(b);
}

static void semaphore(const char *url) {
    fencelock_client *a = NULL, *b = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &a), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_connect(url, &b), FENCELOCK_OK);
    if (!a || !b) goto out;
    char name[128];
    unique(name, sizeof name, "sem");
    fencelock_lock_options o1 = with_owner("p1", 0), o2 = with_owner("p2", 0), o3 = with_owner("p3", 300);
    uint32_t count = 99;
    if (!supported(fencelock_semaphore_available(a, name, 2, &count), "semaphores")) goto out;
    CHECK(count == 2);

    fencelock_lease *p1 = NULL, *p2 = NULL, *p3 = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_semaphore_try_acquire(a, name, 2, &o1, &p1), FENCELOCK_OK);
    CHECK_STATUS(fencelock_semaphore_acquire(b, name, 2, &o2, &p2), FENCELOCK_OK);
    CHECK(p1 && p2);
    if (!p1 || !p2) goto out;
    int64_t s1 = fencelock_lease_slot(p1), s2 = fencelock_lease_slot(p2);
    CHECK(s1 >= 0 && s1 < 2 && s2 >= 0 && s2 < 2 && s1 != s2);
    CHECK_STATUS(fencelock_semaphore_available(b, name, 2, &count), FENCELOCK_OK);
    CHECK(count == 0);
    /* The third waits, then times out. */
    CHECK_STATUS(fencelock_semaphore_try_acquire(b, name, 2, &o3, &p3), FENCELOCK_BUSY);
    CHECK(p3 == NULL);
    CHECK_STATUS(fencelock_semaphore_acquire(b, name, 2, &o3, &p3), FENCELOCK_TIMEOUT);
    /* Another number of permits on the same name names both. */
    CHECK_STATUS(fencelock_semaphore_try_acquire(b, name, 3, &o3, &p3), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("3");
    CHECK_ERROR_MENTIONS("2 permits");
    /* A freed slot changes hands with a larger token of its own. */
    uint64_t t1 = fencelock_lease_fence(p1);
    CHECK_STATUS(fencelock_lease_release(p1), FENCELOCK_OK);
    CHECK_STATUS(fencelock_semaphore_acquire(b, name, 2, &o3, &p3), FENCELOCK_OK);
    CHECK(p3 && fencelock_lease_slot(p3) == s1 && fencelock_lease_fence(p3) > t1);
    CHECK_STATUS(fencelock_lease_release(p2), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(p3), FENCELOCK_OK);
    CHECK_STATUS(fencelock_semaphore_available(a, name, 2, &count), FENCELOCK_OK);
    CHECK(count == 2);

    /* Bad numbers of permits. */
    fencelock_lease *bad = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_semaphore_acquire(a, name, 0, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    CHECK_ERROR_MENTIONS("not 0");
    CHECK_STATUS(fencelock_semaphore_available(a, name, 0, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out_count");
    fencelock_lease_free(p1);
    fencelock_lease_free(p2);
    fencelock_lease_free(p3);
out:
    fencelock_client_free(a);
    fencelock_client_free(b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [require]\n", argv[0]);
        return 2;
    }
    require_all = argc > 2 && strcmp(argv[2], "require") == 0;
    CHECK(fencelock_lease_slot(NULL) == -1);
    rw_lock(argv[1]);
    semaphore(argv[1]);
    return report("primitives");
}
