/* A tiny test harness for the C tests: CHECK counts, failures print file:line and fencelock_last_error(). */
#ifndef FENCELOCK_CHECK_H
#define FENCELOCK_CHECK_H

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fencelock.h"

static atomic_int checks_passed;
static atomic_int checks_failed;

#define CHECK(cond)                                                                                    \
    do {                                                                                               \
        if (cond) {                                                                                    \
            atomic_fetch_add(&checks_passed, 1);                                                       \
        } else {                                                                                       \
            atomic_fetch_add(&checks_failed, 1);                                                       \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond,            \
                    fencelock_last_error());                                                           \
        }                                                                                              \
    } while (0)

/* A call that must return `want`. */
#define CHECK_STATUS(call, want) CHECK((call) == (want))

/* The last error message on this thread contains `part`. */
#define CHECK_ERROR_MENTIONS(part) CHECK(strstr(fencelock_last_error(), (part)) != NULL)

static inline long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Prints the per-binary result line run.sh adds up; the exit status is the failure count (capped). */
static inline int report(const char *suite) {
    int p = atomic_load(&checks_passed), f = atomic_load(&checks_failed);
    printf("%s: %d passed, %d failed\n", suite, p, f);
    return f > 100 ? 100 : f;
}

#endif
