/* test_nvtx_capture.c — the probes' NVTX ranges as a tool sees them, without a GPU.
 *
 * This test is its own NVTX tool: it defines InitializeInjectionNvtx2_fnptr (NVTX3 static
 * injection, probes/nvtx_capture.h) and drives the probe API through training-like steps
 * (setup; per step: step > data, forward, backward (all-reduce launches), optimizer; eval).
 * It asserts the raw events (domain, registered names, categories, colours, payloads,
 * push/pop balance, start/end ranges) and runs nvtx_capture_check, which must accept
 * them and reject deliberately broken variants.  Two forked "ranks" also run the same
 * steps with the dynamic tool (NVTX_INJECTION64_PATH=libddpprof_nvtx_inject.so), as an
 * end-to-end test of the real trainer would; their captures must pass the check and be
 * identical.  Skipped (77) when the build has no NVTX3 headers. */
#include "common/error.h"
#include "probes/nvtx.h"
#include "probes/tools/nvtx_capture.h"
#include "probes/phase.h"
#include "probes/probe.h"
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

NVTX_CAPTURE_STATIC_INJECTION;

static char tmp[512];

static size_t find_ev(const struct nvtx_capture_event *ev, size_t n, enum nvtx_capture_op op,
                      const char *name, int nth);

/* What the trainer does, through the probe API: returns 0 or -1. */
static int drive(enum probe_mode mode, int rank, const char *dir, int steps, int buckets,
                 int data)
{
    struct probe_opts o;
    probe_opts_default(&o);
    o.mode = mode;
    o.rank = rank;
    o.world_size = 2;
    o.run_dir = dir;
    struct probe *p = probe_create(&o);
    if (!p)
        return -1;
    probe_push(p, PROBE_SETUP);
    probe_pop(p);
    for (int s = 1; s <= steps; s++) {
        probe_set_step(p, s, 1);
        probe_push(p, PROBE_STEP);
        if (data) {
            probe_push(p, PROBE_DATA);
            probe_pop(p);
        }
        probe_push_sized(p, PROBE_FORWARD, 32); /* a batch of 32 images */
        probe_pop(p);
        probe_push(p, PROBE_BACKWARD);
        for (int b = 0; b < buckets; b++) { /* buckets become ready during backward */
            probe_bucket_launch(p, b, 4096u * (unsigned)(b + 1));
            probe_bucket_issued(p, b);
        }
        probe_pop(p);
        for (int b = buckets - 1; b >= 0; b--) /* waits return in any order */
            probe_bucket_range(p, b, 4096u * (unsigned)(b + 1), 0, 0);
        probe_push(p, PROBE_OPTIMIZER);
        probe_pop(p);
        probe_pop(p);
    }
    probe_set_step(p, 0, 1);
    probe_push(p, PROBE_EVAL);
    probe_pop(p);
    return probe_destroy(p);
}

static size_t count_op(const struct nvtx_capture_event *ev, size_t n, enum nvtx_capture_op op,
                       const char *name)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].op == op && strcmp(ev[i].domain, "ddpprof") == 0 &&
            (!name || strcmp(ev[i].name, name) == 0))
            k++;
    return k;
}

/* ---- static injection: raw events ------------------------------------------------- */

static struct nvtx_capture_event *saved; /* a copy of the full-mode capture for mutation */
static size_t nsaved;

