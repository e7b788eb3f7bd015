/* Metrics through the C ABI on the backend URL given as argv[1]: a timeout and a busy try_lock are counted,
 * force_release + renew is a loss `taken`, a stale fenced write is `refused`, the struct's histograms agree with
 * core's buckets, the Prometheus text and JSON carry the same figures, names become labels only when opted in,
 * metrics off records nothing, and bad input is an error naming it. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static const char *URL;
static char SCHEME[32]; /* the `backend` label: the URL's scheme */

/* A lock name unique to this process and call, so reruns against a persistent backend start clean. */
static void unique(char *buf, size_t len, const char *base) {
    static int n;
    snprintf(buf, len, "c-metrics-%s-%d-%lld-%d", base, (int)getpid(), now_ms(), n++);
}

static fencelock_metrics metrics_of(const fencelock_client *c) {
    fencelock_metrics m;
    CHECK_STATUS(fencelock_client_metrics(c, &m), FENCELOCK_OK);
    return m;
}

/* A copy of the client's Prometheus text or JSON, or NULL. */
static char *text_of(const fencelock_client *c, bool json) {
    char *s = NULL;
    if (json) {
        CHECK_STATUS(fencelock_client_metrics_json(c, &s), FENCELOCK_OK);
    } else {
        CHECK_STATUS(fencelock_client_metrics_text(c, &s), FENCELOCK_OK);
    }
    return s;
}

static void check_text_contains(const fencelock_client *c, bool json, const char *want) {
    char *s = text_of(c, json);
    CHECK(s != NULL && strstr(s, want) != NULL);
    if (s && !strstr(s, want)) fprintf(stderr, "  wanted %s in:\n%s\n", want, s);
    fencelock_string_free(s);
}

static void bucket_bounds(void) {
    CHECK(fencelock_metrics_bucket_le(0) == 0.0001);
    CHECK(fencelock_metrics_bucket_le(FENCELOCK_METRICS_BUCKETS - 2) == 300.0);
    CHECK(isinf(fencelock_metrics_bucket_le(FENCELOCK_METRICS_BUCKETS - 1)));
    CHECK(isnan(fencelock_metrics_bucket_le(FENCELOCK_METRICS_BUCKETS)));
}

/* Cumulative buckets ending at `count`, and nothing at or below `floor_s` seconds. */
static void check_histogram(const fencelock_histogram *h, double floor_s) {
    CHECK(h->buckets[FENCELOCK_METRICS_BUCKETS - 1] == h->count);
    for (size_t i = 1; i < FENCELOCK_METRICS_BUCKETS; i++) CHECK(h->buckets[i - 1] <= h->buckets[i]);
    for (size_t i = 0; i < FENCELOCK_METRICS_BUCKETS && fencelock_metrics_bucket_le(i) < floor_s; i++)
        CHECK(h->buckets[i] == 0);
}

