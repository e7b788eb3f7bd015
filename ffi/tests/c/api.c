/* What the C ABI adds beyond the JSON scenarios (conformance.c runs those), on the backend URL argv[1]: the default
 * options, out-parameters cleared on failure, the last error naming the problem, the calling thread as the default
 * owner, a fence never written, the lost callback and its reason, NUL-terminated strings that are not UTF-8, the
 * wait order option, the connect timeout against a listener that never answers, and the introspection calls. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

static char name_buf[128];

/* A lock name unique to this run, so reruns against a persistent backend start clean. */
static const char *unique(const char *base) {
    snprintf(name_buf, sizeof name_buf, "c-%s-%d-%lld", base, (int)getpid(), now_ms());
    return name_buf;
}

static void c_api_basics(const char *url) {
    fencelock_client *a = NULL, *b = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &a), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_connect(url, &b), FENCELOCK_OK);
    if (!a || !b) goto out;
    char name[128];
    snprintf(name, sizeof name, "%s", unique("basics"));

    fencelock_lease *la = NULL, *lb = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_lock(a, name, NULL, &la), FENCELOCK_OK);
    CHECK(la != NULL);
    uint64_t t1 = fencelock_lease_fence(la);
    CHECK(t1 > 0);
    CHECK(fencelock_lease_remaining_ms(la) > 20000 && fencelock_lease_remaining_ms(la) <= 30000);
    CHECK(!fencelock_lease_is_lost(la) && !fencelock_lease_is_lost(NULL) && fencelock_lease_remaining_ms(NULL) == 0);

    /* Failures clear the out-parameter and name the lock or the kind. */
    CHECK_STATUS(fencelock_try_lock(b, name, NULL, &lb), FENCELOCK_BUSY);
    CHECK(lb == NULL);
    CHECK_ERROR_MENTIONS(name);
    fencelock_lock_options o = fencelock_lock_options_default();
    CHECK(o.timeout_ms == FENCELOCK_WAIT_FOREVER && o.ttl_ms == 30000 && o.watchdog && o.owner == NULL && o.fair == 0);
    o.timeout_ms = 300;
    lb = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_lock(b, name, &o, &lb), FENCELOCK_TIMEOUT);
    CHECK(lb == NULL);
    CHECK_ERROR_MENTIONS("TIMEOUT");

    /* Inspect: the holder, as a string of its own, or NULL when not wanted; the local table; the capability. */
    bool held = false;
    char *holder = NULL;
    CHECK_STATUS(fencelock_client_inspect(b, name, &held, &holder), FENCELOCK_OK);
    CHECK(held && holder != NULL);
    fencelock_string_free(holder);
    CHECK_STATUS(fencelock_client_inspect(b, name, &held, NULL), FENCELOCK_OK);
    CHECK(held);
    CHECK_STATUS(fencelock_client_inspect(b, name, NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out_held");
    size_t entries = 99;
    CHECK_STATUS(fencelock_client_local_entries(a, &entries), FENCELOCK_OK);
    CHECK(entries == 1);
    fencelock_capability caps;
    CHECK_STATUS(fencelock_client_capability(a, &caps), FENCELOCK_OK);
    CHECK(caps.fencing);
    CHECK_STATUS(fencelock_client_capability(NULL, &caps), FENCELOCK_INVALID_ARGUMENT);
    CHECK(!caps.fencing && !caps.rw_lock);

    /* Reentrancy: the same thread (the default owner) gets the same grant again. */
    fencelock_lease *again = NULL;
    CHECK_STATUS(fencelock_lock(a, name, NULL, &again), FENCELOCK_OK);
    CHECK(fencelock_lease_fence(again) == t1);
    CHECK_STATUS(fencelock_lease_release(again), FENCELOCK_OK);
    fencelock_lease_free(again);
    CHECK_STATUS(fencelock_try_lock(b, name, NULL, &lb), FENCELOCK_BUSY); /* still one hold left */

    bool valid = false;
    CHECK_STATUS(fencelock_lease_renew(la, 0), FENCELOCK_OK); /* 0 keeps the TTL */
    CHECK_STATUS(fencelock_lease_is_valid(la, &valid), FENCELOCK_OK);
    CHECK(valid);
    CHECK_STATUS(fencelock_lease_release(la), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_is_valid(la, &valid), FENCELOCK_OK);
    CHECK(!valid);
    CHECK(fencelock_lease_fence(la) == t1); /* readable after release */
    CHECK_STATUS(fencelock_client_local_entries(a, &entries), FENCELOCK_OK);
    CHECK(entries == 0);

    /* A fence never written reads as token 0 and no buffer; an empty value is written with NULL. */
    fencelock_fence *f = NULL;
    char resource[160];
    snprintf(resource, sizeof resource, "%s-res", name);
    CHECK_STATUS(fencelock_client_fence(a, resource, &f), FENCELOCK_OK);
    uint64_t tok = 99;
    uint8_t *val = (uint8_t *)1;
    size_t len = 99;
    CHECK_STATUS(fencelock_fence_read(f, &tok, &val, &len), FENCELOCK_OK);
    CHECK(tok == 0 && val == NULL && len == 0);
    CHECK_STATUS(fencelock_fence_write(f, t1, NULL, 0), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_write(f, 0, (const uint8_t *)"stale", 5), FENCELOCK_FENCED);
    CHECK_ERROR_MENTIONS("FENCED");
    fencelock_fence_free(f);
    fencelock_lease_free(la);
out:
    fencelock_client_free(a);
    fencelock_client_free(b);
}

static atomic_int lost_calls;
static atomic_int release_in_callback = -1;

static void on_lost(void *user_data) {
    atomic_fetch_add(&lost_calls, 1);
    /* Blocking calls are refused on the runtime thread, with an error rather than a deadlock or panic. */
    atomic_store(&release_in_callback, (int)fencelock_lease_release((const fencelock_lease *)user_data));
}

static void lost_callback(const char *url) {
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &c), FENCELOCK_OK);
    if (!c) return;
    fencelock_lock_options o = fencelock_lock_options_default();
    o.ttl_ms = 200;
    o.watchdog = false; /* nobody renews: the lease is lost when its validity passes */
    fencelock_lease *l = NULL;
    CHECK_STATUS(fencelock_lock(c, unique("lost"), &o, &l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_on_lost(l, on_lost, l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_on_lost(l, NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    for (int i = 0; i < 300 && atomic_load(&lost_calls) == 0; i++) usleep(10000);
    usleep(50000);
    CHECK(atomic_load(&lost_calls) == 1);
    CHECK(atomic_load(&release_in_callback) == FENCELOCK_INTERNAL);
    bool valid = true;
    CHECK_STATUS(fencelock_lease_is_valid(l, &valid), FENCELOCK_OK);
    CHECK(!valid);
    CHECK_STATUS(fencelock_lease_renew(l, 0), FENCELOCK_LOCK_LOST);
    /* Core's reason, whole or truncated on a boundary, and the same reason in the LOCK_LOST error. */
    char reason[256] = "", tiny[4] = "xyz";
    size_t len = 0;
    CHECK_STATUS(fencelock_lease_lost_reason(l, reason, sizeof reason, &len), FENCELOCK_OK);
    CHECK(len > 0 && strlen(reason) == len);
    CHECK_ERROR_MENTIONS(reason);
    CHECK_STATUS(fencelock_lease_lost_reason(l, tiny, sizeof tiny, &len), FENCELOCK_OK);
    CHECK(strlen(tiny) <= 3 && strncmp(tiny, reason, strlen(tiny)) == 0);
    /* Lost while held: the release says so (the refused release in the callback did not count). */
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_LOCK_LOST);
    fencelock_lease_free(l);
    fencelock_client_free(c);
}

static void bad_inputs(const char *url) {
    fencelock_client *c = (fencelock_client *)1;
    CHECK_STATUS(fencelock_client_connect("nonsense", &c), FENCELOCK_INVALID_ARGUMENT);
    CHECK(c == NULL);
    CHECK_ERROR_MENTIONS("scheme");
    CHECK_STATUS(fencelock_client_connect("\xff\xfe", &c), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("url is not valid UTF-8");

    CHECK_STATUS(fencelock_client_connect(url, &c), FENCELOCK_OK);
    if (!c) return;
    fencelock_lease *l = NULL;
    CHECK_STATUS(fencelock_lock(c, "", NULL, &l), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("name is empty");
    CHECK_STATUS(fencelock_try_lock(c, "bad\xc3", NULL, &l), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("name is not valid UTF-8");
    fencelock_lock_options o;
    o = fencelock_lock_options_default();
    o.owner = "\x80";
    CHECK_STATUS(fencelock_lock(c, "ok-name", &o, &l), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("owner");
    CHECK(l == NULL);

    fencelock_fence *f = NULL;
    CHECK_STATUS(fencelock_client_fence(c, "", &f), FENCELOCK_OK); /* checked on use */
    CHECK_STATUS(fencelock_fence_write(f, 1, (const uint8_t *)"x", 1), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("empty");
    fencelock_fence_free(f);
    CHECK_STATUS(fencelock_client_fence(c, "r", &f), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_write(f, 1, NULL, 4), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("value is NULL but len is 4");
    fencelock_fence_free(f);

    /* Reading the last error does not clear it, and a successful call does not either. */
    const char *msg = fencelock_last_error();
    CHECK(strstr(msg, "len is 4") != NULL);
    CHECK(strstr(fencelock_last_error(), "len is 4") != NULL);
    CHECK_STATUS(fencelock_client_fence(c, "r", &f), FENCELOCK_OK);
    CHECK(strstr(fencelock_last_error(), "len is 4") != NULL);
    fencelock_fence_free(f);
    fencelock_client_free(c);
}

static void connect_timeout(void) {
    /* A listener that never answers: the kernel completes the TCP handshake, the etcd handshake never comes. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(fd, 8) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&addr, &alen) == 0);
    char url[64];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", ntohs(addr.sin_port));
    fencelock_client_options o = fencelock_client_options_default();
    CHECK(o.connect_timeout_ms == 5000 && o.request_timeout_ms == 5000);
    o.connect_timeout_ms = 300;
    fencelock_client *c = NULL;
    long long t0 = now_ms();
    CHECK_STATUS(fencelock_client_connect_with(url, &o, &c), FENCELOCK_UNAVAILABLE);
    CHECK(c == NULL);
    CHECK_ERROR_MENTIONS("fencelock_client_connect_with");
    CHECK(now_ms() - t0 < 2500); /* the default would wait 5 s */
    close(fd);
}

/* The wait order reaches the backend: the memory backend's waiters race, so arrival order is refused there and
 * nothing is left held; SQLite and Redis serve both orders; a zeroed field keeps the backend's default everywhere. */
static void fair_option(const char *url) {
    fencelock_client *c = NULL;
    fencelock_lease *l = NULL;
    fencelock_lock_options o = fencelock_lock_options_default();
    o.timeout_ms = 2000;
    o.fair = 1;
    CHECK_STATUS(fencelock_client_connect("memory://fair-option", &c), FENCELOCK_OK);
    if (c) {
        CHECK_STATUS(fencelock_lock(c, "fair", &o, &l), FENCELOCK_UNSUPPORTED);
        CHECK_ERROR_MENTIONS("arrival order");
        CHECK_STATUS(fencelock_try_lock(c, "fair", &o, &l), FENCELOCK_UNSUPPORTED);
        CHECK(l == NULL);
        fencelock_client_free(c);
        c = NULL;
    }
    CHECK_STATUS(fencelock_client_connect(url, &c), FENCELOCK_OK);
    if (!c) return;
    if (strncmp(url, "sqlite:", 7) == 0 || strncmp(url, "redis://", 8) == 0) {
        CHECK_STATUS(fencelock_lock(c, "fair", &o, &l), FENCELOCK_OK);
        CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_OK);
        fencelock_lease_free(l);
    }
    o.fair = 0;
    CHECK_STATUS(fencelock_lock(c, "fair", &o, &l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_OK);
    fencelock_lease_free(l);
    fencelock_client_free(c);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL\n", argv[0]);
        return 2;
    }
    c_api_basics(argv[1]);
    lost_callback(argv[1]);
    bad_inputs(argv[1]);
    fair_option(argv[1]);
    connect_timeout();
    char suite[256];
    snprintf(suite, sizeof suite, "api %s", argv[1]);
    return report(suite);
}
