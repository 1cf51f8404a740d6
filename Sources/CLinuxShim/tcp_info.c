// Apart from shim.c: <linux/tcp.h> has the newer tcp_info fields, and it clashes with
// the <netinet/tcp.h> that CLinuxShim.h includes.
#include <stddef.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/tcp.h>

long long salvo_acknowledged_bytes(int fd) {
    struct tcp_info info;
    socklen_t length = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    if (length < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) return -1;
    return (long long)info.tcpi_bytes_acked;
}

long long salvo_smoothed_round_trip_us(int fd) {
    struct tcp_info info;
    socklen_t length = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    if (length < offsetof(struct tcp_info, tcpi_rtt) + sizeof(info.tcpi_rtt)) return -1;
    return (long long)info.tcpi_rtt;
}
