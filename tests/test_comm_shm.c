/* test_comm_shm.c — the shm comm transport (comm_shm.c) between forked CPU ranks, and the
 * fp16/bf16 conversion helpers of kernel_math.h it reduces with.
 *
 * Correctness through the parity driver (comm_parity.h, shared with test_comm_gloo): every
 * collective and dtype against a serial reference (sums in rank order 0..world-1,
 * fp16/bf16 summed in fp32 and rounded once) bit for bit.  Failure cases: a rank
 * that skips a collective (timeout naming rank, collective and sequence number), mismatched
 * collectives, a rank SIGKILLed mid-collective, a rank that leaves, attach timeouts, a
 * leftover segment.  After every case /dev/shm must hold nothing with this test's prefix. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/comm_shm.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/half.h"
#include "comm_parity.h"
#include "testutil.h"

#define MAX_WORLD COMM_PARITY_MAX_WORLD
#define BIG_LEN 1000003 /* prime, and larger than a 64 KiB slot: chunked */
#define CHUNKED_LEN 100003 /* prime: 13 chunks of a 64 KiB slot's half in f32, 7 in f16 (the
                            * parity driver's every form and dtype, in the sanitizers' time) */
#define SMALL_SLOT (64 * 1024)
#define LARGE_SLOT (8 * 1024 * 1024) /* BIG_LEN f32 fits one 4 MiB half-slot: one chunk */
#define TIMEOUT_MS 10000             /* correctness cases: only a hang would reach it */
#define SHORT_TIMEOUT_MS 500         /* failure cases */
#define CASE_LIMIT_S 60              /* a case whose ranks have not all exited by then hung */


static char prefix[64]; /* "ddpprof-test-shm-<pid>-": every segment name of this run */
static int case_number;
static char segment[128]; /* the current case's segment name */


/* ---------------------------------------------------------------------------------------- */
/* fp16 / bf16 helpers                                                                       */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* An independent reference: round x to `mant_bits` fraction bits with exponent floor
 * `min_exp` (below it, subnormal quanta) by nearbyint in double (round-to-nearest-even under
 * the default mode, and exact: x / quantum is exact in double); beyond max -> inf. */
static double ref_round(float x, int mant_bits, int min_exp, double max_finite)
{
    double d = x;
    if (isnan(d) || isinf(d) || d == 0.0)
        return d;
    int e;
    frexp(fabs(d), &e); /* |d| in [2^(e-1), 2^e) */
    int exp = e - 1 < min_exp ? min_exp : e - 1;
    double q = ldexp(1.0, exp - mant_bits);
    double r = nearbyint(d / q) * q;
    if (fabs(r) > max_finite)
        r = copysign(INFINITY, d);
    return r == 0.0 ? copysign(0.0, d) : r;
}

