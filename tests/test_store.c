/* test_store.c — the rendezvous TCP store (store.h) across real processes.
 *
 * World sizes 1..4 as forked processes on a free port: set/get/add/wait/barrier over
 * repeated rounds, values with zero bytes, empty and 1 MiB values, concurrent atomic adds.
 * Then the failure paths, each bounded in time: a missing key times out naming the key, a
 * busy port says so, a client without a server gives up, a server that dies mid-call is
 * an error (not a hang or SIGPIPE), and the server's destroy waits for the other ranks.
 * And peers that are no ranks (store_server.c): garbage, huge lengths and silent
 * connections on the port while 3 ranks meet: the ranks still meet, the server's memory
 * stays bounded, strangers are closed (silent ones after the hello deadline), and once the
 * group is formed a connection from an address no rank came from is refused; a store on
 * loopback listens on 127.0.0.1 only.
 * And the job secret (store_auth.h): where it comes from (variable, a file of mode 0600,
 * none on loopback, "none": the open mode works and warns once); a rank without it or with another is refused at once and the
 * refusal names its address, once; strangers, silent ones included, do not delay rank 0's
 * end; another user's process is refused even with the secret (as root: uid 65534), a
 * server of another user or one that cannot prove the secret is refused by the client. */
#include "comm/store.h"

#include "comm/store_auth.h"
#include "comm/store_wire.h"

#include "common/clock.h"
#include "common/error.h"
#include "launch/dist_env.h"
#include "launch/launcher.h"
#include "store_raw.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOST DIST_ENV_DEFAULT_ADDR /* this machine */
#define BIG_BYTES (1u << 20) /* the largest value the store takes */


static uint8_t big_byte(size_t i, int world)
{
    return (uint8_t)(i * 131u + (size_t)world * 7u + (i >> 9));
}

/* ---------------------------------------------------------------- one rank of a world */

static void rank_body(struct store *s, int rank, int world)
{
    char key[64], val[64], got[64];
    size_t len;
    const int rounds = 20;
    for (int round = 0; round < rounds; round++) {
        snprintf(key, sizeof key, "k/%d/%d", rank, round);
        int n = snprintf(val, sizeof val, "v-%d-%d", rank, round);
        CHECK(store_set(s, key, val, (size_t)n) == 0, "rank %d set: %s", rank, error_get());
        CHECK(store_barrier(s, "round") == 0, "rank %d barrier: %s", rank, error_get());
        for (int q = 0; q < world; q++) {
            snprintf(key, sizeof key, "k/%d/%d", q, round);
            n = snprintf(val, sizeof val, "v-%d-%d", q, round);
            len = 0;
            int rc = store_get(s, key, got, sizeof got, &len);
            CHECK(rc == 0 && len == (size_t)n && memcmp(got, val, len) == 0,
                  "rank %d round %d get %s: rc %d len %zu (%s)", rank, round, key, rc, len,
                  error_get());
        }
        int64_t v = -1;
        CHECK(store_add(s, "counter", 1, &v) == 0 && v >= 1 && v <= (int64_t)world * (round + 1),
              "rank %d add -> %" PRId64 " (%s)", rank, v, error_get());
        CHECK(store_barrier(s, "added") == 0, "rank %d barrier: %s", rank, error_get());
        /* the barrier can only pass once every rank's add is in */
        CHECK(store_add(s, "counter", 0, &v) == 0 && v == (int64_t)world * (round + 1),
              "rank %d round %d: counter %" PRId64 " after the barrier, want %d", rank, round, v,
              world * (round + 1));
        CHECK(store_barrier(s, "read") == 0, "rank %d barrier: %s", rank, error_get());
    }

    /* wait/get block until a later set */
    if (rank == 0) {
        clock_sleep_ms(50);
        CHECK(store_set(s, "late", "here", 4) == 0, "set late: %s", error_get());
    }
    CHECK(store_wait(s, "late") == 0, "rank %d wait: %s", rank, error_get());
    CHECK(store_get(s, "late", got, sizeof got, &len) == 0 && len == 4 &&
              memcmp(got, "here", 4) == 0,
          "rank %d get late: %s", rank, error_get());

    /* values with zero bytes, an empty value, and a 1 MiB value */
    static const uint8_t bin[6] = {0, 'a', 0, 0, 'b', 0};
    uint8_t *big = malloc(BIG_BYTES), *back = malloc(BIG_BYTES);
    if (rank == world - 1) {
        for (size_t i = 0; i < BIG_BYTES; i++)
            big[i] = big_byte(i, world);
        CHECK(store_set(s, "bin", bin, sizeof bin) == 0, "set bin: %s", error_get());
        CHECK(store_set(s, "empty", "", 0) == 0, "set empty: %s", error_get());
        CHECK(store_set(s, "big", big, BIG_BYTES) == 0, "set big: %s", error_get());
    }
    CHECK(store_barrier(s, "values") == 0, "rank %d barrier: %s", rank, error_get());
    len = 99;
    CHECK(store_get(s, "bin", got, sizeof got, &len) == 0 && len == sizeof bin &&
              memcmp(got, bin, sizeof bin) == 0,
          "rank %d bin: len %zu (%s)", rank, len, error_get());
    len = 99;
    CHECK(store_get(s, "empty", got, sizeof got, &len) == 0 && len == 0, "rank %d empty: len %zu",
          rank, len);
    len = 0;
    memset(back, 0, BIG_BYTES);
    CHECK(store_get(s, "big", back, BIG_BYTES, &len) == 0 && len == BIG_BYTES,
          "rank %d big: len %zu (%s)", rank, len, error_get());
    size_t bad = 0;
    for (size_t i = 0; i < BIG_BYTES; i++)
        bad += back[i] != big_byte(i, world);
    CHECK(bad == 0, "rank %d: %zu bytes of the 1 MiB value differ", rank, bad);

    /* too small a buffer is an error that names the sizes; the store stays usable */
    CHECK(store_get(s, "big", got, 16, &len) == -1 && len == BIG_BYTES &&
              strstr(error_get(), "16-byte buffer"),
          "rank %d small buffer: %s", rank, error_get());
    CHECK(store_set(s, "huge", big, BIG_BYTES + 1) == -1 && strstr(error_get(), "1 MiB"),
          "rank %d oversized value: %s", rank, error_get());
    char long_key[300];
    memset(long_key, 'x', 256);
    long_key[256] = '\0';
    CHECK(store_set(s, long_key, "v", 1) == -1 && strstr(error_get(), "256 bytes"),
          "rank %d long key: %s", rank, error_get());
    free(big);
    free(back);

    /* concurrent adds are atomic */
    const int adds = 200;
    for (int i = 0; i < adds; i++)
        if (store_add(s, "atomic", 1, NULL) < 0) {
            CHECK(0, "rank %d add %d: %s", rank, i, error_get());
            break;
        }
    CHECK(store_barrier(s, "atomic") == 0, "rank %d barrier: %s", rank, error_get());
    int64_t total = -1;
    CHECK(store_add(s, "atomic", 0, &total) == 0 && total == (int64_t)adds * world,
          "rank %d: %" PRId64 " after %d adds by %d ranks", rank, total, adds, world);
    char text[32];
    int tn = snprintf(text, sizeof text, "%d", adds * world);
    CHECK(store_get(s, "atomic", got, sizeof got, &len) == 0 && len == (size_t)tn &&
              memcmp(got, text, len) == 0,
          "rank %d: counter reads back as text '%.*s'", rank, (int)len, got);
    CHECK(store_add(s, "bin", 1, NULL) == -1 && strstr(error_get(), "non-counter"),
          "rank %d add on binary value: %s", rank, error_get());
    CHECK(store_barrier(s, "end") == 0, "rank %d barrier: %s", rank, error_get());
}

