/* test_cuda_nccl_world.c — the NCCL comm (trainer/comm/cuda/comm_nccl.c, the very object
 * built into libddpprof_cuda.so) with two and three ranks, as forked processes on a host
 * without GPUs: linked against a stub libnccl and a host stand-in for the CUDA runtime
 * (tests/nccl_stub.h), the ranks meeting in the real rendezvous store.
 *
 *   parity      world 2 and 3: the unique id through the store (the ranks join one
 *               communicator only if all got rank 0's), every collective and dtype against
 *               the host oracle (comm_parity.h; blocking, asynchronous, joined + settled),
 *               non-blocking init and first-call connection polled to completion, no call
 *               NCCL's rules refuse, an idle communicator finalized (polled) and destroyed
 *               rather than aborted, and the process's next communicator (key nccl_id.1).
 *   die         world 3: rank 1 is killed inside all-reduce #3; ranks 0 (wait) and 2 (join,
 *               then settle) fail well before the timeout with NCCL's error string and the
 *               stub's last error naming rank 1; every later call fails at once; aborted.
 *   fail        world 2: rank 1's all-reduce #2 fails as it is enqueued: that error names
 *               NCCL's string; rank 1's next call fails at once; rank 0, inside #2, fails
 *               well before the timeout naming rank 1.
 *   stuck       world 2: rank 1 never issues all-reduce #2: rank 0 times out naming the
 *               collective and its number, then every call fails at once.
 *   connect     world 2: rank 1 dies after joining, before any collective: rank 0's first
 *               collective, in progress while it connects, fails naming NCCL's string and
 *               rank 1.
 *   init        world 2: rank 1 never joins (both time out in create, saying so), or dies
 *               while joining (rank 0 fails at once, naming NCCL's string and rank 1).
 *   finalize    world 2: rank 0's finalize never completes: its destroy aborts after the
 *               timeout instead of hanging; rank 1 finalizes and destroys.
 * and NCCL's error strings: the stub's are the installed libnccl's, word for word (where
 * it loads), so the messages checked above are the ones a GPU run prints.
 *
 * What this does not prove (docs/GPU.md, "What has been measured on a GPU"): anything NCCL
 * itself does on GPUs. */
#include "comm/comm.h"
#include "comm/store.h"
#include "common/clock.h"
#include "common/error.h"
#include "cuda/cuda_api.h"
#include "launch/dist_env.h"
#include "launch/launcher.h"
#include "comm_parity.h"
#include "nccl_stub.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST DIST_ENV_DEFAULT_ADDR /* this machine */
#define TIMEOUT_MS 20000           /* parity: only a hang would reach it */
#define FAIL_TIMEOUT_MS 10000      /* a failure that must be seen before the timeout... */
#define FAIL_SEEN_MS 4000          /* ...within this (the stub sees a peer go in ~2 ms) */
#define SHORT_TIMEOUT_MS 1500      /* the cases that end in the timeout */
#define SLACK_MS 3000              /* past a timeout, on a loaded 2-core machine */
#define CASE_LIMIT_S 90            /* a case whose ranks have not all exited by then hung */
#define BIG_LEN 100003 /* fp32: 7 chunks of the stub's 64 KiB slots, the last one partial */
#define N 1000         /* the failure cases' all-reduce */

/* NCCL's strings (the stub's equal the installed libnccl's: strings_match_libnccl) */
#define NCCL_REMOTE "remote process exited or there was a network error"
#define NCCL_SYSTEM "unhandled system error"

static int case_number;
static int port; /* the current case's store port */

static int contains(const char *msg, const char *what) { return strstr(msg, what) != NULL; }

static void show(int rank, const char *msg) { printf("  rank %d got: %s\n", rank, msg); }

static int64_t ms_since(int64_t t0_ns) { return (clock_now_ns() - t0_ns) / 1000000; }

/* Nothing the stub made may be left in /dev/shm once a case's ranks are gone.  A segment is
 * named after the process of the rank that made the id (nccl_stub.c ncclGetUniqueId): one
 * whose process still runs belongs to another run of this test. */
static void check_no_segments(void)
{
    static const char prefix[] = "ddpprof-nccl-stub.";
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    char left[300] = "";
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) == 0) {
            const long pid = strtol(e->d_name + sizeof prefix - 1, NULL, 10);
            if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
                snprintf(left, sizeof left, "%s", e->d_name);
        }
    closedir(d);
    CHECK(!left[0], "case %d left /dev/shm/%s behind", case_number, left);
}

/* Fork world ranks running fn on a fresh store port; killed_rank (-1: none) must die by
 * SIGKILL (the stub's injected deaths). */
