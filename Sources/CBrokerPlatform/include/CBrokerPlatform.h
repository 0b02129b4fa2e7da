#pragma once
#include <sys/types.h>

// System calls and socket options that Swift's Glibc module does not show (syscall is variadic; Debian 12's headers
// predate SO_PEERPIDFD). Each returns what the kernel returns: -1 with errno on failure.

// pidfd_open(2) (Linux 5.3): a descriptor that pins the process `pid`, close-on-exec.
int brokerd_pidfd_open(pid_t pid);

// pidfd_send_signal(2) (Linux 5.1); signal 0 asks whether the pinned process is still alive.
int brokerd_pidfd_send_signal(int pidfd, int signal);

// getsockopt(SO_PEERPIDFD) (Linux 6.5): a pidfd of the process that connected to the Unix socket `fd`, taken by the
// kernel at connect time. ENOPROTOOPT on older kernels.
int brokerd_peer_pidfd(int fd);

// statfs(2)'s f_type of the file system holding `path` (sys/vfs.h is not in Swift's Glibc module); -1 with errno.
long brokerd_filesystem_type(const char *path);

#include "NetworkChanges.h"
