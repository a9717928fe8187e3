/* store.c — the rendezvous TCP key-value store (see store.h), as c10d's TCPStore.
 *
 * Server: one thread in rank 0's process, a poll() loop over the listening socket, a wake
 * pipe (store_destroy) and every client connection, all non-blocking.  Keys live in a
 * chained hash table.  A GET or WAIT for a missing key parks the connection as a waiter
 * until a SET or ADD creates the key.
 *
 * Client: one blocking-in-spirit, non-blocking-in-fact socket per struct store; every
 * call is bounded by the timeout with poll().  After a timeout or a lost connection the
 * socket is closed (the server may still answer the abandoned request) and the next call
 * reconnects.
 *
 * Wire format (integers little-endian):
 *   request: op u8, key length u16, value length u32, key bytes, value bytes
 *   reply:   status u8 (0 ok, 1 error), length u32, bytes (value, counter, or error text)
 *   HELLO's value is rank u32 + world u32; ADD's value and reply are an int64.
 * Counters are stored as decimal text, so get() of a counter key reads "3". */
#include "comm/store.h"

#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

#define STORE_KEY_MAX 255
#define STORE_VALUE_MAX (1u << 20)
#define STORE_REQ_HEADER 7   /* op u8, key length u16, value length u32 */
#define STORE_REPLY_HEADER 5 /* status u8, length u32 */
#define STORE_REQ_MAX (STORE_REQ_HEADER + STORE_KEY_MAX + STORE_VALUE_MAX)
#define STORE_BUCKETS 1024

enum store_op { STORE_OP_HELLO = 1, STORE_OP_SET, STORE_OP_GET, STORE_OP_ADD, STORE_OP_WAIT,
                STORE_OP_TIME };
enum store_status { STORE_REPLY_OK = 0, STORE_REPLY_ERROR = 1 };
enum store_io { STORE_IO_OK, STORE_IO_TIMEOUT, STORE_IO_CLOSED, STORE_IO_ERROR, STORE_IO_REPLY };

/* ---------------------------------------------------------------- helpers */

static int64_t store_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void store_put_u16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void store_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void store_put_i64(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

static uint32_t store_get_u16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t store_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static int64_t store_get_i64(const uint8_t *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)p[i] << (8 * i);
    return (int64_t)u;
}

