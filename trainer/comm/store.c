/* store.c — the rendezvous store's client and the public API (see store.h), as c10d's
 * TCPStore.
 *
 * One blocking-in-spirit, non-blocking-in-fact socket per struct store; every call is
 * bounded by the timeout with poll().  After a timeout or a lost connection the socket is
 * closed (the server may still answer the abandoned request) and the next call
 * reconnects.  The host rank's struct store also owns the server thread
 * (store_server.h); messages as store_wire.h says, and every connection starts with the
 * handshake of store_auth.h (the job secret, from the environment). */
#include "comm/store.h"

#include "comm/store_auth.h"
#include "comm/store_server.h"
#include "comm/store_wire.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/sha256.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum store_io { STORE_IO_OK, STORE_IO_TIMEOUT, STORE_IO_CLOSED, STORE_IO_ERROR, STORE_IO_REPLY };

struct store_round {
    struct store_round *next;
    int64_t round;
    char name[];
};

struct store {
    char host[256];
    int port, rank, world, timeout_ms;
    int fd; /* -1: reconnect on the next call */
    int connected_once; /* a refused reconnect is then a server gone, not one starting */
    struct store_auth auth;
    struct store_server *server;
    struct store_round *rounds;
};

static enum store_io store_poll_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - clock_now_ms();
        if (left <= 0)
            return STORE_IO_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r < 0 && errno != EINTR)
            return STORE_IO_ERROR;
        if (r > 0)
            return STORE_IO_OK; /* POLLHUP/POLLERR too: the next send/recv says what */
    }
}

static enum store_io store_send_all(int fd, const uint8_t *p, size_t len, int64_t deadline_ms)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            enum store_io r = store_poll_fd(fd, POLLOUT, deadline_ms);
            if (r != STORE_IO_OK)
                return r;
        } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)) {
            return STORE_IO_CLOSED;
        } else {
            return STORE_IO_ERROR;
        }
    }
    return STORE_IO_OK;
}

/* Receive len bytes into p (p NULL: discard them). */
static enum store_io store_recv_all(int fd, uint8_t *p, size_t len, int64_t deadline_ms)
{
    uint8_t scratch[4096];
    while (len) {
        uint8_t *dst = p ? p : scratch;
        size_t want = p ? len : (len < sizeof scratch ? len : sizeof scratch);
        ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
        if (n > 0) {
            if (p)
                p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return STORE_IO_CLOSED;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            enum store_io r = store_poll_fd(fd, POLLIN, deadline_ms);
            if (r != STORE_IO_OK)
                return r;
        } else if (errno == ECONNRESET || errno == ENOTCONN) {
            return STORE_IO_CLOSED;
        } else {
            return STORE_IO_ERROR;
        }
    }
    return STORE_IO_OK;
}

static void store_disconnect(struct store *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* One TCP connection attempt to ai, bounded by deadline.  fd or -1 (errno set). */
static int store_try_connect(const struct addrinfo *ai, int64_t deadline_ms)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (store_poll_fd(fd, POLLOUT, deadline_ms) != STORE_IO_OK) {
            close(fd);
            errno = ETIMEDOUT;
            return -1;
        }
        int err = 0;
        socklen_t elen = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
            close(fd);
            errno = err ? err : ECONNREFUSED;
            return -1;
        }
    }
    /* Connecting to a local port in the ephemeral range with no listener can connect the
     * socket to itself (TCP simultaneous open); that is no server. */
    struct sockaddr_storage self, peer;
    socklen_t sl = sizeof self, pl = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&self, &sl) == 0 &&
        getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && sl == pl &&
        memcmp(&self, &peer, sl) == 0) {
        close(fd);
        errno = ECONNREFUSED;
        return -1;
    }
    store_wire_nodelay(fd);
    return fd;
}

static enum store_io store_exchange(int fd, const uint8_t *req, size_t req_len, int *status,
                                    uint32_t *reply_len, int64_t deadline_ms)
{
    enum store_io r = store_send_all(fd, req, req_len, deadline_ms);
    if (r != STORE_IO_OK)
        return r;
    uint8_t h[STORE_REPLY_HEADER];
    r = store_recv_all(fd, h, sizeof h, deadline_ms);
    if (r != STORE_IO_OK)
        return r;
    if (store_wire_decode_reply(h, status, reply_len) < 0) {
        errno = EBADMSG;
        return STORE_IO_ERROR;
    }
    return STORE_IO_OK;
}

