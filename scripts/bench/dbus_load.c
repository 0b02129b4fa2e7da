/* The D-Bus load client of scripts/bench.sh (scripts/bench/dbus.sh): calls DESTINATION's
 * com.microsoft.identity.Broker1.acquireTokenSilently("0.0", correlation id, request JSON) on the session bus
 * (DBUS_SESSION_BUS_ADDRESS) one call at a time, and times each round trip (call sent → reply in). The same program
 * and requests drive the sd-bus echo service (dbus_echo, the baseline) and brokerd, so the ratios compare services.
 *
 * Each call's message is built before its timer starts; each answer is checked after it stops: a D-Bus error is an
 * error; with --echo the reply must be a non-empty string, otherwise it must contain every --expect string (default:
 * "accessToken":") and the request line's own expected text. Errors are counted, the first is printed, and the exit
 * status is 1 when there was any: a benchmark that timed error answers is worthless.
 *
 * usage: dbus_load DESTINATION REQUEST_FILE [--varied] [--count N] [--warmup N] [--expect STRING]... [--echo]
 *                  [--seed N] [--save FILE] [--wait SECONDS]
 *   REQUEST_FILE: one request JSON (repeated mode: the same request every call), or with --varied a file of lines
 *                 `REQUEST_JSON[<TAB>EXPECTED]`: each call takes a random line (--seed, default 1), never the same
 *                 line twice in a row, and its answer must contain EXPECTED too (unless --echo).
 *   --save FILE:  writes the first answer to FILE (the echo service replies with it).
 *   --wait S:     first waits up to S seconds for DESTINATION to appear on the bus (a service starting up).
 * Output (one line, as load_client's): requests=N errors=N p50_us=X p99_us=X mean_us=X rps=X seconds=X
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#define MAX_EXPECT 8
#define OBJECT_PATH "/com/microsoft/identity/broker1"
#define INTERFACE "com.microsoft.identity.Broker1"
#define METHOD "acquireTokenSilently"
#define CORRELATION_ID "5c3f2a1e-8d4b-4c6a-9e7f-0b1a2c3d4e5f"
#define CALL_TIMEOUT_US (30ull * 1000000)

typedef struct {
    char *request;
    const char *expected;  /* NULL: nothing of its own */
} line;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 1;
static uint64_t next_random(void) {  /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile */
static double pct_us(const uint32_t *v, long n, double p) {
    long rank = (long)(p * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    return v[rank - 1] / 1000.0;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t r; (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Waits until `name` has an owner on the bus; 0 when it has. */
static int wait_for(sd_bus *bus, const char *name, double seconds) {
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    for (;;) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int has = 0;
        int r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "NameHasOwner", &error, &reply, "s", name);
        if (r >= 0) r = sd_bus_message_read(reply, "b", &has);
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
        if (r >= 0 && has) return 0;
        if (now_ns() > deadline) return -1;
        usleep(10000);
    }
}

int main(int argc, char **argv) {
    long count = 20000, warmup = 2000;
    int varied = 0, echo_mode = 0, n_expect = 0;
    const char *expect[MAX_EXPECT], *save = NULL;
    double wait_seconds = 0;
    if (argc < 3) {
        fprintf(stderr, "usage: %s DESTINATION REQUEST_FILE [--varied] [--count N] [--warmup N] [--expect STRING]... "
                        "[--echo] [--seed N] [--save FILE] [--wait SECONDS]\n", argv[0]);
        return 2;
    }
    const char *destination = argv[1];
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--echo")) { echo_mode = 1; continue; }
        if (!strcmp(a, "--varied")) { varied = 1; continue; }
        if (!v) { fprintf(stderr, "dbus_load: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--count")) count = atol(v);
        else if (!strcmp(a, "--warmup")) warmup = atol(v);
        else if (!strcmp(a, "--seed")) rng_state = strtoull(v, NULL, 10) * 2654435761u + 1;
        else if (!strcmp(a, "--save")) save = v;
        else if (!strcmp(a, "--wait")) wait_seconds = atof(v);
        else if (!strcmp(a, "--expect") && n_expect < MAX_EXPECT) expect[n_expect++] = v;
        else { fprintf(stderr, "dbus_load: unknown option %s\n", a); return 2; }
    }
    if (!n_expect) expect[n_expect++] = "\"accessToken\":\"";
    if (count < 1 || warmup < 0) { fprintf(stderr, "dbus_load: bad numbers\n"); return 2; }

    size_t len;
    char *text = read_file(argv[2], &len);
    if (!text) return 2;
    line *lines = NULL;
    long n_lines = 0;
    if (varied) {
        long cap = 0;
        for (char *p = text, *end; *p; p = end) {
            end = strchr(p, '\n');
            end = end ? (*end = 0, end + 1) : p + strlen(p);
            if (!*p) continue;
            if (n_lines == cap) lines = realloc(lines, (size_t)(cap = cap ? cap * 2 : 1024) * sizeof *lines);
            char *tab = strchr(p, '\t');
            if (tab) *tab = 0;
            lines[n_lines++] = (line){p, tab && tab[1] ? tab + 1 : NULL};
        }
    } else {
        while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = 0;
        lines = malloc(sizeof *lines);
        lines[n_lines++] = (line){text, NULL};
    }
    if (n_lines == 0 || (varied && n_lines < 2)) {
        fprintf(stderr, "dbus_load: %s: %s\n", argv[2], varied ? "--varied needs at least two lines" : "empty");
        return 2;
    }

    sd_bus *bus = NULL;
    int r = sd_bus_open_user(&bus);
    if (r < 0) { fprintf(stderr, "dbus_load: session bus: %s\n", strerror(-r)); return 1; }
    if (wait_seconds > 0 && wait_for(bus, destination, wait_seconds) < 0) {
        fprintf(stderr, "dbus_load: %s did not appear on the bus within %.0f s\n", destination, wait_seconds);
        return 1;
    }

    uint32_t *lat_ns = malloc((size_t)count * sizeof *lat_ns);
    long errors = 0, timed = 0, previous = -1;
    double sum = 0;
    uint64_t start = 0;
    for (long i = 0; i < warmup + count; i++) {
        long k = 0;
        if (varied) {  /* a random line other than the previous one */
            k = (long)(next_random() % (uint64_t)(previous < 0 ? n_lines : n_lines - 1));
            if (previous >= 0 && k >= previous) k++;
            previous = k;
        }
        sd_bus_message *call = NULL, *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        r = sd_bus_message_new_method_call(bus, &call, destination, OBJECT_PATH, INTERFACE, METHOD);
        if (r >= 0) r = sd_bus_message_append(call, "sss", "0.0", CORRELATION_ID, lines[k].request);
        if (r < 0) { fprintf(stderr, "dbus_load: building the call: %s\n", strerror(-r)); return 1; }
        if (i == warmup) start = now_ns();

        uint64_t t0 = now_ns();
        r = sd_bus_call(bus, call, CALL_TIMEOUT_US, &error, &reply);
        uint64_t t1 = now_ns();

        const char *answer = NULL, *problem = NULL;
        if (r < 0) {
            problem = error.name ? error.name : strerror(-r);
        } else if (sd_bus_message_read(reply, "s", &answer) < 0 || !answer || !*answer) {
            problem = "no string in the reply";
        } else if (!echo_mode) {
            for (int e = 0; e < n_expect && !problem; e++)
                if (!strstr(answer, expect[e])) problem = expect[e];
            if (!problem && lines[k].expected && !strstr(answer, lines[k].expected)) problem = lines[k].expected;
        }
        if (problem) {
            if (errors++ == 0)
                fprintf(stderr, "dbus_load: unexpected answer (%.100s) to line %ld: %.400s%s%.200s\n", problem, k + 1,
                        answer ? answer : "", error.message ? " " : "", error.message ? error.message : "");
        } else if (save) {
            FILE *f = fopen(save, "wb");
            if (!f || fputs(answer, f) < 0 || fclose(f) != 0) { perror(save); return 1; }
            save = NULL;
        }
        sd_bus_message_unref(reply);
        sd_bus_message_unref(call);
        sd_bus_error_free(&error);
        if (r == -ENOTCONN || r == -ECONNRESET) { fprintf(stderr, "dbus_load: the bus connection broke\n"); return 1; }
        if (i >= warmup) {
            lat_ns[timed++] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
            sum += (double)(t1 - t0);
        }
    }
    double seconds = (double)(now_ns() - start) / 1e9;
    sd_bus_flush_close_unref(bus);
    if (save) { fprintf(stderr, "dbus_load: no answer passed: nothing saved\n"); return 1; }

    qsort(lat_ns, (size_t)timed, sizeof *lat_ns, cmp_u32);
    printf("requests=%ld errors=%ld p50_us=%.1f p99_us=%.1f mean_us=%.1f rps=%.0f seconds=%.2f\n", timed, errors,
           pct_us(lat_ns, timed, 0.50), pct_us(lat_ns, timed, 0.99), sum / (double)timed / 1000.0,
           (double)timed / seconds, seconds);
    return errors ? 1 : 0;
}
