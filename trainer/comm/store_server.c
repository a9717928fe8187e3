/* store_server.c — the rendezvous store's server (see store_server.h), as c10d's
 * TCPStore's.
 *
 * One thread in rank 0's process, a poll() loop over the listening socket, a wake pipe
 * (store_server_stop) and every client connection, all non-blocking.  Keys live in a
 * chained hash table.  A GET or WAIT for a missing key parks the connection as a waiter
 * until a SET or ADD creates the key.  Messages as store_wire.h says.
 *
 * It listens on a network port, so what it owes to peers that are not ranks is written
 * here once.  A connection from this host whose socket belongs to another user is closed
 * as it is accepted (store_auth.h).  Every other one is sent a challenge and is a stranger
 * until its first request, a valid HELLO (STORE_HELLO_BYTES: the job's world size, a rank in
 * range, and, with a job secret, the proof of it): a stranger's buffer holds those bytes and
 * no more, anything else (a wrong proof included) is answered with one error line and
 * closed, silence is closed after STORE_HELLO_MS, and of more than STORE_MAX_STRANGERS at
 * once the oldest is closed; so garbage, huge lengths, wrong secrets and silent connections
 * cost a few hundred bytes each, never count as a rank (nothing waits for them to leave)
 * and never stall the ranks' requests (no read or write here ever blocks).  Each kind of
 * refusal is said once per address on stderr, naming the peer.  Once every rank has said
 * hello (the group is formed), a new connection from an address no rank came from is
 * refused at once.  At most STORE_MAX_RANK_CONNS connections may say the same rank at once,
 * and when accept runs out of descriptors the listening socket is left alone for
 * STORE_ACCEPT_PAUSE_MS (it stays readable: polling it at once would spin).  A rank (a peer
 * whose hello was accepted) is trusted to speak the protocol: its buffers are bounded by the
 * message limits, and the table by STORE_TABLE_MAX_BYTES. */
#include "comm/store_server.h"

#include "comm/store_auth.h"
#include "comm/store_wire.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/sha256.h"
#include "common/vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STORE_BUCKETS 1024
#define STORE_HELLO_BYTES (STORE_REQ_HEADER + STORE_HELLO_VALUE) /* a stranger's first and
                                                                   only request */
#define STORE_HELLO_MS 2000        /* a stranger silent this long is closed */
#define STORE_MAX_STRANGERS 64     /* more at once: the oldest is closed */
#define STORE_MAX_RANK_CONNS 4     /* open connections saying one rank: a 5th hello is refused */
#define STORE_ACCEPT_PAUSE_MS 100  /* out of descriptors: the listening socket rests this long */
#define STORE_OUT_HIGH (4u << 20)  /* replies queued to a rank that does not read: serve no
                                      more of its requests until they drain */
#define STORE_TABLE_MAX_BYTES (64u << 20) /* keys and values held, all ranks together */
#define STORE_LOG_MAX 32           /* refusals said on stderr: one per (address, kind) */

/* the kinds of refusal the server says on stderr, each once per address */
enum store_refusal { REFUSE_UID, REFUSE_UNKNOWN_PEER, REFUSE_SECRET, REFUSE_GARBAGE,
                     REFUSE_SILENT, REFUSE_RANK_CAP, REFUSE_NOT_RANK_ADDR };

struct store_entry {
    struct store_entry *next;
    char *key;
    uint8_t *val;
    uint32_t len;
};

struct store_conn {
    int fd;
    int rank; /* -1 until HELLO: a stranger */
    int dead; /* closed at the end of this loop turn */
    int closing; /* closed once its queued reply (an error) is sent, or at once if it cannot be */
    int64_t since_ms; /* accepted at (clock_now_ms) */
    uint32_t addr;    /* its IPv4 address (network order) */
    char peer[24];    /* "a.b.c.d:port", for messages */
    uint8_t nonce[STORE_NONCE_BYTES]; /* the challenge it was sent */
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_off, out_len, out_cap;
    int wait_op; /* STORE_OP_GET or STORE_OP_WAIT while parked on wait_key, else 0 */
    char wait_key[STORE_KEY_MAX + 1];
};