static void test_half_known_values(void)
{
    /* fp16 */
    CHECK(half_f32_to_f16(1.0f) == 0x3c00, "1.0 -> %#x", half_f32_to_f16(1.0f));
    CHECK(half_f32_to_f16(-2.0f) == 0xc000, "-2.0 -> %#x", half_f32_to_f16(-2.0f));
    CHECK(half_f32_to_f16(0.0f) == 0x0000, "0");
    CHECK(half_f32_to_f16(-0.0f) == 0x8000, "-0 keeps its sign");
    CHECK(half_f32_to_f16(65504.0f) == 0x7bff, "max half");
    CHECK(half_f32_to_f16(65519.0f) == 0x7bff, "65519 rounds down to max half");
    CHECK(half_f32_to_f16(65520.0f) == 0x7c00, "65520 is the tie above max: to inf");
    CHECK(half_f32_to_f16(-65520.0f) == 0xfc00, "-65520 -> -inf");
    CHECK(half_f32_to_f16(1e30f) == 0x7c00, "huge -> inf");
    CHECK(half_f32_to_f16(INFINITY) == 0x7c00, "inf");
    CHECK(half_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    CHECK(half_f32_to_f16(ldexpf(1.0f, -14)) == 0x0400, "smallest normal");
    CHECK(half_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001, "smallest subnormal 2^-24");
    CHECK(half_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000, "2^-25 ties to even: 0");
    CHECK(half_f32_to_f16(ldexpf(1.5f, -25)) == 0x0001, "1.5*2^-25 rounds up to 2^-24");
    CHECK(half_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002, "3*2^-25 ties to even: 2*2^-24");
    CHECK(half_f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400,
          "largest subnormal + half ulp ties to even: smallest normal");
    CHECK(half_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00, "1+2^-11 ties to even: 1");
    CHECK(half_f32_to_f16(1.0f + ldexpf(3.0f, -11)) == 0x3c02, "1+3*2^-11 ties up: 1+2^-9");
    CHECK(half_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)) == 0x3c01,
          "just above the tie rounds up");
    uint16_t qnan = half_f32_to_f16(NAN);
    CHECK((qnan & 0x7c00) == 0x7c00 && (qnan & 0x3ff), "nan stays nan: %#x", qnan);
    uint16_t snan = half_f32_to_f16(bits_f32(0x7f800001u)); /* payload only in low bits */
    CHECK((snan & 0x7c00) == 0x7c00 && (snan & 0x200), "signalling nan -> quiet nan: %#x", snan);
    CHECK(half_f32_to_f16(bits_f32(0xffc00000u)) & 0x8000, "nan keeps its sign");

    CHECK(half_f16_to_f32(0x3c00) == 1.0f, "0x3c00 -> 1");
    CHECK(half_f16_to_f32(0x7bff) == 65504.0f, "0x7bff -> 65504");
    CHECK(half_f16_to_f32(0x0001) == ldexpf(1.0f, -24), "0x0001 -> 2^-24");
    CHECK(half_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24), "largest subnormal");
    CHECK(half_f16_to_f32(0x7c00) == INFINITY, "inf");
    CHECK(f32_bits(half_f16_to_f32(0x8000)) == 0x80000000u, "-0");
    CHECK(isnan(half_f16_to_f32(0x7e00)), "nan");

    /* bf16 */
    CHECK(half_f32_to_bf16(1.0f) == 0x3f80, "bf16 1.0");
    CHECK(half_f32_to_bf16(1.0f + ldexpf(1.0f, -8)) == 0x3f80, "bf16 1+2^-8 ties to even: 1");
    CHECK(half_f32_to_bf16(1.0f + ldexpf(3.0f, -8)) == 0x3f82,
          "bf16 1+3*2^-8 ties up to 1+2^-6");
    CHECK(half_f32_to_bf16(bits_f32(0x3f808001u)) == 0x3f81, "bf16 above the tie rounds up");
    CHECK(half_f32_to_bf16(bits_f32(0x7f7fffffu)) == 0x7f80, "bf16 FLT_MAX rounds to inf");
    CHECK(half_f32_to_bf16(bits_f32(0x7f7f7fffu)) == 0x7f7f, "bf16 below the tie stays max");
    CHECK(half_f32_to_bf16(-INFINITY) == 0xff80, "bf16 -inf");
    CHECK(half_f32_to_bf16(bits_f32(0x00018000u)) == 0x0002, "bf16 subnormal tie to even");
    CHECK(half_f32_to_bf16(-0.0f) == 0x8000, "bf16 -0");
    uint16_t bnan = half_f32_to_bf16(bits_f32(0x7f800001u)); /* would round to inf */
    CHECK((bnan & 0x7f80) == 0x7f80 && (bnan & 0x7f), "bf16 nan stays nan: %#x", bnan);
    CHECK(half_bf16_to_f32(0x3f80) == 1.0f && half_bf16_to_f32(0xc040) == -3.0f,
          "bf16 -> f32");

    /* every fp16 pattern: to f32 and back is the identity (NaN: stays NaN) */
    int bad16 = 0, badb16 = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = half_f16_to_f32((uint16_t)h);
        uint16_t back = half_f32_to_f16(f);
        int nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan ? !(isnan(f) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h)
            bad16++;
        float g = half_bf16_to_f32((uint16_t)h);
        uint16_t bback = half_f32_to_bf16(g);
        int bnan16 = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (bnan16 ? !isnan(g) || (bback & 0x7fff) <= 0x7f80 : bback != h)
            badb16++;
    }
    CHECK(bad16 == 0, "%d fp16 patterns do not round-trip", bad16);
    CHECK(badb16 == 0, "%d bf16 patterns do not round-trip", badb16);

    /* random float bit patterns (all exponents): against the double-precision reference and,
     * where the compiler has it, the compiler's own _Float16 conversion */
    uint64_t seed = 0x51ed2701u;
    int mis16 = 0, misb = 0, mis_native = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)(test_uniform(&seed) * 4294967296.0);
        if (i & 1) /* half of them near fp16's range, where the interesting cases are */
            u = (u & 0x807fffffu) | ((uint32_t)(98 + (u >> 23) % 50) << 23);
        float f = bits_f32(u);
        if (isnan(f))
            continue;
        float h = half_f16_to_f32(half_f32_to_f16(f));
        double r16 = ref_round(f, 10, -14, 65504.0);
        if (f32_bits(h) != f32_bits((float)r16))
            mis16++;
        float b = half_bf16_to_f32(half_f32_to_bf16(f));
        double rb = ref_round(f, 7, -126, (double)bits_f32(0x7f7f0000u));
        if (f32_bits(b) != f32_bits((float)rb))
            misb++;
