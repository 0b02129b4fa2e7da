#pragma once
#include <sys/types.h>
#include <pthread.h>

// System calls and socket options that Swift's Glibc module does not show (syscall is variadic; Debian 12's headers
// predate SO_PEERPIDFD). Each returns what the kernel returns: -1 with errno on failure.

// pidfd_open(2) (Linux 5.3): a descriptor that pins the process `pid`, close-on-exec.
int brokerd_pidfd_open(pid_t pid);

// getsockopt(SO_PEERPIDFD) (Linux 6.5): a pidfd of the process that connected to the Unix socket `fd`, taken by the
// kernel at connect time. ENOPROTOOPT on older kernels.
int brokerd_peer_pidfd(int fd);

// statfs(2)'s f_type of the file system holding `path` (sys/vfs.h is not in Swift's Glibc module); -1 with errno.
long brokerd_filesystem_type(const char *path);

// prctl is variadic: fixed-arity wrappers for PR_SET_DUMPABLE 0 (no core dumps, no ptrace by the user's other
// processes) and PR_GET_DUMPABLE.
int brokerd_set_nondumpable(void);
int brokerd_is_dumpable(void);

// glibc gives each thread that allocates an arena of its own (up to 8 per core), and each arena keeps memory it
// freed. brokerd has a handful of threads and no allocation-heavy parallel work: two arenas keep idle RSS down.
int brokerd_limit_malloc_arenas(void);

// Gives freed heap memory back to the system (after a large import or export).
int brokerd_trim_heap(void);

// Fills buf with up to len bytes from the kernel's CSPRNG (getrandom): the count filled, or -1 with errno set.
long brokerd_random_bytes(void *buf, unsigned long len);

// accept4 and eventfd, which Swift's Glibc module does not show (a GNU extension, a header it leaves out): the
// connection and the wake-up descriptors of brokerd's socket front end must be close-on-exec from the start (the
// browser it spawns must not inherit them). A connection is left blocking (each read and write says MSG_DONTWAIT,
// except the read that waits for an app's next request after a cache hit); the wake-up descriptor is non-blocking.
int brokerd_accept_cloexec(int fd);
int brokerd_eventfd_nonblocking(void);

// A reader-writer lock on which a waiting writer goes before readers that come after it (glibc's default lets
// readers in for as long as any reader holds it: under a steady stream of cache hits, the broker's writes would
// wait for ever). pthread_rwlockattr_setkind_np is a GNU extension that Swift's Glibc module does not show.
int brokerd_rwlock_init_writer_preferring(pthread_rwlock_t *lock);

#include "NetworkChanges.h"
