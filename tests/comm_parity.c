/* comm_parity.c — the parity driver of the host transports (see comm_parity.h). */
#include "comm_parity.h"

#include "comm/comm.h"
#include "common/error.h"
#include "common/half.h"
#include "testutil.h"

#include "common/clock.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const parity_dt_names[] = {"f32", "f16", "bf16"};

/* Rank r's input for a tag: f32 in [-1, 1); f16 the same scaled by 300 (so sums have
 * rounding to do), bf16 the same rounded. */
static void parity_input(void *x, size_t n, enum comm_dtype dt, int rank, uint64_t tag)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1) + tag * 0x100000001b3ull + 1;
    if (dt == COMM_F32) {
        test_fill_uniform(x, n, -1.0f, 1.0f, &seed);
        return;
    }
    float *f = malloc((n ? n : 1) * sizeof *f);
    test_fill_uniform(f, n, -1.0f, 1.0f, &seed);
    uint16_t *h = x;
    for (size_t i = 0; i < n; i++)
        h[i] = dt == COMM_F16 ? half_f32_to_f16(f[i] * 300.0f) : half_f32_to_bf16(f[i]);
    free(f);
}

static float parity_f32(const void *x, size_t i, enum comm_dtype dt)
{
    if (dt == COMM_F32)
        return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return dt == COMM_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}

static size_t parity_first_diff(const void *a, const void *b, size_t n, enum comm_dtype dt)
{
    size_t es = comm_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es))
            return i;
    return n;
}

/* The oracle of a sum over the ranks' inputs for tag: the first element of got that is
 * wrong, or n (see comm_parity.h for exact). */
static size_t parity_first_bad_sum(const void *got, size_t n, enum comm_dtype dt, int world,
                                   uint64_t tag, int exact)
{
    size_t es = comm_dtype_size(dt), bad = n;
    void *x = malloc(n * es + 1);
    float *acc = malloc((n ? n : 1) * sizeof *acc);
    double *sum = malloc((n ? n : 1) * sizeof *sum), *mag = malloc((n ? n : 1) * sizeof *mag);
    for (int k = 0; k < world; k++) {
        parity_input(x, n, dt, k, tag);
        for (size_t i = 0; i < n; i++) {
            float v = parity_f32(x, i, dt);
            acc[i] = k ? acc[i] + v : v;
            sum[i] = k ? sum[i] + v : v;
            mag[i] = k ? mag[i] + fabs(v) : fabs(v);
        }
    }
    for (size_t i = 0; i < n && bad == n; i++) {
        if (exact) { /* the rank-order fp32 sum, rounded once */
            float want = dt == COMM_F32   ? acc[i]
                         : dt == COMM_F16 ? half_f16_to_f32(half_f32_to_f16(acc[i]))
                                          : half_bf16_to_f32(half_f32_to_bf16(acc[i]));
            float g = parity_f32(got, i, dt);
            if (memcmp(&g, &want, sizeof g))
                bad = i;
            continue;
        }
        double tol = world * 1.2e-7 * mag[i] + 1e-30;
        if (dt == COMM_F16)
            tol += fabs(sum[i]) * ldexp(1.0, -11) + ldexp(1.0, -24);
        else if (dt == COMM_BF16)
            tol += fabs(sum[i]) * ldexp(1.0, -8) + 1e-38;
        if (!(fabs(parity_f32(got, i, dt) - sum[i]) <= tol))
            bad = i;
    }
    free(mag);
    free(sum);
    free(acc);
    free(x);
    return bad;
}

/* Every rank holds rank 0's bits (rank 0's copy is broadcast and compared). */
static int parity_same_on_all_ranks(struct comm *c, const void *buf, size_t n,
                                    enum comm_dtype dt)
{
    size_t es = comm_dtype_size(dt);
    void *copy = malloc(n * es + 1);
    memcpy(copy, buf, n * es);
    int rc = c->broadcast(c, copy, n, dt, 0);
    CHECK(rc == 0, "broadcast for the cross-rank check: %s", error_get());
    int same = rc == 0 && parity_first_diff(copy, buf, n, dt) == n;
    free(copy);
    return same;
}

/* The three ways to all-reduce: blocking, asynchronous + wait, joined + settled. */
static int parity_allreduce(struct comm *c, void *buf, size_t n, enum comm_dtype dt, int how)
{
    if (how == 0)
        return comm_allreduce(c, buf, n, dt);
    if (how == 1) {
        struct comm_work *w = c->allreduce_async(c, buf, n, dt);
        return w ? c->wait(c, w, NULL) : -1;
    }
    return comm_allreduce_join(c, buf, n, dt) || comm_settle(c) ? -1 : 0;
}