static void store_set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Strict decimal int64 parse of a stored counter value. */
static int store_parse_counter(const uint8_t *val, uint32_t len, int64_t *out)
{
    char text[32];
    if (len == 0 || len >= sizeof text)
        return -1;
    memcpy(text, val, len);
    text[len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || end != text + len) /* also rejects embedded zero bytes */
        return -1;
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- server */

struct store_entry {
    struct store_entry *next;
    char *key;
    uint8_t *val;
    uint32_t len;
};

struct store_conn {
    int fd;
    int rank; /* -1 until HELLO */
    int dead; /* closed at the end of this loop turn */
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_off, out_len, out_cap;
    int wait_op; /* STORE_OP_GET or STORE_OP_WAIT while parked on wait_key, else 0 */
    char wait_key[STORE_KEY_MAX + 1];
};

struct store_server {
    int listen_fd;
    int wake[2]; /* store_destroy writes a byte to stop the thread */
    int world, host_rank;
    pthread_t thread;
    struct store_conn **conns;
    size_t nconns, conns_cap;
    struct pollfd *pfds;
    size_t pfds_cap;
    struct store_entry *table[STORE_BUCKETS];

    /* shared with store_destroy, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *rank_conns;      /* open connections per rank */
    char *rank_seen;      /* rank ever said HELLO */
    int others_connected; /* open connections of ranks other than host_rank */
    int others_seen;      /* distinct ranks other than host_rank that ever connected */
    int stopped;          /* the thread left its loop (failure or stop) */
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

/* Insert or overwrite; takes a copy of val.  -1 on allocation failure. */
static int store_table_put(struct store_server *srv, const char *key, const uint8_t *val,
                           uint32_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    if (len)
        memcpy(copy, val, len);
    struct store_entry *e = store_table_find(srv, key);
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
}

/* Queue a reply on c.  Allocation failure kills the connection (the client then sees a
 * closed connection, an error, not a hang). */
static void store_conn_reply(struct store_conn *c, int status, const void *data, uint32_t len)
{
    size_t need = c->out_len + STORE_REPLY_HEADER + len;
    if (need > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 256;
        while (cap < need)
            cap *= 2;
        uint8_t *p = realloc(c->out, cap);
        if (!p) {
            c->dead = 1;
            return;
        }
        c->out = p;
        c->out_cap = cap;
    }
    uint8_t *h = c->out + c->out_len;
    h[0] = (uint8_t)status;
    store_put_u32(h + 1, len);
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
    if (len != 8) {
        store_conn_error(c, "store: malformed hello (%u bytes); is this a ddpprof store?", len);
        return;
    }
    int rank = (int)store_get_u32(val), world = (int)store_get_u32(val + 4);
    if (world != srv->world) {
        store_conn_error(c,
                         "store: rank %d joined with WORLD_SIZE=%d but rank %d's store has "
                         "WORLD_SIZE=%d (every rank needs the same world size)",
                         rank, world, srv->host_rank, srv->world);
        return;
    }
    if (rank < 0 || rank >= srv->world || c->rank >= 0) {
        store_conn_error(c, "store: bad hello from rank %d of %d", rank, world);
        return;
    }
    c->rank = rank;
    pthread_mutex_lock(&srv->mu);
    srv->rank_conns[rank]++;
    if (rank != srv->host_rank) {
        srv->others_connected++;
        if (!srv->rank_seen[rank])
            srv->others_seen++;
    }
    srv->rank_seen[rank] = 1;
    pthread_mutex_unlock(&srv->mu);
    store_conn_reply(c, STORE_REPLY_OK, NULL, 0);
}

static void store_server_request(struct store_server *srv, struct store_conn *c, int op,
                                 const char *key, const uint8_t *val, uint32_t len)
{
    if (op == STORE_OP_HELLO) {
        store_server_hello(srv, c, val, len);
        return;
    }
    if (c->rank < 0) {
        store_conn_error(c, "store: request before hello; is this a ddpprof store client?");
        return;
    }
    struct store_entry *e;
    switch (op) {
    case STORE_OP_SET:
        if (store_table_put(srv, key, val, len) < 0) {
            store_conn_error(c, "store: out of memory storing key '%s' (%u bytes) on rank %d", key,
                             len, srv->host_rank);
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
        if (len != 8) {
            store_conn_error(c, "store: malformed add on key '%s'", key);
            return;
        }
        int64_t cur = 0, delta = store_get_i64(val);
        e = store_table_find(srv, key);
        if (e && store_parse_counter(e->val, e->len, &cur) < 0) {
            store_conn_error(c, "store: add on key '%s', which holds a %u-byte non-counter value",
                             key, e->len);
            return;
        }
        int64_t sum = (int64_t)((uint64_t)cur + (uint64_t)delta);
        char text[32];
        int n = snprintf(text, sizeof text, "%" PRId64, sum);
        if (store_table_put(srv, key, (const uint8_t *)text, (uint32_t)n) < 0) {
            store_conn_error(c, "store: out of memory on add to key '%s'", key);
            return;
        }
        uint8_t out[8];
        store_put_i64(out, sum);
        store_conn_reply(c, STORE_REPLY_OK, out, 8);
        store_wake_waiters(srv, key, store_table_find(srv, key));
        return;
    }
    case STORE_OP_TIME: { /* the host rank's CLOCK_MONOTONIC, for clock alignment */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint8_t out[8];
        store_put_i64(out, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
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
    while (!c->dead && !c->wait_op && c->in_len - off >= STORE_REQ_HEADER) {
        const uint8_t *h = c->in + off;
        int op = h[0];
        uint32_t klen = store_get_u16(h + 1), vlen = store_get_u32(h + 3);
        if (klen > STORE_KEY_MAX || vlen > STORE_VALUE_MAX) {
            c->dead = 1; /* not our protocol: the client is told by the close */
            break;
        }
        if (c->in_len - off < STORE_REQ_HEADER + klen + vlen)
            break;
        char key[STORE_KEY_MAX + 1];
        memcpy(key, h + STORE_REQ_HEADER, klen);
        key[klen] = '\0';
        store_server_request(srv, c, op, key, h + STORE_REQ_HEADER + klen, vlen);
        off += STORE_REQ_HEADER + klen + vlen;
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
    for (;;) {
        if (c->in_cap - c->in_len < 65536) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 131072;
            if (cap > 2 * (size_t)STORE_REQ_MAX + 131072) {
                c->dead = 1; /* a client flooding requests without reading replies */
                return;
            }
            uint8_t *p = realloc(c->in, cap);
            if (!p) {
                c->dead = 1;
                return;
            }
            c->in = p;
            c->in_cap = cap;
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
}

static void store_conn_close(struct store_server *srv, struct store_conn *c)
{
    close(c->fd);
    if (c->rank >= 0) {
        pthread_mutex_lock(&srv->mu);
        srv->rank_conns[c->rank]--;
        if (c->rank != srv->host_rank)
            srv->others_connected--;
        pthread_cond_broadcast(&srv->cv);
        pthread_mutex_unlock(&srv->mu);
    }
    free(c->in);
    free(c->out);
    free(c);
}

static int store_server_accept(struct store_server *srv)
{
    for (;;) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                return 0; /* try again on the next turn */
            return -1;
        }
        store_set_nodelay(fd);
        struct store_conn *c = calloc(1, sizeof *c);
        if (c && srv->nconns == srv->conns_cap) {
            size_t cap = srv->conns_cap ? srv->conns_cap * 2 : 16;
            struct store_conn **p = realloc(srv->conns, cap * sizeof *p);
            if (!p) {
                free(c);
                c = NULL;
            } else {
                srv->conns = p;
                srv->conns_cap = cap;
            }
        }
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->rank = -1;
        srv->conns[srv->nconns++] = c;
    }
}

static void *store_server_main(void *arg)
{
    struct store_server *srv = arg;
    for (;;) {
        size_t n = 2 + srv->nconns;
        if (n > srv->pfds_cap) {
            struct pollfd *p = realloc(srv->pfds, 2 * n * sizeof *p);
            if (!p)
                break; /* out of memory: stop serving; clients see closed connections */
            srv->pfds = p;
            srv->pfds_cap = 2 * n;
        }
        struct pollfd *pfds = srv->pfds;
        pfds[0] = (struct pollfd){.fd = srv->wake[0], .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = srv->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < srv->nconns; i++) {
            struct store_conn *c = srv->conns[i];
            pfds[2 + i] = (struct pollfd){
                .fd = c->fd, .events = (short)(POLLIN | (c->out_len > c->out_off ? POLLOUT : 0))};
        }
        if (poll(pfds, n, -1) < 0) {
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
    }
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
    free(srv->conns);
    free(srv->pfds);
    free(srv->rank_conns);
    free(srv->rank_seen);
    pthread_cond_destroy(&srv->cv);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

static struct store_server *store_server_start(int port, int rank, int world)
{
    struct store_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        error_set("store: out of memory starting the server on port %d", port);
        return NULL;
    }
    srv->listen_fd = srv->wake[0] = srv->wake[1] = -1;
    srv->world = world;
    srv->host_rank = rank;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srv->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&srv->mu, NULL);
    srv->rank_conns = calloc((size_t)world, sizeof *srv->rank_conns);
    srv->rank_seen = calloc((size_t)world, 1);
    if (!srv->rank_conns || !srv->rank_seen) {
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
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_ANY)};
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

/* Wait (until deadline) for every other rank to have connected and disconnected, then
 * stop the thread and free everything. */
static void store_server_stop(struct store_server *srv, int64_t deadline_ms)
{
    pthread_mutex_lock(&srv->mu);
    while (!srv->stopped && (srv->others_connected > 0 || srv->others_seen < srv->world - 1)) {
        int64_t left = deadline_ms - store_now_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (left % 1000) * 1000000;
        ts.tv_sec += (time_t)(left / 1000 + ns / 1000000000);
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

/* ---------------------------------------------------------------- client */

struct store_round {
    struct store_round *next;
    int64_t round;
    char name[];
};

struct store {
    char host[256];
    int port, rank, world, timeout_ms;
    int fd; /* -1: reconnect on the next call */
    struct store_server *server;
    struct store_round *rounds;
};

static enum store_io store_poll_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - store_now_ms();
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
    store_set_nodelay(fd);
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
    *status = h[0];
    *reply_len = store_get_u32(h + 1);
    if (*reply_len > STORE_VALUE_MAX + 1024) {
        errno = EBADMSG;
        return STORE_IO_ERROR;
    }
    return STORE_IO_OK;
}

/* Say hello on the fresh connection s->fd.  0: accepted; 1: the connection closed (a
 * server starting or exiting), try again; -1: refused or no answer (error_set). */
static int store_hello(struct store *s, int64_t deadline_ms)
{
    uint8_t req[STORE_REQ_HEADER + 8] = {STORE_OP_HELLO};
    store_put_u16(req + 1, 0);
    store_put_u32(req + 3, 8);
    store_put_u32(req + STORE_REQ_HEADER, (uint32_t)s->rank);
    store_put_u32(req + STORE_REQ_HEADER + 4, (uint32_t)s->world);
    int status = 0;
    uint32_t len = 0;
    enum store_io r = store_exchange(s->fd, req, sizeof req, &status, &len, deadline_ms);
    if (r == STORE_IO_OK && status == STORE_REPLY_OK && len == 0)
        return 0;
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
    int delay_ms = 10, last_errno = ECONNREFUSED, rc = -1;
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
            if (s->fd < 0)
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
        int64_t left = deadline_ms - store_now_ms();
        if (left <= 0) {
            error_set("store: could not connect to rank 0's store at %s:%d within %.1f s "
                      "(rank %d of %d; last error: %s; is rank 0 running?)",
                      s->host, s->port, s->timeout_ms / 1000.0, s->rank, s->world,
                      strerror(last_errno));
            break;
        }
        int nap = delay_ms < left ? delay_ms : (int)left;
        struct timespec ts = {.tv_sec = nap / 1000, .tv_nsec = (long)(nap % 1000) * 1000000};
        nanosleep(&ts, NULL);
        if (delay_ms < 200)
            delay_ms *= 2;
    }
    if (ais)
        freeaddrinfo(ais);
    if (rc < 0)
        store_disconnect(s);
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
    int64_t deadline = store_now_ms() + s->timeout_ms;
    if (s->fd < 0 && store_connect(s, deadline) < 0)
        return STORE_IO_CLOSED;

    size_t req_len = STORE_REQ_HEADER + klen + len;
    uint8_t small[STORE_REQ_HEADER + STORE_KEY_MAX + 64];
    uint8_t *req = req_len <= sizeof small ? small : malloc(req_len);
    if (!req) {
        error_set("store: out of memory sending %zu bytes for key '%s'", len, key);
        return STORE_IO_REPLY;
    }
    req[0] = (uint8_t)op;
    store_put_u16(req + 1, (uint32_t)klen);
    store_put_u32(req + 3, (uint32_t)len);
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
        error_set("store: timed out after %.1f s waiting for key '%s' (rank %d of %d; is rank 0 "
                  "running?)",
                  secs, key, s->rank, s->world);
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

struct store *store_create(const char *host, int port, int is_server, int rank, int world,
                           int timeout_ms)
{
    if (!host || !*host || strlen(host) >= sizeof((struct store *)0)->host) {
        error_set("store: bad host name '%s' (set MASTER_ADDR to rank 0's address)",
                  host ? host : "(null)");
        return NULL;
    }
    if (port < 1 || port > 65535) {
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
    if (is_server && !(s->server = store_server_start(port, rank, world))) {
        free(s);
        return NULL;
    }
    if (store_connect(s, store_now_ms() + timeout_ms) < 0) {
        if (s->server)
            store_server_stop(s->server, 0);
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
    store_put_i64(d, delta);
    if (store_call(s, STORE_OP_ADD, key, d, 8, out, 8, &got) != STORE_IO_OK)
        return -1;
    if (got != 8)
        return error_set("store: malformed reply to add on key '%s' (rank %d of %d)", key, s->rank,
                         s->world);
    if (result)
        *result = store_get_i64(out);
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
    *server_ns = store_get_i64(out);
    return 0;
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
        store_server_stop(s->server, store_now_ms() + grace_ms);
    while (s->rounds) {
        struct store_round *next = s->rounds->next;
        free(s->rounds);
        s->rounds = next;
    }
    free(s);
}

void store_destroy(struct store *s)
{
    if (s)
        store_close(s, s->timeout_ms);
}

void store_abort(struct store *s) { store_close(s, 0); }