static void test_static(void)
{
    const int steps = 3, buckets = 4;
    nvtx_capture_reset();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/static", tmp);
    mkdir(dir, 0755);
    CHECK(drive(PROBE_FULL, 0, dir, steps, buckets, 1) == 0, "drive: %s", error_get());
    CHECK(nvtx_capture_attached(), "NVTX did not attach the static tool");
    const struct nvtx_capture_event *ev;
    size_t n = nvtx_capture_events(&ev);
    CHECK(n > 0, "no events");
    if (n == 0)
        return;

    CHECK(ev[0].op == NVTX_CAPTURE_DOMAIN_CREATE && strcmp(ev[0].name, "ddpprof") == 0,
          "first event is not the ddpprof domain: %s %s", nvtx_capture_op_name(ev[0].op),
          ev[0].name);
    for (int ph = 0; ph < PROBE_PHASE_COUNT; ph++) {
        const char *name = phase_name((enum probe_phase)ph);
        CHECK(count_op(ev, n, NVTX_CAPTURE_REGISTER_STRING, name) == 1, "%s registered once", name);
        int named = 0;
        for (size_t i = 0; i < n; i++)
            named += ev[i].op == NVTX_CAPTURE_NAME_CATEGORY && ev[i].category == (uint32_t)ph + 1 &&
                     strcmp(ev[i].name, name) == 0;
        CHECK(named == 1, "category %d not named %s", ph + 1, name);
    }
    for (int b = 0; b < buckets; b++) {
        char name[32];
        snprintf(name, sizeof name, "allreduce.b%d", b);
        CHECK(count_op(ev, n, NVTX_CAPTURE_REGISTER_STRING, name) == 1, "%s registered once", name);
        CHECK(count_op(ev, n, NVTX_CAPTURE_START, name) == (size_t)steps, "%s started %d times",
              name, steps);
    }
    size_t pushes = count_op(ev, n, NVTX_CAPTURE_PUSH, NULL);
    CHECK(pushes == (size_t)(2 + steps * 5), "%zu pushes", pushes);
    CHECK(count_op(ev, n, NVTX_CAPTURE_POP, NULL) == pushes, "pops != pushes");
    CHECK(count_op(ev, n, NVTX_CAPTURE_START, NULL) == (size_t)(steps * buckets) &&
              count_op(ev, n, NVTX_CAPTURE_END, NULL) == (size_t)(steps * buckets),
          "start/end counts");
    CHECK(count_op(ev, n, NVTX_CAPTURE_DOMAIN_DESTROY, NULL) == 1, "domain destroyed once");
    CHECK(count_op(ev, n, NVTX_CAPTURE_PUSH, "step") == (size_t)steps, "step pushes");

    /* the first step range, field by field */
    const struct nvtx_capture_event *first = NULL;
    for (size_t i = 0; i < n && !first; i++)
        if (ev[i].op == NVTX_CAPTURE_PUSH && strcmp(ev[i].name, "step") == 0)
            first = &ev[i];
    CHECK(first && first->registered && first->payload_type == NVTX_CAPTURE_PAYLOAD_U64 &&
              first->payload == 1 && first->category == 1 && first->has_color &&
              first->color == phase_color(PROBE_STEP),
          "first step push: payload %llu category %u colour %#x",
          first ? (unsigned long long)first->payload : 0ull, first ? first->category : 0u,
          first ? first->color : 0u);
    /* every all-reduce start carries its bucket's bytes, its colour and category; every
     * forward its batch's images (probes/nvtx.h) */
    int ar_ok = 1, fwd_ok = 1;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].op == NVTX_CAPTURE_START) {
            int b = atoi(ev[i].name + strlen("allreduce.b"));
            ar_ok &= ev[i].payload == 4096u * (unsigned)(b + 1) &&
                     ev[i].color == phase_color(PROBE_ALLREDUCE) &&
                     ev[i].category == phase_category(PROBE_ALLREDUCE) && ev[i].registered;
        }
        if (ev[i].op == NVTX_CAPTURE_PUSH && strcmp(ev[i].name, "forward") == 0)
            fwd_ok &= ev[i].payload == 32;
    }
    CHECK(ar_ok, "an all-reduce range has the wrong payload (not its bytes), colour or category");
    CHECK(fwd_ok, "a forward range's payload is not its batch's 32 images");
    /* who the process is: one rank mark, before the first step */
    size_t mark = find_ev(ev, n, NVTX_CAPTURE_MARK, "ddpprof nvtx=2 rank=0 world_size=2", 0);
    CHECK(mark < n && count_op(ev, n, NVTX_CAPTURE_MARK, NULL) == 1 &&
              mark < find_ev(ev, n, NVTX_CAPTURE_PUSH, "step", 0) && ev[mark].payload == 0,
          "no rank mark 'ddpprof nvtx=2 rank=0 world_size=2' before the first step");

    struct nvtx_capture_expect x = {.steps = steps, .first_step = 1, .buckets = buckets, .data = 1,
                                    .world_size = 2};
    char why[512];
    CHECK(nvtx_capture_check(ev, n, &x, why, sizeof why) == 0, "check: %s", why);
    x.world_size = 4;
    CHECK(nvtx_capture_check(ev, n, &x, why, sizeof why) != 0 && strstr(why, "world_size=2"),
          "a rank mark of world size 2 passed for 4: '%s'", why);

    saved = malloc(n * sizeof *saved);
    memcpy(saved, ev, n * sizeof *saved);
    nsaved = n;

    char trace[700];
    snprintf(trace, sizeof trace, "%s/rank0.trace.csv", dir);
    struct stat st;
    CHECK(stat(trace, &st) == 0 && st.st_size > 0, "full mode wrote no trace");
}

