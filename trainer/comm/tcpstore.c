/* tcpstore.c — a minimal PyTorch TCPStore client (see tcpstore.h).
 *
 * Wire format (torch 1.13, c10d TCPStore.cpp): a request is one QueryType byte followed by
 * its arguments; a string or a byte vector is a u64 length (little-endian, as x86 and
 * aarch64 send it) and the bytes.  SET key value -> no reply; WAIT count key... -> one byte
 * (STOP_WAITING = 0) once every key exists; GET key -> the value as a vector. */
#include "comm/tcpstore.h"

#include "common/clock.h"
#include "common/error.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum tcpstore_query { TCPSTORE_SET = 0, TCPSTORE_GET = 2, TCPSTORE_WAIT = 5 };

#define TCPSTORE_VALUE_MAX (64u << 20) /* a larger length is a protocol mismatch */

struct tcpstore {
    int fd;
    int timeout_ms;
    char where[300]; /* "host:port" for messages */
};

/* Wait for events on fd until deadline; 0, or -1 on timeout or error (errno set). */
static int tcpstore_poll(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - clock_now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int tcpstore_send(struct tcpstore *t, const void *p, size_t n, int64_t deadline_ms)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(t->fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (tcpstore_poll(t->fd, POLLOUT, deadline_ms))
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int tcpstore_recv(struct tcpstore *t, void *p, size_t n, int64_t deadline_ms)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = recv(t->fd, b, n, MSG_DONTWAIT);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
        } else if (r == 0) {
            errno = ECONNRESET;
            return -1;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (tcpstore_poll(t->fd, POLLIN, deadline_ms))
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static void tcpstore_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t tcpstore_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* a u64 length and the bytes */
static int tcpstore_send_bytes(struct tcpstore *t, const void *p, size_t n, int64_t deadline_ms)
{
    uint8_t len[8];
    tcpstore_put_u64(len, n);
    return tcpstore_send(t, len, 8, deadline_ms) || (n && tcpstore_send(t, p, n, deadline_ms))
               ? -1
               : 0;
}

static int tcpstore_fail(struct tcpstore *t, const char *what, const char *key)
{
    int e = errno;
    close(t->fd);
    t->fd = -1;
    if (e == ETIMEDOUT)
        return error_set("tcpstore: timed out after %.1f s on %s of key '%s' at torchrun's agent "
                         "store %s",
                         t->timeout_ms / 1000.0, what, key, t->where);
    return error_set("tcpstore: %s of key '%s' at torchrun's agent store %s failed: %s", what, key,
                     t->where, strerror(e));
}

struct tcpstore *tcpstore_connect(const char *host, int port, int timeout_ms)
{
    struct tcpstore *t = calloc(1, sizeof *t);
    if (!t) {
        error_set("tcpstore: out of memory");
        return NULL;
    }
    t->fd = -1;
    t->timeout_ms = timeout_ms;
    snprintf(t->where, sizeof t->where, "%s:%d", host, port);
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    int64_t deadline = clock_now_ms() + timeout_ms;
    int last = ECONNREFUSED, nap_ms = 10;
    while (t->fd < 0) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ais = NULL;
        int gai = getaddrinfo(host, port_text, &hints, &ais);
        if (gai && gai != EAI_AGAIN) {
            error_set("tcpstore: cannot resolve MASTER_ADDR '%s': %s", host, gai_strerror(gai));
            free(t);
            return NULL;
        }
        for (struct addrinfo *ai = ais; ai && t->fd < 0; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0)
                continue;
            int ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
            if (!ok && errno == EINPROGRESS && tcpstore_poll(fd, POLLOUT, deadline) == 0) {
                int err = 0;
                socklen_t elen = sizeof err;
                ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0;
                if (!ok)
                    errno = err ? err : ECONNREFUSED;
            }
            if (ok) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                t->fd = fd;
            } else {
                last = errno;
                close(fd);
            }
        }
        if (ais)
            freeaddrinfo(ais);
        if (t->fd >= 0)
            break;
        if (clock_now_ms() >= deadline) {
            error_set("tcpstore: could not connect to torchrun's agent store at %s within %.1f s "
                      "(%s)",
                      t->where, timeout_ms / 1000.0, strerror(last));
            free(t);
            return NULL;
        }
        clock_sleep_ms(nap_ms);
        if (nap_ms < 200)
            nap_ms *= 2;
    }
    return t;
}

int tcpstore_set(struct tcpstore *t, const char *key, const void *val, size_t len)
{
    if (t->fd < 0)
        return error_set("tcpstore: the connection to %s was lost earlier", t->where);
    int64_t deadline = clock_now_ms() + t->timeout_ms;
    uint8_t q = TCPSTORE_SET;
    if (tcpstore_send(t, &q, 1, deadline) || tcpstore_send_bytes(t, key, strlen(key), deadline) ||
        tcpstore_send_bytes(t, val, len, deadline))
        return tcpstore_fail(t, "set", key);
    return 0;
}

int tcpstore_get(struct tcpstore *t, const char *key, void *val, size_t cap, size_t *len)
{
    if (t->fd < 0)
        return error_set("tcpstore: the connection to %s was lost earlier", t->where);
    int64_t deadline = clock_now_ms() + t->timeout_ms;
    uint8_t q = TCPSTORE_WAIT, count[8], reply = 0xff, n8[8];
    tcpstore_put_u64(count, 1);
    if (tcpstore_send(t, &q, 1, deadline) || tcpstore_send(t, count, 8, deadline) ||
        tcpstore_send_bytes(t, key, strlen(key), deadline) ||
        tcpstore_recv(t, &reply, 1, deadline))
        return tcpstore_fail(t, "wait", key);
    if (reply != 0) {
        errno = EBADMSG;
        return tcpstore_fail(t, "wait", key);
    }
    q = TCPSTORE_GET;
    if (tcpstore_send(t, &q, 1, deadline) || tcpstore_send_bytes(t, key, strlen(key), deadline) ||
        tcpstore_recv(t, n8, 8, deadline))
        return tcpstore_fail(t, "get", key);
    uint64_t n = tcpstore_get_u64(n8);
    if (n > TCPSTORE_VALUE_MAX || n > cap) {
        errno = EMSGSIZE;
        return tcpstore_fail(t, "get", key);
    }
    if (n && tcpstore_recv(t, val, (size_t)n, deadline))
        return tcpstore_fail(t, "get", key);
    *len = (size_t)n;
    return 0;
}

void tcpstore_close(struct tcpstore *t)
{
    if (!t)
        return;
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}