/* Every collective at length n.  A large n (where the transports chunk, pipeline and
 * split work among ranks) costs seconds under the sanitizers, so there only what depends
 * on the length runs: f32 broadcast from the first and last rank, all-reduce blocking and
 * asynchronous, reduce to the first and last rank, all-gather; f16 and bf16 (whose copies
 * are the same bytes moved) their sums only: all-reduce, and bf16 reduce to rank 0. */
static void parity_length(struct comm *c, size_t n, int exact, uint64_t *tag)
{
    const int large = n > 65536;
    const int rank = c->rank, world = c->world;
    size_t cap = n ? n : 1;
    unsigned char *buf = malloc(cap * 4), *ref = malloc(cap * 4);
    unsigned char *gather = malloc((size_t)world * cap * 4);
    for (enum comm_dtype dt = COMM_F32; dt <= COMM_BF16; dt++) {
        const char *dn = parity_dt_names[dt];
        const size_t es = comm_dtype_size(dt);

        const int half = dt != COMM_F32;
        for (int root = 0; root < (large && half ? 0 : world); root++) { /* every root */
            if (large && root != 0 && root != world - 1)
                continue;
            ++*tag;
            parity_input(buf, n, dt, rank, *tag);
            parity_input(ref, n, dt, root, *tag);
            CHECK(c->broadcast(c, buf, n, dt, root) == 0, "broadcast %s: %s", dn, error_get());
            size_t at = parity_first_diff(buf, ref, n, dt);
            CHECK(at == n, "rank %d: broadcast %s n=%zu root %d differs at %zu", rank, dn, n,
                  root, at);
        }

        for (int how = 0; how < (!large ? 3 : half ? 1 : 2); how++) { /* blocking, async, joined */
            ++*tag;
            parity_input(buf, n, dt, rank, *tag);
            CHECK(parity_allreduce(c, buf, n, dt, how) == 0, "all-reduce %s (%d): %s", dn, how,
                  error_get());
            size_t at = parity_first_bad_sum(buf, n, dt, world, *tag, exact);
            CHECK(at == n, "rank %d: all-reduce %s (%d) n=%zu wrong at %zu", rank, dn, how, n,
                  at);
            if (!exact && how == 0)
                CHECK(parity_same_on_all_ranks(c, buf, n, dt),
                      "rank %d: all-reduce %s n=%zu differs from rank 0's bits", rank, dn, n);
        }

        /* reduce to the first and the last rank: root gets the sum, others keep their input */
        for (int root = 0; root < world; root += world > 1 ? world - 1 : 1) {
            if (large && (dt == COMM_F16 || (dt == COMM_BF16 && root != 0)))
                break;
            ++*tag;
            parity_input(buf, n, dt, rank, *tag);
            parity_input(ref, n, dt, rank, *tag);
            CHECK(c->reduce(c, buf, n, dt, root) == 0, "reduce %s: %s", dn, error_get());
            size_t at = rank == root ? parity_first_bad_sum(buf, n, dt, world, *tag, exact)
                                     : parity_first_diff(buf, ref, n, dt);
            CHECK(at == n, "rank %d: reduce %s n=%zu root %d wrong at %zu", rank, dn, n, root,
                  at);
        }

        for (int joined = 0; joined < (!large ? 2 : half ? 0 : 1); joined++) { /* exact */
            ++*tag;
            parity_input(buf, n, dt, rank, *tag);
            int rc = joined ? comm_allgather_join(c, buf, gather, n, dt) || comm_settle(c)
                            : c->allgather(c, buf, gather, n, dt);
            CHECK(rc == 0, "all-gather %s: %s", dn, error_get());
            for (int k = 0; k < world; k++) {
                parity_input(ref, n, dt, k, *tag);
                size_t at = parity_first_diff(gather + (size_t)k * n * es, ref, n, dt);
                CHECK(at == n, "rank %d: all-gather %s n=%zu block %d differs at %zu", rank, dn,
                      n, k, at);
            }
        }
    }
    CHECK(c->barrier(c) == 0, "barrier: %s", error_get());
    free(gather);
    free(ref);
    free(buf);
}

/* Several asynchronous all-reduces in flight, a blocking broadcast queued behind them,
 * then waited in order: each ran after the previous one (spans, where timed), each sum is
 * right. */
