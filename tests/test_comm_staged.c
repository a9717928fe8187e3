/* test_comm_staged.c — collectives on "device" memory staged through the shm comm
 * (comm_staged.c), between forked CPU ranks, with a fake device.
 *
 * The fake device stands in for a GPU backend: its buffers are addresses in a reserved
 * PROT_NONE region (any direct access, by the staged comm or the shm comm thread, kills
 * the rank with SIGSEGV), their bytes live in a separate host shadow, and its download and
 * upload copy between shadow and host while counting calls and checking that they run on
 * the rank's own thread (a backend's slots must never run on the comm thread).
 *
 * Each rank checks its results against what every rank contributed: all-reduce (async,
 * several in flight, sizes 0, 7 and larger than the shm slot so they are chunked; f32 and
 * f16), broadcast, reduce (other ranks' buffers untouched, not even uploaded), all-gather,
 * barrier; and the exact copies each makes.  World 1 in this process: a failing download
 * is an error naming the rank and the copy, and nothing is issued. */
#include "comm/comm.h"
#include "comm/comm_shm.h"
#include "comm/comm_staged.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/half.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORLD 2
#define BIG 300007            /* floats: larger than the slot's half, so chunked */
#define SLOT (256 * 1024)     /* shm per-rank slot, bytes */
#define SPACE ((size_t)16 << 20) /* fake device address space */
#define TIMEOUT_MS 10000
#define CASE_LIMIT_S 60

/* ------------------------------------------------------------------ the fake device */

struct fake_dev {
    unsigned char *base;   /* PROT_NONE: device addresses */
    unsigned char *shadow; /* the bytes behind them */
    size_t used;
    pthread_t owner;       /* the rank's thread: the only one allowed to copy */
    int downloads, uploads, wrong_thread, fail_download;
    size_t down_bytes, up_bytes;
};