static void run_ranks(int world, comm_rank_fn fn, int killed_rank)
{
    case_number++;
    port = launcher_free_port();
    CHECK(port > 0, "no free port: %s", error_get());
    comm_parity_fork(world, fn, NULL, killed_rank, SIGKILL, CASE_LIMIT_S, case_number);
    check_no_segments();
}

/* The stub reads the fault at each init; every rank sets it, only the named one acts. */
static void set_fault(const char *fault)
{
    if (fault)
        setenv(NCCL_STUB_FAULT_ENV, fault, 1);
    else
        unsetenv(NCCL_STUB_FAULT_ENV);
}

static struct store *open_store(int rank, int world)
{
    struct store *s = store_create(HOST, port, rank == 0, rank, world, TIMEOUT_MS);
    CHECK(s != NULL, "rank %d: store_create: %s", rank, error_get());
    return s;
}

/* the NCCL comm on this process's host "GPU"; NULL after a failed CHECK */
static struct comm *open_comm(struct store *s, int rank, int world, int timeout_ms)
{
    struct backend *be = cuda_host_backend();
    CHECK(be != NULL, "rank %d: no host CUDA backend", rank);
    struct comm *c = be ? comm_nccl_create(be, s, rank, world, timeout_ms) : NULL;
    CHECK(c != NULL, "rank %d: comm_nccl_create: %s", rank, error_get());
    return c;
}

static void fill(float *x, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rank + 1) * 0.5f + (float)i;
}

static struct nccl_stub_counts counts(void)
{
    struct nccl_stub_counts n;
    nccl_stub_counts_get(&n);
    return n;
}

static void check_no_misuse(int rank)
{
    const struct nccl_stub_counts n = counts();
    CHECK(n.misuses == 0, "rank %d: %d call(s) NCCL refuses, the last: %s", rank, n.misuses,
          nccl_stub_last_misuse());
}

/* ------------------------------------------------------------------ parity */

static void parity_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault(NULL);
    struct store *s = open_store(rank, world);
    struct comm *c = s ? open_comm(s, rank, world, TIMEOUT_MS) : NULL;
    if (!c) {
        if (s)
            store_abort(s);
        return;
    }
    CHECK(strcmp(c->name, "nccl") == 0 && c->rank == rank && c->world == world &&
              c->stream(c) != NULL,
          "rank %d: comm says %s rank %d of %d, stream %p", rank, c->name, c->rank, c->world,
          c->stream(c));
    struct nccl_stub_counts n = counts();
    CHECK(n.inits == 1 && n.inits_in_progress == 1,
          "rank %d: %d init(s), %d returned ncclInProgress (want 1 and 1: non-blocking, "
          "polled)", rank, n.inits, n.inits_in_progress);

    comm_parity_run(c, BIG_LEN, COMM_PARITY_UNTIMED); /* NCCL's order of terms is its own */

    n = counts();
    CHECK(n.calls_in_progress == 1,
          "rank %d: %d collective call(s) returned ncclInProgress (want 1: the first, which "
          "connects)", rank, n.calls_in_progress);
    c->destroy(c);
    n = counts();
    CHECK(n.finalizes == 1 && n.destroys == 1 && n.aborts == 0,
          "rank %d: destroy of an idle, healthy communicator: %d finalize, %d destroy, %d "
          "abort (want 1, 1, 0)", rank, n.finalizes, n.destroys, n.aborts);

    /* the process's next communicator: rank 0 publishes a new id under nccl_id.1 */
    c = open_comm(s, rank, world, TIMEOUT_MS);
    if (c) {
        float x[3] = {(float)rank, 1.0f, 2.0f};
        CHECK(comm_allreduce(c, x, 3, COMM_F32) == 0, "rank %d: second comm: %s", rank,
              error_get());
        CHECK(x[0] == (float)(world * (world - 1) / 2) && x[1] == (float)world &&
                  x[2] == 2.0f * (float)world,
              "rank %d: second comm's sum %g %g %g", rank, x[0], x[1], x[2]);
        c->destroy(c);
    }
    n = counts();
    CHECK(n.inits == 2 && n.aborts == 0, "rank %d: %d inits, %d aborts (want 2, 0)", rank,
          n.inits, n.aborts);
    check_no_misuse(rank);
    store_destroy(s);
}

/* ------------------------------------------------------------------ failures */

