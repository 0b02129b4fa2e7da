/* The load client of scripts/bench.sh: sends one request line again and again (or, with --requests, a random one of
 * a file's lines each time) over AF_UNIX and times each round trip (write of the line → its whole answer line read).
 * The same program, with the same request lines, drives the echo server (the baseline) and brokerd, so the ratios
 * compare servers, not clients.
 *
 * Every answer is checked, outside the timed interval: with --echo it must equal the request; otherwise it must
 * contain every --expect string (default: "result"). A benchmark that timed error answers is worthless, so errors
 * are counted, the first one is printed, and the exit status is 1 when there was any. An answer byte for byte the
 * same as the connection's last one that passed is not searched again: with an expected access token of 1-2 KB,
 * three memmem calls over a 5 KB answer cost the client about 4 us per request, CPU that the 64-client run takes
 * from the server it measures (the echo check is a memcmp of the line, and so is this one).
 *
 * usage: load_client SOCKET REQUEST_FILE [--count N] [--warmup N] [--clients C] [--duration SECONDS]
 *                    [--expect STRING]... [--echo]
 *        load_client SOCKET --requests LINES_FILE [the same options]
 *   --clients 1 (default): one connection, --warmup untimed requests, then --count timed ones, one at a time.
 *   --clients C > 1: C connections on C threads, each sending sequential requests for --duration seconds after
 *                    its own warm-up (--warmup / C requests); reports the total rate and the latency under load.
 *   REQUEST_FILE: the one request line, sent again and again (the "repeated" mode).
 *   --requests LINES_FILE (instead of REQUEST_FILE; the "varied" mode): a file of request lines, each optionally
 *                    followed by a TAB and a string its answer must contain (make_cache.py's OUT.json.varied.jsonl).
 *                    Each request sends one of them picked at random (a xorshift generator per thread, seeded by
 *                    the thread's index: the same sequence in every run), never a line the same as the one before
 *                    it, so that no memo of the last request can answer (at least two different lines needed). The
 *                    round trip is timed as in the repeated mode (the pick is before the clock starts) and the check
 *                    is outside the timed interval: with --echo the answer must equal the line sent; otherwise it
 *                    must contain every --expect string (default "result") and the line's own expected string.
 *                    Every answer is searched (no two answers in a row are the same): about 0.7 us of the client's
 *                    CPU for a 5 KB answer and three strings, against a memcmp in the repeated mode.
 * Output (one line, for bench.sh): requests=N errors=N p50_us=X p99_us=X mean_us=X rps=X seconds=X
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_EXPECT 8

static const char *socket_path;
static char *request;
static size_t request_len;

/* --requests: the varied mode's lines */
typedef struct {
    char *line;             /* the request line, with its newline */
    size_t len;             /* with the newline */
    const char *expect;     /* the string its answer must contain, or NULL */
    long distinct;          /* index of the first line with the same bytes: lines alike are never sent in a row */
} request_line;
static request_line *lines;
static long n_lines;
static const char *expect[MAX_EXPECT];
static int n_expect;
static int echo_mode;
static atomic_int stop_flag;
static atomic_long error_count;
static atomic_int first_error_printed;
static pthread_barrier_t start_barrier;