static int fake_init(struct fake_dev *f)
{
    memset(f, 0, sizeof *f);
    f->base = mmap(NULL, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    f->shadow = calloc(1, SPACE);
    f->owner = pthread_self();
    return f->base != MAP_FAILED && f->shadow ? 0 : -1;
}

static void fake_free(struct fake_dev *f)
{
    munmap(f->base, SPACE);
    free(f->shadow);
}

static void *fake_alloc(struct fake_dev *f, size_t bytes)
{
    void *p = f->base + f->used;
    f->used += (bytes + 255) & ~(size_t)255;
    return p;
}

/* the shadow bytes of a device address */
static void *fake_at(struct fake_dev *f, const void *dev)
{
    return f->shadow + ((const unsigned char *)dev - f->base);
}

static int fake_download(void *ctx, void *host_dst, const void *dev_src, size_t bytes)
{
    struct fake_dev *f = ctx;
    if (!pthread_equal(pthread_self(), f->owner))
        f->wrong_thread++;
    if (f->fail_download)
        return error_set("fake device: download failed");
    memcpy(host_dst, fake_at(f, dev_src), bytes);
    f->downloads++;
    f->down_bytes += bytes;
    return 0;
}

static int fake_upload(void *ctx, void *dev_dst, const void *host_src, size_t bytes)
{
    struct fake_dev *f = ctx;
    if (!pthread_equal(pthread_self(), f->owner))
        f->wrong_thread++;
    memcpy(fake_at(f, dev_dst), host_src, bytes);
    f->uploads++;
    f->up_bytes += bytes;
    return 0;
}

static struct comm *staged_join(struct fake_dev *f, const char *segment, int rank, int world)
{
    struct comm *shm = comm_shm_create(rank, world, segment, SLOT, TIMEOUT_MS);
    CHECK(shm != NULL, "rank %d: shm: %s", rank, error_get());
    if (!shm)
        return NULL;
    const struct comm_stage stage = {fake_download, fake_upload, f};
    struct comm *c = comm_staged_create(shm, &stage);
    CHECK(c != NULL, "rank %d: staged: %s", rank, error_get());
    if (c)
        CHECK(strcmp(c->name, "shm-staged") == 0 && c->rank == rank && c->world == world &&
                  c->stream(c) == NULL && c->order == NULL,
              "rank %d: comm %s %d/%d", rank, c->name, c->rank, c->world);
    return c;
}

/* ------------------------------------------------------------------ one rank */

/* rank r's value at i: small integers, exact in f32 and f16 and in their sums */
static float value(int rank, size_t i) { return (float)((i % 61) * (rank + 1)); }

static float sum_over_ranks(size_t i, int world)
{
    float s = 0;
    for (int r = 0; r < world; r++)
        s += value(r, i);
    return s;
}

static void fill(struct fake_dev *f, float *dev, size_t n, int rank)
{
    float *h = fake_at(f, dev);
    for (size_t i = 0; i < n; i++)
        h[i] = value(rank, i);
}

static size_t count_bad_sum(struct fake_dev *f, const float *dev, size_t n, int world)
{
    const float *h = fake_at(f, dev);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += h[i] != sum_over_ranks(i, world);
    return bad;
}

static void rank_main(int rank, int world, const char *segment)
{
    struct fake_dev f;
    CHECK(fake_init(&f) == 0, "rank %d: fake device", rank);
    struct comm *c = staged_join(&f, segment, rank, world);
    if (!c)
        return;
    static const size_t sizes[] = {7, 0, BIG};
    float *bufs[3];
    size_t expect_down = 0;
    for (int k = 0; k < 3; k++) {
        bufs[k] = fake_alloc(&f, (sizes[k] ? sizes[k] : 1) * sizeof(float));
        fill(&f, bufs[k], sizes[k], rank);
    }

    /* async all-reduces, three in flight (as buckets during backward), waited in order */
    struct comm_work *w[3];
    for (int k = 0; k < 3; k++) {
        w[k] = c->allreduce_async(c, bufs[k], sizes[k], COMM_F32);
        CHECK(w[k] != NULL, "rank %d: all-reduce %d: %s", rank, k, error_get());
        expect_down += sizes[k] ? 1 : 0;
    }
    CHECK(f.downloads == (int)expect_down && f.uploads == 0,
          "rank %d: issuing downloaded %d times, uploaded %d", rank, f.downloads, f.uploads);
    for (int k = 0; k < 3; k++) {
        struct comm_span span = {0, 0};
        CHECK(w[k] && c->wait(c, w[k], &span) == 0, "rank %d: wait %d: %s", rank, k,
              error_get());
        CHECK(sizes[k] == 0 || (span.start_ns > 0 && span.end_ns >= span.start_ns),
              "rank %d: the shm span passes through: %lld..%lld", rank,
              (long long)span.start_ns, (long long)span.end_ns);
        CHECK(count_bad_sum(&f, bufs[k], sizes[k], world) == 0,
              "rank %d: all-reduce %d of %zu floats: wrong sums", rank, k, sizes[k]);
    }
    CHECK(f.uploads == (int)expect_down, "rank %d: %d uploads after the waits, want %zu", rank,
          f.uploads, expect_down);

    /* f16: 2-byte elements staged as such */
    uint16_t *h16 = fake_alloc(&f, 1000 * sizeof(uint16_t));
    uint16_t *s16 = fake_at(&f, h16);
    for (int i = 0; i < 1000; i++)
        s16[i] = half_f32_to_f16(value(rank, (size_t)i));
    size_t up_before = f.up_bytes;
    CHECK(comm_allreduce(c, h16, 1000, COMM_F16) == 0, "rank %d: f16: %s", rank, error_get());
    size_t bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += half_f16_to_f32(s16[i]) != sum_over_ranks((size_t)i, world);
    CHECK(bad == 0 && f.up_bytes - up_before == 2000, "rank %d: f16 all-reduce: %zu wrong, "
          "%zu bytes uploaded", rank, bad, f.up_bytes - up_before);

    /* broadcast from rank 1: only the root downloads, only the others upload */
    float *b = bufs[2];
    fill(&f, b, BIG, rank);
    int d0 = f.downloads, u0 = f.uploads;
    CHECK(c->broadcast(c, b, BIG, COMM_F32, 1) == 0, "rank %d: broadcast: %s", rank,
          error_get());
    bad = 0;
    for (size_t i = 0; i < BIG; i++)
        bad += ((float *)fake_at(&f, b))[i] != value(1, i);
    CHECK(bad == 0, "rank %d: broadcast from 1: %zu wrong", rank, bad);
    CHECK(f.downloads - d0 == (rank == 1) && f.uploads - u0 == (rank != 1),
          "rank %d: broadcast copies: %d down, %d up", rank, f.downloads - d0, f.uploads - u0);

    /* reduce to rank 0: rank 0 gets the sum; rank 1's buffer untouched and not uploaded */
    fill(&f, b, BIG, rank);
    d0 = f.downloads, u0 = f.uploads;
    CHECK(c->reduce(c, b, BIG, COMM_F32, 0) == 0, "rank %d: reduce: %s", rank, error_get());
    bad = 0;
    for (size_t i = 0; i < BIG; i++)
        bad += ((float *)fake_at(&f, b))[i] != (rank == 0 ? sum_over_ranks(i, world) : value(rank, i));
    CHECK(bad == 0, "rank %d: reduce to 0: %zu wrong", rank, bad);
    CHECK(f.downloads - d0 == 1 && f.uploads - u0 == (rank == 0),
          "rank %d: reduce copies: %d down, %d up", rank, f.downloads - d0, f.uploads - u0);

    /* all-gather: send downloaded, every rank's block uploaded */
    const size_t n = 1001;
    float *send = fake_alloc(&f, n * sizeof(float)), *recv = fake_alloc(&f, world * n * sizeof(float));
    fill(&f, send, n, rank);
    CHECK(c->allgather(c, send, recv, n, COMM_F32) == 0, "rank %d: all-gather: %s", rank,
          error_get());
    bad = 0;
    for (size_t i = 0; i < world * n; i++)
        bad += ((float *)fake_at(&f, recv))[i] != value((int)(i / n), i % n);
    CHECK(bad == 0, "rank %d: all-gather: %zu wrong", rank, bad);

    d0 = f.downloads, u0 = f.uploads;
    CHECK(c->barrier(c) == 0, "rank %d: barrier: %s", rank, error_get());
    CHECK(f.downloads == d0 && f.uploads == u0, "rank %d: the barrier copied", rank);
    CHECK(f.wrong_thread == 0, "rank %d: %d copies ran on another thread (the comm thread?)",
          rank, f.wrong_thread);

    /* an all-reduce left in flight: destroy frees it */
    fill(&f, bufs[0], 7, rank);
    struct comm_work *left = c->allreduce_async(c, bufs[0], 7, COMM_F32);
    CHECK(left != NULL, "rank %d: last all-reduce: %s", rank, error_get());
    if (left)
        CHECK(c->wait(c, left, NULL) == 0, "rank %d: last wait: %s", rank, error_get());
    c->destroy(c);
    fake_free(&f);
}

/* ------------------------------------------------------------------ forking */

static struct { int passed, failed; } *reports; /* MAP_SHARED, WORLD entries */

static void run_world(const char *segment)
{
    pid_t pids[WORLD];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < WORLD; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            test_passed = test_failed = 0;
            rank_main(r, WORLD, segment);
            reports[r].passed = test_passed;
            reports[r].failed = test_failed;
            fflush(stdout);
            _exit(0);
        }
        CHECK(pids[r] > 0, "fork: %s", strerror(errno));
    }
    const double give_up = clock_now_s() + CASE_LIMIT_S;
    for (int r = 0; r < WORLD; r++) {
        int status = 0;
        if (pids[r] > 0 && test_wait_child(pids[r], give_up - clock_now_s(), &status) < 0)
            CHECK(0, "rank %d hung", r);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "rank %d exited with status %#x (SIGSEGV: a device pointer was dereferenced)", r,
              status);
        test_passed += reports[r].passed;
        test_failed += reports[r].failed;
    }
}