#ifdef __FLT16_MAX__
        _Float16 native = (_Float16)f;
        uint16_t nb;
        memcpy(&nb, &native, sizeof nb);
        if (nb != half_f32_to_f16(f))
            mis_native++;
#endif
    }
    CHECK(mis16 == 0, "%d floats round to fp16 differently from the reference", mis16);
    CHECK(misb == 0, "%d floats round to bf16 differently from the reference", misb);
    CHECK(mis_native == 0, "%d floats round to fp16 differently from _Float16", mis_native);
}

/* ---------------------------------------------------------------------------------------- */
/* forking ranks                                                                             */

static void case_begin(const char *what)
{
    case_number++;
    snprintf(segment, sizeof segment, "/%s%d", prefix, case_number);
    printf("case %d: %s\n", case_number, what);
    fflush(stdout);
}

/* Nothing of this run may be left in /dev/shm. */
static void check_no_segments(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return; /* no /dev/shm to look at (shm_open lives elsewhere): nothing to check */
    struct dirent *e;
    while ((e = readdir(d)))
        CHECK(strncmp(e->d_name, prefix, strlen(prefix)) != 0,
              "case %d left /dev/shm/%s behind", case_number, e->d_name);
    closedir(d);
}

/* Fork `world` ranks running fn (see comm_parity_fork); then nothing may be left in
 * /dev/shm. */
static void run_ranks(int world, comm_rank_fn fn, const void *arg, int killed_rank,
                      int killed_sig)
{
    comm_parity_fork(world, fn, arg, killed_rank, killed_sig, CASE_LIMIT_S, case_number);
    check_no_segments();
}

/* ---------------------------------------------------------------------------------------- */
/* correctness                                                                               */

/* Rank r's input for a given tag: f32 in [-1, 1) (for fp16/bf16 the same values rounded). */
static void rank_input(float *x, size_t n, int rank, uint64_t tag)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1) + tag * 0x100000001b3ull + 1;
    test_fill_uniform(x, n, -1.0f, 1.0f, &seed);
}

struct correct_arg {
    size_t max_bytes, big; /* the slot, the parity driver's largest length */
};

static struct comm *join(int rank, int world, size_t max_bytes, int timeout_ms)
{
    struct comm *c = comm_shm_create(rank, world, segment, max_bytes, timeout_ms);
    CHECK(c != NULL, "rank %d: comm_shm_create: %s", rank, error_get());
    if (c) {
        CHECK(c->rank == rank && c->world == world && strcmp(c->name, "shm") == 0,
              "rank %d: comm says rank %d world %d name %s", rank, c->rank, c->world, c->name);
        /* the name is removed as soon as everyone is in, before create returns */
        int fd = shm_open(segment, O_RDWR, 0600);
        CHECK(fd < 0 && errno == ENOENT, "rank %d: %s still exists after create", rank,
              segment);
        if (fd >= 0)
            close(fd);
    }
    return c;
}