static void parity_async(struct comm *c, size_t big, int exact, int timed)
{
    enum { NASYNC = 5 };
    const size_t alen[NASYNC] = {big, 7, 0, 4099, 1};
    const int rank = c->rank, world = c->world;
    float *abuf[NASYNC];
    struct comm_work *work[NASYNC];
    const uint64_t atag = 1000000;
    for (int i = 0; i < NASYNC; i++) {
        abuf[i] = malloc((alen[i] ? alen[i] : 1) * sizeof(float));
        parity_input(abuf[i], alen[i], COMM_F32, rank, atag + (uint64_t)i);
        work[i] = c->allreduce_async(c, abuf[i], alen[i], COMM_F32);
        CHECK(work[i] != NULL, "allreduce_async %d: %s", i, error_get());
    }
    float buf[7], ref[7];
    parity_input(buf, 7, COMM_F32, rank, atag + 99);
    parity_input(ref, 7, COMM_F32, world - 1, atag + 99);
    CHECK(c->broadcast(c, buf, 7, COMM_F32, world - 1) == 0, "broadcast behind async: %s",
          error_get());
    CHECK(parity_first_diff(buf, ref, 7, COMM_F32) == 7,
          "rank %d: broadcast behind async work differs", rank);
    int64_t last_end = 0;
    for (int i = 0; i < NASYNC; i++) {
        if (!work[i])
            continue;
        struct comm_span span = {-1, -1}; /* the wait fills it in */
        CHECK(c->wait(c, work[i], &span) == 0, "wait %d: %s", i, error_get());
        if (timed)
            CHECK(span.start_ns > 0 && span.end_ns >= span.start_ns &&
                      span.start_ns >= last_end,
                  "rank %d: async %d ran %lld..%lld, after %lld (issue order)", rank, i,
                  (long long)span.start_ns, (long long)span.end_ns, (long long)last_end);
        else
            CHECK(span.start_ns == 0 && span.end_ns == 0,
                  "rank %d: async %d: a span %lld..%lld from a transport without them", rank,
                  i, (long long)span.start_ns, (long long)span.end_ns);
        last_end = span.end_ns;
        size_t at = parity_first_bad_sum(abuf[i], alen[i], COMM_F32, world, atag + (uint64_t)i,
                                         exact);
        CHECK(at == alen[i], "rank %d: async all-reduce %d (n=%zu) wrong at %zu", rank, i,
              alen[i], at);
        free(abuf[i]);
    }

    /* a handle left unwaited is freed by destroy (ASan would see a leak otherwise); the
     * barrier orders it, so buf is no longer written when this returns */
    parity_input(buf, 7, COMM_F32, rank, 5);
    CHECK(c->allreduce_async(c, buf, 7, COMM_F32) != NULL, "allreduce_async: %s", error_get());
    CHECK(c->barrier(c) == 0, "final barrier: %s", error_get());
}

void comm_parity_run(struct comm *c, size_t big, int flags)
{
    const size_t lengths[] = {0, 1, 7, big};
    const int exact = (flags & COMM_PARITY_EXACT) != 0;
    uint64_t tag = 1;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        parity_length(c, lengths[li], exact, &tag);
    parity_async(c, big, exact, !(flags & COMM_PARITY_UNTIMED));
}

void comm_parity_fork(int world, comm_rank_fn fn, const void *arg, int killed_rank,
                      int killed_sig, int limit_s, int case_number)
{
    static struct {
        int passed, failed;
    } *reports; /* MAP_SHARED, one per rank */
    if (!reports) {
        void *m = mmap(NULL, sizeof *reports * COMM_PARITY_MAX_WORLD, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
        if (m == MAP_FAILED)
            return;
        reports = m;
    }
    pid_t pids[COMM_PARITY_MAX_WORLD];
    memset(reports, 0, sizeof *reports * COMM_PARITY_MAX_WORLD);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            CHECK(0, "fork: %s", strerror(errno));
            return;
        }
        if (pids[r] == 0) {
            test_passed = test_failed = 0;
            fn(r, world, arg);
            reports[r].passed = test_passed;
            reports[r].failed = test_failed;
            fflush(stdout);
            fflush(stderr);
            _exit(0);
        }
    }
    /* one deadline for all ranks: one still running at it is killed (its status then 0) */
    int status[COMM_PARITY_MAX_WORLD], hung = 0;
    double give_up = clock_now_s() + limit_s;
    for (int r = 0; r < world; r++)
        if (test_wait_child(pids[r], give_up - clock_now_s(), &status[r]) < 0) {
            hung = 1;
            status[r] = 0;
        }
    if (hung)
        CHECK(0, "case %d: ranks still running after %d s: hung", case_number, limit_s);
    for (int r = 0; r < world; r++) {
        if (r == killed_rank) {
            CHECK(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == killed_sig,
                  "case %d: rank %d should have died by signal %d (status %#x)", case_number, r,
                  killed_sig, status[r]);
            continue;
        }
        CHECK(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
              "case %d: rank %d exited with status %#x", case_number, r, status[r]);
        test_passed += reports[r].passed;
        test_failed += reports[r].failed;
    }
}