static void check_world(int world)
{
    int port = launcher_free_port();
    pid_t pids[4];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            test_passed = test_failed = 0;
            struct store *s = store_create(HOST, port, r == 0, r, world, 10000);
            CHECK(s != NULL, "rank %d of %d: store_create: %s", r, world, error_get());
            if (s)
                rank_body(s, r, world);
            store_destroy(s);
            exit(test_failed ? 1 : 0);
        }
    }
    for (int r = 0; r < world; r++) {
        int st = test_wait_status(pids[r], 15.0);
        CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "world %d: rank %d ended with status 0x%x (-1: hung, killed)", world, r, st);
    }
}

/* ---------------------------------------------------------------- failure paths */

static void check_missing_key_times_out(void)
{
    int port = launcher_free_port();
    struct store *s = store_create(HOST, port, 1, 0, 1, 300);
    CHECK(s != NULL, "store_create: %s", error_get());
    if (!s)
        return;
    char buf[16];
    size_t len;
    double t0 = clock_now_s();
    int rc = store_get(s, "shm_name", buf, sizeof buf, &len);
    double dt = clock_now_s() - t0;
    /* 300 ms timeout: at least ~that long, and well under 1.5 s even on a loaded 2-core box */
    CHECK(rc == -1 && dt >= 0.25 && dt < 1.5, "get of a missing key: rc %d after %.3f s", rc, dt);
    const char *e = error_get();
    CHECK(strstr(e, "timed out after 0.3 s") && strstr(e, "'shm_name'") && strstr(e, "rank 0 of 1"),
          "message: %s", e);
    t0 = clock_now_s();
    rc = store_wait(s, "nobody_sets_this");
    dt = clock_now_s() - t0;
    CHECK(rc == -1 && dt >= 0.25 && dt < 1.5 && strstr(error_get(), "'nobody_sets_this'"),
          "wait: rc %d after %.3f s: %s", rc, dt, error_get());
    /* the store is still usable after a timeout (the client reconnects) */
    CHECK(store_set(s, "after", "ok", 2) == 0, "set after timeout: %s", error_get());
    CHECK(store_get(s, "after", buf, sizeof buf, &len) == 0 && len == 2 &&
              memcmp(buf, "ok", 2) == 0,
          "get after timeout: %s", error_get());
    CHECK(store_set(s, "text", "abc", 3) == 0, "set: %s", error_get());
    CHECK(store_add(s, "text", 1, NULL) == -1 && strstr(error_get(), "'text'"),
          "add on non-counter: %s", error_get());
    t0 = clock_now_s();
    store_destroy(s);
    CHECK(clock_now_s() - t0 < 0.2, "destroy of a world-1 store took %.3f s (nobody to wait for)",
          clock_now_s() - t0);
}

static void check_barrier_times_out(void)
{
    int port = launcher_free_port();
    struct store *s = store_create(HOST, port, 1, 0, 2, 300);
    CHECK(s != NULL, "store_create: %s", error_get());
    if (!s)
        return;
    double t0 = clock_now_s();
    int rc = store_barrier(s, "lonely");
    double dt = clock_now_s() - t0;
    CHECK(rc == -1 && dt >= 0.25 && dt < 1.5, "barrier alone: rc %d after %.3f s", rc, dt);
    CHECK(strstr(error_get(), "barrier 'lonely'") && strstr(error_get(), "1 of 2"), "message: %s",
          error_get());

    /* a rank with the wrong world size is refused with both sizes named */
    struct store *c = store_create(HOST, port, 0, 1, 3, 300);
    CHECK(c == NULL && strstr(error_get(), "WORLD_SIZE=3") && strstr(error_get(), "WORLD_SIZE=2"),
          "world mismatch: %s", c ? "accepted" : error_get());
    store_destroy(c);
    t0 = clock_now_s();
    store_destroy(s); /* rank 1 never joined: waits out the 300 ms timeout, no longer */
    dt = clock_now_s() - t0;
    CHECK(dt < 1.5, "destroy waited %.3f s with a 300 ms timeout", dt);
}