static void correct_rank(int rank, int world, const void *argp)
{
    const struct correct_arg *arg = argp;
    struct comm *c = join(rank, world, arg->max_bytes, TIMEOUT_MS);
    if (!c)
        return;
    comm_parity_run(c, arg->big, COMM_PARITY_EXACT); /* sums bit-exact in rank order */
    c->destroy(c);
}

/* ---------------------------------------------------------------------------------------- */
/* failures                                                                                  */

static int contains(const char *msg, const char *what)
{
    return strstr(msg, what) != NULL;
}

/* the messages a user would see, for the test log */
static void show(int rank, const char *msg)
{
    printf("  rank %d got: %s\n", rank, msg);
}

/* Rank 1 skips all-reduce #2 and idles: rank 0 times out naming rank 1, the collective and
 * #2; once rank 1 comes back, its next collective fails at once (rank 0 gave up). */
static void skip_rank(int rank, int world, const void *arg)
{
    (void)arg;
    /* rank 1 gets the long timeout: its failure below must come without waiting for one */
    struct comm *c = join(rank, world, SMALL_SLOT, rank == 0 ? SHORT_TIMEOUT_MS : TIMEOUT_MS);
    if (!c)
        return;
    float x[1024];
    rank_input(x, 1024, rank, 7);
    CHECK(comm_allreduce(c, x, 1024, COMM_F32) == 0, "all-reduce #1: %s", error_get());
    if (rank == 0) {
        double t0 = clock_now_s();
        int rc = comm_allreduce(c, x, 1024, COMM_F32);
        double dt = clock_now_s() - t0;
        const char *msg = error_get();
        show(rank, msg);
        CHECK(rc == -1, "rank 0: all-reduce #2 without rank 1 succeeded");
        CHECK(contains(msg, "rank 0 timed out after 0.5 s in all-reduce #2 (count 1024)") &&
                  contains(msg, "rank 1 did not arrive"),
              "rank 0: timeout message: %s", msg);
        /* 0.5 s timeout; the upper bound leaves slack for a loaded 2-core machine and stays
         * under rank 1's 2 s idle, or it would not be a timeout */
        CHECK(dt >= 0.45 && dt < 1.9, "rank 0: timed out after %.3f s (timeout 0.5 s)", dt);
        rc = c->barrier(c);
        CHECK(rc == -1 && contains(error_get(), "failed earlier") &&
                  contains(error_get(), "barrier #3") && contains(error_get(), "timed out"),
              "rank 0: call after the failure: %s", error_get());
        clock_sleep_ms(2500); /* stay attached while rank 1 comes back */
    } else {
        clock_sleep_ms(2000);
        double t0 = clock_now_s();
        /* its #2: rank 0 gave up on its #2 meanwhile, but had arrived at its first barrier,
         * so rank 1 passes that barrier and sees what rank 0 was in */
        int rc = c->barrier(c);
        double dt = clock_now_s() - t0;
        show(rank, error_get());
        CHECK(rc == -1 && contains(error_get(), "rank 1 in barrier #2") &&
                  contains(error_get(), "rank 0 is in all-reduce #2 (count 1024"),
              "rank 1: %s", rc ? error_get() : "succeeded");
        CHECK(dt < 2.0, "rank 1 took %.3f s to fail (its timeout is 10 s)", dt);
        rc = c->barrier(c);
        show(rank, error_get());
        CHECK(rc == -1 && contains(error_get(), "failed earlier"), "rank 1: %s",
              rc ? error_get() : "succeeded");
    }
    c->destroy(c);
}

/* Ranks issue different collectives: both fail at once (well before the timeout). */
static void mismatch_rank(int rank, int world, const void *arg)
{
    (void)arg;
    struct comm *c = join(rank, world, SMALL_SLOT, TIMEOUT_MS);
    if (!c)
        return;
    float x[64];
    rank_input(x, 64, rank, 3);
    double t0 = clock_now_s();
    int rc = rank == 0 ? c->broadcast(c, x, 64, COMM_F32, 0) : comm_allreduce(c, x, 64, COMM_F32);
    double dt = clock_now_s() - t0;
    const char *msg = error_get();
    show(rank, msg);
    CHECK(rc == -1, "rank %d: mismatched collectives succeeded", rank);
    CHECK((rank == 0 && contains(msg, "rank 0 in broadcast #1 (count 64, f32, root 0)") &&
           contains(msg, "rank 1 is in all-reduce #1 (count 64, f32, root -1)")) ||
              (rank == 1 && contains(msg, "rank 1 in all-reduce #1") &&
               contains(msg, "rank 0 is in broadcast #1")) ||
              contains(msg, "gave up"),
          "rank %d: mismatch message: %s", rank, msg);
    CHECK(dt < 2.0, "rank %d: mismatch took %.3f s (timeout 10 s)", rank, dt);
    c->destroy(c);
}