/* The server's challenge on the fresh connection s->fd (store_wire.h): 0 with its mode and
 * nonce, 1 when the connection closed (a server starting, exiting or refusing us), -1 on
 * anything else (error_set). */
static int store_challenge(struct store *s, int64_t deadline_ms, int *mode,
                           uint8_t nonce[STORE_NONCE_BYTES])
{
    uint8_t h[STORE_REPLY_HEADER], body[STORE_CHALLENGE_BYTES];
    int status = 0;
    uint32_t len = 0;
    const uint8_t *n;
    enum store_io r = store_recv_all(s->fd, h, sizeof h, deadline_ms);
    if (r == STORE_IO_OK && (store_wire_decode_reply(h, &status, &len) < 0 ||
                             status != STORE_REPLY_OK || len != sizeof body))
        r = STORE_IO_ERROR;
    if (r == STORE_IO_OK)
        r = store_recv_all(s->fd, body, sizeof body, deadline_ms);
    if (r == STORE_IO_OK && store_wire_decode_challenge(body, len, mode, &n) == 0) {
        memcpy(nonce, n, STORE_NONCE_BYTES);
        return 0;
    }
    if (r == STORE_IO_CLOSED)
        return 1;
    return error_set("store: connected to %s:%d but no ddpprof store of this version answered "
                     "within %.1f s (rank %d of %d; another program on that port, or rank 0 "
                     "runs another ddpprof?)",
                     s->host, s->port, s->timeout_ms / 1000.0, s->rank, s->world);
}

/* Say hello on the fresh connection s->fd, proving the job secret where there is one and
 * checking the server's proof.  0: accepted; 1: the connection closed (a server starting or
 * exiting), try again; -1: refused or no answer (error_set). */
static int store_hello(struct store *s, int64_t deadline_ms)
{
    /* the server's end on this host must be ours: another user's program may have taken
     * the port first (a free port is free for everyone) */
    uid_t uid = 0;
    int established = 0;
    if (store_auth_peer_uid(s->fd, &uid, &established) == 1 && established &&
        uid != geteuid())
        return error_set("store: the store at %s:%d belongs to uid %u, not this job's uid %u: "
                         "another user's program holds that port (rank %d of %d)",
                         s->host, s->port, (unsigned)uid, (unsigned)geteuid(), s->rank, s->world);
    int mode = 0;
    uint8_t snonce[STORE_NONCE_BYTES], cnonce[STORE_NONCE_BYTES], mac[STORE_MAC_BYTES] = {0};
    int c = store_challenge(s, deadline_ms, &mode, snonce);
    if (c)
        return c;
    const int have = s->auth.mode == STORE_AUTH_SECRET;
    if ((mode == STORE_AUTH_SECRET) != have)
        return error_set(have ? "store: rank 0's store at %s:%d has no job secret, but this rank "
                                "has one: set " STORE_SECRET_ENV " or " STORE_SECRET_FILE_ENV
                                " alike for every rank (rank %d of %d)"
                              : "store: rank 0's store at %s:%d requires the job secret, and "
                                "this rank has none: set " STORE_SECRET_ENV " or "
                                STORE_SECRET_FILE_ENV " as for rank 0 (rank %d of %d)",
                         s->host, s->port, s->rank, s->world);
    if (store_auth_random(cnonce, sizeof cnonce))
        return -1;
    if (have)
        store_auth_mac(&s->auth, 0, snonce, cnonce, (uint32_t)s->rank, (uint32_t)s->world, mac);
    uint8_t req[STORE_REQ_HEADER + STORE_HELLO_VALUE];
    store_wire_put_request(req, STORE_OP_HELLO, 0, STORE_HELLO_VALUE);
    store_wire_put_hello(req + STORE_REQ_HEADER, (uint32_t)s->rank, (uint32_t)s->world, cnonce,
                         mac);
    int status = 0;
    uint32_t len = 0;
    enum store_io r = store_exchange(s->fd, req, sizeof req, &status, &len, deadline_ms);
    if (r == STORE_IO_OK && status == STORE_REPLY_OK && len == (have ? STORE_MAC_BYTES : 0)) {
        if (!have)
            return 0;
        uint8_t proof[STORE_MAC_BYTES];
        r = store_recv_all(s->fd, proof, sizeof proof, deadline_ms);
        if (r == STORE_IO_OK &&
            store_auth_check(&s->auth, 1, snonce, cnonce, (uint32_t)s->rank, (uint32_t)s->world,
                             proof))
            return 0;
        if (r == STORE_IO_OK)
            return error_set("store: the store at %s:%d does not prove the job secret: it is "
                             "not this job's (rank %d of %d)",
                             s->host, s->port, s->rank, s->world);
    }
    if (r == STORE_IO_CLOSED)
        return 1;
    if (r == STORE_IO_OK && status == STORE_REPLY_ERROR) {
        char msg[1100] = "";
        uint32_t take = len < sizeof msg - 1 ? len : (uint32_t)sizeof msg - 1;
        if (store_recv_all(s->fd, (uint8_t *)msg, take, deadline_ms) == STORE_IO_OK)
            msg[take] = '\0';
        return error_set("%s", msg[0] ? msg : "store: the server refused this rank");
    }
    return error_set("store: connected to %s:%d but got no answer from a ddpprof store within "
                     "%.1f s (rank %d of %d; is another program on that port?)",
                     s->host, s->port, s->timeout_ms / 1000.0, s->rank, s->world);
}

