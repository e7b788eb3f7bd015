/* The language-neutral scenarios of tests/conformance/ (every .json file) through the C ABI, read at run time with jansson and
 * interpreted step by step as core/tests/conformance.rs and the Python, Node and Java runners do (the step language:
 * tests/conformance/README.md). Prints this backend's row of the scenario × backend matrix and a
 * "conformance LABEL: N passed, M failed" line (scenarios); a scenario whose `requires` the backend lacks, or whose
 * `unless` it has, is skipped.
 * Usage: conformance DIR LABEL URL [UNREACHABLE]   (UNREACHABLE: an address of this backend where nothing answers) */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

#define MAX_ITEMS 64     /* clients, leases, names or tasks of one scenario */
#define MAX_WATCHES 4096 /* expect_lost steps of one process */
#define STEP_BOUND_MS 60000

enum kind { K_MUTEX, K_READ, K_WRITE, K_PERMIT, K_LEADER };
struct hold {
    enum kind kind;
    uint32_t permits;
};

/* An acquire started with `spawn`, on a thread of its own; `join` waits for it. Its last error is its thread's. */
struct task {
    char id[64];
    pthread_t thread;
    fencelock_client *client;
    char *name, *owner;
    struct hold hold;
    uint8_t *value; /* a campaign's */
    size_t value_len;
    fencelock_lock_options opts;
    bool once, joined, started;
    fencelock_status status;
    fencelock_lease *lease;
    char error[1024];
};

struct named {
    char id[64];
    void *ptr;
};

/* A leadership kept `as` a lease: the client and election name its proclaim takes. */
struct leadership {
    fencelock_client *client;
    char *name;
};

/* An observer's reports, queued by its callback (a runtime thread) for expect_observed. */
#define MAX_REPORTS 256
struct report {
    bool has_leader;
    uint64_t term;
    fencelock_status status;
    size_t len;
    uint8_t *value;
};
struct watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct report reports[MAX_REPORTS];
    int head, tail; /* taken, queued */
    bool overflow;
    fencelock_observer *observer;
};

/* The state of one scenario run. */
struct run {
    const char *url, *unreachable;
    char prefix[256];
    struct named clients[MAX_ITEMS], leases[MAX_ITEMS], leaderships[MAX_ITEMS], watches[MAX_ITEMS];
    int n_clients, n_leases, n_leaderships, n_watches;
    struct {
        char *name;
        struct hold hold;
    } names[MAX_ITEMS];
    int n_names;
    struct task *tasks[MAX_ITEMS];
    int n_tasks;
    /* The outcome of the current step's operation: its status and, on an error, the last error's text. */
    fencelock_status status;
    char message[1024];
    /* Why the step failed its expectations. */
    char fail[4096];
    /* When the previous and the current step began, in µs: `min_elapsed_ms` counts from the previous one. */
    long long previous_start, current_start;
};

/* Monotonic microseconds: elapsed times against a TTL less its drift (min_elapsed_ms) leave little slack for the
 * truncation of whole milliseconds. */
static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool failf(struct run *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->fail, sizeof r->fail, fmt, ap);
    va_end(ap);
    return false;
}

