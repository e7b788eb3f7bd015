/* A wall-clock offset for the Redis servers of the server-clock-jump fault, preloaded with LD_PRELOAD.
 *
 * libfaketime cannot load into Debian's redis-server: jemalloc calls clock_gettime() while libfaketime is still
 * initialising (its dlsym allocates), and the server hangs (libfaketime issue #130). This shim needs no dlsym and no
 * allocation: it asks the kernel directly and adds the offset in seconds written in $FENCELOCK_CLOCK_FILE ("+4",
 * "-4", "+0"), read again at most every 5 ms. Only the wall clock moves (CLOCK_REALTIME, gettimeofday, time): that is
 * what Redis expires keys by and what TIME answers, and what an NTP step moves; CLOCK_MONOTONIC stays true.
 *
 * Built by locktest (servers.rs) with `cc -O2 -shared -fPIC`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(clockid_t id) {
    struct timespec ts;
    if (syscall(SYS_clock_gettime, id, &ts) != 0) return 0;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The offset in ns: cached for 5 ms of CLOCK_MONOTONIC. Relaxed atomics: several threads may read the file at once,
 * and any of their answers is a correct one. */
static long long offset_ns(void) {
    static long long cached, checked;
    long long mono = now_ns(CLOCK_MONOTONIC);
    long long last = __atomic_load_n(&checked, __ATOMIC_RELAXED);
    if (last != 0 && mono - last < 5000000LL) return __atomic_load_n(&cached, __ATOMIC_RELAXED);
    const char *path = getenv("FENCELOCK_CLOCK_FILE");
    long long off = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        char buf[32];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            off = strtoll(buf, NULL, 10) * 1000000000LL;
        }
    }
    __atomic_store_n(&cached, off, __ATOMIC_RELAXED);
    __atomic_store_n(&checked, mono, __ATOMIC_RELAXED);
    return off;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long rc = syscall(SYS_clock_gettime, id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
        ts->tv_sec = t / 1000000000LL;
        ts->tv_nsec = t % 1000000000LL;
    }
    return (int)rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