/* Rank 1 is killed inside all-reduce #3 (the stub kills it once all three are in it). */
static void die_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault("die:1:3");
    struct store *s = open_store(rank, world);
    struct comm *c = s ? open_comm(s, rank, world, FAIL_TIMEOUT_MS) : NULL;
    if (!c) {
        if (s)
            store_abort(s);
        return;
    }
    float x[N];
    for (int i = 1; i <= 2; i++) {
        fill(x, N, rank);
        CHECK(comm_allreduce(c, x, N, COMM_F32) == 0, "rank %d: all-reduce #%d: %s", rank, i,
              error_get());
    }
    fill(x, N, rank);
    int64_t t0 = clock_now_ns();
    int rc;
    if (rank == 2) { /* the DDP step's way: joined, found by the next settle */
        rc = comm_allreduce_join(c, x, N, COMM_F32);
        CHECK(rc == 0, "rank 2: the join of #3 failed before any wait: %s", error_get());
        rc = rc ? rc : comm_settle(c);
    } else {
        struct comm_work *w = c->allreduce_async(c, x, N, COMM_F32);
        CHECK(w != NULL, "rank %d: allreduce_async #3: %s", rank, error_get());
        rc = w ? c->wait(c, w, NULL) : -1;
    }
    const int64_t ms = ms_since(t0); /* rank 1 never gets here */
    const char *msg = error_get();
    show(rank, msg);
    char what[64];
    snprintf(what, sizeof what, "rank %d: nccl allreduce #3 (%d elements) failed", rank, N);
    CHECK(rc == -1 && contains(msg, what) && contains(msg, NCCL_REMOTE) &&
              contains(msg, "rank 1 (pid") && contains(msg, "exited") &&
              contains(msg, "communicator aborted"),
          "rank %d: want the collective, NCCL's string and rank 1 named: %s", rank, msg);
    CHECK(ms < FAIL_SEEN_MS, "rank %d: saw rank 1's death after %lld ms (timeout %d ms)", rank,
          (long long)ms, FAIL_TIMEOUT_MS);
    t0 = clock_now_ns();
    CHECK(c->broadcast(c, x, 4, COMM_F32, 0) == -1 && contains(error_get(), "aborted earlier") &&
              contains(error_get(), NCCL_REMOTE) && ms_since(t0) < 500,
          "rank %d: a call after the failure: %s", rank, error_get());
    c->destroy(c);
    const struct nccl_stub_counts n = counts();
    CHECK(n.aborts == 1 && n.finalizes == 0, "rank %d: %d aborts, %d finalizes (want 1, 0)",
          rank, n.aborts, n.finalizes);
    check_no_misuse(rank);
    store_abort(s);
}

/* Rank 1's all-reduce #2 fails as it is enqueued (nothing reaches the stream).  Rank 0
 * sees rank 1's abort at once here; how soon NCCL shows a peer's abort depends on its
 * transport (at worst rank 0's timeout). */
static void fail_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault("fail:1:2");
    struct store *s = open_store(rank, world);
    struct comm *c = s ? open_comm(s, rank, world, FAIL_TIMEOUT_MS) : NULL;
    if (!c) {
        if (s)
            store_abort(s);
        return;
    }
    float x[N];
    fill(x, N, rank);
    CHECK(comm_allreduce(c, x, N, COMM_F32) == 0, "rank %d: all-reduce #1: %s", rank,
          error_get());
    fill(x, N, rank);
    int64_t t0 = clock_now_ns();
    const int rc = comm_allreduce(c, x, N, COMM_F32);
    const int64_t ms = ms_since(t0);
    char *msg = strdup(error_get());
    show(rank, msg);
    CHECK(rc == -1, "rank %d: all-reduce #2 succeeded", rank);
    if (rank == 1) {
        CHECK(contains(msg, "rank 1: nccl allreduce #2") && contains(msg, "ncclAllReduce") &&
                  contains(msg, NCCL_SYSTEM) && contains(msg, "injected failure"),
              "rank 1: want the collective, the call and NCCL's string: %s", msg);
        /* the ranks' sequences now differ: nothing more may be issued on this comm */
        t0 = clock_now_ns();
        const int rc2 = c->broadcast(c, x, 4, COMM_F32, 0);
        show(rank, error_get());
        CHECK(rc2 == -1 && contains(error_get(), "aborted earlier") &&
                  contains(error_get(), "injected failure") && ms_since(t0) < 500,
              "rank 1: the call after a failed enqueue: %s",
              rc2 ? error_get() : "it was issued");
    } else {
        CHECK(contains(msg, "rank 0: nccl allreduce #2") && contains(msg, NCCL_REMOTE) &&
                  contains(msg, "rank 1 (pid"),
              "rank 0: want the collective, NCCL's string and rank 1 named: %s", msg);
        CHECK(ms < FAIL_SEEN_MS, "rank 0: saw rank 1's failure after %lld ms (timeout %d ms)",
              (long long)ms, FAIL_TIMEOUT_MS);
    }
    free(msg);
    c->destroy(c);
    check_no_misuse(rank);
    store_abort(s);
}

