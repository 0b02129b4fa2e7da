/* The D-Bus baseline of scripts/bench.sh (scripts/bench/dbus.sh): the smallest sd-bus service of brokerd's method
 * shape. It owns BUS_NAME on the session bus (DBUS_SESSION_BUS_ADDRESS) and exports, at brokerd's object path and
 * interface, acquireTokenSilently(s protocolVersion, s correlationId, s requestJSON) → s, answering every call with
 * ANSWER_FILE's text: brokerd's real answer, so the bytes on the bus are the same both ways. It reads the three
 * arguments (as brokerd must) and nothing else: no JSON, no cache, one thread, sd-bus's own loop.
 *
 * usage: dbus_echo BUS_NAME ANSWER_FILE       (serves until SIGTERM/SIGINT)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

static char *answer;

static int silently(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    const char *version, *correlation, *request;
    int r = sd_bus_message_read(m, "sss", &version, &correlation, &request);
    if (r < 0) return r;  /* sd-bus answers the caller with the error */
    return sd_bus_reply_method_return(m, "s", answer);
}

static const sd_bus_vtable vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("acquireTokenSilently", "sss", "s", silently, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BUS_NAME ANSWER_FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror("dbus_echo: answer file"); return 2; }
    size_t cap = 1 << 20;
    answer = malloc(cap + 1);
    size_t n = fread(answer, 1, cap, f);
    fclose(f);
    while (n && (answer[n - 1] == '\n' || answer[n - 1] == '\r')) n--;
    answer[n] = 0;
    if (n == 0 || strlen(answer) != n) {
        fprintf(stderr, "dbus_echo: the answer file must hold a non-empty text without NUL bytes\n");
        return 2;
    }

    sd_bus *bus = NULL;
    int r = sd_bus_open_user(&bus);
    if (r >= 0) r = sd_bus_add_object_vtable(bus, NULL, "/com/microsoft/identity/broker1",
                                             "com.microsoft.identity.Broker1", vtable, NULL);
    if (r >= 0) r = sd_bus_request_name(bus, argv[1], 0);
    if (r < 0) {
        fprintf(stderr, "dbus_echo: %s: %s\n", argv[1], strerror(-r));
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};  /* no SA_RESTART: sd_bus_wait returns -EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    while (!stop) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) { fprintf(stderr, "dbus_echo: %s\n", strerror(-r)); return 1; }
        if (r > 0) continue;  /* more may be queued */
        r = sd_bus_wait(bus, UINT64_MAX);
        if (r < 0 && r != -EINTR) { fprintf(stderr, "dbus_echo: %s\n", strerror(-r)); return 1; }
    }
    sd_bus_flush_close_unref(bus);
    return 0;
}
