/*
 * Uncontended acquire+release through the C API: one client, one thread, `fencelock_lock` + `fencelock_lease_release`
 * + `fencelock_lease_free` on one name, back to back, with the default options (ttl 30 s, watchdog on, wait forever),
 * after 200 warm-up cycles — the cycle of fencelock-bench's figure 1 (`client.lock(name).release()`), seen from C.
 * Each cycle is timed on CLOCK_MONOTONIC, as fencelock-bench times each of its cycles.
 *
 * Usage: bench URL NAME SECONDS
 * Prints one line: `c URL cycles=N seconds=S cycles_per_s=R ns_per_cycle=X p50_ns=A p99_ns=B`.
 * Exit status 1 when a call fails (with fencelock_last_error() on stderr), 2 on bad usage.
 * Driven by bench/c/run.sh, which puts these figures next to fencelock-bench's.
 */
#define _POSIX_C_SOURCE 200809L

#include <fencelock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WARMUP 200

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile as fencelock-bench's Samples::pct picks it: index round(p/100 * (n-1)) of the sorted samples. */
static uint64_t pct(const uint64_t *sorted, size_t n, double p) {
    if (n == 0) return 0;
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

static void die(const char *what, fencelock_status st) {
    fprintf(stderr, "bench: %s failed with status %d: %s\n", what, (int)st, fencelock_last_error());
    exit(1);
}

/* One cycle: lock with the defaults, release, free the handle. */
static void cycle(const fencelock_client *client, const char *name) {
    fencelock_lease *lease = NULL;
    fencelock_status st = fencelock_lock(client, name, NULL, &lease);
    if (st != FENCELOCK_OK) die("fencelock_lock", st);
    st = fencelock_lease_release(lease);
    if (st != FENCELOCK_OK) die("fencelock_lease_release", st);
    fencelock_lease_free(lease);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s URL NAME SECONDS\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *name = argv[2];
    double seconds = strtod(argv[3], NULL);
    if (!(seconds > 0)) {
        fprintf(stderr, "bench: SECONDS must be positive, got %s\n", argv[3]);
        return 2;
    }

    fencelock_client *client = NULL;
    fencelock_status st = fencelock_client_connect(url, &client);
    if (st != FENCELOCK_OK) die("fencelock_client_connect", st);

    for (int i = 0; i < WARMUP; i++) cycle(client, name);

    size_t cap = 1 << 16, n = 0;
    uint64_t *lat = malloc(cap * sizeof *lat);
    if (!lat) return 1;
    const uint64_t span = (uint64_t)(seconds * 1e9);
    const uint64_t start = now_ns();
    uint64_t end = start;
    while (end - start < span) {
        uint64_t t = now_ns();
        cycle(client, name);
        end = now_ns();
        if (n == cap) {
            cap *= 2;
            uint64_t *grown = realloc(lat, cap * sizeof *lat);
            if (!grown) return 1;
            lat = grown;
        }
        lat[n++] = end - t;
    }
    const double elapsed = (double)(end - start) / 1e9;

    st = fencelock_client_close(client);
    if (st != FENCELOCK_OK) die("fencelock_client_close", st);
    fencelock_client_free(client);

    qsort(lat, n, sizeof *lat, cmp_u64);
    const double rate = (double)n / elapsed;
    printf("c %s cycles=%zu seconds=%.3f cycles_per_s=%.0f ns_per_cycle=%.0f p50_ns=%llu p99_ns=%llu\n", url, n,
           elapsed, rate, 1e9 / rate, (unsigned long long)pct(lat, n, 50), (unsigned long long)pct(lat, n, 99));
    free(lat);
    return 0;
}