static void check_busy_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t alen = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &alen) == 0,
          "listening socket: %s", strerror(errno));
    int port = ntohs(a.sin_port);
    struct store *s = store_create(HOST, port, 1, 0, 2, 300);
    char want[64];
    snprintf(want, sizeof want, "store: port %d on this host is busy", port);
    CHECK(s == NULL && strstr(error_get(), want) && strstr(error_get(), "--master-port"),
          "busy port: %s", s ? "accepted" : error_get());
    store_destroy(s);
    close(fd);
}

static void check_no_server(void)
{
    int port = launcher_free_port();
    double t0 = clock_now_s();
    struct store *s = store_create(HOST, port, 0, 1, 2, 300);
    double dt = clock_now_s() - t0;
    CHECK(s == NULL && dt >= 0.25 && dt < 2.0, "no server: %s after %.3f s",
          s ? "connected" : "failed", dt);
    char want[64];
    snprintf(want, sizeof want, "%s:%d", HOST, port);
    CHECK(strstr(error_get(), "could not connect") && strstr(error_get(), want) &&
              strstr(error_get(), "rank 1 of 2"),
          "message: %s", error_get());
    /* every attempt was refused: said so, not "timed out" (the last attempt, cut by the
     * deadline, used to name the reason) */
    CHECK(strstr(error_get(), "connection refused: nothing listens there") &&
              !strstr(error_get(), "timed out"),
          "the reason: %s", error_get());
    store_destroy(s);
}

/* The server's process dies while this rank waits on a key: an error, promptly. */
static void check_server_dies(void)
{
    int port = launcher_free_port();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct store *s = store_create(HOST, port, 1, 0, 2, 5000);
        if (!s || store_barrier(s, "up") < 0)
            _exit(1);
        clock_sleep_ms(200); /* let rank 1 leave the barrier and park on its get */
        _exit(0);      /* gone without store_destroy, as a crashed rank 0 */
    }
    struct store *s = store_create(HOST, port, 0, 1, 2, 2000);
    CHECK(s != NULL, "client: %s", error_get());
    if (s) {
        CHECK(store_barrier(s, "up") == 0, "barrier: %s", error_get());
        char buf[8];
        size_t len;
        double t0 = clock_now_s();
        int rc = store_get(s, "never", buf, sizeof buf, &len);
        double dt = clock_now_s() - t0;
        /* rank 0 exits 0.2 s after the barrier and its close is seen at once; the bound
         * leaves room for slow exits under sanitizers (~1 s seen with TSan) and still lies
         * below the 2 s timeout, so a timeout cannot pass for a detected close */
        CHECK(rc == -1 && dt < 1.8 && strstr(error_get(), "lost the connection"),
              "get after the server died: rc %d after %.3f s: %s", rc, dt, error_get());
        /* a later call is an error too (reconnect refused), not a SIGPIPE, and at once: a
         * server that was up and now refuses is gone, not starting (it used to retry until
         * the timeout, which made a node whose rendezvous died wait 3 timeouts) */
        t0 = clock_now_s();
        rc = store_set(s, "x", "y", 1);
        dt = clock_now_s() - t0;
        CHECK(rc == -1 && dt < 0.5 && strstr(error_get(), "lost rank 0's store"),
              "set after the server died: rc %d after %.3f s (timeout 2 s): %s", rc, dt,
              error_get());
        store_destroy(s);
    }
    int st = test_wait_status(pid, 10.0);
    CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "server process status 0x%x", st);
}

/* The server's process dies while this rank is idle; its next set (1 MiB, many sends) hits
 * the reset connection: an error, and no SIGPIPE (which would kill this test). */
static void check_server_dies_idle(void)
{
    int port = launcher_free_port();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct store *s = store_create(HOST, port, 1, 0, 2, 5000);
        if (!s || store_barrier(s, "up") < 0)
            _exit(1);
        clock_sleep_ms(100);
        _exit(0);
    }
    struct store *s = store_create(HOST, port, 0, 1, 2, 1000);
    CHECK(s != NULL, "client: %s", error_get());
    int st = -1;
    if (s) {
        CHECK(store_barrier(s, "up") == 0, "barrier: %s", error_get());
        st = test_wait_status(pid, 10.0); /* rank 0 is gone before the set */
        uint8_t *big = calloc(1, BIG_BYTES);
        CHECK(store_set(s, "big", big, BIG_BYTES) == -1 &&
                  strstr(error_get(), "lost the connection"),
              "set after the server died: %s", error_get());
        free(big);
        store_destroy(s);
    } else {
        st = test_wait_status(pid, 10.0);
    }
    CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "server process status 0x%x", st);
}

/* Rank 0's destroy waits until rank 1 is done with the store. */
static void check_destroy_waits(void)
{
    int port = launcher_free_port();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct store *s = store_create(HOST, port, 0, 1, 2, 5000);
        if (!s || store_barrier(s, "up") < 0)
            _exit(1);
        clock_sleep_ms(300);
        char buf[8];
        size_t len;
        int ok = store_set(s, "still", "up", 2) == 0 &&
                 store_get(s, "still", buf, sizeof buf, &len) == 0 && len == 2;
        store_destroy(s);
        _exit(ok ? 0 : 2);
    }
    struct store *s = store_create(HOST, port, 1, 0, 2, 5000);
    CHECK(s != NULL, "server: %s", error_get());
    if (s) {
        CHECK(store_barrier(s, "up") == 0, "barrier: %s", error_get());
        double t0 = clock_now_s();
        store_destroy(s);
        double dt = clock_now_s() - t0;
        /* rank 1 keeps using the store for 300 ms after the barrier */
        CHECK(dt >= 0.25 && dt < 4.0, "destroy returned after %.3f s", dt);
    }
    int st = test_wait_status(pid, 10.0);
    CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "rank 1 status 0x%x (2: lost the store before it was done)", st);
}