static const char *status_name(fencelock_status s) {
    static const char *names[] = {"OK",          "TIMEOUT",     "LOCK_LOST", "NOT_HELD",  "FENCED",   "UNAVAILABLE",
                                  "INVALID_ARGUMENT", "UNSUPPORTED", "CLOSED", "CANCELLED", "INTERNAL", "BUSY"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* ---- the JSON fields of a step ---- */

static const char *str(json_t *step, const char *key) { return json_string_value(json_object_get(step, key)); }
static bool has(json_t *step, const char *key) { return json_object_get(step, key) != NULL; }
static long long num(json_t *step, const char *key, long long dflt) {
    json_t *v = json_object_get(step, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}
static bool is(json_t *step, const char *key, const char *want) {
    const char *s = str(step, key);
    return s && strcmp(s, want) == 0;
}

/* ---- the run's tables ---- */

static void *find(struct named *items, int n, const char *id) {
    for (int i = 0; i < n && id; i++)
        if (strcmp(items[i].id, id) == 0) return items[i].ptr;
    return NULL;
}

/* Stores `ptr` under `id`; returns what it replaces (the caller frees it), or NULL. */
static void *put(struct named *items, int *n, const char *id, void *ptr) {
    for (int i = 0; i < *n; i++) {
        if (strcmp(items[i].id, id) == 0) {
            void *old = items[i].ptr;
            items[i].ptr = ptr;
            return old;
        }
    }
    if (*n == MAX_ITEMS) {
        fprintf(stderr, "more than %d items in one scenario\n", MAX_ITEMS);
        abort();
    }
    snprintf(items[*n].id, sizeof items[*n].id, "%s", id);
    items[(*n)++].ptr = ptr;
    return NULL;
}

static fencelock_client *client(struct run *r, json_t *step) {
    return find(r->clients, r->n_clients, str(step, "client"));
}
static fencelock_lease *lease(struct run *r, json_t *step, const char *key) {
    return find(r->leases, r->n_leases, str(step, key));
}

static void drop_lease(fencelock_lease *l) {
    if (!l) return;
    fencelock_lease_release(l); /* released or lost already: nothing to release */
    fencelock_lease_free(l);
}

/* The kind of hold a lock step asks for: `kind` read, write or permit (of `permits`), else a mutex. */
static struct hold hold_of(json_t *step) {
    struct hold h = {K_MUTEX, 0};
    const char *k = str(step, "kind");
    if (!k) return h;
    if (strcmp(k, "read") == 0) h.kind = K_READ;
    else if (strcmp(k, "write") == 0) h.kind = K_WRITE;
    else if (strcmp(k, "leader") == 0) h.kind = K_LEADER;
    else if (strcmp(k, "permit") == 0) {
        h.kind = K_PERMIT;
        h.permits = (uint32_t)num(step, "permits", 0);
    } else {
        fprintf(stderr, "unknown kind %s\n", k);
        abort();
    }
    return h;
}

/* The name a step's label maps to (`<prefix>/<label>`), recorded with its kind for the clean check; `name_len` is a
 * name of that many bytes; an empty label is passed as it is. The result is the caller's to free. */
static char *name_of(struct run *r, json_t *step) {
    if (has(step, "name_len")) {
        size_t n = (size_t)num(step, "name_len", 0);
        char *s = malloc(n + 1);
        memset(s, 'n', n);
        s[n] = 0;
        return s;
    }
    json_t *v = json_object_get(step, "name");
    const char *label = v ? json_string_value(v) : "L";
    if (!*label) return strdup(label);
    size_t len = strlen(r->prefix) + strlen(label) + 2;
    char *name = malloc(len);
    snprintf(name, len, "%s/%s", r->prefix, label);
    struct hold h = is(step, "op", "lock") || is(step, "op", "try_lock") ? hold_of(step) : (struct hold){K_MUTEX, 0};
    if (is(step, "op", "expect_leader") || is(step, "op", "observe")) h.kind = K_LEADER;
    bool known = false;
    for (int i = 0; i < r->n_names; i++) known |= strcmp(r->names[i].name, name) == 0;
    if (!known && !(h.kind == K_PERMIT && h.permits == 0) && r->n_names < MAX_ITEMS) {
        r->names[r->n_names].name = strdup(name);
        r->names[r->n_names++].hold = h;
    }
    return name;
}

/* The value a step campaigns or proclaims with: `value` (UTF-8), or `value_len` bytes 'v'. The caller frees it. */
static uint8_t *value_of(json_t *step, size_t *len) {
    if (has(step, "value_len")) {
        *len = (size_t)num(step, "value_len", 0);
        uint8_t *v = malloc(*len ? *len : 1);
        memset(v, 'v', *len);
        return v;
    }
    const char *s = str(step, "value") ? str(step, "value") : "";
    *len = strlen(s);
    return (uint8_t *)strdup(s);
}

/* ---- acquiring ---- */

static fencelock_status acquire(fencelock_client *c, const char *name, struct hold h, const uint8_t *value,
                                size_t value_len, const fencelock_lock_options *o, bool once, fencelock_lease **out) {
    switch (h.kind) {
    case K_LEADER:
        return once ? fencelock_try_campaign(c, name, value, value_len, o, out)
                    : fencelock_campaign(c, name, value, value_len, o, out);
    case K_READ:
    case K_WRITE: {
        int mode = h.kind == K_READ ? FENCELOCK_READ : FENCELOCK_WRITE;
        return once ? fencelock_try_rw_lock(c, name, mode, o, out) : fencelock_rw_lock(c, name, mode, o, out);
    }
    case K_PERMIT:
        return once ? fencelock_semaphore_try_acquire(c, name, h.permits, o, out)
                    : fencelock_semaphore_acquire(c, name, h.permits, o, out);
    default:
        return once ? fencelock_try_lock(c, name, o, out) : fencelock_lock(c, name, o, out);
    }
}

static atomic_long next_owner;

/* The step's options. A call without `owner` gets one of its own, as the other runners' calls do (C's NULL owner
 * would be the calling thread, making two ownerless calls of one thread reentrant). `*owner` is the caller's. */
static fencelock_lock_options options(json_t *step, char **owner) {
    fencelock_lock_options o = fencelock_lock_options_default();
    o.ttl_ms = (uint64_t)num(step, "ttl_ms", 30000);
    if (has(step, "timeout_ms")) o.timeout_ms = (uint64_t)num(step, "timeout_ms", 0);
    if (has(step, "watchdog")) o.watchdog = json_is_true(json_object_get(step, "watchdog"));
    if (has(step, "fair")) o.fair = json_is_true(json_object_get(step, "fair")) ? 1 : -1;
    if (str(step, "owner")) {
        *owner = strdup(str(step, "owner"));
    } else {
        *owner = malloc(48);
        snprintf(*owner, 48, "call-%d-%ld", (int)getpid(), atomic_fetch_add(&next_owner, 1));
    }
    o.owner = *owner;
    return o;
}

static void *task_main(void *arg) {
    struct task *t = arg;
    t->status = acquire(t->client, t->name, t->hold, t->value, t->value_len, &t->opts, t->once, &t->lease);
    if (t->status != FENCELOCK_OK) snprintf(t->error, sizeof t->error, "%s", fencelock_last_error());
    return NULL;
}

static void drop_leadership(struct leadership *l) {
    if (!l) return;
    free(l->name);
    free(l);
}

/* Checks an acquire's outcome against the step (`expect`, `min_elapsed_ms`) and keeps the lease `as`; a leadership
 * (`h`) with the client and election name of its proclaim. */
static bool settle(struct run *r, json_t *step, fencelock_status s, fencelock_lease *l, const char *error,
                   fencelock_client *c, const char *name, struct hold h) {
    if (s != FENCELOCK_OK && s != FENCELOCK_BUSY) {
        r->status = s;
        snprintf(r->message, sizeof r->message, "%s", error);
        return true;
    }
    bool busy_expected = is(step, "expect", "busy");
    if (l && busy_expected) {
        drop_lease(l);
        return failf(r, "acquired, expected busy");
    }
    if (!l && !busy_expected) return failf(r, "busy, expected to acquire (%s)", error);
    if (!l) return true;
    /* From the previous step's start: the hold this one waits out was written after it. */
    long long elapsed = now_us() - r->previous_start;
    if (has(step, "min_elapsed_ms") && elapsed < num(step, "min_elapsed_ms", 0) * 1000) {
        drop_lease(l);
        return failf(r, "acquired %.3f ms after the previous step began, sooner than %lld ms", elapsed / 1000.0,
                     num(step, "min_elapsed_ms", 0));
    }
    if (str(step, "as")) {
        drop_lease(put(r->leases, &r->n_leases, str(step, "as"), l));
        if (h.kind == K_LEADER) {
            struct leadership *ld = malloc(sizeof *ld);
            ld->client = c;
            ld->name = strdup(name);
            drop_leadership(put(r->leaderships, &r->n_leaderships, str(step, "as"), ld));
        }
    } else {
        fencelock_status rs = fencelock_lease_release(l);
        fencelock_lease_free(l);
        if (rs != FENCELOCK_OK) return failf(r, "release failed: %s", fencelock_last_error());
    }
    return true;
}

/* ---- the lost signal: fencelock_lease_on_lost sets a flag of its own and wakes the waiter ---- */

static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lost_cv = PTHREAD_COND_INITIALIZER;
/* Static, so a callback that runs late never touches freed memory. */
static bool lost_fired[MAX_WATCHES];
static atomic_int next_watch;

static void on_lost(void *flag) {
    pthread_mutex_lock(&lost_mu);
    *(bool *)flag = true;
    pthread_cond_broadcast(&lost_cv);
    pthread_mutex_unlock(&lost_mu);
}

static bool wait_lost(struct run *r, fencelock_lease *l, long long within) {
    int i = atomic_fetch_add(&next_watch, 1);
    if (i >= MAX_WATCHES) return failf(r, "more than %d expect_lost steps", MAX_WATCHES);
    if (fencelock_lease_on_lost(l, on_lost, &lost_fired[i]) != FENCELOCK_OK)
        return failf(r, "on_lost: %s", fencelock_last_error());
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += within / 1000;
    deadline.tv_nsec += (within % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&lost_mu);
    int rc = 0;
    while (!lost_fired[i] && rc == 0) rc = pthread_cond_timedwait(&lost_cv, &lost_mu, &deadline);
    bool fired = lost_fired[i];
    pthread_mutex_unlock(&lost_mu);
    if (!fired) return failf(r, "lost did not fire within %lld ms", within);
    return true;
}

/* ---- elections: a leader read or observed, and the observer's queue ---- */

/* A leader read or observed against the step: `none`, or `value` and `term_of` (a leadership's term). */
static bool check_leader(struct run *r, json_t *step, const struct report *l) {
    if (json_is_true(json_object_get(step, "none"))) {
        if (l->has_leader) return failf(r, "leader of term %llu, expected none", (unsigned long long)l->term);
        return true;
    }
    if (!l->has_leader) return failf(r, "no leader, expected one");
    if (str(step, "value")) {
        const char *want = str(step, "value");
        if (l->len != strlen(want) || (l->len && memcmp(l->value, want, l->len) != 0))
            return failf(r, "leader value \"%.*s\", expected \"%s\"", (int)l->len, l->value ? (char *)l->value : "",
                         want);
    }
    if (str(step, "term_of")) {
        uint64_t want = fencelock_lease_fence(lease(r, step, "term_of"));
        if (l->term != want)
            return failf(r, "leader term %llu, expected %llu, the term of %s", (unsigned long long)l->term,
                         (unsigned long long)want, str(step, "term_of"));
    }
    return true;
}

/* The observer's callback, on a runtime thread: queues the report (with a copy of the value) and wakes the waiter. */
static void on_change(void *data, bool has_leader, const uint8_t *value, size_t len, uint64_t term,
                      fencelock_status status) {
    struct watch *w = data;
    pthread_mutex_lock(&w->mu);
    if (w->tail - w->head == MAX_REPORTS) {
        w->overflow = true;
    } else {
        struct report *rp = &w->reports[w->tail++ % MAX_REPORTS];
        rp->has_leader = has_leader;
        rp->term = term;
        rp->status = status;
        rp->len = len;
        rp->value = len ? malloc(len) : NULL;
        if (len) memcpy(rp->value, value, len);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void free_watch(struct watch *w) {
    if (!w) return;
    fencelock_observer_close(w->observer); /* no callback runs after it */
    for (int i = w->head; i < w->tail; i++) free(w->reports[i % MAX_REPORTS].value);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static struct timespec deadline_in(long long ms) {
    struct timespec d;
    clock_gettime(CLOCK_REALTIME, &d);
    d.tv_sec += ms / 1000;
    d.tv_nsec += (ms % 1000) * 1000000;
    if (d.tv_nsec >= 1000000000) {
        d.tv_sec++;
        d.tv_nsec -= 1000000000;
    }
    return d;
}

/* The observer's next report, which must come within `within` ms, against the step. */
static bool expect_observed(struct run *r, json_t *step, struct watch *w, long long within) {
    struct timespec deadline = deadline_in(within);
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (w->head == w->tail && rc == 0) rc = pthread_cond_timedwait(&w->cv, &w->mu, &deadline);
    bool got = w->head != w->tail, overflow = w->overflow;
    struct report rp = {0};
    if (got) rp = w->reports[w->head++ % MAX_REPORTS];
    pthread_mutex_unlock(&w->mu);
    if (overflow) return failf(r, "more than %d reports queued", MAX_REPORTS);
    if (!got) return failf(r, "no change observed within %lld ms", within);
    bool ok = rp.status == FENCELOCK_OK ? check_leader(r, step, &rp)
                                        : failf(r, "observe failed with %s", status_name(rp.status));
    free(rp.value);
    return ok;
}

/* ---- the steps ---- */

static void error_outcome(struct run *r, fencelock_status s) {
    r->status = s;
    if (s != FENCELOCK_OK) snprintf(r->message, sizeof r->message, "%s", fencelock_last_error());
}

/* Runs the step's operation: false when it failed an expectation of its own (r->fail); its status in r->status. */
static bool op(struct run *r, json_t *step, const char *opname) {
    if (strcmp(opname, "connect") == 0) {
        const char *u = str(step, "url") ? str(step, "url") : r->url;
        if (strcmp(u, "$UNREACHABLE") == 0) u = r->unreachable;
        fencelock_client_options o = fencelock_client_options_default();
        if (has(step, "connect_timeout_ms")) o.connect_timeout_ms = (uint64_t)num(step, "connect_timeout_ms", 0);
        fencelock_client *c = NULL;
        error_outcome(r, fencelock_client_connect_with(u, &o, &c));
        if (c) fencelock_client_free(put(r->clients, &r->n_clients, str(step, "client"), c));
        return true;
    }
    if (strcmp(opname, "close") == 0) {
        error_outcome(r, fencelock_client_close(client(r, step)));
        return true;
    }
    if (strcmp(opname, "lock") == 0 || strcmp(opname, "try_lock") == 0) {
        char *name = name_of(r, step);
        char *owner = NULL;
        fencelock_lock_options o = options(step, &owner);
        bool once = strcmp(opname, "try_lock") == 0;
        if (str(step, "spawn")) {
            if (r->n_tasks == MAX_ITEMS) abort();
            struct task *t = calloc(1, sizeof *t);
            snprintf(t->id, sizeof t->id, "%s", str(step, "spawn"));
            t->client = client(r, step);
            t->name = name;
            t->owner = owner;
            t->hold = hold_of(step);
            t->value = value_of(step, &t->value_len);
            t->opts = o;
            t->once = once;
            r->tasks[r->n_tasks++] = t;
            t->started = pthread_create(&t->thread, NULL, task_main, t) == 0;
            return t->started || failf(r, "pthread_create failed");
        }
        fencelock_lease *l = NULL;
        size_t vlen = 0;
        uint8_t *value = value_of(step, &vlen);
        fencelock_status s = acquire(client(r, step), name, hold_of(step), value, vlen, &o, once, &l);
        char error[1024];
        snprintf(error, sizeof error, "%s", s == FENCELOCK_OK ? "" : fencelock_last_error());
        bool ok = settle(r, step, s, l, error, client(r, step), name, hold_of(step));
        free(value);
        free(name);
        free(owner);
        return ok;
    }
    if (strcmp(opname, "join") == 0) {
        struct task *t = NULL;
        for (int i = 0; i < r->n_tasks; i++)
            if (!r->tasks[i]->joined && strcmp(r->tasks[i]->id, str(step, "task")) == 0) t = r->tasks[i];
        if (!t || !t->started) return failf(r, "join of a task never spawned");
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += STEP_BOUND_MS / 1000;
        if (pthread_timedjoin_np(t->thread, NULL, &deadline) != 0)
            return failf(r, "the spawned acquire did not finish within %d ms", STEP_BOUND_MS);
        t->joined = true;
        fencelock_lease *l = t->lease;
        t->lease = NULL;
        return settle(r, step, t->status, l, t->error, t->client, t->name, t->hold);
    }
    if (strcmp(opname, "expect_slot") == 0) {
        int64_t mine = fencelock_lease_slot(lease(r, step, "lease"));
        if (mine < 0) return failf(r, "lease %s has no slot", str(step, "lease"));
        if (str(step, "eq") && mine != fencelock_lease_slot(lease(r, step, "eq")))
            return failf(r, "slot %lld is not the slot of %s", (long long)mine, str(step, "eq"));
        if (str(step, "ne") && mine == fencelock_lease_slot(lease(r, step, "ne")))
            return failf(r, "slot %lld is also the slot of %s", (long long)mine, str(step, "ne"));
        if (has(step, "below") && mine >= num(step, "below", 0))
            return failf(r, "slot %lld is not below %lld", (long long)mine, num(step, "below", 0));
        return true;
    }
    if (strcmp(opname, "expect_available") == 0) {
        char *name = name_of(r, step);
        uint32_t n = 0;
        error_outcome(r, fencelock_semaphore_available(client(r, step), name, (uint32_t)num(step, "permits", 0), &n));
        free(name);
        if (r->status == FENCELOCK_OK && has(step, "count") && n != num(step, "count", 0))
            return failf(r, "%u permits available, expected %lld", n, num(step, "count", 0));
        return true;
    }
    if (strcmp(opname, "release") == 0) {
        error_outcome(r, fencelock_lease_release(lease(r, step, "lease")));
        return true;
    }
    if (strcmp(opname, "renew") == 0) {
        fencelock_lease *l = lease(r, step, "lease");
        error_outcome(r, fencelock_lease_renew(l, (uint64_t)num(step, "ttl_ms", 0)));
        uint64_t left = fencelock_lease_remaining_ms(l);
        if (r->status == FENCELOCK_OK && has(step, "min_remaining_ms") && left < (uint64_t)num(step, "min_remaining_ms", 0))
            return failf(r, "remaining %llu ms < %lld ms after renew", (unsigned long long)left,
                         num(step, "min_remaining_ms", 0));
        return true;
    }
    if (strcmp(opname, "expect_token") == 0) {
        uint64_t a = fencelock_lease_fence(lease(r, step, "lease"));
        bool gt = has(step, "gt");
        uint64_t b = fencelock_lease_fence(lease(r, step, gt ? "gt" : "eq"));
        if (gt ? a <= b : a != b)
            return failf(r, "token %llu is not %s %llu", (unsigned long long)a, gt ? "gt" : "eq", (unsigned long long)b);
        return true;
    }
    if (strcmp(opname, "pause") == 0) {
        usleep((useconds_t)num(step, "ms", 0) * 1000); /* the subject of the step: letting TTLs and watchdogs run */
        return true;
    }
    if (strcmp(opname, "expect_lost") == 0) return wait_lost(r, lease(r, step, "lease"), num(step, "within_ms", 0));
    if (strcmp(opname, "expect_not_lost") == 0) {
        fencelock_lease *l = lease(r, step, "lease");
        bool valid = false;
        fencelock_lease_is_valid(l, &valid);
        if (fencelock_lease_is_lost(l) || !valid)
            return failf(r, "lease lost=%d valid=%d", fencelock_lease_is_lost(l), valid);
        return true;
    }
    if (strcmp(opname, "force_release") == 0) {
        char *name = name_of(r, step);
        bool deleted = false;
        error_outcome(r, fencelock_client_force_release(client(r, step), name, &deleted));
        free(name);
        return true;
    }
    if (strcmp(opname, "expect_free") == 0 || strcmp(opname, "expect_held") == 0) {
        char *name = name_of(r, step);
        bool held = false;
        char *holder = NULL;
        fencelock_status s = fencelock_client_inspect(client(r, step), name, &held, &holder);
        free(name);
        bool ok = s == FENCELOCK_OK && held == (strcmp(opname, "expect_held") == 0);
        if (!ok) failf(r, "%s: %s", opname, s == FENCELOCK_OK ? (holder ? holder : "free") : fencelock_last_error());
        fencelock_string_free(holder);
        return ok;
    }
    if (strcmp(opname, "fence_write") == 0 || strcmp(opname, "fence_read") == 0) {
        char resource[512];
        snprintf(resource, sizeof resource, "%s/%s", r->prefix, str(step, "resource"));
        uint64_t token = str(step, "token_of") ? fencelock_lease_fence(lease(r, step, "token_of"))
                                               : (uint64_t)num(step, "token", 0);
        const char *value = str(step, "value") ? str(step, "value") : "";
        size_t vlen = strlen(value);
        fencelock_fence *f = NULL;
        error_outcome(r, fencelock_client_fence(client(r, step), resource, &f));
        if (r->status != FENCELOCK_OK) return true;
        bool ok = true;
        if (strcmp(opname, "fence_write") == 0) {
            error_outcome(r, fencelock_fence_write(f, token, (const uint8_t *)value, vlen));
        } else {
            uint64_t got = 0;
            uint8_t *bytes = NULL;
            size_t len = 0;
            error_outcome(r, fencelock_fence_read(f, &got, &bytes, &len));
            if (r->status == FENCELOCK_OK && (got != token || len != vlen || (len && memcmp(bytes, value, len) != 0)))
                ok = failf(r, "read (%llu, %.*s), expected (%llu, %s)", (unsigned long long)got, (int)len,
                           bytes ? (const char *)bytes : "", (unsigned long long)token, value);
            fencelock_bytes_free(bytes, len);
        }
        fencelock_fence_free(f);
        return ok;
    }
    if (strcmp(opname, "proclaim") == 0) {
        struct leadership *ld = find(r->leaderships, r->n_leaderships, str(step, "lease"));
        if (!ld) return failf(r, "%s is no leadership", str(step, "lease"));
        size_t vlen = 0;
        uint8_t *value = value_of(step, &vlen);
        error_outcome(r, fencelock_proclaim(ld->client, ld->name, lease(r, step, "lease"), value, vlen));
        free(value);
        return true;
    }
    if (strcmp(opname, "resign") == 0) { /* releasing a leadership resigns */
        error_outcome(r, fencelock_lease_release(lease(r, step, "lease")));
        return true;
    }
    if (strcmp(opname, "expect_leader") == 0) {
        char *name = name_of(r, step);
        bool found = false;
        uint64_t term = 0;
        uint8_t *value = NULL;
        size_t len = 0;
        error_outcome(r, fencelock_leader(client(r, step), name, &found, &term, &value, &len));
        free(name);
        struct report rep = {found, term, FENCELOCK_OK, len, value};
        bool ok = r->status != FENCELOCK_OK || check_leader(r, step, &rep);
        fencelock_bytes_free(value, len);
        return ok;
    }
    if (strcmp(opname, "observe") == 0) {
        char *name = name_of(r, step);
        struct watch *w = calloc(1, sizeof *w);
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        error_outcome(r, fencelock_observe(client(r, step), name, on_change, w, &w->observer));
        free(name);
        if (r->status != FENCELOCK_OK) {
            free_watch(w);
            return true;
        }
        free_watch(put(r->watches, &r->n_watches, str(step, "as"), w));
        return true;
    }
    if (strcmp(opname, "expect_observed") == 0) {
        struct watch *w = find(r->watches, r->n_watches, str(step, "observer"));
        if (!w) return failf(r, "no observer %s", str(step, "observer"));
        return expect_observed(r, step, w, num(step, "within_ms", 10000));
    }
    fprintf(stderr, "unknown op %s\n", opname);
    abort();
}

/* Whether `kind` is among the step's `expect_error` (a kind or a list); *any: whether it names one at all. */
static bool expected(json_t *step, const char *kind, bool *any) {
    json_t *want = json_object_get(step, "expect_error");
    *any = want != NULL;
    if (json_is_string(want)) return strcmp(json_string_value(want), kind) == 0;
    size_t i;
    json_t *k;
    json_array_foreach(want, i, k) if (strcmp(json_string_value(k), kind) == 0) return true;
    return false;
}

/* `mentions` must be in the error, no `not_mentions` anywhere in it (C shows only its last error). */
static bool check_mentions(struct run *r, json_t *step) {
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(step, "mentions"), i, w) {
        if (!strstr(r->message, json_string_value(w)))
            return failf(r, "the error does not mention %s: %s", json_string_value(w), r->message);
    }
    json_array_foreach(json_object_get(step, "not_mentions"), i, w) {
        if (strstr(r->message, json_string_value(w)))
            return failf(r, "the error mentions %s: %s", json_string_value(w), r->message);
    }
    return true;
}

static bool step_once(struct run *r, json_t *step) {
    const char *opname = str(step, "op");
    if (strcmp(opname, "connect") == 0 && is(step, "url", "$UNREACHABLE") && !r->unreachable)
        return true; /* this backend has no such address (memory://) */
    r->status = FENCELOCK_OK;
    r->message[0] = 0;
    long long started = now_us();
    if (!op(r, step, opname)) return false;
    long long elapsed = now_us() - started;
    if (has(step, "within_ms") && strcmp(opname, "expect_lost") != 0 && strcmp(opname, "expect_observed") != 0 &&
        elapsed > num(step, "within_ms", 0) * 1000)
        return failf(r, "took %.3f ms, more than %lld ms", elapsed / 1000.0, num(step, "within_ms", 0));
    bool any = false;
    bool listed = expected(step, status_name(r->status), &any);
    if (r->status != FENCELOCK_OK && !any) return failf(r, "failed: %s", r->message);
    if (r->status != FENCELOCK_OK && listed) return check_mentions(r, step);
    if (!any) return true;
    char *want = json_dumps(json_object_get(step, "expect_error"), JSON_ENCODE_ANY);
    if (r->status == FENCELOCK_OK) failf(r, "succeeded, expected %s", want);
    else failf(r, "failed with %s, expected %s", r->message, want);
    free(want);
    return false;
}

/* Runs one step, again and again within `eventually_ms` until it meets its expectations. */
static bool step(struct run *r, json_t *step) {
    r->previous_start = r->current_start;
    r->current_start = now_us();
    if (!has(step, "eventually_ms")) return step_once(r, step);
    long long bound = num(step, "eventually_ms", 0), deadline = now_ms() + bound;
    while (!step_once(r, step)) {
        if (now_ms() >= deadline) {
            char *why = strdup(r->fail);
            failf(r, "not within %lld ms: %s", bound, why);
            free(why);
            return false;
        }
        usleep(20 * 1000); /* a bounded retry for a state another task reaches (a spawned writer now waiting) */
    }
    return true;
}

/* Per kind: a mutex is free, a read-write lock gives its write lock, a semaphore has every permit. */
static bool check_free(struct run *r, fencelock_client *checker, const char *name, struct hold h) {
    if (h.kind == K_READ || h.kind == K_WRITE) {
        fencelock_lease *w = NULL;
        fencelock_status s = fencelock_try_rw_lock(checker, name, FENCELOCK_WRITE, NULL, &w);
        drop_lease(w);
        if (s == FENCELOCK_BUSY) return failf(r, "read-write lock %s left held", name);
        if (s != FENCELOCK_OK && s != FENCELOCK_UNSUPPORTED) return failf(r, "%s", fencelock_last_error());
    } else if (h.kind == K_LEADER) {
        bool found = false;
        uint64_t term = 0;
        fencelock_status s = fencelock_leader(checker, name, &found, &term, NULL, NULL);
        if (s == FENCELOCK_OK && found)
            return failf(r, "election %s left a leader of term %llu", name, (unsigned long long)term);
        if (s != FENCELOCK_OK && s != FENCELOCK_UNSUPPORTED) return failf(r, "%s", fencelock_last_error());
    } else if (h.kind == K_PERMIT) {
        uint32_t n = 0;
        fencelock_status s = fencelock_semaphore_available(checker, name, h.permits, &n);
        if (s == FENCELOCK_OK && n != h.permits) return failf(r, "semaphore %s left %u of %u", name, n, h.permits);
        if (s != FENCELOCK_OK && s != FENCELOCK_UNSUPPORTED && s != FENCELOCK_INVALID_ARGUMENT)
            return failf(r, "%s", fencelock_last_error());
    } else {
        bool held = false;
        char *holder = NULL;
        fencelock_status s = fencelock_client_inspect(checker, name, &held, &holder);
        bool ok = s == FENCELOCK_OK && !held;
        if (!ok) failf(r, "%s left held by %s", name, s == FENCELOCK_OK ? holder : fencelock_last_error());
        fencelock_string_free(holder);
        if (!ok) return false;
    }
    return true;
}

/* After the scenario: nothing may be left held, locally or on the backend. */
static bool check_clean(struct run *r) {
    for (int i = 0; i < r->n_leases; i++) fencelock_lease_release(r->leases[i].ptr);
    fencelock_client *checker = NULL;
    if (fencelock_client_connect(r->url, &checker) != FENCELOCK_OK)
        return failf(r, "the checker cannot connect: %s", fencelock_last_error());
    bool ok = true;
    for (int i = 0; i < r->n_clients && ok; i++) {
        size_t n = 0;
        fencelock_client_local_entries(r->clients[i].ptr, &n);
        if (n) ok = failf(r, "%zu local queue entries left on client %s", n, r->clients[i].id);
    }
    for (int i = 0; i < r->n_names && ok; i++) ok = check_free(r, checker, r->names[i].name, r->names[i].hold);
    fencelock_client_close(checker);
    fencelock_client_free(checker);
    return ok;
}

/* Frees everything: closing the clients ends the waits of tasks never joined. */
static void finish(struct run *r) {
    for (int i = 0; i < r->n_watches; i++) free_watch(r->watches[i].ptr);
    for (int i = 0; i < r->n_leases; i++) drop_lease(r->leases[i].ptr);
    for (int i = 0; i < r->n_leaderships; i++) drop_leadership(r->leaderships[i].ptr);
    for (int i = 0; i < r->n_clients; i++) fencelock_client_close(r->clients[i].ptr);
    for (int i = 0; i < r->n_tasks; i++) {
        struct task *t = r->tasks[i];
        if (t->started && !t->joined) pthread_join(t->thread, NULL);
        drop_lease(t->lease);
        free(t->value);
        free(t->name);
        free(t->owner);
        free(t);
    }
    for (int i = 0; i < r->n_clients; i++) fencelock_client_free(r->clients[i].ptr);
    for (int i = 0; i < r->n_names; i++) free(r->names[i].name);
}

/* ---- scenarios and capabilities ---- */

static bool has_flag(const fencelock_capability *c, const char *flag) {
    if (strcmp(flag, "fencing") == 0) return c->fencing;
    if (strcmp(flag, "native_wait") == 0) return c->native_wait;
    if (strcmp(flag, "fair") == 0) return c->fair;
    if (strcmp(flag, "session_bound") == 0) return c->session_bound;
    if (strcmp(flag, "rw_lock") == 0) return c->rw_lock;
    if (strcmp(flag, "semaphore") == 0) return c->semaphore;
    if (strcmp(flag, "election") == 0) return c->election;
    fprintf(stderr, "unknown capability %s\n", flag);
    abort();
}

static bool applies(json_t *sc, const fencelock_capability *caps) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(sc, "unless"), i, f) if (has_flag(caps, json_string_value(f))) return false;
    json_array_foreach(json_object_get(sc, "requires"), i, f) if (!has_flag(caps, json_string_value(f))) return false;
    return true;
}

static int json_file(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    return n > 5 && strcmp(e->d_name + n - 5, ".json") == 0;
}

/* A label with a NUL inside: C cannot pass it (the NUL ends the C string), so its step does not apply here. */
static bool nul_inside(json_t *label) {
    return json_is_string(label) && json_string_length(label) != strlen(json_string_value(label));
}

/* Runs one scenario: NULL when it passed, else why not (static). */
static const char *run_scenario(json_t *sc, const char *url, const char *unreachable) {
    static struct run r;
    memset(&r, 0, sizeof r);
    r.url = url;
    r.unreachable = unreachable;
    snprintf(r.prefix, sizeof r.prefix, "c-%d-%lld/conformance/%s", (int)getpid(), now_ms(),
             str(sc, "name"));
    bool ok = true;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(sc, "steps"), i, s) {
        char *text = json_dumps(s, JSON_COMPACT);
        if (!has(s, "name_len") && nul_inside(json_object_get(s, "name"))) {
            printf("  %s step %zu %s: skipped (a NUL inside a C string ends it)\n", str(sc, "name"), i + 1, text);
        } else if (!step(&r, s)) {
            char *why = strdup(r.fail);
            failf(&r, "step %zu %s: %s", i + 1, text, why);
            free(why);
            ok = false;
        }
        free(text);
        if (!ok) break;
    }
    if (ok) ok = check_clean(&r);
    finish(&r);
    return ok ? NULL : r.fail;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s DIR LABEL URL [UNREACHABLE]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *label = argv[2], *url = argv[3], *unreachable = argc > 4 ? argv[4] : NULL;
    fencelock_client *probe = NULL;
    fencelock_capability caps;
    if (fencelock_client_connect(url, &probe) != FENCELOCK_OK ||
        fencelock_client_capability(probe, &caps) != FENCELOCK_OK) {
        fprintf(stderr, "%s: cannot connect to %s: %s\n", label, url, fencelock_last_error());
        fencelock_client_free(probe);
        return 1;
    }
    fencelock_client_free(probe);
    struct dirent **files = NULL;
    int n = scandir(dir, &files, json_file, alphasort);
    if (n <= 0) {
        fprintf(stderr, "no scenarios in %s\n", dir);
        return 1;
    }
    int passed = 0, failed = 0;
    char row[8192] = "";
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]->d_name);
        free(files[i]);
        json_error_t err;
        json_t *sc = json_load_file(path, JSON_ALLOW_NUL, &err); /* bad_input.json has a name with a NUL */
        if (!sc || !str(sc, "name") || !json_is_array(json_object_get(sc, "steps"))) {
            fprintf(stderr, "FAIL %s: line %d: %s\n", path, err.line, sc ? "no name or steps" : err.text);
            json_decref(sc);
            failed++;
            continue;
        }
        const char *result = "skip";
        if (applies(sc, &caps)) {
            const char *why = run_scenario(sc, url, unreachable);
            result = why ? "FAIL" : "pass";
            if (why) fprintf(stderr, "FAIL %s/%s: %s\n", label, str(sc, "name"), why);
            why ? failed++ : passed++;
        }
        size_t used = strlen(row);
        snprintf(row + used, sizeof row - used, " %s=%s", str(sc, "name"), result);
        json_decref(sc);
    }
    free(files);
    printf("conformance matrix row: c × %s:%s\n", label, row);
    printf("conformance %s: %d passed, %d failed\n", label, passed, failed);
    return failed > 100 ? 100 : failed;
}
