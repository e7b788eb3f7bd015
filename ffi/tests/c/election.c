/* What the C ABI adds to elections beyond the JSON scenarios (tests/conformance/election_*.json, which
 * conformance.c runs), on the backend URL argv[1]: NULL and bad arguments, the leader's value buffer, the observer's
 * callback on a closed client, and an observer closed from inside its own callback. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static void unique(char *buf, size_t len, const char *base) {
    snprintf(buf, len, "c-%s-%d-%lld", base, (int)getpid(), now_ms());
}

/* An observer's reports: a count, the last status, and whether the callback closes its own observer. */
struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int reports;
    fencelock_status last;
    bool close_itself;
    fencelock_observer *observer;
};

static void on_change(void *data, bool has_leader, const uint8_t *value, size_t len, uint64_t term,
                      fencelock_status status) {
    (void)has_leader, (void)value, (void)len, (void)term;
    struct seen *s = data;
    pthread_mutex_lock(&s->mu);
    s->reports++;
    s->last = status;
    if (s->close_itself && s->observer) {
        fencelock_observer_close(s->observer); /* from its own callback: this call is the last */
        s->observer = NULL;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits up to 5 s for at least `n` reports; returns the count. */
static int wait_reports(struct seen *s, int n) {
    struct timespec d;
    clock_gettime(CLOCK_REALTIME, &d);
    d.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (s->reports < n && rc == 0) rc = pthread_cond_timedwait(&s->cv, &s->mu, &d);
    int got = s->reports;
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void election(const char *url) {
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &c), FENCELOCK_OK);
    if (!c) return;
    fencelock_capability caps;
    CHECK_STATUS(fencelock_client_capability(c, &caps), FENCELOCK_OK);
    CHECK(caps.election);
    char name[128];
    unique(name, sizeof name, "election");

    /* Bad arguments: a clear status, the out-parameter cleared. */
    fencelock_lease *bad = (fencelock_lease *)1;
    CHECK_STATUS(fencelock_campaign(c, name, NULL, 3, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    CHECK_ERROR_MENTIONS("value_len");
    CHECK_STATUS(fencelock_campaign(NULL, name, NULL, 0, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("client");
    CHECK_STATUS(fencelock_try_campaign(c, NULL, NULL, 0, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("name");
    CHECK_STATUS(fencelock_campaign(c, "\xff", NULL, 0, NULL, &bad), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("UTF-8");
    CHECK_STATUS(fencelock_campaign(c, name, NULL, 0, NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    bool found = true;
    uint64_t term = 7;
    CHECK_STATUS(fencelock_leader(c, name, NULL, &term, NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out_found");
    uint8_t *value = (uint8_t *)1;
    CHECK_STATUS(fencelock_leader(c, name, &found, &term, &value, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out_len");
    fencelock_observer *obs = (fencelock_observer *)1;
    CHECK_STATUS(fencelock_observe(c, name, NULL, NULL, &obs), FENCELOCK_INVALID_ARGUMENT);
    CHECK(obs == NULL);
    CHECK_ERROR_MENTIONS("cb");
    CHECK_STATUS(fencelock_observe(c, "", on_change, NULL, &obs), FENCELOCK_INVALID_ARGUMENT); /* no callback */
    CHECK(obs == NULL);
    fencelock_observer_close(NULL);
    CHECK_STATUS(fencelock_proclaim(c, name, NULL, NULL, 0), FENCELOCK_INVALID_ARGUMENT);

    /* A leadership is a lease whose token is the term; the value comes back as a buffer, or not at all. */
    fencelock_lease *lead = NULL;
    CHECK_STATUS(fencelock_campaign(c, name, (const uint8_t *)"one", 3, NULL, &lead), FENCELOCK_OK);
    fencelock_lease *other = (fencelock_lease *)1;
    fencelock_lock_options o = fencelock_lock_options_default();
    o.owner = "another"; /* the default owner, this thread, would hold it again */
    CHECK_STATUS(fencelock_try_campaign(c, name, NULL, 0, &o, &other), FENCELOCK_BUSY);
    CHECK(other == NULL);
    size_t len = 0;
    CHECK_STATUS(fencelock_leader(c, name, &found, &term, &value, &len), FENCELOCK_OK);
    CHECK(found && term == fencelock_lease_fence(lead) && len == 3 && value && memcmp(value, "one", 3) == 0);
    fencelock_bytes_free(value, len);
    CHECK_STATUS(fencelock_leader(c, name, &found, &term, NULL, NULL), FENCELOCK_OK);
    CHECK(found && term == fencelock_lease_fence(lead));
    /* A leadership of another election is not this one's. */
    char elsewhere[160];
    snprintf(elsewhere, sizeof elsewhere, "%s-other", name);
    CHECK_STATUS(fencelock_proclaim(c, elsewhere, lead, NULL, 0), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_proclaim(c, name, lead, NULL, 0), FENCELOCK_OK);
    CHECK_STATUS(fencelock_leader(c, name, &found, &term, &value, &len), FENCELOCK_OK);
    CHECK(found && len == 0 && value == NULL);

    /* An observer that closes itself from its callback gets exactly one report. */
    struct seen once = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, FENCELOCK_OK, true, NULL};
    pthread_mutex_lock(&once.mu); /* the first report waits until the handle is stored */
    fencelock_status s = fencelock_observe(c, name, on_change, &once, &once.observer);
    CHECK_STATUS(s, FENCELOCK_OK);
    pthread_mutex_unlock(&once.mu);
    CHECK(wait_reports(&once, 1) == 1);

    /* Closing the client ends an observation with one FENCELOCK_CLOSED report. */
    fencelock_client *d = NULL;
    CHECK_STATUS(fencelock_client_connect(url, &d), FENCELOCK_OK);
    struct seen watch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, FENCELOCK_OK, false, NULL};
    CHECK_STATUS(fencelock_observe(d, name, on_change, &watch, &watch.observer), FENCELOCK_OK);
    CHECK(wait_reports(&watch, 1) >= 1);
    CHECK_STATUS(fencelock_lease_release(lead), FENCELOCK_OK); /* resigns */
    CHECK(wait_reports(&watch, 2) >= 2);
    CHECK_STATUS(fencelock_client_close(d), FENCELOCK_OK);
    int before = watch.reports;
    CHECK(wait_reports(&watch, before + 1) == before + 1);
    pthread_mutex_lock(&watch.mu);
    CHECK(watch.last == FENCELOCK_CLOSED);
    pthread_mutex_unlock(&watch.mu);
    fencelock_observer_close(watch.observer);
    int after = watch.reports;
    CHECK(after == before + 1); /* nothing after close */
    CHECK(once.reports == 1);
    fencelock_client_free(d);
    fencelock_lease_free(lead);
    fencelock_client_free(c);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL\n", argv[0]);
        return 2;
    }
    election(argv[1]);
    return report("election");
}