/* A server on a port the kernel picked; store_check never waits; a rank that closed with
 * store_destroy is not lost, one that died (or aborted) is, and the first one lost is named. */
static void check_any_port_check_and_lost(void)
{
    struct store *s = store_create_any_port(HOST, 0, 3, 2000);
    CHECK(s != NULL && store_port(s) > 0, "store_create_any_port: %s", error_get());
    if (!s)
        return;
    int port = store_port(s), exists = -1, first = 7;
    double t0 = clock_now_s();
    CHECK(store_check(s, "nothing", &exists) == 0 && exists == 0 && clock_now_s() - t0 < 0.5,
          "check of a missing key: rc, exists %d after %.3f s", exists, clock_now_s() - t0);
    CHECK(store_set(s, "k", "v", 1) == 0 && store_check(s, "k", &exists) == 0 && exists == 1,
          "check of a set key: exists %d (%s)", exists, error_get());
    CHECK(store_lost(s, 1, &first) == 0 && first == -1, "nobody lost yet: first %d", first);
    fflush(NULL);
    for (int r = 1; r <= 2; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct store *c = store_create(HOST, port, 0, r, 3, 2000);
            if (!c)
                _exit(2);
            if (store_set(c, "hello", "", 0))
                _exit(3);
            if (r == 1)
                store_destroy(c); /* a clean goodbye */
            _exit(0);                /* rank 2 just dies with its connection open */
        }
        int st = test_wait_status(pid, 10.0);
        CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d status 0x%x", r, st);
    }
    int lost1 = -1, lost2 = -1;
    for (int i = 0; i < 100 && lost2 != 1; i++) { /* the server sees the close soon after */
        lost2 = store_lost(s, 2, &first);
        if (lost2 != 1)
            clock_sleep_ms(10);
    }
    lost1 = store_lost(s, 1, NULL);
    CHECK(lost2 == 1 && first == 2, "rank 2 died: lost %d, first lost %d", lost2, first);
    CHECK(lost1 == 0, "rank 1 said goodbye: lost %d", lost1);
    store_abort(s);
}

/* This process's resident set in KiB (VmRSS), or -1. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* A non-blocking TCP connection to 127.0.0.1:port from source address src, or -1. */
static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, HOST, &to.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Send what the socket takes of len bytes of p now (never blocks). */
static void send_some(int fd, const void *p, size_t len)
{
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
}

/* How many of the n connections at fds the server has closed (EOF, or reset, after any
 * reply bytes), waiting until all are or limit_s has passed.  Closed ones become -1. */
static int count_closed(int *fds, int n, double limit_s)
{
    double end = clock_now_s() + limit_s;
    char buf[4096];
    int closed = 0;
    for (;;) {
        struct pollfd p[256];
        int np = 0;
        for (int i = 0; i < n; i++) {
            if (fds[i] < 0)
                continue;
            ssize_t k;
            while ((k = recv(fds[i], buf, sizeof buf, MSG_DONTWAIT)) > 0)
                ;
            if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                close(fds[i]);
                fds[i] = -1;
                closed++;
            } else if (np < 256) {
                p[np++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
            }
        }
        double left = end - clock_now_s();
        if (np == 0 || left <= 0)
            return closed;
        poll(p, (nfds_t)np, (int)(left * 1000) + 1);
    }
}

/* Five connections that say hello as rank 1: four are served, the fifth is refused and
 * closed (any number used to be kept: 244 fake ranks ran the store out of descriptors). */
