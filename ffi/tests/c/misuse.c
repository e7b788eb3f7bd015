/* Misuse through the C ABI on the backend URL given as argv[1]: NULL everywhere, double release, release after the
 * client is freed or closed, a lease used from another thread, 200+ threads on one lock through one client, fork. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static const char *URL;

/* A lock name unique to this process, so reruns against a persistent backend (Redis) start clean. A ring of
 * buffers: a few names may be in use at once, all from the main thread. */
static const char *N(const char *base) {
    static char ring[8][128];
    static int next;
    char *buf = ring[next++ % 8];
    snprintf(buf, sizeof ring[0], "misuse-%s-%d", base, (int)getpid());
    return buf;
}

/* Threads of this process whose name starts with `prefix` (Linux truncates names to 15 bytes). */
static int threads_named(const char *prefix) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && strncmp(comm, prefix, strlen(prefix)) == 0) n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* The shared runtime: built on first use, FENCELOCK_RUNTIME_THREADS workers (default 2) named fencelock-worker-N.
 * Blocking-pool threads carry the same name, so the count is a lower bound. */
static void runtime_threads(void) {
    CHECK(threads_named("fencelock-work") == 0);
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect(URL, &c), FENCELOCK_OK);
    const char *env = getenv("FENCELOCK_RUNTIME_THREADS");
    int want = env && atoi(env) > 0 ? atoi(env) : 2;
    int have = threads_named("fencelock-work");
    CHECK(have >= want);
    printf("runtime: %d fencelock-worker threads (at least %d wanted)\n", have, want);
    fencelock_client_free(c);
}