/* world 1, in this process: a failing download issues nothing */
static void test_download_fails(const char *segment)
{
    struct fake_dev f;
    CHECK(fake_init(&f) == 0, "fake device");
    struct comm *c = staged_join(&f, segment, 0, 1);
    if (!c)
        return;
    float *buf = fake_alloc(&f, 64 * sizeof(float));
    f.fail_download = 1;
    error_clear();
    CHECK(c->allreduce_async(c, buf, 64, COMM_F32) == NULL, "a failed download was issued");
    CHECK(strstr(error_get(), "rank 0") && strstr(error_get(), "shm-staged all-reduce") &&
              strstr(error_get(), "download failed"),
          "error: '%s'", error_get());
    CHECK(c->broadcast(c, buf, 64, COMM_F32, 0) == -1, "a failed broadcast download passed");
    f.fail_download = 0;
    CHECK(comm_allreduce(c, buf, 64, COMM_F32) == 0, "the comm works after a failed copy: %s",
          error_get());
    CHECK(c->wait(c, NULL, NULL) == -1, "wait(NULL) succeeded");
    c->destroy(c);
    fake_free(&f);

    error_clear();
    const struct comm_stage none = {NULL, NULL, NULL};
    CHECK(comm_staged_create(NULL, &none) == NULL && error_get()[0],
          "a staged comm without a comm or copies");
}