static void check_rank_conn_cap(void)
{
    struct store *s = store_create_any_port(HOST, 0, 2, 5000);
    CHECK(s != NULL, "store_create_any_port: %s", error_get());
    if (!s)
        return;
    int port = store_port(s), fds[5], made = 0;
    for (int i = 0; i < 5; i++) {
        if ((fds[i] = connect_from(HOST, port)) < 0)
            break;
        made++;
        CHECK(store_raw_hello(fds[i], 1, 2, NULL) == 0, "connection %d got no challenge", i + 1);
        clock_sleep_ms(20); /* served in this order */
    }
    CHECK(made == 5, "only %d connections made", made);
    int closed = count_closed(fds, made, 1.0);
    CHECK(closed == 1 && fds[4] == -1, "%d of 5 rank-1 connections closed (want the 5th alone)",
          closed);
    for (int i = 0; i < made; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    store_destroy(s);
}

/* A store whose process has no descriptor left for accept, with connections waiting: its
 * thread rests instead of spinning on the readable listening socket (it burnt a core). */
static void check_accept_no_spin(void)
{
    fflush(NULL);
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        struct rlimit rl = {.rlim_cur = 64, .rlim_max = 64};
        struct store *s = setrlimit(RLIMIT_NOFILE, &rl) == 0
                              ? store_create_any_port(HOST, 0, 2, 5000)
                              : NULL;
        if (!s)
            _exit(2);
        int port = store_port(s), n = 0;
        while (n < 64 && connect_from(HOST, port) >= 0) /* until no descriptor is left */
            n++;
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        clock_sleep_ms(600);
        getrusage(RUSAGE_SELF, &r1);
        double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                     (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                     1e-6 * (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec +
                                     r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
        char msg[64];
        int len = snprintf(msg, sizeof msg, "%d %.3f", n, cpu);
        ssize_t w = write(pipefd[1], msg, (size_t)len);
        (void)w;
        _exit(0); /* no store_destroy: nothing to wait for */
    }
    close(pipefd[1]);
    char msg[64] = "";
    ssize_t got = 0;
    for (int i = 0; i < 50 && got == 0; i++) { /* 5 s at most */
        struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
        if (poll(&p, 1, 100) > 0)
            got = read(pipefd[0], msg, sizeof msg - 1);
    }
    close(pipefd[0]);
    if (pid > 0 && got <= 0)
        kill(pid, SIGKILL);
    int st = pid > 0 ? test_wait_status(pid, 5.0) : -1;
    int n = 0;
    double cpu = -1;
    CHECK(got > 0 && sscanf(msg, "%d %lf", &n, &cpu) == 2 && st >= 0 && WIFEXITED(st) &&
              WEXITSTATUS(st) == 0,
          "the child: '%s', status 0x%x", msg, st);
    /* a rested thread wakes ~6 times in 0.6 s; a spinning one burns most of a core (more
     * than 0.1 s even on a machine shared with several other busy processes) */
    CHECK(n > 0 && n < 64 && cpu >= 0 && cpu < 0.1,
          "out of descriptors with %d connections waiting: %.3f s of CPU in 0.6 s", n, cpu);
}

enum { GARBAGE = 40, HUGE = 40, SILENT = 100 };

static void check_hostile_peers(void)
{
    struct store *s = store_create_any_port(HOST, 0, 3, 10000);
    CHECK(s != NULL, "store_create_any_port: %s", error_get());
    if (!s)
        return;
    int port = store_port(s);
    long rss0 = rss_kib();

    /* the store on loopback listens on 127.0.0.1 only: /proc/net/tcp, state 0A (LISTEN) */
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512], want[32];
    snprintf(want, sizeof want, ":%04X", port);
    int listening = 0, loopback = 1;
    while (f && fgets(line, sizeof line, f)) {
        char local[64], remote[64], state[8];
        if (sscanf(line, "%*d: %63s %63s %7s", local, remote, state) == 3 &&
            strlen(local) > 5 && strcmp(local + strlen(local) - 5, want) == 0 &&
            strcmp(state, "0A") == 0) {
            listening = 1;
            loopback &= strncmp(local, "0100007F:", 9) == 0;
        }
    }
    if (f)
        fclose(f);
    CHECK(listening && loopback, "store for %s: listening %d, on loopback only %d", HOST,
          listening, loopback);

    /* garbage (an HTTP request), huge lengths (a 1 MiB SET before hello, a hello claiming
     * 4 GiB), each pushing 1 MiB behind, and silent connections */
    static char junk[1 << 20];
    memset(junk, 'x', sizeof junk);
    int fds[GARBAGE + HUGE + SILENT];
    int nfd = 0;
    for (int i = 0; i < GARBAGE; i++)
        if ((fds[nfd] = connect_from(HOST, port)) >= 0) {
            static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
            send_some(fds[nfd], get, sizeof get - 1);
            send_some(fds[nfd++], junk, sizeof junk);
        }
    for (int i = 0; i < HUGE; i++)
        if ((fds[nfd] = connect_from(HOST, port)) >= 0) {
            uint8_t h[7] = {i % 2 ? 2 : 1, 0, 0, 0, 0, 0x10, 0}; /* SET 1 MiB / HELLO ... */
            if (i % 2 == 0)
                h[3] = h[4] = h[5] = h[6] = 0xff; /* a hello of 4 GiB */
            send_some(fds[nfd], h, sizeof h);
            send_some(fds[nfd++], junk, sizeof junk);
        }
    int silent0 = nfd;
    for (double end = clock_now_s() + 1.0; clock_now_s() < end;) /* keep pushing for 1 s */
        for (int i = 0; i < silent0; i++)
            send_some(fds[i], junk, 65536);
    for (int i = 0; i < SILENT; i++)
        if ((fds[nfd] = connect_from(HOST, port)) >= 0)
            nfd++;
    CHECK(nfd == GARBAGE + HUGE + SILENT, "only %d hostile connections made", nfd);

    /* meanwhile the real ranks 1 and 2 meet rank 0 (this process) */
    double t0 = clock_now_s();
    fflush(NULL);
    pid_t kids[2];
    for (int r = 1; r <= 2; r++)
        if ((kids[r - 1] = fork()) == 0) {
            struct store *c = store_create(HOST, port, 0, r, 3, 10000);
            if (!c || store_barrier(c, "met") || store_set(c, "from", "x", 1))
                _exit(2);
            store_destroy(c);
            _exit(0);
        }
    CHECK(store_barrier(s, "met") == 0, "rank 0's barrier with hostile peers around: %s",
          error_get());
    double met = clock_now_s() - t0;
    for (int r = 1; r <= 2; r++) {
        int st = test_wait_status(kids[r - 1], 15.0);
        CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d status 0x%x", r, st);
    }
    CHECK(met < 5.0, "the ranks took %.2f s to meet among %d hostile connections", met, nfd);

    int closed = count_closed(fds, silent0, 3.0);
    CHECK(closed == silent0, "%d of %d garbage and huge-length connections closed", closed,
          silent0);
    /* of 100 silent ones at most 64 were kept, and none outlives the 2 s hello deadline */
    int evicted = count_closed(fds + silent0, nfd - silent0, 0.05);
    CHECK(nfd - silent0 - evicted <= 64, "%d silent strangers kept open (at most 64)",
          nfd - silent0 - evicted);
    closed = evicted + count_closed(fds + silent0, nfd - silent0, 4.0);
    CHECK(closed == nfd - silent0, "%d of %d silent connections closed by the hello deadline",
          closed, nfd - silent0);
    long grown = rss_kib() - rss0;
    printf("hostile peers: ranks met in %.2f s, the server grew by %ld KiB\n", met, grown);
    /* the old server buffered up to 2 MiB per connection: 80 MiB here; now 15 bytes each */
    CHECK(rss0 > 0 && grown < 16 * 1024, "the server grew by %ld KiB among %d hostile "
          "connections", grown, nfd);
    for (int i = 0; i < nfd; i++)
        if (fds[i] >= 0)
            close(fds[i]);

    /* the group is formed: a connection from another address (127.0.0.2, still this
     * host) is closed unanswered even with a valid hello; one from the ranks' address is
     * still served */
    int other = connect_from("127.0.0.2", port), same = connect_from(HOST, port);
    CHECK(other >= 0 && same >= 0, "connections from 127.0.0.2 and %s", HOST);
    if (other >= 0 && same >= 0) {
        CHECK(store_raw_hello(other, 1, 3, NULL) == -1, "a stranger's address was sent a challenge "
              "after the group formed");
        CHECK(store_raw_hello(same, 1, 3, NULL) == 0 && store_raw_reply(same, 3.0) == STORE_REPLY_OK,
              "a rank's address was not served after the group formed");
    }
    if (other >= 0)
        close(other);
    if (same >= 0)
        close(same);
    store_abort(s);
}


/* ---------------------------------------------------------------- the job secret */

#define SECRET "test_store-secret-0123456789"
#define NOBODY 65534

/* stderr into path (this process's, the server thread's lines included) until restored:
 * the saved descriptor, or -1 */
static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) {
        if (fd >= 0)
            close(fd);
        if (saved >= 0)
            close(saved);
        return -1;
    }
    close(fd);
    return saved;
}

