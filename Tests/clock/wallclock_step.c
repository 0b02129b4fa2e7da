// Preloaded (LD_PRELOAD) into brokerd and the test IdP by ClockStepTests: their wall clock reads the real time
// plus the whole seconds in the file $WALLCLOCK_STEP_FILE, read again at every call, so a test steps it by rewriting
// the file. Only the wall clock moves, as in a real step (an NTP correction, a clock set by hand, the catch-up after
// a suspend): CLOCK_MONOTONIC, CLOCK_BOOTTIME and every timer are left alone. libfaketime was tried first; it
// also rewrites timerfd and epoll timeouts, which real steps do not touch, so a step back stalled every timer.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

// Raw syscalls, no stdio: this runs inside clock_gettime, which the allocator and the runtime may call.
static long long step_seconds(void) {
    const char *path = getenv("WALLCLOCK_STEP_FILE");
    if (path == NULL) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[32];
    ssize_t length = read(fd, text, sizeof text - 1);
    close(fd);
    if (length <= 0) return 0;
    text[length] = 0;
    return strtoll(text, NULL, 10);
}

static int (*real_clock_gettime)(clockid_t, struct timespec *);

int clock_gettime(clockid_t clock, struct timespec *now) {
    if (real_clock_gettime == NULL) real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    int result = real_clock_gettime(clock, now);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) now->tv_sec += step_seconds();
    return result;
}

time_t time(time_t *out) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (out != NULL) *out = now.tv_sec;
    return now.tv_sec;
}

int gettimeofday(struct timeval *restrict out, void *restrict zone) {
    (void)zone;
    struct timespec now;
    int result = clock_gettime(CLOCK_REALTIME, &now);
    if (result == 0 && out != NULL) {
        out->tv_sec = now.tv_sec;
        out->tv_usec = now.tv_nsec / 1000;
    }
    return result;
}

int timespec_get(struct timespec *now, int base) {
    if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, now) != 0) return 0;
    return base;
}