/* one rank, no DDP: nvtx mode, no data ranges, no buckets */
static void test_single(void)
{
    nvtx_capture_reset();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/single", tmp);
    mkdir(dir, 0755);
    CHECK(drive(PROBE_NVTX, 0, dir, 2, 0, 0) == 0, "drive nvtx: %s", error_get());
    const struct nvtx_capture_event *ev;
    size_t n = nvtx_capture_events(&ev);
    struct nvtx_capture_expect x = {.steps = 2, .first_step = 1, .buckets = 0, .data = 0};
    char why[512];
    CHECK(nvtx_capture_check(ev, n, &x, why, sizeof why) == 0, "check nvtx mode: %s", why);
    CHECK(count_op(ev, n, NVTX_CAPTURE_START, NULL) == 0, "no all-reduce ranges without DDP");
}

static void test_off(void)
{
    nvtx_capture_reset();
    CHECK(drive(PROBE_OFF, 0, tmp, 3, 2, 1) == 0, "drive off");
    const struct nvtx_capture_event *ev;
    CHECK(nvtx_capture_events(&ev) == 0, "--trace off emitted NVTX events");
}

/* ---- the check can fail ----------------------------------------------------------- */

static size_t find_ev(const struct nvtx_capture_event *ev, size_t n, enum nvtx_capture_op op,
                      const char *name, int nth)
{
    for (size_t i = 0; i < n; i++)
        if (ev[i].op == op && (!name || strcmp(ev[i].name, name) == 0) && nth-- == 0)
            return i;
    return n;
}

static void expect_rejected(const char *what, struct nvtx_capture_event *ev, size_t n,
                            const struct nvtx_capture_expect *x)
{
    char why[512];
    int rc = nvtx_capture_check(ev, n, x, why, sizeof why);
    CHECK(rc == -1, "the check accepted %s", what);
    if (rc == -1)
        printf("rejected %-34s %s\n", what, why);
}

static void test_check_rejects(void)
{
    if (!saved)
        return;
    const struct nvtx_capture_expect x = {.steps = 3, .first_step = 1, .buckets = 4, .data = 1};
    struct nvtx_capture_event *ev = malloc(nsaved * sizeof *ev);
    size_t n = nsaved, i, j;

#define RESET() memcpy(ev, saved, nsaved * sizeof *ev), n = nsaved

    RESET(); /* forward and backward swapped in step 2 */
    i = find_ev(ev, n, NVTX_CAPTURE_PUSH, "forward", 1);
    j = find_ev(ev, n, NVTX_CAPTURE_PUSH, "backward", 1);
    if (i < n && j < n) {
        struct nvtx_capture_event t = ev[i];
        strcpy(ev[i].name, ev[j].name), ev[i].color = ev[j].color, ev[i].category = ev[j].category;
        strcpy(ev[j].name, t.name), ev[j].color = t.color, ev[j].category = t.category;
    }
    expect_rejected("forward/backward swapped", ev, n, &x);

    RESET(); /* a pop lost */
    i = find_ev(ev, n, NVTX_CAPTURE_POP, NULL, 3);
    memmove(&ev[i], &ev[i + 1], (n - i - 1) * sizeof *ev), n--;
    expect_rejected("a missing pop", ev, n, &x);

    RESET(); /* an all-reduce never ended */
    i = find_ev(ev, n, NVTX_CAPTURE_END, NULL, 5);
    memmove(&ev[i], &ev[i + 1], (n - i - 1) * sizeof *ev), n--;
    expect_rejected("an all-reduce never ended", ev, n, &x);

    RESET(); /* wrong step payload on an optimizer */
    ev[find_ev(ev, n, NVTX_CAPTURE_PUSH, "optimizer", 2)].payload = 7;
    expect_rejected("a wrong payload", ev, n, &x);

    RESET(); /* a forward without its images */
    ev[find_ev(ev, n, NVTX_CAPTURE_PUSH, "forward", 1)].payload = 0;
    expect_rejected("a forward without images", ev, n, &x);

    RESET(); /* a bucket's all-reduce without its bytes */
    ev[find_ev(ev, n, NVTX_CAPTURE_START, "allreduce.b2", 0)].payload = 0;
    expect_rejected("an all-reduce without bytes", ev, n, &x);

    RESET(); /* no rank mark where one is expected */
    ev[find_ev(ev, n, NVTX_CAPTURE_MARK, NULL, 0)].op = NVTX_CAPTURE_OP_COUNT;
    {
        struct nvtx_capture_expect w = x;
        w.world_size = 2;
        expect_rejected("no rank mark", ev, n, &w);
    }

    RESET(); /* wrong colour */
    ev[find_ev(ev, n, NVTX_CAPTURE_PUSH, "optimizer", 0)].color = 0xFF000000u;
    expect_rejected("a wrong colour", ev, n, &x);

    RESET(); /* wrong category */
    ev[find_ev(ev, n, NVTX_CAPTURE_START, "allreduce.b1", 0)].category = 1;
    expect_rejected("a wrong category", ev, n, &x);

    RESET(); /* an all-reduce started before backward: move b0's start before the push */
    i = find_ev(ev, n, NVTX_CAPTURE_PUSH, "backward", 0);
    j = find_ev(ev, n, NVTX_CAPTURE_START, "allreduce.b0", 0);
    if (i < j && j < n) {
        struct nvtx_capture_event t = ev[j];
        memmove(&ev[i + 1], &ev[i], (j - i) * sizeof *ev);
        ev[i] = t;
    }
    expect_rejected("all-reduce started before backward", ev, n, &x);

    RESET(); /* ended after the optimizer started: move b2's end past the optimizer push */
    j = find_ev(ev, n, NVTX_CAPTURE_PUSH, "optimizer", 0);
    for (i = j; i > 0 && ev[i].op != NVTX_CAPTURE_END; i--)
        ;
    if (i > 0) {
        struct nvtx_capture_event t = ev[i];
        memmove(&ev[i], &ev[i + 1], (j - i) * sizeof *ev);
        ev[j] = t;
    }
    expect_rejected("all-reduce ended after optimizer", ev, n, &x);

    RESET(); /* a plain (unregistered) message */
    ev[find_ev(ev, n, NVTX_CAPTURE_PUSH, "data", 0)].registered = 0;
    expect_rejected("an unregistered name", ev, n, &x);

    RESET();
    struct nvtx_capture_expect more = x;
    more.steps = 4;
    expect_rejected("too few steps", ev, n, &more);
    more = x;
    more.buckets = 5;
    expect_rejected("too few buckets", ev, n, &more);
    more = x;
    more.first_step = 0;
    expect_rejected("steps numbered from 0", ev, n, &more);
#undef RESET
    free(ev);
}