/* Connect and say hello, retrying refused or dropped connections until deadline.
 * 0 or -1 (error_set). */
static int store_connect(struct store *s, int64_t deadline_ms)
{
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", s->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ais = NULL;
    int delay_ms = 10, last_errno = 0, rc = -1;
    for (;;) {
        if (!ais) {
            int gai = getaddrinfo(s->host, port_text, &hints, &ais);
            if (gai == EAI_AGAIN) {
                ais = NULL;
                last_errno = EHOSTUNREACH;
            } else if (gai) {
                return error_set("store: cannot resolve MASTER_ADDR '%s': %s (rank %d of %d)",
                                 s->host, gai_strerror(gai), s->rank, s->world);
            }
        }
        for (struct addrinfo *ai = ais; ai && s->fd < 0; ai = ai->ai_next) {
            s->fd = store_try_connect(ai, deadline_ms);
            /* an attempt the deadline cut short says nothing of the peer: an earlier
             * "refused" stays the reason (it was reported as "timed out") */
            if (s->fd < 0 && (errno != ETIMEDOUT || last_errno == 0 ||
                              clock_now_ms() < deadline_ms))
                last_errno = errno;
        }
        if (s->fd >= 0) {
            int h = store_hello(s, deadline_ms);
            if (h <= 0) {
                rc = h;
                break;
            }
            store_disconnect(s);
            last_errno = ECONNRESET;
        }
        int64_t left = deadline_ms - clock_now_ms();
        if (s->connected_once && last_errno == ECONNREFUSED) {
            /* it was up and now nothing listens: its process is gone, and waiting out the
             * timeout would only delay saying so */
            error_set("store: lost rank 0's store at %s:%d: nothing listens there any more "
                      "(rank %d of %d; did rank 0 exit?)",
                      s->host, s->port, s->rank, s->world);
            break;
        }
        if (left <= 0) {
            error_set("store: could not connect to rank 0's store at %s:%d within %.1f s "
                      "(rank %d of %d; last error: %s; %s)",
                      s->host, s->port, s->timeout_ms / 1000.0, s->rank, s->world,
                      last_errno == ECONNREFUSED ? "connection refused: nothing listens there"
                                                 : strerror(last_errno ? last_errno : ETIMEDOUT),
                      s->rank == 0 ? "this rank hosts the store: is the master address one "
                                     "of this host's?"
                                   : "is rank 0 running?");
            break;
        }
        int nap = delay_ms < left ? delay_ms : (int)left;
        clock_sleep_ms(nap);
        if (delay_ms < 200)
            delay_ms *= 2;
    }
    if (ais)
        freeaddrinfo(ais);
    if (rc < 0)
        store_disconnect(s);
    else
        s->connected_once = 1;
    return rc;
}

static const char *store_op_name(int op)
{
    switch (op) {
    case STORE_OP_SET: return "set";
    case STORE_OP_GET: return "get";
    case STORE_OP_ADD: return "add";
    case STORE_OP_WAIT: return "wait";
    case STORE_OP_TIME: return "time";
    case STORE_OP_CHECK: return "check";
    default: return "request";
    }
}