/* The last rank is SIGKILLed while a chunked all-reduce runs; the others fail well within
 * the timeout (the dead pid is noticed) instead of hanging. */
#define KILL_TIMEOUT_MS 5000
static void kill_rank(int rank, int world, const void *arg)
{
    (void)arg;
    struct comm *c = join(rank, world, SMALL_SLOT, KILL_TIMEOUT_MS);
    if (!c)
        return;
    size_t n = BIG_LEN;
    float *x = malloc(n * sizeof *x);
    rank_input(x, n, rank, 11);
    CHECK(comm_allreduce(c, x, 1000, COMM_F32) == 0, "all-reduce #1: %s", error_get());
    if (rank == world - 1) {
        struct comm_work *w = c->allreduce_async(c, x, n, COMM_F32);
        CHECK(w != NULL, "allreduce_async: %s", error_get());
        clock_sleep_ms(3); /* let the comm thread get into the chunks */
        raise(SIGKILL);
    }
    double t0 = clock_now_s();
    int rc = comm_allreduce(c, x, n, COMM_F32);
    double dt = clock_now_s() - t0;
    const char *msg = error_get();
    show(rank, msg);
    CHECK(rc == -1, "rank %d: all-reduce with a killed rank succeeded", rank);
    char died[64];
    snprintf(died, sizeof died, "rank %d (pid", world - 1);
    CHECK(contains(msg, "all-reduce #2 (count 1000003)") &&
              ((contains(msg, died) && contains(msg, "died")) || contains(msg, "gave up")),
          "rank %d: message: %s", rank, msg);
    CHECK(dt < KILL_TIMEOUT_MS / 1000.0, "rank %d: took %.3f s, the timeout is %.1f s", rank, dt,
          KILL_TIMEOUT_MS / 1000.0);
    free(x);
    c->destroy(c);
}

/* A rank destroys its comm without joining a barrier: the other fails at once. */
static void leave_rank(int rank, int world, const void *arg)
{
    (void)arg;
    struct comm *c = join(rank, world, SMALL_SLOT, TIMEOUT_MS);
    if (!c)
        return;
    if (rank == 1) {
        c->destroy(c);
        return;
    }
    double t0 = clock_now_s();
    int rc = c->barrier(c);
    double dt = clock_now_s() - t0;
    show(rank, error_get());
    CHECK(rc == -1 && contains(error_get(), "rank 0 in barrier #1") &&
              contains(error_get(), "rank 1 destroyed its communicator"),
          "rank 0: %s", rc ? error_get() : "barrier succeeded");
    CHECK(dt < 2.0, "rank 0 took %.3f s to see rank 1 leave (timeout 10 s)", dt);
    c->destroy(c);
}

/* Rank 1 destroys its comm while its all-reduce is still in flight (rank 0 is late):
 * destroy returns at once (it waits for nothing) and rank 0 fails at once. */
static void destroy_in_flight_rank(int rank, int world, const void *arg)
{
    (void)arg;
    struct comm *c = join(rank, world, SMALL_SLOT, TIMEOUT_MS);
    if (!c)
        return;
    float x[1000];
    rank_input(x, 1000, rank, 13);
    if (rank == 1) {
        struct comm_work *w = c->allreduce_async(c, x, 1000, COMM_F32);
        CHECK(w != NULL, "allreduce_async: %s", error_get());
        clock_sleep_ms(50); /* the comm thread is now waiting for rank 0 */
        double t0 = clock_now_s();
        c->destroy(c); /* frees w too */
        double dt = clock_now_s() - t0;
        CHECK(dt < 1.0, "rank 1: destroy took %.3f s with work in flight (timeout 10 s)", dt);
        return;
    }
    clock_sleep_ms(300);
    double t0 = clock_now_s();
    int rc = comm_allreduce(c, x, 1000, COMM_F32);
    double dt = clock_now_s() - t0;
    show(rank, error_get());
    CHECK(rc == -1 && contains(error_get(), "rank 0 in all-reduce #1 (count 1000)") &&
              contains(error_get(), "rank 1 destroyed its communicator"),
          "rank 0: %s", rc ? error_get() : "all-reduce succeeded");
    CHECK(dt < 2.0, "rank 0 took %.3f s to see rank 1 leave (timeout 10 s)", dt);
    c->destroy(c);
}

