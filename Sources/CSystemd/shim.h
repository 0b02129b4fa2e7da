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

#include <malloc.h>

// glibc gives each thread that allocates an arena of its own (up to 8 per core), and each arena keeps memory it
// freed. brokerd has a handful of threads and no allocation-heavy parallel work: two arenas keep idle RSS down.
static inline int brokerd_limit_malloc_arenas(void) {
    return mallopt(M_ARENA_MAX, 2);
}

// Gives freed heap memory back to the system (after a large import or export).
static inline int brokerd_trim_heap(void) {
    return malloc_trim(0);
}