static void scripted_workload(void) {
    char name[160], hot[160];
    unique(name, sizeof name, "m");
    unique(hot, sizeof hot, "hot");
    const char *only[] = {hot, NULL};
    fencelock_client_options named = fencelock_client_options_default();
    CHECK(named.metrics && !named.metrics_all_names && named.metrics_names == NULL);
    named.metrics_names = only;
    fencelock_client *a = NULL, *b = NULL;
    CHECK_STATUS(fencelock_client_connect_with(URL, &named, &a), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_connect(URL, &b), FENCELOCK_OK);
    if (!a || !b) goto out;

    fencelock_metrics m = metrics_of(a);
    CHECK(m.enabled && m.acquire_wait.acquired.count == 0 && m.active_leases == 0);

    /* acquired on a; busy and timeout on b while a holds it. */
    fencelock_lease *la = NULL, *lb = NULL;
    CHECK_STATUS(fencelock_lock(a, name, NULL, &la), FENCELOCK_OK);
    m = metrics_of(a);
    CHECK(m.acquire_wait.acquired.count == 1 && m.active_leases == 1);
    CHECK(m.backend_ops.acquire.ok.count >= 1);
    CHECK_STATUS(fencelock_try_lock(b, name, NULL, &lb), FENCELOCK_BUSY);
    fencelock_lock_options o = fencelock_lock_options_default();
    o.timeout_ms = 150;
    CHECK_STATUS(fencelock_lock(b, name, &o, &lb), FENCELOCK_TIMEOUT);
    m = metrics_of(b);
    CHECK(m.acquire_wait.busy.count == 1);
    CHECK(m.acquire_wait.timeout.count == 1);
    CHECK(m.acquire_wait.timeout.sum_seconds >= 0.15);
    check_histogram(&m.acquire_wait.timeout, 0.15);
    CHECK(m.acquire_wait.acquired.count == 0 && m.local_queue_depth == 0);
    CHECK_STATUS(fencelock_lease_release(la), FENCELOCK_OK);
    fencelock_lease_free(la);
    m = metrics_of(a);
    CHECK(m.active_leases == 0 && m.hold_time.count == 1 && m.backend_ops.release.ok.count == 1);
    check_histogram(&m.hold_time, 0);

    /* taken: b force-releases a's lease, a's next renewal finds the record gone. */
    o = fencelock_lock_options_default();
    o.watchdog = false;
    o.ttl_ms = 5000;
    CHECK_STATUS(fencelock_lock(a, name, &o, &la), FENCELOCK_OK);
    bool deleted = false;
    CHECK_STATUS(fencelock_client_force_release(b, name, &deleted), FENCELOCK_OK);
    CHECK(deleted);
    CHECK_STATUS(fencelock_lease_renew(la, 0), FENCELOCK_LOCK_LOST);
    m = metrics_of(a);
    CHECK(m.lost.taken == 1 && m.lost.expired == 0 && m.lost.unreachable == 0);
    CHECK(m.renewals.failed == 1 && m.renewals.ok == 0 && m.active_leases == 0);
    CHECK(metrics_of(b).backend_ops.force_release.ok.count == 1);
    uint64_t token = fencelock_lease_fence(la);
    fencelock_lease_free(la);

    /* A stale fenced write is refused, and still the backend's answer (ok round trip). */
    char resource[160];
    unique(resource, sizeof resource, "res");
    fencelock_fence *f = NULL;
    CHECK_STATUS(fencelock_client_fence(a, resource, &f), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_write(f, token + 1, (const uint8_t *)"new", 3), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_write(f, token, (const uint8_t *)"stale", 5), FENCELOCK_FENCED);
    fencelock_fence_free(f);
    m = metrics_of(a);
    CHECK(m.fence_writes.ok == 1 && m.fence_writes.refused == 1 && m.fence_writes.error == 0);
    CHECK(m.backend_ops.fence_write.ok.count == 2 && m.backend_ops.fence_write.error.count == 0);

    /* Only the opted-in name gets series; the text and JSON carry the struct's figures. */
    CHECK_STATUS(fencelock_lock(a, hot, NULL, &la), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(la), FENCELOCK_OK);
    fencelock_lease_free(la);
    char want[400];
    snprintf(want, sizeof want, "fencelock_lost_total{backend=\"%s\",reason=\"taken\"} 1\n", SCHEME);
    check_text_contains(a, false, want);
    snprintf(want, sizeof want, "fencelock_fence_writes_total{backend=\"%s\",outcome=\"refused\"} 1\n", SCHEME);
    check_text_contains(a, false, want);
    snprintf(want, sizeof want, "fencelock_lock_hold_seconds_count{backend=\"%s\",lock=\"%s\"} 1\n", SCHEME, hot);
    check_text_contains(a, false, want);
    snprintf(want, sizeof want, "\"names\":{\"%s\":", hot);
    check_text_contains(a, true, want);
    char *text = text_of(a, false);
    CHECK(text != NULL && strstr(text, name) == NULL); /* not opted in: never a label */
    fencelock_string_free(text);
    snprintf(want, sizeof want, "fencelock_acquire_wait_seconds_count{backend=\"%s\",outcome=\"timeout\"} 1\n", SCHEME);
    check_text_contains(b, false, want);
    check_text_contains(b, true, "\"names\":{}");

out:
    fencelock_client_free(a);
    fencelock_client_free(b);
}