/* Rank 1 never issues all-reduce #2 (it idles, then leaves). */
static void stuck_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault(NULL);
    struct store *s = open_store(rank, world);
    struct comm *c = s ? open_comm(s, rank, world, rank == 0 ? SHORT_TIMEOUT_MS : TIMEOUT_MS)
                       : NULL;
    if (!c) {
        if (s)
            store_abort(s);
        return;
    }
    float x[N];
    fill(x, N, rank);
    CHECK(comm_allreduce(c, x, N, COMM_F32) == 0, "rank %d: all-reduce #1: %s", rank,
          error_get());
    if (rank == 0) {
        int64_t t0 = clock_now_ns();
        const int rc = comm_allreduce(c, x, N, COMM_F32);
        const int64_t ms = ms_since(t0);
        show(rank, error_get());
        CHECK(rc == -1 && contains(error_get(), "rank 0: nccl allreduce #2") &&
                  contains(error_get(), "did not complete within 1500 ms"),
              "rank 0: timeout message: %s", rc ? error_get() : "all-reduce #2 succeeded");
        CHECK(ms >= SHORT_TIMEOUT_MS && ms < SHORT_TIMEOUT_MS + SLACK_MS,
              "rank 0: timed out after %lld ms (timeout %d ms)", (long long)ms,
              SHORT_TIMEOUT_MS);
        t0 = clock_now_ns();
        CHECK(c->barrier(c) == -1 && contains(error_get(), "allreduce #2") &&
                  ms_since(t0) < 500,
              "rank 0: a call after the timeout: %s", error_get());
    } else {
        clock_sleep_ms(SHORT_TIMEOUT_MS + SLACK_MS + 500);
    }
    c->destroy(c);
    check_no_misuse(rank);
    store_abort(s);
}

/* Rank 1 dies after create, before any collective: rank 0's first collective is in
 * progress while it connects, and the connection fails. */
static void connect_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault(NULL);
    struct store *s = open_store(rank, world);
    struct comm *c = s ? open_comm(s, rank, world, FAIL_TIMEOUT_MS) : NULL;
    if (!c) {
        if (s)
            store_abort(s);
        return;
    }
    if (rank == 1)
        raise(SIGKILL);
    float x[N];
    fill(x, N, rank);
    const int64_t t0 = clock_now_ns();
    const int rc = comm_allreduce(c, x, N, COMM_F32);
    const int64_t ms = ms_since(t0);
    show(rank, error_get());
    CHECK(rc == -1 && contains(error_get(), "rank 0: nccl allreduce #1") &&
              contains(error_get(), NCCL_REMOTE) && contains(error_get(), "rank 1 (pid") &&
              contains(error_get(), "communicator aborted"),
          "rank 0: want the collective, NCCL's string and rank 1 named: %s",
          rc ? error_get() : "all-reduce succeeded");
    CHECK(ms < FAIL_SEEN_MS, "rank 0: saw rank 1's death after %lld ms (timeout %d ms)",
          (long long)ms, FAIL_TIMEOUT_MS);
    c->destroy(c);
    check_no_misuse(rank);
    store_abort(s);
}

/* Rank 1 never joins: both ranks' create times out, saying so. */
static void init_hang_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault("init-hang:1");
    struct store *s = open_store(rank, world);
    if (!s)
        return;
    const int64_t t0 = clock_now_ns();
    struct comm *c = comm_nccl_create(cuda_host_backend(), s, rank, world, SHORT_TIMEOUT_MS);
    const int64_t ms = ms_since(t0);
    show(rank, error_get());
    CHECK(c == NULL && contains(error_get(), "ncclCommInitRankConfig did not complete within "
                                             "the timeout (did every rank start?)"),
          "rank %d: create: %s", rank, c ? "succeeded" : error_get());
    CHECK(ms >= SHORT_TIMEOUT_MS && ms < SHORT_TIMEOUT_MS + SLACK_MS,
          "rank %d: create gave up after %lld ms (timeout %d ms)", rank, (long long)ms,
          SHORT_TIMEOUT_MS);
    CHECK(counts().aborts == 1, "rank %d: %d aborts (want 1)", rank, counts().aborts);
    if (c)
        c->destroy(c);
    check_no_misuse(rank);
    store_abort(s);
}

