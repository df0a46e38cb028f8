#ifndef CSOCKETSHIM_H
#define CSOCKETSHIM_H
// Socket glue Swift cannot express: ancillary data (CMSG_* macros) to pass file descriptors over a
// Unix socket (SCM_RIGHTS), memfd_create, which glibc declares only under _GNU_SOURCE, and eventfd;
// and prctl, which is variadic.
// Every name is `ork_`. Each call returns 0 or a positive count on success, -errno on failure.
#include <stddef.h>
#include <sys/types.h>

/// Most descriptors one message carries.
#define ORK_MAX_FDS 8

/// Sends `length` bytes (at least one) and `fd_count` descriptors in one message on a connected
/// Unix stream or datagram socket. Returns the bytes sent or -errno. Retries EINTR.
ssize_t ork_send_fds(int socket, const void *bytes, size_t length, const int *fds, int fd_count);

/// Receives up to `capacity` bytes and up to `fd_capacity` descriptors (opened close-on-exec).
/// Returns the bytes received (0 at end of stream) or -errno; `*fd_count` is how many descriptors
/// came. Descriptors beyond `fd_capacity` are closed, and the call returns -EMSGSIZE (MSG_CTRUNC).
ssize_t ork_receive_fds(int socket, void *bytes, size_t capacity, int *fds, int fd_capacity, int *fd_count);

/// An anonymous shared-memory file of `size` bytes (memfd, close-on-exec, sealable). Returns the
/// descriptor or -errno.
int ork_memfd_create(const char *name, size_t size);

/// Forbids growing or shrinking a memfd (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL): a receiver
/// can map it without fearing SIGBUS. 0 or -errno.
int ork_memfd_seal_size(int fd);

/// An eventfd counter (close-on-exec, non-blocking): the frame ring's wake-up, handed over once with
/// its memory. Returns the descriptor or -errno (glibc's <sys/eventfd.h> does not reach Swift).
int ork_eventfd_create(void);

/// A pipe, both ends close-on-exec from the start (pipe2, which glibc declares only under
/// _GNU_SOURCE): no program another thread starts meanwhile inherits it. 0 or -errno.
int ork_pipe_cloexec(int fds[2]);

/// No transparent huge pages for this process and the programs it starts, even where a library asks
/// for them with madvise(MADV_HUGEPAGE) (prctl PR_SET_THP_DISABLE). 0 or -errno.
int ork_disable_transparent_huge_pages(void);

#endif