static void nulls(void) {
    fencelock_client *c = NULL;
    fencelock_lease *l = NULL;
    fencelock_fence *f = NULL;
    CHECK_STATUS(fencelock_client_connect(URL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out is NULL");
    CHECK_STATUS(fencelock_lock(NULL, "n", NULL, &l), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("client is NULL");
    CHECK_STATUS(fencelock_try_lock(NULL, "n", NULL, &l), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_fence(NULL, "n", &f), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_close(NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_lease_renew(NULL, 0), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_lease_release(NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("fencelock_lease_release: lease is NULL");
    bool valid;
    CHECK_STATUS(fencelock_lease_is_valid(NULL, &valid), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_lease_on_lost(NULL, NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK(fencelock_lease_fence(NULL) == 0);
    uint64_t tok;
    uint8_t *val;
    size_t len;
    CHECK_STATUS(fencelock_fence_write(NULL, 1, NULL, 0), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_fence_read(NULL, &tok, &val, &len), FENCELOCK_INVALID_ARGUMENT);
    CHECK(val == NULL && len == 0 && tok == 0);

    CHECK_STATUS(fencelock_client_connect(URL, &c), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lock(c, NULL, NULL, &l), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("name is NULL");
    CHECK_STATUS(fencelock_lock(c, "n", NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_try_lock(c, "n", NULL, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_fence(c, NULL, &f), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_fence(c, "r", NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_client_fence(c, "r", &f), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_read(f, NULL, &val, &len), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_fence_read(f, &tok, NULL, &len), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_fence_read(f, &tok, &val, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("len_out is NULL");
    CHECK_STATUS(fencelock_lock(c, "n", NULL, &l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_is_valid(l, NULL), FENCELOCK_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_OK);

    /* Every free accepts NULL. */
    fencelock_client_free(NULL);
    fencelock_lease_free(NULL);
    fencelock_fence_free(NULL);
    fencelock_bytes_free(NULL, 0);
    fencelock_bytes_free(NULL, 5);
    fencelock_lease_free(l);
    fencelock_fence_free(f);
    fencelock_client_free(c);
}

static void double_release_and_freed_client(void) {
    fencelock_client *c = NULL, *other = NULL;
    CHECK_STATUS(fencelock_client_connect(URL, &c), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_connect(URL, &other), FENCELOCK_OK);
    if (!c || !other) return;
    fencelock_lease *l = NULL, *l2 = NULL;
    CHECK_STATUS(fencelock_lock(c, N("twice"), NULL, &l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_NOT_HELD);
    CHECK_ERROR_MENTIONS("NOT_HELD");
    fencelock_lease_free(l);

    /* The lease keeps the client alive: releasing after the client handle is freed works. */
    CHECK_STATUS(fencelock_lock(c, N("after-free"), NULL, &l), FENCELOCK_OK);
    fencelock_fence *f = NULL;
    CHECK_STATUS(fencelock_client_fence(c, N("after-free"), &f), FENCELOCK_OK);
    fencelock_client_free(c);
    CHECK_STATUS(fencelock_lease_renew(l, 0), FENCELOCK_OK);
    CHECK_STATUS(fencelock_fence_write(f, fencelock_lease_fence(l), (const uint8_t *)"v", 1), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_OK);
    fencelock_lease_free(l);
    fencelock_fence_free(f);
    CHECK_STATUS(fencelock_try_lock(other, N("after-free"), NULL, &l2), FENCELOCK_OK);
    fencelock_lease_release(l2);
    fencelock_lease_free(l2);

    /* Freeing an unreleased lease releases it. */
    CHECK_STATUS(fencelock_lock(other, N("free-unreleased"), NULL, &l), FENCELOCK_OK);
    fencelock_lease_free(l);
    fencelock_client *third = NULL;
    CHECK_STATUS(fencelock_client_connect(URL, &third), FENCELOCK_OK);
    CHECK_STATUS(fencelock_try_lock(third, N("free-unreleased"), NULL, &l2), FENCELOCK_OK);
    fencelock_lease_free(l2);

    /* After close: CLOSED for new work and for the leases of the closed client. */
    CHECK_STATUS(fencelock_lock(third, N("closed"), NULL, &l), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_close(third), FENCELOCK_OK);
    CHECK_STATUS(fencelock_client_close(third), FENCELOCK_OK);
    CHECK_STATUS(fencelock_lock(third, N("closed-2"), NULL, &l2), FENCELOCK_CLOSED);
    CHECK_ERROR_MENTIONS("closed");
    /* fencelock.h: later calls on a closed client's leases fail with CLOSED (close released the lock). */
    CHECK_STATUS(fencelock_lease_renew(l, 0), FENCELOCK_CLOSED);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_CLOSED);
    CHECK_ERROR_MENTIONS("closed");
    fencelock_lease_free(l);
    fencelock_client_free(third);
    /* close released it: the other client gets it at once */
    CHECK_STATUS(fencelock_try_lock(other, N("closed"), NULL, &l2), FENCELOCK_OK);
    fencelock_lease_free(l2);
    fencelock_client_free(other);
}

static void *release_elsewhere(void *lease) {
    return (void *)(intptr_t)fencelock_lease_release((const fencelock_lease *)lease);
}

static void other_thread(void) {
    fencelock_client *c = NULL;
    CHECK_STATUS(fencelock_client_connect(URL, &c), FENCELOCK_OK);
    fencelock_lease *l = NULL;
    CHECK_STATUS(fencelock_lock(c, N("thread"), NULL, &l), FENCELOCK_OK);
    pthread_t t;
    void *rc;
    pthread_create(&t, NULL, release_elsewhere, l);
    pthread_join(t, &rc);
    CHECK((intptr_t)rc == FENCELOCK_OK);
    CHECK_STATUS(fencelock_lease_release(l), FENCELOCK_NOT_HELD);
    fencelock_lease_free(l);
    fencelock_client_free(c);
}

#define THREADS 208
#define ROUNDS 2

static fencelock_client *shared;
static const char *contended_name;
static atomic_int inside;
static atomic_int overlaps;
static atomic_int lock_errors;
static long counter; /* deliberately not atomic: only the lock protects it */
static uint64_t last_token;
static atomic_int token_regressions;

static void *contend(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        fencelock_lease *l = NULL;
        if (fencelock_lock(shared, contended_name, NULL, &l) != FENCELOCK_OK) {
            atomic_fetch_add(&lock_errors, 1);
            fprintf(stderr, "contend: %s\n", fencelock_last_error());
            continue;
        }
        if (atomic_fetch_add(&inside, 1) != 0) atomic_fetch_add(&overlaps, 1);
        long seen = counter;
        uint64_t tok = fencelock_lease_fence(l);
        if (tok <= last_token) atomic_fetch_add(&token_regressions, 1);
        last_token = tok;
        sched_yield();
        counter = seen + 1;
        atomic_fetch_sub(&inside, 1);
        if (fencelock_lease_release(l) != FENCELOCK_OK) atomic_fetch_add(&lock_errors, 1);
        fencelock_lease_free(l);
    }
    return NULL;
}

static void many_threads(void) {
    CHECK_STATUS(fencelock_client_connect(URL, &shared), FENCELOCK_OK);
    if (!shared) return;
    contended_name = N("contended");
    pthread_t t[THREADS];
    int started = 0;
    for (int i = 0; i < THREADS; i++) {
        if (pthread_create(&t[i], NULL, contend, NULL) == 0) started++;
    }
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    CHECK(started == THREADS);
    CHECK(atomic_load(&lock_errors) == 0);
    CHECK(atomic_load(&overlaps) == 0);
    CHECK(atomic_load(&token_regressions) == 0);
    CHECK(counter == (long)started * ROUNDS);
    printf("many_threads: %d threads x %d rounds, counter %ld, overlaps %d\n", started, ROUNDS, counter,
           atomic_load(&overlaps));
    fencelock_client_free(shared);
}

/* The runtime is rebuilt in a forked child; the parent's (which has no threads there) is never touched. */
static void after_fork(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30); /* a hang in the child fails the check instead of the run */
        fencelock_client *c = NULL;
        fencelock_lease *l = NULL;
        int ok = fencelock_client_connect(URL, &c) == FENCELOCK_OK &&
                 fencelock_lock(c, N("fork"), NULL, &l) == FENCELOCK_OK &&
                 fencelock_lease_release(l) == FENCELOCK_OK;
        fencelock_lease_free(l);
        fencelock_client_free(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL\n", argv[0]);
        return 2;
    }
    URL = argv[1];
    runtime_threads();
    nulls();
    double_release_and_freed_client();
    other_thread();
    many_threads();
    after_fork();
    char suite[256];
    snprintf(suite, sizeof suite, "misuse %s", URL);
    return report(suite);
}
