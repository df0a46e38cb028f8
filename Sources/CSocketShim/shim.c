#define _GNU_SOURCE
#include "CSocketShim.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

_Static_assert(ORK_MAX_FDS * sizeof(int) <= 64, "the control buffer below holds ORK_MAX_FDS descriptors");

ssize_t ork_send_fds(int socket, const void *bytes, size_t length, const int *fds, int fd_count) {
    if (length == 0 || fd_count < 0 || fd_count > ORK_MAX_FDS) return -EINVAL;
    struct iovec iov = { .iov_base = (void *)bytes, .iov_len = length };
    union { struct cmsghdr header; char buffer[CMSG_SPACE(ORK_MAX_FDS * sizeof(int))]; } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd_count > 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = CMSG_SPACE(fd_count * sizeof(int));
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
        memcpy(CMSG_DATA(cmsg), fds, fd_count * sizeof(int));
    }
    ssize_t sent;
    do { sent = sendmsg(socket, &message, MSG_NOSIGNAL); } while (sent < 0 && errno == EINTR);
    return sent < 0 ? -errno : sent;
}

ssize_t ork_receive_fds(int socket, void *bytes, size_t capacity, int *fds, int fd_capacity, int *fd_count) {
    *fd_count = 0;
    struct iovec iov = { .iov_base = bytes, .iov_len = capacity };
    union { struct cmsghdr header; char buffer[CMSG_SPACE(ORK_MAX_FDS * sizeof(int))]; } control;
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1,
                              .msg_control = control.buffer, .msg_controllen = sizeof control.buffer };
    ssize_t received;
    do { received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC); } while (received < 0 && errno == EINTR);
    if (received < 0) return -errno;
    int truncated = (message.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&message); cmsg != NULL; cmsg = CMSG_NXTHDR(&message, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int received_fds[ORK_MAX_FDS];
        if (count > ORK_MAX_FDS) count = ORK_MAX_FDS;
        memcpy(received_fds, CMSG_DATA(cmsg), count * sizeof(int));
        for (int i = 0; i < count; i++) {
            if (*fd_count < fd_capacity) fds[(*fd_count)++] = received_fds[i];
            else { close(received_fds[i]); truncated = 1; }
        }
    }
    return truncated ? -EMSGSIZE : received;
}

int ork_memfd_create(const char *name, size_t size) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    if (ftruncate(fd, (off_t)size) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int ork_memfd_seal_size(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) == 0 ? 0 : -errno;
}

int ork_eventfd_create(void) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

int ork_disable_transparent_huge_pages(void) {
    return prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 ? 0 : -errno;
}

int ork_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno;
}