/* Rank 1 dies while joining: rank 0's create fails at once, naming it. */
static void init_die_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault("init-die:1");
    struct store *s = open_store(rank, world);
    if (!s)
        return;
    const int64_t t0 = clock_now_ns();
    struct comm *c = comm_nccl_create(cuda_host_backend(), s, rank, world, FAIL_TIMEOUT_MS);
    const int64_t ms = ms_since(t0); /* rank 1 never gets here */
    show(rank, error_get());
    CHECK(c == NULL && contains(error_get(), "ncclCommInitRankConfig failed") &&
              contains(error_get(), NCCL_REMOTE) && contains(error_get(), "rank 1 (pid"),
          "rank 0: want NCCL's string and rank 1 named: %s", c ? "succeeded" : error_get());
    CHECK(ms < FAIL_SEEN_MS, "rank 0: saw rank 1's death after %lld ms (timeout %d ms)",
          (long long)ms, FAIL_TIMEOUT_MS);
    if (c)
        c->destroy(c);
    check_no_misuse(rank);
    store_abort(s);
}

/* Rank 0's finalize never completes: its destroy aborts after the timeout. */
static void finalize_rank(int rank, int world, const void *arg)
{
    (void)arg;
    set_fault("finalize-hang:0");
    struct store *s = open_store(rank, world);
    struct comm *c = s ? open_comm(s, rank, world, SHORT_TIMEOUT_MS) : NULL;
    if (!c) {
        if (s)
            store_abort(s);
        return;
    }
    CHECK(c->barrier(c) == 0, "rank %d: barrier: %s", rank, error_get());
    const int64_t t0 = clock_now_ns();
    c->destroy(c);
    const int64_t ms = ms_since(t0);
    const struct nccl_stub_counts n = counts();
    if (rank == 0) {
        CHECK(n.finalizes == 1 && n.aborts == 1 && n.destroys == 0,
              "rank 0: %d finalize, %d abort, %d destroy (want 1, 1, 0)", n.finalizes,
              n.aborts, n.destroys);
        CHECK(ms >= SHORT_TIMEOUT_MS && ms < SHORT_TIMEOUT_MS + SLACK_MS,
              "rank 0: destroy took %lld ms (timeout %d ms)", (long long)ms, SHORT_TIMEOUT_MS);
    } else {
        CHECK(n.finalizes == 1 && n.aborts == 0 && n.destroys == 1,
              "rank 1: %d finalize, %d abort, %d destroy (want 1, 0, 1)", n.finalizes,
              n.aborts, n.destroys);
    }
    check_no_misuse(rank);
    store_destroy(s);
}

/* ------------------------------------------------------------------ error strings */

/* The stub's ncclGetErrorString against the installed libnccl's (which needs no GPU for
 * it), so the strings the cases above look for are NCCL's own. */
static void strings_match_libnccl(void)
{
    void *h = dlopen(DDPPROF_TEST_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("error strings: %s does not load here (%s): the stub's strings are not "
               "compared\n", DDPPROF_TEST_NCCL_LIBRARY, dlerror());
        return;
    }
    const char *(*real)(int) = (const char *(*)(int))dlsym(h, "ncclGetErrorString");
    CHECK(real != NULL, "%s has no ncclGetErrorString", DDPPROF_TEST_NCCL_LIBRARY);
    for (int r = 0; real && r <= ncclNumResults; r++)
        CHECK(strcmp(real(r), ncclGetErrorString((ncclResult_t)r)) == 0,
              "result %d: libnccl says '%s', the stub '%s'", r, real(r),
              ncclGetErrorString((ncclResult_t)r));
    printf("error strings: the stub's are %s's\n", DDPPROF_TEST_NCCL_LIBRARY);
    dlclose(h);
}

int main(void)
{
    for (int world = 2; world <= 3; world++) {
        const int64_t t0 = clock_now_ns();
        run_ranks(world, parity_rank, -1);
        printf("world %d: every collective, lengths 0 1 7 %d: %lld ms\n", world, BIG_LEN,
               (long long)ms_since(t0));
    }
    run_ranks(3, die_rank, 1);
    run_ranks(2, fail_rank, -1);
    run_ranks(2, stuck_rank, -1);
    run_ranks(2, connect_rank, 1);
    run_ranks(2, init_hang_rank, -1);
    run_ranks(2, init_die_rank, 1);
    run_ranks(2, finalize_rank, -1);
    strings_match_libnccl(); /* last: nothing of libnccl is mapped while ranks fork */
    return test_finish();
}
