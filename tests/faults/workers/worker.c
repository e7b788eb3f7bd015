/* The C client worker of the safety suite: the same loop and JSON-lines protocol as the Rust worker
 * (tests/faults/src/worker.rs, described in tests/faults/README.md), on the C API (ffi/include/fencelock.h).
 *
 * Timestamps come from the raw clock_gettime syscall, like every worker's. Events go to stdout under one mutex (the
 * lost callbacks run on the library's threads); the referee is a TCP connection speaking one JSON object per line,
 * parsed with jansson. Built by tests/faults/run.sh into target/faults/cworker.
 */
#define _GNU_SOURCE
#include <fencelock.h>
#include <jansson.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *client_id;
static long pid;
static uint64_t seq;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool stopping;

static uint64_t t_ref(void) {
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "cworker %s: %s: %s\n", client_id ? client_id : "?", what, detail);
    exit(1);
}

static const char *code(enum fencelock_status s) {
    switch (s) {
    case FENCELOCK_OK: return "OK";
    case FENCELOCK_TIMEOUT: return "TIMEOUT";
    case FENCELOCK_LOCK_LOST: return "LOCK_LOST";
    case FENCELOCK_NOT_HELD: return "NOT_HELD";
    case FENCELOCK_FENCED: return "FENCED";
    case FENCELOCK_UNAVAILABLE: return "UNAVAILABLE";
    case FENCELOCK_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case FENCELOCK_UNSUPPORTED: return "UNSUPPORTED";
    case FENCELOCK_CLOSED: return "CLOSED";
    case FENCELOCK_CANCELLED: return "CANCELLED";
    case FENCELOCK_INTERNAL: return "INTERNAL";
    case FENCELOCK_BUSY: return "BUSY";
    }
    return "INTERNAL";
}

/* One event; session, error and hold may be NULL, token 0 and slot -1 mean absent. */
static void emit(const char *kind, const char *f, const char *session, uint64_t token, const char *error,
                 const char *hold, int64_t slot) {
    pthread_mutex_lock(&out_lock);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "src", "worker", "type", kind, "f", f,
                          "client", client_id, "lang", "c", "pid", (json_int_t)pid, "seq", (json_int_t)seq++,
                          "t_ref", (json_int_t)t_ref());
    if (session) json_object_set_new(e, "session", json_string(session));
    if (token) json_object_set_new(e, "token", json_integer((json_int_t)token));
    if (error) json_object_set_new(e, "error", json_string(error));
    if (hold) json_object_set_new(e, "hold", json_string(hold));
    if (slot >= 0) json_object_set_new(e, "slot", json_integer(slot));
    char *line = json_dumps(e, JSON_COMPACT);
    printf("%s\n", line);
    fflush(stdout);
    free(line);
    json_decref(e);
    pthread_mutex_unlock(&out_lock);
}

/* The referee: one request line, one reply line. */
static FILE *referee_r, *referee_w;

static void referee_connect(const char *addr) {
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) die("--referee", addr);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) die("referee address", addr);
    int fd = socket(res->ai_family, res->ai_socktype, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) die("referee connect", addr);
    freeaddrinfo(res);
    referee_r = fdopen(fd, "r");
    referee_w = fdopen(dup(fd), "w");
}

/* Sends `req` (consumed) and stores the reply's three values in `values`. */
static void referee_call(json_t *req, json_int_t values[3]) {
    char *line = json_dumps(req, JSON_COMPACT);
    fprintf(referee_w, "%s\n", line);
    fflush(referee_w);
    free(line);
    json_decref(req);
    char *reply = NULL;
    size_t cap = 0;
    if (getline(&reply, &cap, referee_r) <= 0) die("referee", "connection closed");
    json_error_t err;
    json_t *r = json_loads(reply, 0, &err);
    json_t *v = r ? json_object_get(r, "values") : NULL;
    if (!json_is_array(v) || json_array_size(v) != 3) die("referee reply", reply);
    for (size_t i = 0; i < 3; i++) values[i] = json_integer_value(json_array_get(v, i));
    json_decref(r);
    free(reply);
}

static void *watch_stdin(void *unused) {
    (void)unused;
    char buf[256];
    while (fread(buf, 1, sizeof buf, stdin) > 0) {
    }
    atomic_store(&stopping, true);
    return NULL;
}

static double uniform(unsigned *rng, double lo, double hi) { return lo + (hi - lo) * rand_r(rng) / ((double)RAND_MAX + 1); }