/* progress passes to the inner comm where it has one (gloo's threads), else stays NULL */
struct progress_comm {
    struct comm base;
    int progress_calls, destroyed;
};

static void pc_progress(struct comm *c) { ((struct progress_comm *)c)->progress_calls++; }
static void pc_destroy(struct comm *c) { ((struct progress_comm *)c)->destroyed++; }

static void test_progress(const char *segment)
{
    struct fake_dev f;
    CHECK(fake_init(&f) == 0, "fake device");
    const struct comm_stage stage = {fake_download, fake_upload, &f};
    struct progress_comm pc = {.base = {.name = "progress", .rank = 0, .world = 2,
                                        .progress = pc_progress, .destroy = pc_destroy}};
    struct comm *c = comm_staged_create(&pc.base, &stage);
    CHECK(c && c->progress, "a staged comm over a comm with progress has none");
    if (c && c->progress) {
        c->progress(c);
        c->progress(c);
    }
    CHECK(pc.progress_calls == 2, "the inner comm's progress ran %d times, not 2",
          pc.progress_calls);
    if (c)
        c->destroy(c);
    CHECK(pc.destroyed == 1, "the inner comm destroyed %d times", pc.destroyed);
    struct comm *shm = staged_join(&f, segment, 0, 1); /* shm: no progress of its own */
    CHECK(shm && shm->progress == NULL, "a staged shm comm has a progress");
    if (shm)
        shm->destroy(shm);
    fake_free(&f);
}

int main(void)
{
    reports = mmap(NULL, sizeof *reports * WORLD, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (reports == MAP_FAILED)
        test_skip("no shared mapping for the ranks' reports");
    char segment[96];
    snprintf(segment, sizeof segment, "/ddpprof-test-staged-%d-1", (int)getpid());
    run_world(segment);
    snprintf(segment, sizeof segment, "/ddpprof-test-staged-%d-2", (int)getpid());
    test_download_fails(segment);
    snprintf(segment, sizeof segment, "/ddpprof-test-staged-%d-3", (int)getpid());
    test_progress(segment);
    return test_finish();
}
