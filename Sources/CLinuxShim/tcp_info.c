// Apart from shim.c: <linux/tcp.h> has the newer tcp_info fields, and it clashes with
// the <netinet/tcp.h> that CLinuxShim.h includes.
#include <stddef.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/tcp.h>

// The socket's TCP_INFO field `field`, or -1 when it cannot be read or the kernel's
// tcp_info is too old to have it.
#define TCP_INFO_FIELD(fd, field)                                                          \
    do {                                                                                   \
        struct tcp_info info;                                                              \
        socklen_t length = sizeof(info);                                                   \
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;         \
        if (length < offsetof(struct tcp_info, field) + sizeof(info.field)) return -1;     \
        return (long long)info.field;                                                      \
    } while (0)

long long salvo_acknowledged_bytes(int fd) { TCP_INFO_FIELD(fd, tcpi_bytes_acked); }

long long salvo_smoothed_round_trip_us(int fd) { TCP_INFO_FIELD(fd, tcpi_rtt); }
