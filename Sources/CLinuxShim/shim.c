#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <pthread.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include "CLinuxShim.h"

int salvo_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int salvo_accept4_nonblocking(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int salvo_pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

const char *salvo_errno_name(int err) {
    return strerrorname_np(err);
}

int salvo_gettid(void) {
    return (int)gettid();
}

void salvo_ignore_sigpipe(void) {
    signal(SIGPIPE, SIG_IGN);
}

void salvo_set_current_thread_name(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof(truncated) - 1);
    truncated[sizeof(truncated) - 1] = 0;
    pthread_setname_np(pthread_self(), truncated);
}

int salvo_unacknowledged_bytes(int fd) {
    int bytes = 0;
    if (ioctl(fd, SIOCOUTQ, &bytes) != 0) return -1;
    return bytes;
}

int salvo_open_tun(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct ifreq request;
    memset(&request, 0, sizeof(request));
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &request) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int salvo_enter_network_namespace(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int result = setns(fd, CLONE_NEWNET);
    int saved = errno;
    close(fd);
    errno = saved;
    return result;
}