/* ---- the injection library, two forked ranks --------------------------------------- */

static int same_events(const struct nvtx_capture_event *a, size_t na,
                       const struct nvtx_capture_event *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (a[i].op != b[i].op ||
            (a[i].op != NVTX_CAPTURE_MARK && strcmp(a[i].name, b[i].name) != 0) ||
            strcmp(a[i].domain, b[i].domain) != 0 ||
            (a[i].op != NVTX_CAPTURE_MARK && a[i].payload != b[i].payload) ||
            a[i].category != b[i].category || a[i].color != b[i].color)
            return 0;
    return 1;
}

/* Must run before this process makes any NVTX call (the forked ranks inherit NVTX's state). */
static void test_injection_library(void)
{
    const char *build = getenv("DDPPROF_BUILD_DIR");
    char lib[700];
    snprintf(lib, sizeof lib, "%s/libddpprof_nvtx_inject.so", build ? build : ".");
    if (access(lib, R_OK) != 0) {
        printf("no %s (run through ctest): injection-library part skipped\n", lib);
        return;
    }
    char dir[600];
    snprintf(dir, sizeof dir, "%s/inject", tmp);
    mkdir(dir, 0755);
    const int steps = 2, buckets = 3;
    pid_t pid[2];
    fflush(NULL);
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            setenv("NVTX_INJECTION64_PATH", lib, 1);
            setenv("DDPPROF_NVTX_CAPTURE", dir, 1);
            exit(drive(PROBE_FULL, r, dir, steps, buckets, 1) == 0 ? 0 : 1); /* atexit saves */
        }
    }
    struct nvtx_capture_event *ev[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        int status;
        waitpid(pid[r], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d status %#x", r, status);
        char path[700];
        snprintf(path, sizeof path, "%s/nvtx.%d.csv", dir, (int)pid[r]);
        CHECK(nvtx_capture_load(path, &ev[r], &n[r]) == 0, "rank %d: %s", r, error_get());
        struct nvtx_capture_expect x = {.steps = steps, .first_step = 1, .buckets = buckets,
                                        .data = 1};
        char why[512];
        CHECK(n[r] > 0 && nvtx_capture_check(ev[r], n[r], &x, why, sizeof why) == 0,
              "rank %d (injection library): %s", r, n[r] ? why : "no events");
    }
    CHECK(same_events(ev[0], n[0], ev[1], n[1]), "ranks 0 and 1 emitted different NVTX events");
    free(ev[0]);
    free(ev[1]);
    CHECK(nvtx_capture_load("/nonexistent/nvtx.csv", &ev[0], &n[0]) == -1, "load missing file");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    if (!nvtx_compiled())
        test_skip("this build has no NVTX3 headers (nvtx3/nvToolsExt.h): NVTX ranges are no-ops");
    char *d = test_tmpdir();
    if (!d)
        test_skip("no temp directory");
    snprintf(tmp, sizeof tmp, "%s", d);
    free(d);

    test_injection_library(); /* first: before this process touches NVTX */
    test_static();
    test_single();
    test_off();
    test_check_rejects();

    free(saved);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