static void sleep_s(double s) {
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* What a lost callback reports: sessions live in a ring, so a callback that runs late never reads freed memory. */
struct held {
    char session[96];
    uint64_t token;
};
static struct held sessions[1024];

static void on_lost(void *data) {
    const struct held *h = data;
    emit("lost", "lost", h->session, h->token, "LOCK_LOST", NULL, -1);
}

static void renew(const struct fencelock_lease *lease, const char *session) {
    uint64_t token = fencelock_lease_fence(lease);
    emit("invoke", "renew", session, token, NULL, NULL, -1);
    enum fencelock_status s = fencelock_lease_renew(lease, 0);
    emit(s == FENCELOCK_OK ? "ok" : "fail", "renew", session, token, s == FENCELOCK_OK ? NULL : code(s), NULL, -1);
}

/* A write of the hold's token to the SDK's own register `key`: 1 accepted, 0 refused (FENCED), -1 unknown (any
 * other error says nothing of what the register did). */
static int fence_write(const struct fencelock_client *client, const char *key, uint64_t token, int64_t slot,
                       const char *session) {
    emit("invoke", "fence-write", session, token, NULL, NULL, slot);
    struct fencelock_fence *fence = NULL;
    enum fencelock_status s = fencelock_client_fence(client, key, &fence);
    if (s == FENCELOCK_OK) s = fencelock_fence_write(fence, token, (const uint8_t *)session, strlen(session));
    fencelock_fence_free(fence);
    int answer = s == FENCELOCK_OK ? 1 : s == FENCELOCK_FENCED ? 0 : -1;
    emit(answer == 1 ? "ok" : answer == 0 ? "fail" : "info", "fence-write", session, token,
         s == FENCELOCK_OK ? NULL : code(s), NULL, slot);
    return answer;
}

struct args {
    const char *url, *referee, *name, *key, *workload;
    uint64_t ttl_ms;
    unsigned seed;
    uint32_t permits;
    bool careless; /* no lost check before a write: the canary's user */
};

static json_t *request(const char *key, const char *session, uint64_t token, const char *hold, const char *op) {
    json_t *r = json_pack("{s:s, s:s, s:s, s:I, s:s}", "key", key, "client", client_id, "session", session, "token",
                          (json_int_t)token, "op", op);
    if (hold) json_object_set_new(r, "hold", json_string(hold));
    return r;
}

static void critical_section(const struct fencelock_client *client, const struct fencelock_lease *lease,
                             const char *hold, const struct args *a, const struct fencelock_lock_options *opts,
                             const char *session, unsigned *rng) {
    uint64_t token = fencelock_lease_fence(lease);
    int64_t slot = fencelock_lease_slot(lease);
    double ttl = (double)a->ttl_ms / 1000;
    if (!hold && uniform(rng, 0, 1) < 0.2) {
        /* Reentrancy: the same owner gets the same grant back (P8). */
        emit("invoke", "nested-acquire", session, token, NULL, NULL, -1);
        struct fencelock_lease *inner = NULL;
        enum fencelock_status s = fencelock_lock(client, a->name, opts, &inner);
        if (s == FENCELOCK_OK) {
            emit("ok", "nested-acquire", session, fencelock_lease_fence(inner), NULL, NULL, -1);
            s = fencelock_lease_release(inner);
            emit(s == FENCELOCK_OK ? "ok" : "fail", "nested-release", session, token,
                 s == FENCELOCK_OK ? NULL : code(s), NULL, -1);
            fencelock_lease_free(inner);
        } else {
            emit(s == FENCELOCK_TIMEOUT ? "fail" : "info", "nested-acquire", session, 0, code(s), NULL, -1);
        }
    }
    /* Each semaphore slot is a register of its own, fenced by the slot's token. */
    char key[160];
    if (slot >= 0) {
        snprintf(key, sizeof key, "%s.slot%lld", a->key, (long long)slot);
    } else {
        snprintf(key, sizeof key, "%s", a->key);
    }
    json_int_t values[3];
    /* A refused read does not end the cycle: the shadow and cas registers must see what an unfenced resource would. */
    referee_call(request(key, session, token, hold, "read"), values);
    sleep_s(ttl * uniform(rng, 0.1, 1.5)); /* work; the long tail crosses the TTL */
    if (hold && strcmp(hold, "read") == 0) {
        /* A reader reads again at the end (the checker: no write in between), then renews once (P6). */
        if (fencelock_lease_is_lost(lease)) return;
        referee_call(request(key, session, token, hold, "read"), values);
        renew(lease, session);
        return;
    }
    int writes = uniform(rng, 0, 1) < 0.3 ? 2 : 1;
    for (int i = 0; i < writes; i++) {
        /* a careful user; a pause right after this is what fencing is for */
        if (!a->careless && fencelock_lease_is_lost(lease)) return;
        int fenced = fence_write(client, key, token, slot, session);
        json_t *w = request(key, session, token, hold, "write");
        json_object_set_new(w, "fenced", fenced < 0 ? json_null() : json_boolean(fenced));
        json_object_set_new(w, "values", json_pack("[I, I, I]", values[0] + 1, values[1] + 1, values[2] + 1));
        referee_call(w, values);
        if (i == 0) {
            renew(lease, session);
            if (writes > 1) sleep_s(ttl * uniform(rng, 0.0, 0.3));
        }
    }
}

int main(int argc, char **argv) {
    struct args a = {.name = "locktest", .key = "register", .workload = "mutex", .ttl_ms = 2000, .permits = 2};
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--careless")) {
            a.careless = true;
            i--; /* a flag: no value */
            continue;
        }
        if (i + 1 >= argc) die("option without a value", argv[i]);
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--url")) a.url = v;
        else if (!strcmp(k, "--referee")) a.referee = v;
        else if (!strcmp(k, "--client")) client_id = v;
        else if (!strcmp(k, "--ttl-ms")) a.ttl_ms = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--name")) a.name = v;
        else if (!strcmp(k, "--key")) a.key = v;
        else if (!strcmp(k, "--seed")) a.seed = (unsigned)strtoull(v, NULL, 10);
        else if (!strcmp(k, "--workload")) a.workload = v;
        else if (!strcmp(k, "--permits")) a.permits = (uint32_t)strtoul(v, NULL, 10);
        else die("unknown option", k);
    }
    if (!a.url || !a.referee || !client_id) die("usage", "--url URL --referee HOST:PORT --client ID are required");
    pid = (long)getpid();
    unsigned rng = a.seed ^ (unsigned)pid;
    pthread_t stdin_thread;
    pthread_create(&stdin_thread, NULL, watch_stdin, NULL);
    pthread_detach(stdin_thread);
    referee_connect(a.referee);

    struct fencelock_client *client = NULL;
    while (fencelock_client_connect(a.url, &client) != FENCELOCK_OK) {
        if (atomic_load(&stopping)) die("connect", fencelock_last_error());
        sleep_s(0.2);
    }
    char owner[128];
    snprintf(owner, sizeof owner, "%s-main", client_id);
    struct fencelock_lock_options opts = fencelock_lock_options_default();
    opts.ttl_ms = a.ttl_ms;
    opts.timeout_ms = 3 * a.ttl_ms;
    opts.owner = owner;
    double ttl = (double)a.ttl_ms / 1000;
    for (unsigned n = 1; !atomic_load(&stopping);) {
        /* The rw workload: 60 % reads. The mutex's events carry no hold kind. */
        const char *hold = NULL;
        if (!strcmp(a.workload, "rwlock")) hold = uniform(&rng, 0, 1) < 0.6 ? "read" : "write";
        else if (!strcmp(a.workload, "semaphore")) hold = "permit";
        else if (!strcmp(a.workload, "election")) hold = "leader";
        else if (strcmp(a.workload, "mutex")) die("unknown workload", a.workload);
        emit("invoke", "acquire", NULL, 0, NULL, hold, -1);
        struct fencelock_lease *lease = NULL;
        enum fencelock_status s;
        if (!hold) s = fencelock_lock(client, a.name, &opts, &lease);
        else if (!strcmp(hold, "read")) s = fencelock_rw_lock(client, a.name, FENCELOCK_READ, &opts, &lease);
        else if (!strcmp(hold, "write")) s = fencelock_rw_lock(client, a.name, FENCELOCK_WRITE, &opts, &lease);
        else if (!strcmp(hold, "permit")) s = fencelock_semaphore_acquire(client, a.name, a.permits, &opts, &lease);
        else s = fencelock_campaign(client, a.name, (const uint8_t *)client_id, strlen(client_id), &opts, &lease);
        if (s != FENCELOCK_OK) {
            emit(s == FENCELOCK_TIMEOUT ? "fail" : "info", "acquire", NULL, 0, code(s), NULL, -1);
            sleep_s(0.1);
            continue;
        }
        struct held *h = &sessions[n % (sizeof sessions / sizeof sessions[0])];
        snprintf(h->session, sizeof h->session, "%s.%ld.%u", client_id, pid, n);
        n++;
        h->token = fencelock_lease_fence(lease);
        emit("ok", "acquire", h->session, h->token, NULL, hold, fencelock_lease_slot(lease));
        fencelock_lease_on_lost(lease, on_lost, h);
        critical_section(client, lease, hold, &a, &opts, h->session, &rng);
        emit("invoke", "release", h->session, h->token, NULL, NULL, -1);
        s = fencelock_lease_release(lease);
        emit(s == FENCELOCK_OK ? "ok" : "fail", "release", h->session, h->token, s == FENCELOCK_OK ? NULL : code(s),
             NULL, -1);
        fencelock_lease_free(lease);
        sleep_s(ttl * uniform(&rng, 0.0, 0.1));
    }
    fencelock_client_close(client);
    fencelock_client_free(client);
    return 0;
}