/* One request/reply.  The reply's payload goes to out (up to cap bytes, *out_len gets
 * its length).  Returns STORE_IO_OK, or another code with the error already set. */
static enum store_io store_call(struct store *s, int op, const char *key, const void *val,
                                size_t len, void *out, size_t cap, size_t *out_len)
{
    size_t klen = strlen(key);
    if (klen > STORE_KEY_MAX) {
        error_set("store: key '%.40s...' is %zu bytes, more than the %d allowed", key, klen,
                  STORE_KEY_MAX);
        return STORE_IO_REPLY;
    }
    if (len > STORE_VALUE_MAX) {
        error_set("store: value for key '%s' is %zu bytes, more than the %u allowed (1 MiB)", key,
                  len, STORE_VALUE_MAX);
        return STORE_IO_REPLY;
    }
    int64_t deadline = clock_now_ms() + s->timeout_ms;
    if (s->fd < 0 && store_connect(s, deadline) < 0)
        return STORE_IO_CLOSED;

    size_t req_len = STORE_REQ_HEADER + klen + len;
    uint8_t small[STORE_REQ_HEADER + STORE_KEY_MAX + 64];
    uint8_t *req = req_len <= sizeof small ? small : malloc(req_len);
    if (!req) {
        error_set("store: out of memory sending %zu bytes for key '%s'", len, key);
        return STORE_IO_REPLY;
    }
    store_wire_put_request(req, op, (uint32_t)klen, (uint32_t)len);
    memcpy(req + STORE_REQ_HEADER, key, klen);
    if (len)
        memcpy(req + STORE_REQ_HEADER + klen, val, len);
    int status = 0;
    uint32_t rlen = 0;
    enum store_io r = store_exchange(s->fd, req, req_len, &status, &rlen, deadline);
    if (req != small)
        free(req);

    if (r == STORE_IO_OK && status != STORE_REPLY_OK) {
        char msg[1100];
        uint32_t take = rlen < sizeof msg - 1 ? rlen : (uint32_t)sizeof msg - 1;
        r = store_recv_all(s->fd, (uint8_t *)msg, take, deadline);
        if (r == STORE_IO_OK)
            r = store_recv_all(s->fd, NULL, rlen - take, deadline);
        if (r == STORE_IO_OK) {
            msg[take] = '\0';
            error_set("%s (rank %d of %d)", msg, s->rank, s->world);
            return STORE_IO_REPLY;
        }
    } else if (r == STORE_IO_OK) {
        size_t take = rlen < cap ? rlen : cap;
        r = store_recv_all(s->fd, out, take, deadline);
        if (r == STORE_IO_OK)
            r = store_recv_all(s->fd, NULL, rlen - take, deadline);
        if (r == STORE_IO_OK) {
            if (out_len)
                *out_len = rlen;
            if (rlen > cap) {
                error_set("store: value of key '%s' is %u bytes, more than the %zu-byte buffer "
                          "(rank %d of %d)",
                          key, rlen, cap, s->rank, s->world);
                return STORE_IO_REPLY;
            }
            return STORE_IO_OK;
        }
    }

    /* the connection is now out of step with the server: drop it, reconnect next call */
    int err = errno;
    store_disconnect(s);
    double secs = s->timeout_ms / 1000.0;
    if (r == STORE_IO_TIMEOUT && (op == STORE_OP_GET || op == STORE_OP_WAIT))
        error_set("store: timed out after %.1f s waiting for key '%s' (rank %d of %d; %s)",
                  secs, key, s->rank, s->world,
                  s->rank == 0 ? "did every other rank start?" : "is rank 0 running?");
    else if (r == STORE_IO_TIMEOUT)
        error_set("store: timed out after %.1f s on %s of key '%s': rank 0's store at %s:%d did "
                  "not answer (rank %d of %d)",
                  secs, store_op_name(op), key, s->host, s->port, s->rank, s->world);
    else if (r == STORE_IO_CLOSED)
        error_set("store: lost the connection to rank 0's store at %s:%d during %s of key '%s' "
                  "(rank %d of %d; did rank 0 exit?)",
                  s->host, s->port, store_op_name(op), key, s->rank, s->world);
    else
        error_set("store: %s of key '%s' failed on the connection to %s:%d: %s (rank %d of %d)",
                  store_op_name(op), key, s->host, s->port, strerror(err), s->rank, s->world);
    return r;
}