static void all_names(void) {
    char name[160];
    unique(name, sizeof name, "any");
    fencelock_client_options opts = fencelock_client_options_default();
    opts.metrics_all_names = true;
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect_with(URL, &opts, &c), FENCELOCK_OK);
    if (!c) return;
    fencelock_lease *l = NULL;
    CHECK_STATUS(fencelock_try_lock(c, name, NULL, &l), FENCELOCK_OK);
    char want[400];
    snprintf(want, sizeof want, "fencelock_lock_active_leases{backend=\"%s\",lock=\"%s\"} 1\n", SCHEME, name);
    check_text_contains(c, false, want);
    fencelock_lease_free(l);
    fencelock_client_free(c);
}

static void metrics_off(void) {
    char name[160];
    unique(name, sizeof name, "off");
    const char *only[] = {name, NULL};
    fencelock_client_options opts = fencelock_client_options_default();
    opts.metrics = false;
    opts.metrics_names = only; /* ignored when off */
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect_with(URL, &opts, &c), FENCELOCK_OK);
    if (!c) return;
    fencelock_lease *l = NULL;
    CHECK_STATUS(fencelock_lock(c, name, NULL, &l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_renew(l, 0), FENCELOCK_OK);
    fencelock_fence *f = NULL;
    CHECK_STATUS(fencelock_client_fence(c, name, &f), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_write(f, fencelock_lease_fence(l), NULL, 0), FENCELOCK_OK);
    fencelock_fence_free(f);
    fencelock_metrics m = metrics_of(c); /* while it is held: not even the gauge moved */
    CHECK(!m.enabled && m.active_leases == 0);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_OK);
    fencelock_lease_free(l);
    m = metrics_of(c);
    CHECK(!m.enabled);
    CHECK(m.acquire_wait.acquired.count == 0 && m.acquire_wait.acquired.buckets[FENCELOCK_METRICS_BUCKETS - 1] == 0);
    CHECK(m.hold_time.count == 0 && m.renewals.ok == 0 && m.fence_writes.ok == 0);
    CHECK(m.backend_ops.acquire.ok.count == 0 && m.backend_ops.release.ok.count == 0);
    check_text_contains(c, true, "\"enabled\":false");
    check_text_contains(c, true, "\"names\":{}");
    fencelock_client_free(c);
}

static void bad_inputs(void) {
    fencelock_metrics m;
    m.active_leases = 7;
    CHECK_STATUS(fencelock_client_metrics(NULL, &m), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("client is NULL");
    CHECK(m.active_leases == 0); /* zeroed on failure */
    char *s = (char *)1;
    CHECK_STATUS(fencelock_client_metrics_text(NULL, &s), FENCELOCK_INVALID_ARGUMENT);
    CHECK(s == NULL);
    CHECK_STATUS(fencelock_client_metrics_json(NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out is NULL");
    fencelock_string_free(NULL);

    fencelock_client *c = (fencelock_client *)1;
    const char *only[] = {"x", NULL};
    fencelock_client_options opts = fencelock_client_options_default();
    opts.metrics_all_names = true;
    opts.metrics_names = only;
    CHECK_STATUS(fencelock_client_connect_with(URL, &opts, &c), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("metrics_all_names and options.metrics_names are both set");
    CHECK(c == NULL);
    const char *bad[] = {"ok", "\xff", NULL};
    opts.metrics_all_names = false;
    opts.metrics_names = bad;
    CHECK_STATUS(fencelock_client_connect_with(URL, &opts, &c), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("options.metrics_names[1] is not valid UTF-8");

    CHECK_STATUS(fencelock_client_connect(URL, &c), FENCELOCK_OK);
    bool deleted = true;
    CHECK_STATUS(fencelock_client_metrics(c, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_force_release(c, NULL, &deleted), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("name is NULL");
    CHECK(!deleted);
    CHECK_STATUS(fencelock_client_force_release(c, "", &deleted), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_force_release(c, "x", NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out_deleted is NULL");
    fencelock_client_free(c);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL\n", argv[0]);
        return 2;
    }
    URL = argv[1];
    snprintf(SCHEME, sizeof SCHEME, "%.*s", (int)strcspn(URL, ":?"), URL);
    bucket_bounds();
    scripted_workload();
    all_names();
    metrics_off();
    bad_inputs();
    char suite[256];
    snprintf(suite, sizeof suite, "metrics %s", URL);
    return report(suite);
}
