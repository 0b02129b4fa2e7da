#define _GNU_SOURCE  /* memrchr, accept4 */
/* The baseline of scripts/bench.sh: the fastest line-echo server we can write in a few lines, on the same kind of
 * socket brokerd serves (AF_UNIX, SOCK_STREAM). brokerd's figures are reported as ratios against it, so what it
 * measures is the cost of the kernel round trip and the client, not of any JSON or cache work.
 *
 * One thread per connection with blocking I/O: with at most 64 connections this is as fast as epoll and has no
 * event-loop overhead at all. Each read's complete lines are written back in one write (a client that pipelines
 * gets them in one go); a partial line waits in the buffer for its end.
 *
 * usage: echo_server SOCKET_PATH [REPLY_FILE]      (serves until SIGTERM/SIGINT; unlinks the path at exit)
 *   REPLY_FILE: answer every line with this file's content (one line) instead of the line itself, so that the
 *   floor can also be measured with a reply as large as brokerd's answer (the request line is ~360 bytes, a token
 *   answer ~5 KB: moving the answer is part of the physical cost).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *socket_path;
static char *reply;       /* NULL: echo */
static size_t reply_len;

static void on_signal(int sig) {
    (void)sig;
    unlink(socket_path);
    _exit(0);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *serve(void *arg) {
    int fd = (int)(long)arg;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len == cap) {  /* a line longer than the buffer: grow, the way a real server must */
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t scanned = len;
        len += (size_t)r;
        char *last = memrchr(buf + scanned, '\n', len - scanned);
        if (!last) continue;
        size_t complete = (size_t)(last - buf) + 1;
        if (reply) {
            for (char *p = buf; p < buf + complete; p = (char *)memchr(p, '\n', (size_t)(buf + complete - p)) + 1)
                if (write_all(fd, reply, reply_len) < 0) goto done;
        } else if (write_all(fd, buf, complete) < 0) {
            break;
        }
        memmove(buf, buf + complete, len - complete);
        len -= complete;
    }
done:
    free(buf);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s SOCKET_PATH [REPLY_FILE]\n", argv[0]);
        return 2;
    }
    socket_path = argv[1];
    if (argc == 3) {
        FILE *f = fopen(argv[2], "rb");
        if (!f) {
            perror("echo_server: reply file");
            return 2;
        }
        size_t cap = 1 << 20;
        reply = malloc(cap);
        reply_len = fread(reply, 1, cap, f);
        fclose(f);
        if (reply_len == 0 || reply[reply_len - 1] != '\n') {
            fprintf(stderr, "echo_server: the reply file must hold one line ending in a newline\n");
            return 2;
        }
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof addr.sun_path) {
        fprintf(stderr, "echo_server: socket path too long\n");
        return 2;
    }
    strcpy(addr.sun_path, socket_path);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(socket_path);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 512) < 0) {
        perror("echo_server");
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            perror("echo_server: accept");
            return 1;
        }
        pthread_t t;
        if (pthread_create(&t, &attr, serve, (void *)(long)fd) != 0) close(fd);
    }
}