/* store_create; port 0 is allowed (for the server: the kernel picks) when any_port */
static struct store *store_open(const char *host, int port, int is_server, int any_port,
                                int rank, int world, int timeout_ms)
{
    if (!host || !*host || strlen(host) >= sizeof((struct store *)0)->host) {
        error_set("store: bad host name '%s' (set MASTER_ADDR to rank 0's address)",
                  host ? host : "(null)");
        return NULL;
    }
    if (port < (any_port ? 0 : 1) || port > 65535) {
        error_set("store: port %d is not in 1..65535 (check MASTER_PORT)", port);
        return NULL;
    }
    if (world < 1 || rank < 0 || rank >= world) {
        error_set("store: rank %d of world size %d is impossible (check RANK and WORLD_SIZE)", rank,
                  world);
        return NULL;
    }
    if (timeout_ms <= 0) {
        error_set("store: timeout %d ms must be positive", timeout_ms);
        return NULL;
    }
    struct store *s = calloc(1, sizeof *s);
    if (!s) {
        error_set("store: out of memory");
        return NULL;
    }
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port;
    s->rank = rank;
    s->world = world;
    s->timeout_ms = timeout_ms;
    s->fd = -1;
    if (store_auth_from_env(&s->auth, host)) {
        free(s);
        return NULL;
    }
    if (s->auth.mode == STORE_AUTH_OPEN) {
        char what[300];
        snprintf(what, sizeof what, "the rendezvous store at %s:%d", host, port);
        store_auth_warn_open(what);
    }
    if (is_server && !(s->server = store_server_start(host, port, rank, world, &s->auth))) {
        mem_wipe(&s->auth, sizeof s->auth);
        free(s);
        return NULL;
    }
    if (s->server)
        s->port = store_server_port(s->server);
    if (store_connect(s, clock_now_ms() + timeout_ms) < 0) {
        if (s->server)
            store_server_stop(s->server, 0);
        mem_wipe(&s->auth, sizeof s->auth);
        free(s);
        return NULL;
    }
    return s;
}

int store_set(struct store *s, const char *key, const void *val, size_t len)
{
    return store_call(s, STORE_OP_SET, key, val, len, NULL, 0, NULL) == STORE_IO_OK ? 0 : -1;
}

int store_get(struct store *s, const char *key, void *val, size_t cap, size_t *len)
{
    return store_call(s, STORE_OP_GET, key, NULL, 0, val, cap, len) == STORE_IO_OK ? 0 : -1;
}

int store_add(struct store *s, const char *key, int64_t delta, int64_t *result)
{
    uint8_t d[8], out[8];
    size_t got = 0;
    store_wire_put_i64(d, delta);
    if (store_call(s, STORE_OP_ADD, key, d, 8, out, 8, &got) != STORE_IO_OK)
        return -1;
    if (got != 8)
        return error_set("store: malformed reply to add on key '%s' (rank %d of %d)", key, s->rank,
                         s->world);
    if (result)
        *result = store_wire_get_i64(out);
    return 0;
}

int store_server_time(struct store *s, int64_t *server_ns)
{
    uint8_t out[8];
    size_t got = 0;
    if (store_call(s, STORE_OP_TIME, "time", NULL, 0, out, 8, &got) != STORE_IO_OK)
        return -1;
    if (got != 8)
        return error_set("store: malformed reply to a time request (rank %d of %d)", s->rank,
                         s->world);
    *server_ns = store_wire_get_i64(out);
    return 0;
}

struct store *store_create(const char *host, int port, int is_server, int rank, int world,
                           int timeout_ms)
{
    return store_open(host, port, is_server, 0, rank, world, timeout_ms);
}

struct store *store_create_any_port(const char *host, int rank, int world, int timeout_ms)
{
    return store_open(host, 0, 1, 1, rank, world, timeout_ms);
}

int store_port(const struct store *s) { return s->port; }

const char *store_host(const struct store *s) { return s->host; }

