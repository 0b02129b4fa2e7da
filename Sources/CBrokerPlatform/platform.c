#define _GNU_SOURCE
#include "CBrokerPlatform.h"
#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <malloc.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
// asm-generic/socket.h: the value on every architecture brokerd is built for (x86-64, arm64).
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

int brokerd_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int brokerd_peer_pidfd(int fd) {
    int pidfd = -1;
    socklen_t length = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) return -1;
    return pidfd;
}

#include <sys/vfs.h>

long brokerd_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}

int brokerd_set_nondumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int brokerd_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

int brokerd_limit_malloc_arenas(void) { return mallopt(M_ARENA_MAX, 4); }

int brokerd_trim_heap(void) { return malloc_trim(0); }

long brokerd_random_bytes(void *buf, unsigned long len) { return getrandom(buf, len, 0); }

int brokerd_accept_cloexec(int fd) { return accept4(fd, 0, 0, SOCK_CLOEXEC); }

int brokerd_eventfd_nonblocking(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int brokerd_rwlock_init_writer_preferring(pthread_rwlock_t *lock) {
    pthread_rwlockattr_t attributes;
    if (pthread_rwlockattr_init(&attributes) != 0) return -1;
    pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int result = pthread_rwlock_init(lock, &attributes);
    pthread_rwlockattr_destroy(&attributes);
    return result;
}
