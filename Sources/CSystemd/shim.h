#pragma once
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/prctl.h>

// prctl is variadic and so not callable from Swift: a fixed-arity wrapper.
static inline int brokerd_set_nondumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static inline int brokerd_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}