static void stderr_back(int saved)
{
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    static char buf[16384];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* A child of ours that takes the store at HOST:port as rank `rank` of 2 with secret (NULL:
 * none) in its environment; 0 when it got in, 2 when it was refused with `want` in the
 * message within `limit_s`, 3 refused otherwise (its message on stderr). */
static pid_t secret_child(int port, int rank, const char *secret, const char *want,
                          double limit_s, int timeout_ms)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (secret)
        setenv("DDPPROF_JOB_SECRET", secret, 1);
    else
        unsetenv("DDPPROF_JOB_SECRET");
    double t0 = clock_now_s();
    struct store *c = store_create(HOST, port, 0, rank, 2, timeout_ms);
    double dt = clock_now_s() - t0;
    if (c) {
        int ok = store_barrier(c, "up") == 0 && store_set(c, "from-1", "x", 1) == 0;
        store_destroy(c);
        _exit(ok ? 0 : 4);
    }
    int refused = want && strstr(error_get(), want) && dt < limit_s;
    if (!refused)
        fprintf(stderr, "rank %d (secret %s): refused after %.2f s: %s\n", rank,
                secret ? secret : "none", dt, error_get());
    _exit(refused ? 2 : 3);
}

/* The job secret is proven by every connection: a rank without it or with another is
 * refused at once (not after the timeout), the refusal is said once naming the peer's
 * address, a stranger holding a connection that claims rank 1 does not keep rank 0
 * waiting at the end, and the rank with the secret gets in. */