struct store_server {
    int listen_fd, port;
    int wake[2]; /* store_server_stop writes a byte to stop the thread */
    int world, host_rank;
    pthread_t thread;
    struct store_conn **conns;
    size_t nconns, conns_cap;
    struct pollfd *pfds;
    size_t pfds_cap;
    struct store_entry *table[STORE_BUCKETS];
    size_t table_bytes;   /* keys and values held */
    size_t strangers;     /* connections that have not said hello */
    int formed;           /* every rank has said hello once: strangers' addresses are checked */
    uint32_t *rank_addrs; /* the addresses ranks said hello from (network order), unique */
    int naddrs;
    long refused;         /* connections refused (for tests and the curious) */
    struct store_auth auth; /* the job secret, or none (store_auth.h) */
    uid_t uid;            /* ours: a peer of this host must have it */
    struct { uint32_t addr; int kind; } logged[STORE_LOG_MAX]; /* refusals said */
    int nlogged;
    long unlogged;        /* refusals not said (their address and kind were) */
    int64_t accept_rest_until_ms; /* out of descriptors: accept again from then */

    /* shared with store_server_stop, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *rank_conns;      /* open connections per rank */
    char *rank_seen;      /* rank ever said HELLO */
    int others_connected; /* open connections of ranks other than host_rank */
    int others_seen;      /* distinct ranks other than host_rank that ever connected */
    int stopped;          /* the thread left its loop (failure or stop) */

    int lost_pending;     /* server thread: lost marks whose waiters are not answered yet */
    int stopping;         /* server thread: closing everything, no lost marks */
};

static size_t store_hash(const char *key)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (size_t)(h % STORE_BUCKETS);
}

static struct store_entry *store_table_find(struct store_server *srv, const char *key)
{
    for (struct store_entry *e = srv->table[store_hash(key)]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* Insert or overwrite; takes a copy of val.  -1 on allocation failure, -2 when the table
 * would hold more than STORE_TABLE_MAX_BYTES. */
static int store_table_put(struct store_server *srv, const char *key, const uint8_t *val,
                           uint32_t len)
{
    struct store_entry *e = store_table_find(srv, key);
    size_t held = srv->table_bytes - (e ? e->len : 0) + len + (e ? 0 : strlen(key) + 1);
    if (held > STORE_TABLE_MAX_BYTES)
        return -2;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    if (len)
        memcpy(copy, val, len);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->key = strdup(key))) {
            free(e);
            free(copy);
            return -1;
        }
        size_t b = store_hash(key);
        e->next = srv->table[b];
        srv->table[b] = e;
    }
    free(e->val);
    e->val = copy;
    e->len = len;
    srv->table_bytes = held;
    return 0;
}

static void store_table_free(struct store_server *srv)
{
    for (size_t b = 0; b < STORE_BUCKETS; b++) {
        struct store_entry *e = srv->table[b];
        while (e) {
            struct store_entry *next = e->next;
            free(e->key);
            free(e->val);
            free(e);
            e = next;
        }
        srv->table[b] = NULL;
    }
    srv->table_bytes = 0;
}

/* Queue a reply on c.  Allocation failure kills the connection (the client then sees a
 * closed connection, an error, not a hang). */
static void store_conn_reply(struct store_conn *c, int status, const void *data, uint32_t len)
{
    size_t need = c->out_len + STORE_REPLY_HEADER + len;
    if (VEC_RESERVE(c->out, c->out_cap, need)) {
        c->dead = 1;
        return;
    }
    uint8_t *h = c->out + c->out_len;
    store_wire_put_reply(h, status, len);
    if (len)
        memcpy(h + STORE_REPLY_HEADER, data, len);
    c->out_len = need;
}