int store_check(struct store *s, const char *key, int *exists)
{
    uint8_t out = 0;
    size_t got = 0;
    if (store_call(s, STORE_OP_CHECK, key, NULL, 0, &out, 1, &got) != STORE_IO_OK)
        return -1;
    if (got != 1)
        return error_set("store: malformed reply to a check of key '%s' (rank %d of %d)", key,
                         s->rank, s->world);
    *exists = out != 0;
    return 0;
}

int store_lost(struct store *s, int rank, int *first)
{
    char key[64], text[16] = "";
    int lost = 0, exists = 0;
    /* rank's mark first: the server sets it and the first-lost mark in one step, so once
     * rank's is seen the first-lost one is there too (read the other way round, a loss
     * between the two requests gave "lost" with no first rank) */
    snprintf(key, sizeof key, STORE_KEY_LOST "/%d", rank);
    if (store_check(s, key, &lost))
        return -1;
    if (first) {
        *first = -1;
        if (store_check(s, STORE_KEY_LOST, &exists))
            return -1;
        size_t len = 0;
        if (exists && store_get(s, STORE_KEY_LOST, text, sizeof text - 1, &len) == 0) {
            text[len < sizeof text ? len : sizeof text - 1] = '\0';
            *first = atoi(text);
        }
    }
    return lost;
}

int store_wait(struct store *s, const char *key)
{
    return store_call(s, STORE_OP_WAIT, key, NULL, 0, NULL, 0, NULL) == STORE_IO_OK ? 0 : -1;
}

/* The round number of the next barrier called name on this client. */
static int store_next_round(struct store *s, const char *name, int64_t *round)
{
    for (struct store_round *r = s->rounds; r; r = r->next)
        if (strcmp(r->name, name) == 0) {
            *round = r->round++;
            return 0;
        }
    size_t n = strlen(name);
    struct store_round *r = malloc(sizeof *r + n + 1);
    if (!r)
        return error_set("store: out of memory in barrier '%s'", name);
    memcpy(r->name, name, n + 1);
    r->round = 1;
    r->next = s->rounds;
    s->rounds = r;
    *round = 0;
    return 0;
}

int store_barrier(struct store *s, const char *name)
{
    int64_t round = 0, arrived = 0;
    if (store_next_round(s, name, &round) < 0)
        return -1;
    char key[STORE_KEY_MAX + 2], done[STORE_KEY_MAX + 8];
    int n = snprintf(key, sizeof key, "barrier/%s/%" PRId64, name, round);
    if (n < 0 || n + 5 > STORE_KEY_MAX)
        return error_set("store: barrier name '%.40s...' is too long", name);
    snprintf(done, sizeof done, "%s/done", key);
    if (store_add(s, key, 1, &arrived) < 0)
        return -1;
    if (arrived > s->world)
        return error_set("store: barrier '%s' round %" PRId64 " counted %" PRId64
                         " arrivals in a world of %d (two processes with the same rank?)",
                         name, round, arrived, s->world);
    if (arrived == s->world && store_set(s, done, "", 0) < 0)
        return -1;
    enum store_io r = store_call(s, STORE_OP_WAIT, done, NULL, 0, NULL, 0, NULL);
    if (r == STORE_IO_TIMEOUT)
        return error_set("store: timed out after %.1f s in barrier '%s' round %" PRId64
                         " (rank %d of %d arrived as %" PRId64 " of %d; is every rank running "
                         "and calling it?)",
                         s->timeout_ms / 1000.0, name, round, s->rank, s->world, arrived, s->world);
    return r == STORE_IO_OK ? 0 : -1;
}

/* Shared by store_destroy (grace: the store's timeout) and store_abort (no grace). */
static void store_close(struct store *s, int64_t grace_ms)
{
    if (!s)
        return;
    store_disconnect(s);
    if (s->server)
        store_server_stop(s->server, clock_now_ns() + grace_ms * 1000000);
    while (s->rounds) {
        struct store_round *next = s->rounds->next;
        free(s->rounds);
        s->rounds = next;
    }
    mem_wipe(&s->auth, sizeof s->auth);
    free(s);
}

void store_destroy(struct store *s)
{
    if (!s)
        return;
    char key[64];
    snprintf(key, sizeof key, STORE_KEY_BYE "/%d", s->rank);
    if (s->fd >= 0 || s->server) /* a rank that lost the store has nobody to tell */
        store_set(s, key, "", 0);
    store_close(s, s->timeout_ms);
}

void store_abort(struct store *s) { store_close(s, 0); }