static void check_secret(void)
{
    char log[600];
    snprintf(log, sizeof log, "/tmp/test_store.%d.log", (int)getpid());
    setenv("DDPPROF_JOB_SECRET", SECRET, 1);
    int saved = stderr_to(log);
    struct store *s = store_create_any_port(HOST, 0, 2, 5000);
    unsetenv("DDPPROF_JOB_SECRET");
    CHECK(s != NULL, "a store with a secret: %s", error_get());
    if (!s) {
        stderr_back(saved);
        return;
    }
    int port = store_port(s);
    /* strangers: a raw claim to be rank 1 with a wrong secret, one without any, and one
     * that only holds its connection open, silent (each used to count as rank 1) */
    int wrong = connect_from(HOST, port), none = connect_from(HOST, port),
        silent = connect_from(HOST, port);
    CHECK(wrong >= 0 && none >= 0 && silent >= 0, "stranger connections");
    CHECK(store_raw_hello(wrong, 1, 2, "a-wrong-secret-0123456789") == 0 &&
              store_raw_reply(wrong, 3.0) == STORE_REPLY_ERROR,
          "a hello with a wrong secret was not refused");
    CHECK(store_raw_hello(none, 1, 2, NULL) == 0 && store_raw_reply(none, 3.0) == STORE_REPLY_ERROR,
          "a hello without the secret was not refused");
    int st_wrong = test_wait_status(secret_child(port, 1, "another-secret-0123456789",
                                                 "does not have rank 0's job secret", 1.0, 5000),
                                    10);
    int st_none = test_wait_status(
        secret_child(port, 1, NULL, "requires the job secret", 1.0, 5000), 10);
    CHECK(st_wrong >= 0 && WIFEXITED(st_wrong) && WEXITSTATUS(st_wrong) == 2,
          "a rank with another secret: status 0x%x (2: refused at once, naming the secret)",
          st_wrong);
    CHECK(st_none >= 0 && WIFEXITED(st_none) && WEXITSTATUS(st_none) == 2,
          "a rank without the secret: status 0x%x (2: refused at once, naming the secret)",
          st_none);
    pid_t good = secret_child(port, 1, SECRET, NULL, 0, 5000);
    CHECK(store_barrier(s, "up") == 0, "rank 0's barrier with the real rank 1: %s", error_get());
    int st_good = test_wait_status(good, 10);
    CHECK(st_good >= 0 && WIFEXITED(st_good) && WEXITSTATUS(st_good) == 0,
          "rank 1 with the secret: status 0x%x", st_good);
    double t0 = clock_now_s();
    store_destroy(s); /* the silent stranger is still connected */
    double dt = clock_now_s() - t0;
    stderr_back(saved);
    CHECK(dt < 1.0, "rank 0's destroy took %.2f s with strangers about (timeout 5 s)", dt);
    const char *text = slurp(log);
    CHECK(strstr(text, "refused a claim to be rank 1 of 2 from 127.0.0.1:") &&
              strstr(text, "does not prove the job secret"),
          "the refusal does not name the claimant:\n%s", text);
    const char *first = strstr(text, "refused a claim"), *again = first ? strstr(first + 1, "refused a claim") : NULL;
    CHECK(first && !again, "the refusals of one address were said more than once:\n%s", text);
    for (int *fd = (int[]){wrong, none, silent}, i = 0; i < 3; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    unlink(log);
}

/* On this host, another user's process is refused as it connects (even one holding the
 * secret), and a server another user runs is refused by the client. */
static void check_other_user(void)
{
    if (geteuid() != 0) {
        printf("skip: another user's connection (needs root to become uid %d)\n", NOBODY);
        return;
    }
    char log[600];
    snprintf(log, sizeof log, "/tmp/test_store.%d.uid.log", (int)getpid());
    setenv("DDPPROF_JOB_SECRET", SECRET, 1);
    int saved = stderr_to(log);
    struct store *s = store_create_any_port(HOST, 0, 2, 5000);
    CHECK(s != NULL, "a store with a secret: %s", error_get());
    int port = s ? store_port(s) : 0;
    fflush(NULL);
    pid_t pid = s ? fork() : -1;
    if (pid == 0) { /* nobody, who knows the secret (from this process): still refused */
        if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(5);
        int fd = connect_from(HOST, port);
        if (fd < 0 || store_raw_hello(fd, 1, 2, SECRET) == 0)
            _exit(6); /* it was sent a challenge */
        struct store *c = store_create(HOST, port, 0, 1, 2, 1000);
        _exit(c ? 7 : 0);
    }
    int st = pid > 0 ? test_wait_status(pid, 10) : -1;
    CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "uid %d's connection: status 0x%x (5: setuid failed, 6: challenged, 7: joined)", NOBODY,
          st);
    pid_t good = s ? secret_child(port, 1, SECRET, NULL, 0, 5000) : -1;
    CHECK(s && store_barrier(s, "up") == 0, "rank 0's barrier: %s", error_get());
    int st_good = good > 0 ? test_wait_status(good, 10) : -1;
    CHECK(st_good >= 0 && WIFEXITED(st_good) && WEXITSTATUS(st_good) == 0,
          "rank 1 of uid 0: status 0x%x", st_good);
    double t0 = clock_now_s();
    store_destroy(s);
    double dt = clock_now_s() - t0;
    stderr_back(saved);
    unsetenv("DDPPROF_JOB_SECRET");
    CHECK(dt < 1.0, "rank 0's destroy took %.2f s after another user's tries", dt);
    char want[64];
    snprintf(want, sizeof want, "belongs to uid %d, not this job's uid 0", NOBODY);
    const char *text = slurp(log);
    CHECK(strstr(text, "refused 127.0.0.1:") && strstr(text, want),
          "the refusal does not name the peer and its uid:\n%s", text);
    unlink(log);

    /* a server of uid nobody (a raw one that would take anyone): the client refuses it */
    int pfd[2];
    if (pipe(pfd) != 0)
        return;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(5);
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof a;
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4) ||
            getsockname(l, (struct sockaddr *)&a, &al))
            _exit(6);
        int p = ntohs(a.sin_port);
        if (write(pfd[1], &p, sizeof p) != sizeof p)
            _exit(7);
        struct pollfd pl = {.fd = l, .events = POLLIN};
        if (poll(&pl, 1, 5000) == 1) {
            int c = accept(l, NULL, NULL);
            uint8_t h[STORE_REPLY_HEADER], ch[STORE_CHALLENGE_BYTES], nonce[32] = {0};
            store_wire_put_challenge(ch, 0, nonce);
            store_wire_put_reply(h, STORE_REPLY_OK, sizeof ch);
            send_some(c, h, sizeof h);
            send_some(c, ch, sizeof ch);
            store_wire_put_reply(h, STORE_REPLY_OK, 0); /* welcome, whatever it says */
            send_some(c, h, sizeof h);
            clock_sleep_ms(2000);
        }
        _exit(0);
    }
    close(pfd[1]);
    int p = 0;
    struct pollfd pp = {.fd = pfd[0], .events = POLLIN};
    if (pid > 0 && poll(&pp, 1, 5000) == 1 && read(pfd[0], &p, sizeof p) == sizeof p) {
        double t1 = clock_now_s();
        struct store *c = store_create(HOST, p, 0, 1, 2, 3000);
        double dt1 = clock_now_s() - t1;
        snprintf(want, sizeof want, "belongs to uid %d", NOBODY);
        CHECK(!c && strstr(error_get(), want) && dt1 < 1.0,
              "a client took uid %d's store: %s after %.2f s", NOBODY,
              c ? "joined" : error_get(), dt1);
        store_abort(c);
    } else {
        CHECK(0, "uid %d's server did not start", NOBODY);
    }
    close(pfd[0]);
    if (pid > 0)
        test_wait_status(pid, 10);
}

/* A server that cannot prove the secret back (it answers any hello with a made-up proof):
 * the client with the secret refuses it. */
static void check_server_proof(void)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4) ||
        getsockname(l, (struct sockaddr *)&a, &al)) {
        CHECK(0, "a listening socket: %s", strerror(errno));
        return;
    }
    int port = ntohs(a.sin_port);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct pollfd pl = {.fd = l, .events = POLLIN};
        if (poll(&pl, 1, 5000) == 1) {
            int c = accept(l, NULL, NULL);
            uint8_t h[STORE_REPLY_HEADER], ch[STORE_CHALLENGE_BYTES], nonce[32] = {9};
            uint8_t hello[STORE_REQ_HEADER + STORE_HELLO_VALUE], fake[STORE_MAC_BYTES] = {0};
            store_wire_put_challenge(ch, 1, nonce);
            store_wire_put_reply(h, STORE_REPLY_OK, sizeof ch);
            send_some(c, h, sizeof h);
            send_some(c, ch, sizeof ch);
            if (c >= 0 && store_raw_recv(c, hello, sizeof hello, 3.0) == 0) {
                store_wire_put_reply(h, STORE_REPLY_OK, sizeof fake);
                send_some(c, h, sizeof h);
                send_some(c, fake, sizeof fake);
            }
            clock_sleep_ms(1000);
        }
        _exit(0);
    }
    close(l);
    setenv("DDPPROF_JOB_SECRET", SECRET, 1);
    struct store *c = store_create(HOST, port, 0, 1, 2, 3000);
    unsetenv("DDPPROF_JOB_SECRET");
    CHECK(!c && strstr(error_get(), "does not prove the job secret"),
          "a client trusted a store without the secret: %s", c ? "joined" : error_get());
    store_abort(c);
    if (pid > 0)
        test_wait_status(pid, 10);
}