static void store_conn_error(struct store_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void store_conn_error(struct store_conn *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    store_conn_reply(c, STORE_REPLY_ERROR, msg, (uint32_t)strlen(msg));
}

/* Say a refusal on stderr, once per peer address and kind (a stranger retrying, or a
 * flood, says nothing more); the rest are counted and summed up at stop. */
static void store_server_log(struct store_server *srv, uint32_t addr, int kind,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void store_server_log(struct store_server *srv, uint32_t addr, int kind,
                             const char *fmt, ...)
{
    srv->refused++;
    for (int i = 0; i < srv->nlogged; i++)
        if (srv->logged[i].addr == addr && srv->logged[i].kind == kind) {
            srv->unlogged++;
            return;
        }
    if (srv->nlogged == STORE_LOG_MAX) {
        srv->unlogged++;
        return;
    }
    srv->logged[srv->nlogged].addr = addr;
    srv->logged[srv->nlogged++].kind = kind;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ddpprof: rendezvous store (port %d): %s\n", srv->port, msg);
}

/* Answer every connection parked on key, now that it exists. */
static void store_wake_waiters(struct store_server *srv, const char *key,
                               const struct store_entry *e)
{
    for (size_t i = 0; i < srv->nconns; i++) {
        struct store_conn *w = srv->conns[i];
        if (!w->wait_op || w->dead || strcmp(w->wait_key, key) != 0)
            continue;
        if (w->wait_op == STORE_OP_GET)
            store_conn_reply(w, STORE_REPLY_OK, e->val, e->len);
        else
            store_conn_reply(w, STORE_REPLY_OK, NULL, 0);
        w->wait_op = 0;
    }
}

static void store_server_hello(struct store_server *srv, struct store_conn *c, const uint8_t *val,
                               uint32_t len)
{
    c->closing = c->rank < 0; /* a stranger gets one try */
    int rank, world;
    const uint8_t *nonce, *mac;
    if (store_wire_decode_hello(val, len, &rank, &world, &nonce, &mac) < 0) {
        store_server_log(srv, c->addr, REFUSE_GARBAGE,
                         "refused %s: a malformed hello (%u bytes; an older ddpprof, or "
                         "not a ddpprof client)", c->peer, len);
        store_conn_error(c, "store: malformed hello (%u bytes, want %d): every rank must run "
                            "the same ddpprof", len, STORE_HELLO_VALUE);
        return;
    }
    if (c->rank < 0 && srv->auth.mode == STORE_AUTH_SECRET &&
        !store_auth_check(&srv->auth, 0, c->nonce, nonce, (uint32_t)rank, (uint32_t)world, mac)) {
        store_server_log(srv, c->addr, REFUSE_SECRET,
                         "refused a claim to be rank %d of %d from %s: it does not prove the "
                         "job secret (another job or user, or a different " STORE_SECRET_ENV ")",
                         rank, world, c->peer);
        store_conn_error(c, "store: refused: this process does not have rank %d's job secret "
                            "(" STORE_SECRET_ENV " or " STORE_SECRET_FILE_ENV " must be the "
                            "same on every node)", srv->host_rank);
        return;
    }
    if (c->rank >= 0) {
        store_conn_error(c, "store: a second hello from rank %d", c->rank);
        return;
    }
    if (world != srv->world) {
        store_conn_error(c,
                         "store: rank %d joined with WORLD_SIZE=%d but rank %d's store has "
                         "WORLD_SIZE=%d (every rank needs the same world size)",
                         rank, world, srv->host_rank, srv->world);
        return;
    }
    if (rank < 0 || rank >= srv->world) {
        store_conn_error(c, "store: bad hello from rank %d of %d", rank, world);
        return;
    }
    if (srv->rank_conns[rank] >= STORE_MAX_RANK_CONNS) { /* only this thread writes it */
        store_server_log(srv, c->addr, REFUSE_RANK_CAP,
                         "refused another connection claiming rank %d from %s: that rank "
                         "already holds %d (a second process posing as rank %d?)",
                         rank, c->peer, srv->rank_conns[rank], rank);
        store_conn_error(c,
                         "store: rank %d already holds %d connections to this store; another "
                         "is refused (is a second process posing as rank %d?)",
                         rank, srv->rank_conns[rank], rank);
        return;
    }
    c->closing = 0;
    c->rank = rank;
    srv->strangers--;
    int known = 0;
    for (int i = 0; i < srv->naddrs && !known; i++)
        known = srv->rank_addrs[i] == c->addr;
    if (!known && srv->naddrs < srv->world)
        srv->rank_addrs[srv->naddrs++] = c->addr;
    pthread_mutex_lock(&srv->mu);
    srv->rank_conns[rank]++;
    if (rank != srv->host_rank) {
        srv->others_connected++;
        if (!srv->rank_seen[rank])
            srv->others_seen++;
    }
    srv->rank_seen[rank] = 1;
    pthread_mutex_unlock(&srv->mu);
    if (!srv->formed) {
        int all = 1;
        for (int r = 0; r < srv->world && all; r++)
            all = srv->rank_seen[r];
        srv->formed = all;
    }
    uint8_t proof[STORE_MAC_BYTES];
    if (srv->auth.mode != STORE_AUTH_SECRET) {
        store_conn_reply(c, STORE_REPLY_OK, NULL, 0);
        return;
    }
    store_auth_mac(&srv->auth, 1, c->nonce, nonce, (uint32_t)rank, (uint32_t)world, proof);
    store_conn_reply(c, STORE_REPLY_OK, proof, sizeof proof);
}

static void store_server_request(struct store_server *srv, struct store_conn *c, int op,
                                 const char *key, const uint8_t *val, uint32_t len)
{
    if (op == STORE_OP_HELLO) {
        store_server_hello(srv, c, val, len);
        return;
    }
    if (c->rank < 0) {
        store_server_log(srv, c->addr, REFUSE_GARBAGE,
                         "refused %s: a request (op %d) before its hello", c->peer, op);
        store_conn_error(c, "store: request before hello; is this a ddpprof store client?");
        c->closing = 1;
        return;
    }
    struct store_entry *e;
    int put;
    switch (op) {
    case STORE_OP_SET:
        if ((put = store_table_put(srv, key, val, len)) < 0) {
            if (put == -2)
                store_conn_error(c, "store: full (%u MiB of keys and values) storing key '%s' "
                                    "(%u bytes) on rank %d",
                                 STORE_TABLE_MAX_BYTES >> 20, key, len, srv->host_rank);
            else
                store_conn_error(c, "store: out of memory storing key '%s' (%u bytes) on rank %d",
                                 key, len, srv->host_rank);
            return;
        }
        store_conn_reply(c, STORE_REPLY_OK, NULL, 0);
        store_wake_waiters(srv, key, store_table_find(srv, key));
        return;
    case STORE_OP_GET:
    case STORE_OP_WAIT:
        e = store_table_find(srv, key);
        if (!e) {
            c->wait_op = op;
            snprintf(c->wait_key, sizeof c->wait_key, "%s", key);
        } else if (op == STORE_OP_GET) {
            store_conn_reply(c, STORE_REPLY_OK, e->val, e->len);
        } else {
            store_conn_reply(c, STORE_REPLY_OK, NULL, 0);
        }
        return;
    case STORE_OP_ADD: {
        int64_t cur = 0, delta;
        if (store_wire_decode_add(val, len, &delta) < 0) {
            store_conn_error(c, "store: malformed add on key '%s'", key);
            return;
        }
        e = store_table_find(srv, key);
        if (e && store_wire_parse_counter(e->val, e->len, &cur) < 0) {
            store_conn_error(c, "store: add on key '%s', which holds a %u-byte non-counter value",
                             key, e->len);
            return;
        }
        int64_t sum = (int64_t)((uint64_t)cur + (uint64_t)delta);
        char text[32];
        int n = snprintf(text, sizeof text, "%" PRId64, sum);
        if (store_table_put(srv, key, (const uint8_t *)text, (uint32_t)n) < 0) {
            store_conn_error(c, "store: out of memory (or full) on add to key '%s'", key);
            return;
        }
        uint8_t out[8];
        store_wire_put_i64(out, sum);
        store_conn_reply(c, STORE_REPLY_OK, out, 8);
        store_wake_waiters(srv, key, store_table_find(srv, key));
        return;
    }
    case STORE_OP_CHECK: {
        uint8_t present = store_table_find(srv, key) != NULL;
        store_conn_reply(c, STORE_REPLY_OK, &present, 1);
        return;
    }
    case STORE_OP_TIME: { /* the host rank's CLOCK_MONOTONIC, for clock alignment */
        uint8_t out[8];
        store_wire_put_i64(out, clock_now_ns());
        store_conn_reply(c, STORE_REPLY_OK, out, 8);
        return;
    }
    default: store_conn_error(c, "store: unknown request %d", op); return;
    }
}

/* Serve the complete requests buffered on c, until it parks on a missing key.  Returns
 * 1 if anything was served. */
static int store_conn_serve(struct store_server *srv, struct store_conn *c)
{
    int served = 0;
    size_t off = 0;
    while (!c->dead && !c->closing && !c->wait_op && c->out_len - c->out_off < STORE_OUT_HIGH) {
        if (c->rank < 0 && c->in_len - off >= STORE_REQ_HEADER) {
            const uint8_t *h = c->in + off;
            int op = h[0];
            uint32_t klen = store_wire_get_u16(h + 1), vlen = store_wire_get_u32(h + 3);
            if (op != STORE_OP_HELLO || klen != 0 || vlen != STORE_HELLO_VALUE) {
                store_server_log(srv, c->addr, REFUSE_GARBAGE,
                                 "refused %s: not a ddpprof hello (request %d, a %u-byte key "
                                 "and a %u-byte value)", c->peer, op, klen, vlen);
                store_conn_error(c, "store: expected a hello, got request %d with a %u-byte key "
                                    "and a %u-byte value; is this a ddpprof store client (of "
                                    "the same version as rank %d's)?",
                                 op, klen, vlen, srv->host_rank);
                c->closing = 1;
                break;
            }
        }
        struct store_request req;
        long n = store_wire_decode_request(c->in + off, c->in_len - off, &req);
        if (n < 0) {
            c->dead = 1; /* not our protocol: the client is told by the close */
            break;
        }
        if (n == 0)
            break;
        store_server_request(srv, c, req.op, req.key, req.value, req.value_len);
        off += (size_t)n;
        served = 1;
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    return served;
}

static void store_conn_read(struct store_conn *c)
{
    while (c->rank < 0 && !c->closing) { /* a stranger: its hello, not a byte more */
        if (VEC_RESERVE(c->in, c->in_cap, STORE_HELLO_BYTES)) {
            c->dead = 1;
            return;
        }
        if (c->in_len == STORE_HELLO_BYTES)
            return; /* served before anything more is read */
        ssize_t n = recv(c->fd, c->in + c->in_len, STORE_HELLO_BYTES - c->in_len, MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        c->dead = 1; /* EOF or reset */
        return;
    }
    if (c->closing) { /* only its goodbye matters now: discard what it sends */
        char sink[4096];
        ssize_t n;
        while ((n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0)
            ;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            c->dead = 1;
        return;
    }
    for (;;) {
        if (c->in_cap - c->in_len < 65536) { /* room for 64 KiB more */
            const size_t need = c->in_len + 65536;
            if (need > 2 * (size_t)STORE_REQ_MAX + 131072) {
                c->dead = 1; /* a client flooding requests without reading replies */
                return;
            }
            if (VEC_RESERVE(c->in, c->in_cap, need)) {
                c->dead = 1;
                return;
            }
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        c->dead = 1; /* EOF or reset */
        return;
    }
}

static void store_conn_flush(struct store_conn *c)
{
    while (!c->dead && c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else {
            c->dead = 1;
            return;
        }
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->closing && (c->out_len == 0 || c->rank < 0))
        c->dead = 1; /* told why (a stranger gets one try: its reply is tiny) */
}

/* The last connection of rank closed without its STORE_KEY_BYE: mark it lost (see
 * store_wire.h).  Only the table changes here (connections are being closed and compacted);
 * store_wake_lost answers the waiters afterwards.  Allocation failures only lose the mark. */
static void store_mark_lost(struct store_server *srv, int rank)
{
    char key[64], text[16];
    snprintf(key, sizeof key, STORE_KEY_BYE "/%d", rank);
    if (store_table_find(srv, key))
        return;
    int n = snprintf(text, sizeof text, "%d", rank);
    snprintf(key, sizeof key, STORE_KEY_LOST "/%d", rank);
    if (store_table_put(srv, key, (const uint8_t *)text, (uint32_t)n) == 0)
        srv->lost_pending = 1;
    if (!store_table_find(srv, STORE_KEY_LOST) &&
        store_table_put(srv, STORE_KEY_LOST, (const uint8_t *)text, (uint32_t)n) == 0)
        srv->lost_pending = 1;
}

/* Answer the connections parked on the lost marks made since the last call. */
static void store_wake_lost(struct store_server *srv)
{
    if (!srv->lost_pending)
        return;
    srv->lost_pending = 0;
    for (int r = 0; r < srv->world; r++) {
        char key[64];
        snprintf(key, sizeof key, STORE_KEY_LOST "/%d", r);
        const struct store_entry *e = store_table_find(srv, key);
        if (e)
            store_wake_waiters(srv, key, e);
    }
    const struct store_entry *e = store_table_find(srv, STORE_KEY_LOST);
    if (e)
        store_wake_waiters(srv, STORE_KEY_LOST, e);
}

static void store_conn_close(struct store_server *srv, struct store_conn *c)
{
    close(c->fd);
    if (c->rank < 0)
        srv->strangers--;
    if (c->rank >= 0) {
        pthread_mutex_lock(&srv->mu);
        int last = --srv->rank_conns[c->rank] == 0;
        if (c->rank != srv->host_rank)
            srv->others_connected--;
        pthread_cond_broadcast(&srv->cv);
        pthread_mutex_unlock(&srv->mu);
        if (last && c->rank != srv->host_rank && !srv->stopping)
            store_mark_lost(srv, c->rank);
    }
    free(c->in);
    free(c->out);
    free(c);
}

/* Make room for one more stranger: close the oldest when there are STORE_MAX_STRANGERS. */
static void store_evict_stranger(struct store_server *srv)
{
    if (srv->strangers < STORE_MAX_STRANGERS)
        return;
    struct store_conn *oldest = NULL;
    for (size_t i = 0; i < srv->nconns; i++) {
        struct store_conn *c = srv->conns[i];
        if (c->rank < 0 && !c->dead && (!oldest || c->since_ms < oldest->since_ms))
            oldest = c;
    }
    if (oldest)
        oldest->dead = 1; /* closed (and uncounted) at the end of this turn */
}

/* 1 when a connection from addr may go on: before the group is formed anyone may (it must
 * still say hello), after it only from an address a rank came from. */
static int store_addr_allowed(const struct store_server *srv, uint32_t addr)
{
    if (!srv->formed)
        return 1;
    for (int i = 0; i < srv->naddrs; i++)
        if (srv->rank_addrs[i] == addr)
            return 1;
    return 0;
}

/* Strangers that said nothing for STORE_HELLO_MS are marked dead; the ms until the next
 * one is due (0: some are dead now, to be closed; -1: no stranger). */
static int store_expire_strangers(struct store_server *srv)
{
    int64_t now = clock_now_ms(), next = -1;
    for (size_t i = 0; i < srv->nconns; i++) {
        struct store_conn *c = srv->conns[i];
        if (c->rank < 0 && !c->dead && c->since_ms + STORE_HELLO_MS <= now) {
            c->dead = 1;
            store_server_log(srv, c->addr, REFUSE_SILENT,
                             "closed %s: no hello within %.1f s", c->peer,
                             STORE_HELLO_MS / 1000.0);
        }
        if (c->rank >= 0)
            continue;
        int64_t left = c->dead ? 0 : c->since_ms + STORE_HELLO_MS - now;
        if (next < 0 || left < next)
            next = left;
    }
    return (int)next;
}

static int store_server_accept(struct store_server *srv)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(srv->listen_fd, (struct sockaddr *)&peer, &plen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                srv->accept_rest_until_ms = clock_now_ms() + STORE_ACCEPT_PAUSE_MS;
                return 0; /* try again after the rest */
            }
            return -1;
        }
        uint32_t addr = plen >= sizeof peer && peer.sin_family == AF_INET
                            ? peer.sin_addr.s_addr
                            : 0;
        char who[24] = "?";
        if (addr) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
            snprintf(who, sizeof who, "%s:%u", ip, (unsigned)ntohs(peer.sin_port));
        }
        if (!store_addr_allowed(srv, addr)) {
            store_server_log(srv, addr, REFUSE_NOT_RANK_ADDR,
                             "refused %s: every rank has joined, none from that address", who);
            close(fd);
            continue;
        }
        /* a peer on this host must be of our uid, whatever it says later; one whose socket
         * cannot be found (or is already closing, and so has no owner to tell) is refused
         * where nothing else guards the store */
        uid_t uid = 0;
        int established = 0, local = store_auth_peer_uid(fd, &uid, &established);
        if (local == 1 && (uid != srv->uid || !established)) {
            if (established)
                store_server_log(srv, addr, REFUSE_UID,
                                 "refused %s: its socket belongs to uid %u, not this job's uid "
                                 "%u", who, (unsigned)uid, (unsigned)srv->uid);
            else
                store_server_log(srv, addr, REFUSE_UNKNOWN_PEER,
                                 "refused %s: closed before it could be told whose it is", who);
            close(fd);
            continue;
        }
        if (local != 1 && srv->auth.mode == STORE_AUTH_LOCAL) {
            store_server_log(srv, addr, REFUSE_UNKNOWN_PEER,
                             "refused %s: cannot tell which user's it is (%s), and no job "
                             "secret is set", who, local < 0 ? strerror(errno) : "not found");
            close(fd);
            continue;
        }
        store_wire_nodelay(fd);
        store_evict_stranger(srv);
        struct store_conn *c = calloc(1, sizeof *c);
        if (c && VEC_RESERVE(srv->conns, srv->conns_cap, srv->nconns + 1)) {
            free(c);
            c = NULL;
        }
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->rank = -1;
        c->since_ms = clock_now_ms();
        c->addr = addr;
        snprintf(c->peer, sizeof c->peer, "%s", who);
        srv->conns[srv->nconns++] = c;
        srv->strangers++;
        /* the challenge: a fresh nonce, so a proof seen once is worth nothing again */
        uint8_t challenge[STORE_CHALLENGE_BYTES];
        if (store_auth_random(c->nonce, sizeof c->nonce)) {
            c->dead = 1;
            continue;
        }
        store_wire_put_challenge(challenge, srv->auth.mode, c->nonce);
        store_conn_reply(c, STORE_REPLY_OK, challenge, sizeof challenge);
    }
}

static void *store_server_main(void *arg)
{
    struct store_server *srv = arg;
    for (;;) {
        size_t n = 2 + srv->nconns;
        if (VEC_RESERVE(srv->pfds, srv->pfds_cap, n))
            break; /* out of memory: stop serving; clients see closed connections */
        struct pollfd *pfds = srv->pfds;
        pfds[0] = (struct pollfd){.fd = srv->wake[0], .events = POLLIN};
        int64_t rest = srv->accept_rest_until_ms - clock_now_ms();
        pfds[1] = (struct pollfd){.fd = srv->listen_fd, .events = rest > 0 ? 0 : POLLIN};
        for (size_t i = 0; i < srv->nconns; i++) {
            struct store_conn *c = srv->conns[i];
            pfds[2 + i] = (struct pollfd){
                .fd = c->fd, .events = (short)(POLLIN | (c->out_len > c->out_off ? POLLOUT : 0))};
        }
        int wait_ms = store_expire_strangers(srv);
        if (rest > 0 && (wait_ms < 0 || rest < wait_ms))
            wait_ms = (int)rest;
        if (poll(pfds, n, wait_ms) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pfds[0].revents)
            break;
        size_t polled = srv->nconns; /* accept appends after these */
        for (size_t i = 0; i < polled; i++) {
            struct store_conn *c = srv->conns[i];
            if (pfds[2 + i].revents & (POLLIN | POLLHUP | POLLERR))
                store_conn_read(c);
            if (pfds[2 + i].revents & POLLOUT)
                store_conn_flush(c);
        }
        if (pfds[1].revents && store_server_accept(srv) < 0)
            break;
        store_expire_strangers(srv);
        /* a SET may unpark a waiter whose own next request is then served, and so on */
        for (int progress = 1; progress;) {
            progress = 0;
            for (size_t i = 0; i < srv->nconns; i++)
                progress |= store_conn_serve(srv, srv->conns[i]);
        }
        size_t kept = 0;
        for (size_t i = 0; i < srv->nconns; i++) {
            struct store_conn *c = srv->conns[i];
            store_conn_flush(c);
            if (c->dead)
                store_conn_close(srv, c);
            else
                srv->conns[kept++] = c;
        }
        srv->nconns = kept;
        store_wake_lost(srv);
    }
    srv->stopping = 1;
    if (srv->unlogged)
        fprintf(stderr, "ddpprof: rendezvous store (port %d): refused %ld more connection(s) "
                "from the peers named above\n", srv->port, srv->unlogged);
    for (size_t i = 0; i < srv->nconns; i++)
        store_conn_close(srv, srv->conns[i]);
    srv->nconns = 0;
    pthread_mutex_lock(&srv->mu);
    srv->stopped = 1;
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

static void store_server_free(struct store_server *srv)
{
    if (!srv)
        return;
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    if (srv->wake[0] >= 0)
        close(srv->wake[0]);
    if (srv->wake[1] >= 0)
        close(srv->wake[1]);
    store_table_free(srv);
    mem_wipe(&srv->auth, sizeof srv->auth);
    free(srv->conns);
    free(srv->pfds);
    free(srv->rank_conns);
    free(srv->rank_seen);
    free(srv->rank_addrs);
    pthread_cond_destroy(&srv->cv);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

struct store_server *store_server_start(const char *host, int port, int rank, int world,
                                        const struct store_auth *auth)
{
    struct store_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        error_set("store: out of memory starting the server on port %d", port);
        return NULL;
    }
    srv->listen_fd = srv->wake[0] = srv->wake[1] = -1;
    srv->world = world;
    srv->host_rank = rank;
    srv->auth = *auth;
    srv->uid = geteuid();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srv->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&srv->mu, NULL);
    srv->rank_conns = calloc((size_t)world, sizeof *srv->rank_conns);
    srv->rank_seen = calloc((size_t)world, 1);
    srv->rank_addrs = calloc((size_t)world, sizeof *srv->rank_addrs);
    if (!srv->rank_conns || !srv->rank_seen || !srv->rank_addrs) {
        error_set("store: out of memory starting the server for %d ranks", world);
        goto fail;
    }
    srv->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->listen_fd < 0) {
        error_set("store: cannot create the server socket: %s", strerror(errno));
        goto fail;
    }
    int one = 1;
    setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* a job whose ranks meet on loopback needs no other interface */
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(store_auth_host_is_loopback(host)
                                                            ? INADDR_LOOPBACK
                                                            : INADDR_ANY)};
    if (bind(srv->listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        if (errno == EADDRINUSE)
            error_set("store: port %d on this host is busy (another run? pick --master-port or "
                      "leave it unset to get a free one)",
                      port);
        else
            error_set("store: cannot listen on port %d: %s (pick another --master-port)", port,
                      strerror(errno));
        goto fail;
    }
    if (listen(srv->listen_fd, 512) < 0) {
        error_set("store: cannot listen on port %d: %s", port, strerror(errno));
        goto fail;
    }
    socklen_t alen = sizeof addr;
    if (getsockname(srv->listen_fd, (struct sockaddr *)&addr, &alen) < 0) {
        error_set("store: cannot read the port the server listens on: %s", strerror(errno));
        goto fail;
    }
    srv->port = ntohs(addr.sin_port);
    if (pipe2(srv->wake, O_CLOEXEC) < 0) {
        error_set("store: cannot create the server's wake pipe: %s", strerror(errno));
        goto fail;
    }
    /* signals are for the application's threads, not the server's poll loop */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&srv->thread, NULL, store_server_main, srv);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        error_set("store: cannot start the server thread: %s", strerror(err));
        goto fail;
    }
    return srv;
fail:
    store_server_free(srv);
    return NULL;
}

int store_server_port(const struct store_server *srv) { return srv->port; }

void store_server_stop(struct store_server *srv, int64_t deadline_ns)
{
    pthread_mutex_lock(&srv->mu);
    while (!srv->stopped && (srv->others_connected > 0 || srv->others_seen < srv->world - 1)) {
        int64_t left = deadline_ns - clock_now_ns();
        if (left <= 0)
            break;
        /* the absolute time on the condition variable's clock (CLOCK_MONOTONIC, set in
         * store_server_start), as pthread_cond_timedwait wants it */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + left % 1000000000;
        ts.tv_sec += (time_t)(left / 1000000000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&srv->cv, &srv->mu, &ts);
    }
    pthread_mutex_unlock(&srv->mu);
    char c = 1;
    while (write(srv->wake[1], &c, 1) < 0 && errno == EINTR)
        ;
    pthread_join(srv->thread, NULL);
    store_server_free(srv);
}