/* Rank 1 is told world 3 while rank 0 made a world-2 segment: both fail fast. */
static void world_mismatch_rank(int rank, int world, const void *arg)
{
    (void)arg;
    (void)world;
    double t0 = clock_now_s();
    struct comm *c = comm_shm_create(rank, rank == 0 ? 2 : 3, segment, SMALL_SLOT, TIMEOUT_MS);
    double dt = clock_now_s() - t0;
    show(rank, error_get());
    CHECK(c == NULL, "rank %d: create with mismatched world sizes succeeded", rank);
    if (rank == 1)
        CHECK(contains(error_get(), "created for world 2") && contains(error_get(), "world 3"),
              "rank 1: %s", error_get());
    else
        CHECK(contains(error_get(), "rank 1 gave up while attaching"), "rank 0: %s",
              error_get());
    CHECK(dt < 2.0, "rank %d: took %.3f s (timeout 10 s)", rank, dt);
    if (c)
        c->destroy(c);
}

static void test_attach_failures(void)
{
    /* rank 1 with no rank 0: times out naming the segment */
    case_begin("rank 1 waits for a segment nobody creates");
    double t0 = clock_now_s();
    struct comm *c = comm_shm_create(1, 2, segment, SMALL_SLOT, SHORT_TIMEOUT_MS);
    double dt = clock_now_s() - t0;
    CHECK(c == NULL, "rank 1 attached to nothing");
    CHECK(contains(error_get(), "rank 1 timed out after 0.5 s waiting for rank 0") &&
              contains(error_get(), segment),
          "%s", error_get());
    CHECK(dt >= 0.45 && dt < 3.0, "took %.3f s (timeout 0.5 s, slack for a loaded machine)", dt);
    check_no_segments();

    /* rank 0 with nobody else: times out naming the missing ranks, removes the segment */
    case_begin("rank 0 waits for ranks that never come");
    t0 = clock_now_s();
    c = comm_shm_create(0, 3, segment, SMALL_SLOT, SHORT_TIMEOUT_MS);
    dt = clock_now_s() - t0;
    CHECK(c == NULL, "rank 0 of 3 created alone");
    CHECK(contains(error_get(), "waiting for ranks 1, 2 to attach") &&
              contains(error_get(), segment),
          "%s", error_get());
    CHECK(dt >= 0.45 && dt < 3.0, "took %.3f s (timeout 0.5 s, slack for a loaded machine)", dt);
    check_no_segments();

    /* SIGTERM (the launcher stopping a failed job) lands on rank 0 while it waits for the
     * others to attach: it dies of the signal, and the segment's name goes with it (it
     * stayed in /dev/shm) */
    case_begin("rank 0 is sent SIGTERM while it waits for the others to attach");
    char shm_path[160];
    snprintf(shm_path, sizeof shm_path, "/dev/shm%s", segment);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        comm_shm_create(0, 2, segment, SMALL_SLOT, 10000);
        _exit(3);
    }
    int there = 0;
    for (int i = 0; i < 500 && kid > 0 && !there; i++) { /* 5 s at most */
        there = access(shm_path, F_OK) == 0;
        if (!there)
            clock_sleep_ms(10);
    }
    CHECK(there, "rank 0 made no %s", shm_path);
    clock_sleep_ms(50); /* into its wait */
    int st = -1;
    if (kid > 0) {
        kill(kid, SIGTERM);
        test_wait_child(kid, 5.0, &st); /* SIGKILLed after 5 s */
    }
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "rank 0's status 0x%x (want SIGTERM)", st);
    CHECK(access(shm_path, F_OK) != 0, "%s left behind by a SIGTERM in the attach window",
          shm_path);
    shm_unlink(segment);
    check_no_segments();

    /* a leftover segment: rank 0 refuses it and says how to remove it */
    case_begin("leftover segment");
    int fd = shm_open(segment, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0, "shm_open %s: %s", segment, strerror(errno));
    c = comm_shm_create(0, 1, segment, SMALL_SLOT, SHORT_TIMEOUT_MS);
    CHECK(c == NULL && contains(error_get(), "already exists") &&
              contains(error_get(), segment + 1),
          "%s", c ? "created over a leftover" : error_get());
    if (fd >= 0)
        close(fd);
    shm_unlink(segment);
    check_no_segments();

    /* bad arguments */
    CHECK(comm_shm_create(2, 2, "/x", SMALL_SLOT, 100) == NULL &&
              contains(error_get(), "rank 2 of world 2"),
          "%s", error_get());
    CHECK(comm_shm_create(0, 1, "/a/b", SMALL_SLOT, 100) == NULL &&
              contains(error_get(), "segment name"),
          "%s", error_get());
    CHECK(comm_shm_create(0, 1, "/x", 16, 100) == NULL && contains(error_get(), "max_bytes 16"),
          "%s", error_get());
    CHECK(comm_shm_create(0, 1, "/x", SMALL_SLOT, 0) == NULL &&
              contains(error_get(), "timeout_ms 0"),
          "%s", error_get());

    /* world 1: the collectives are identities; bad arguments fail without hanging */
    case_begin("world 1 argument errors");
    c = comm_shm_create(0, 1, segment + 1 /* without the slash */, SMALL_SLOT, 1000);
    CHECK(c != NULL, "%s", error_get());
    if (c) {
        float x[3] = {1, 2, 3};
        CHECK(c->broadcast(c, x, 3, COMM_F32, 1) == -1 && contains(error_get(), "root 1"), "%s",
              error_get());
        CHECK(c->allreduce_async(c, x, 3, (enum comm_dtype)7) == NULL &&
                  contains(error_get(), "dtype 7"),
              "%s", error_get());
        CHECK(c->wait(c, NULL, NULL) == -1, "wait(NULL) must fail");
        CHECK(comm_dtype_size(COMM_F32) == 4 && comm_dtype_size(COMM_F16) == 2 &&
                  comm_dtype_size(COMM_BF16) == 2 && comm_dtype_size((enum comm_dtype)9) == 0,
              "comm_dtype_size");
        CHECK(c->barrier(c) == 0, "barrier after argument errors: %s", error_get());
        c->destroy(c);
    }
    check_no_segments();
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(prefix, sizeof prefix, "ddpprof-test-shm-%d-", (int)getpid());

    test_half_known_values();

    for (int world = 1; world <= MAX_WORLD; world++) {
        struct correct_arg small = {SMALL_SLOT, CHUNKED_LEN};
        char what[96];
        snprintf(what, sizeof what, "world %d, 64 KiB slot (chunked)", world);
        case_begin(what);
        run_ranks(world, correct_rank, &small, -1, 0);
    }
    struct correct_arg large = {LARGE_SLOT, BIG_LEN};
    case_begin("world 3, 8 MiB slot (one chunk)");
    run_ranks(3, correct_rank, &large, -1, 0);

    case_begin("a rank skips an all-reduce: timeout");
    run_ranks(2, skip_rank, NULL, -1, 0);
    case_begin("mismatched collectives");
    run_ranks(2, mismatch_rank, NULL, -1, 0);
    case_begin("a rank is SIGKILLed mid-collective");
    run_ranks(3, kill_rank, NULL, 2, SIGKILL);
    case_begin("a rank leaves early");
    run_ranks(2, leave_rank, NULL, -1, 0);
    case_begin("a rank destroys its comm with an all-reduce in flight");
    run_ranks(2, destroy_in_flight_rank, NULL, -1, 0);
    case_begin("ranks disagree on the world size");
    run_ranks(2, world_mismatch_rank, NULL, -1, 0);
    test_attach_failures();

    return test_finish();
}