/* Where the secret comes from: the variable, else a file only we may read, else none (on
 * loopback only), and the explicit open mode. */
static void check_secret_sources(void)
{
    struct store_auth a;
    unsetenv("DDPPROF_JOB_SECRET");
    unsetenv("DDPPROF_JOB_SECRET_FILE");
    CHECK(store_auth_from_env(&a, "127.0.0.1") == 0 && a.mode == STORE_AUTH_LOCAL &&
              store_auth_from_env(&a, "localhost") == 0 && a.mode == STORE_AUTH_LOCAL,
          "no secret on loopback: %s", error_get());
    CHECK(store_auth_from_env(&a, "10.1.2.3") == -1 &&
              strstr(error_get(), "MASTER_ADDR 10.1.2.3 is not a loopback address") &&
              strstr(error_get(), "DDPPROF_JOB_SECRET_FILE") &&
              strstr(error_get(), "DDPPROF_JOB_SECRET=none"),
          "no secret for a store other hosts reach: %s", error_get());
    struct store *s = store_create("10.1.2.3", 29500, 0, 1, 2, 300);
    CHECK(!s && strstr(error_get(), "no job secret is set"), "store_create without a secret "
          "for another host: %s", s ? "made" : error_get());
    setenv("DDPPROF_JOB_SECRET", "none", 1);
    CHECK(store_auth_from_env(&a, "10.1.2.3") == 0 && a.mode == STORE_AUTH_OPEN,
          "DDPPROF_JOB_SECRET=none: %s", error_get());
    /* the open mode works, and says so once */
    char log[600];
    snprintf(log, sizeof log, "/tmp/test_store.%d.open.log", (int)getpid());
    int saved = stderr_to(log);
    s = store_create_any_port(HOST, 0, 1, 2000);
    int ok = s && store_set(s, "k", "v", 1) == 0;
    store_destroy(s);
    s = store_create_any_port(HOST, 0, 1, 2000);
    store_destroy(s);
    stderr_back(saved);
    const char *text = slurp(log);
    const char *w = strstr(text, "warning: DDPPROF_JOB_SECRET=none");
    CHECK(ok && w && !strstr(w + 1, "warning:"), "the open mode: store %s, stderr:\n%s",
          ok ? "worked" : "failed", text);
    unlink(log);
    setenv("DDPPROF_JOB_SECRET", "short", 1);
    CHECK(store_auth_from_env(&a, "127.0.0.1") == -1 && strstr(error_get(), "5 bytes long"),
          "a 5-byte secret: %s", error_get());
    char path[600];
    snprintf(path, sizeof path, "/tmp/test_store.%d.secret", (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("file-secret-0123456789\n", f);
        fclose(f);
    }
    unsetenv("DDPPROF_JOB_SECRET");
    setenv("DDPPROF_JOB_SECRET_FILE", path, 1);
    chmod(path, 0644);
    CHECK(store_auth_from_env(&a, "127.0.0.1") == -1 && strstr(error_get(), "mode 0644") &&
              strstr(error_get(), "chmod 600"),
          "a secret file others may read: %s", error_get());
    chmod(path, 0600);
    CHECK(store_auth_from_env(&a, "10.1.2.3") == 0 && a.mode == STORE_AUTH_SECRET &&
              a.len == 22 && memcmp(a.secret, "file-secret-0123456789", 22) == 0,
          "the secret file (mode 0600, its line break not part of it): mode %d, %zu bytes (%s)",
          a.mode, a.len, error_get());
    setenv("DDPPROF_JOB_SECRET", SECRET, 1); /* the variable wins */
    CHECK(store_auth_from_env(&a, "10.1.2.3") == 0 && a.len == strlen(SECRET),
          "DDPPROF_JOB_SECRET beside a file: %zu bytes", a.len);
    unsetenv("DDPPROF_JOB_SECRET");
    unsetenv("DDPPROF_JOB_SECRET_FILE");
    unlink(path);
    char h1[STORE_SECRET_HEX + 1], h2[STORE_SECRET_HEX + 1];
    CHECK(store_auth_new_secret(h1) == 0 && store_auth_new_secret(h2) == 0 &&
              strlen(h1) == STORE_SECRET_HEX && strspn(h1, "0123456789abcdef") == STORE_SECRET_HEX &&
              strcmp(h1, h2) != 0,
          "two new secrets: %s %s", h1, h2);
}

static void check_bad_arguments(void)
{
    CHECK(store_create(HOST, 0, 1, 0, 1, 300) == NULL && strstr(error_get(), "port 0"),
          "port 0: %s", error_get());
    CHECK(store_create(HOST, 29500, 0, 2, 2, 300) == NULL && strstr(error_get(), "rank 2"),
          "rank 2 of 2: %s", error_get());
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* a stray SIGPIPE must kill the test, not hide */
    for (int world = 1; world <= 4; world++)
        check_world(world);
    check_missing_key_times_out();
    check_barrier_times_out();
    check_busy_port();
    check_no_server();
    check_server_dies();
    check_server_dies_idle();
    check_destroy_waits();
    check_any_port_check_and_lost();
    check_hostile_peers();
    check_rank_conn_cap();
    check_accept_no_spin();
    check_bad_arguments();
    check_secret_sources();
    check_secret();
    check_other_user();
    check_server_proof();
    return test_finish();
}
