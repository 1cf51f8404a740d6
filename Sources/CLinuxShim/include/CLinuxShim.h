#ifndef SALVO_CLINUXSHIM_H
#define SALVO_CLINUXSHIM_H

// The Linux system calls Salvo's event loops use, in a form Swift imports cleanly.
// Functions that need _GNU_SOURCE or expand macros (CPU_SET) are defined in shim.c.

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <stdint.h>

/// pipe2(2) with O_CLOEXEC: a pipe no process started meanwhile inherits.
int salvo_pipe_cloexec(int fds[2]);

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC.
int salvo_accept4_nonblocking(int fd, struct sockaddr *addr, socklen_t *len);

/// Bytes in a TCP socket's send queue that the peer has not acknowledged yet
/// (ioctl SIOCOUTQ), or -1 with errno set.
int salvo_unacknowledged_bytes(int fd);

/// Bytes of a TCP socket's stream the peer has acknowledged so far (TCP_INFO
/// tcpi_bytes_acked, Linux 4.1 and later), or -1 when unknown.
long long salvo_acknowledged_bytes(int fd);

/// A TCP socket's smoothed round-trip time in microseconds (TCP_INFO tcpi_rtt: the
/// kernel's estimate from its acknowledgements), or -1 when unknown.
long long salvo_smoothed_round_trip_us(int fd);

/// Opens a new TUN device (IP packets, no packet-information header) named `name`,
/// nonblocking; returns its descriptor, or -1 with errno set. The device goes away when the
/// descriptor is closed.
int salvo_open_tun(const char *name);

/// Moves the calling thread into the network namespace at `path` (/var/run/netns/NAME);
/// returns 0, or -1 with errno set.
int salvo_enter_network_namespace(const char *path);

/// Pins the calling thread to one CPU; returns 0 or an errno value.
int salvo_pin_current_thread(int cpu);

/// The symbolic errno name ("ECONNREFUSED"), or NULL when unknown.
const char *salvo_errno_name(int err);

/// Names the calling thread (Linux keeps the first 15 bytes).
void salvo_set_current_thread_name(const char *name);

/// The kernel thread id of the caller.
int salvo_gettid(void);

/// Sets SIGPIPE to ignored for the whole process (writes to closed sockets return EPIPE).
void salvo_ignore_sigpipe(void);

/// ThreadSanitizer's annotations: a happens-before edge from every `release` of an address
/// to every later `acquire` of it. Only a ThreadSanitizer build defines them (the runtime
/// does), and only code compiled with SALVO_TSAN calls them; see SalvoIO's `Locked`.
void __tsan_acquire(void *address);
void __tsan_release(void *address);

#endif