typedef struct {
    long index;              /* the thread's: seeds its xorshift in the varied mode */
    long warmup, count;      /* count < 0: until stop_flag */
    uint32_t *lat_ns;        /* latencies of the timed requests */
    long n, cap;
    int failed;              /* the connection broke: the thread stopped early */
} worker;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int connect_socket(void) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, socket_path, sizeof addr.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        fprintf(stderr, "load_client: connect %s: %s\n", socket_path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Reads one answer line into *buf (grown as needed); returns its length without the newline, -1 on EOF/error.
 * Bytes after the newline stay in the buffer for the next call (there are none: one request is in flight). */
static long read_line(int fd, char **buf, size_t *cap, size_t *len) {
    size_t scanned = 0;
    for (;;) {
        char *nl = memchr(*buf + scanned, '\n', *len - scanned);
        if (nl) return nl - *buf;
        scanned = *len;
        if (*len == *cap) {
            *cap *= 2;
            *buf = realloc(*buf, *cap);
        }
        ssize_t r = read(fd, *buf + *len, *cap - *len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        *len += (size_t)r;
    }
}

/* The varied mode's check of the answer to `sent`: no memo of a passing answer, none repeats the last one. */
static int varied_answer_ok(const char *line, long n, const request_line *sent) {
    if (echo_mode) return (size_t)n + 1 == sent->len && memcmp(line, sent->line, (size_t)n) == 0;
    for (int i = 0; i < n_expect; i++)
        if (!memmem(line, (size_t)n, expect[i], strlen(expect[i]))) return 0;
    return !sent->expect || memmem(line, (size_t)n, sent->expect, strlen(sent->expect)) != NULL;
}

static uint64_t xorshift64(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* `passed`: the connection's last answer that contained every --expect string (malloc'd, *passed_len bytes). */
static int answer_ok(const char *line, long n, char **passed, size_t *passed_len) {
    if (echo_mode) return (size_t)n + 1 == request_len && memcmp(line, request, (size_t)n) == 0;
    if (*passed && *passed_len == (size_t)n && memcmp(line, *passed, (size_t)n) == 0) return 1;
    for (int i = 0; i < n_expect; i++)
        if (!memmem(line, (size_t)n, expect[i], strlen(expect[i]))) return 0;
    free(*passed);
    *passed = malloc((size_t)n);
    if (*passed) memcpy(*passed, line, (size_t)n);
    *passed_len = *passed ? (size_t)n : 0;
    return 1;
}

static void *run(void *arg) {
    worker *w = arg;
    int fd = connect_socket();
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    char *passed = NULL;
    size_t passed_len = 0;
    int barrier_done = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(w->index + 1);  /* never 0 */
    long previous = -1;                                             /* the distinct index of the last line sent */
    const request_line *sent = NULL;
    if (fd < 0) { w->failed = 1; goto out; }
    for (long i = 0; w->count < 0 ? !atomic_load(&stop_flag) : i < w->warmup + w->count; i++) {
        if (i == w->warmup && !barrier_done) {  /* all threads start timing together */
            pthread_barrier_wait(&start_barrier);
            barrier_done = 1;
        }
        const char *p = request;
        size_t left = request_len;
        if (lines) {
            do sent = &lines[xorshift64(&rng) % (uint64_t)n_lines];
            while (sent->distinct == previous);
            previous = sent->distinct;
            p = sent->line;
            left = sent->len;
        }
        uint64_t t0 = now_ns();
        while (left > 0) {
            ssize_t wr = write(fd, p, left);
            if (wr < 0 && errno == EINTR) continue;
            if (wr <= 0) { w->failed = 1; goto out; }
            p += wr;
            left -= (size_t)wr;
        }
        long n = read_line(fd, &buf, &cap, &len);
        uint64_t t1 = now_ns();
        if (n < 0) {
            fprintf(stderr, "load_client: the server closed the connection\n");
            w->failed = 1;
            goto out;
        }
        if (lines ? !varied_answer_ok(buf, n, sent) : !answer_ok(buf, n, &passed, &passed_len)) {
            atomic_fetch_add(&error_count, 1);
            if (atomic_exchange(&first_error_printed, 1) == 0) {
                if (lines)
                    fprintf(stderr, "load_client: unexpected answer to line %ld (%.*s): %.400s\n",
                            (long)(sent - lines) + 1, (int)(sent->len - 1 < 200 ? sent->len - 1 : 200), sent->line,
                            buf);
                else
                    fprintf(stderr, "load_client: unexpected answer: %.400s\n", buf);
            }
        }
        memmove(buf, buf + n + 1, len - (size_t)n - 1);
        len -= (size_t)n + 1;
        if (i >= w->warmup) {
            if (w->n == w->cap) {
                w->cap = w->cap ? w->cap * 2 : 65536;
                w->lat_ns = realloc(w->lat_ns, (size_t)w->cap * sizeof *w->lat_ns);
            }
            w->lat_ns[w->n++] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
        }
    }
out:
    if (!barrier_done) pthread_barrier_wait(&start_barrier);
    if (fd >= 0) close(fd);
    free(buf);
    free(passed);
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Reads the whole file (NUL-terminated); NULL on error. */
static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    size_t cap = 1 << 16, len = 0;
    char *data = malloc(cap);
    for (;;) {
        if (len + 1 >= cap) data = realloc(data, cap *= 2);
        size_t r = fread(data + len, 1, cap - len - 1, f);
        if (r == 0) break;
        len += r;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { perror(path); free(data); return NULL; }
    data[len] = 0;
    *size = len;
    return data;
}

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

/* --requests: one request_line per non-empty line (REQUEST[TAB EXPECTED]); 0, or -1 with a message. */
static int load_lines(const char *path) {
    size_t size;
    char *data = read_file(path, &size);
    if (!data) return -1;
    long cap = 1024;
    lines = malloc((size_t)cap * sizeof *lines);
    for (char *p = data, *end = data + size; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        *nl = 0;
        if (nl > p && nl[-1] == '\r') nl[-1] = 0;
        char *tab = strchr(p, '\t');
        if (tab) *tab = 0;
        size_t len = strlen(p);
        if (len) {
            if (n_lines == cap) lines = realloc(lines, (size_t)(cap *= 2) * sizeof *lines);
            request_line *l = &lines[n_lines];
            l->line = malloc(len + 1);
            memcpy(l->line, p, len);
            l->line[len] = '\n';
            l->len = len + 1;
            l->expect = tab && tab[1] ? tab + 1 : NULL;  /* points into data, kept for the whole run */
            l->distinct = n_lines++;
        }
        p = nl + 1;
    }
    /* Lines alike share the index of the first of them: an open-addressing table of the lines' hashes. */
    size_t slots = 1;
    while (slots < 2 * (size_t)n_lines + 2) slots *= 2;
    long *table = malloc(slots * sizeof *table);
    for (size_t i = 0; i < slots; i++) table[i] = -1;
    long distinct = 0;
    for (long i = 0; i < n_lines; i++) {
        size_t k = (size_t)fnv1a(lines[i].line, lines[i].len) & (slots - 1);
        for (;; k = (k + 1) & (slots - 1)) {
            long j = table[k];
            if (j < 0) { table[k] = i; distinct++; break; }
            if (lines[j].len == lines[i].len && !memcmp(lines[j].line, lines[i].line, lines[i].len)) {
                lines[i].distinct = j;
                break;
            }
        }
    }
    free(table);
    if (distinct < 2) {
        fprintf(stderr, "load_client: %s: %ld different request lines; the varied mode needs at least two\n", path,
                distinct);
        return -1;
    }
    return 0;
}

/* nearest-rank percentile */
static double pct_us(const uint32_t *v, long n, double p) {
    long rank = (long)(p * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    return v[rank - 1] / 1000.0;
}

int main(int argc, char **argv) {
    long count = 20000, warmup = 2000, clients = 1;
    double duration = 3;
    const char *request_file = NULL, *lines_file = NULL;
    if (argc < 3) {
    usage:
        fprintf(stderr, "usage: %s SOCKET {REQUEST_FILE | --requests LINES_FILE} [--count N] [--warmup N] "
                        "[--clients C] [--duration S] [--expect STRING]... [--echo]\n", argv[0]);
        return 2;
    }
    socket_path = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (i == 2 && strncmp(a, "--", 2) != 0) { request_file = a; continue; }
        if (!strcmp(a, "--echo")) { echo_mode = 1; continue; }
        if (!v) { fprintf(stderr, "load_client: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--requests")) lines_file = v;
        else if (!strcmp(a, "--count")) count = atol(v);
        else if (!strcmp(a, "--warmup")) warmup = atol(v);
        else if (!strcmp(a, "--clients")) clients = atol(v);
        else if (!strcmp(a, "--duration")) duration = atof(v);
        else if (!strcmp(a, "--expect") && n_expect < MAX_EXPECT) expect[n_expect++] = v;
        else { fprintf(stderr, "load_client: unknown option %s\n", a); return 2; }
    }
    if (!request_file == !lines_file) goto usage;  /* one of the two */
    if (!n_expect) expect[n_expect++] = "\"result\"";
    if (clients < 1 || clients > 1024 || count < 1 || warmup < 0 || duration <= 0 || duration > 600) {
        fprintf(stderr, "load_client: bad numbers\n");
        return 2;
    }

    if (lines_file) {
        if (load_lines(lines_file) < 0) return 2;
    } else {
        FILE *f = fopen(request_file, "rb");
        if (!f) { perror(request_file); return 2; }
        request = malloc(1 << 21);
        request_len = fread(request, 1, (1 << 21) - 2, f);
        fclose(f);
        while (request_len && (request[request_len - 1] == '\n' || request[request_len - 1] == '\r')) request_len--;
        request[request_len++] = '\n';  /* exactly one newline: one message */
    }

    worker *ws = calloc((size_t)clients, sizeof *ws);
    pthread_t *ts = calloc((size_t)clients, sizeof *ts);
    pthread_barrier_init(&start_barrier, NULL, (unsigned)clients + 1);
    for (long c = 0; c < clients; c++) {
        ws[c].index = c;
        ws[c].warmup = clients == 1 ? warmup : warmup / clients;
        ws[c].count = clients == 1 ? count : -1;
        pthread_create(&ts[c], NULL, run, &ws[c]);
    }
    pthread_barrier_wait(&start_barrier);
    uint64_t t0 = now_ns();
    if (clients > 1) {
        struct timespec d = {(time_t)duration, (long)((duration - (double)(time_t)duration) * 1e9)};
        while (nanosleep(&d, &d) < 0 && errno == EINTR) {}
        atomic_store(&stop_flag, 1);
    }
    for (long c = 0; c < clients; c++) pthread_join(ts[c], NULL);
    double seconds = (double)(now_ns() - t0) / 1e9;

    long total = 0, failed = 0;
    for (long c = 0; c < clients; c++) { total += ws[c].n; failed += ws[c].failed; }
    uint32_t *all = malloc((size_t)(total ? total : 1) * sizeof *all);
    long k = 0;
    double sum = 0;
    for (long c = 0; c < clients; c++)
        for (long i = 0; i < ws[c].n; i++) { all[k++] = ws[c].lat_ns[i]; sum += ws[c].lat_ns[i]; }
    if (total == 0 || failed) {
        fprintf(stderr, "load_client: %ld of %ld connections failed, %ld requests timed\n", failed, clients, total);
        return 1;
    }
    qsort(all, (size_t)total, sizeof *all, cmp_u32);
    long errors = atomic_load(&error_count);
    printf("requests=%ld errors=%ld p50_us=%.1f p99_us=%.1f mean_us=%.1f rps=%.0f seconds=%.2f\n", total, errors,
           pct_us(all, total, 0.50), pct_us(all, total, 0.99), sum / (double)total / 1000.0,
           (double)total / seconds, seconds);
    return errors ? 1 : 0;
}
