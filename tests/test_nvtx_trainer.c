/* test_nvtx_trainer.c — the NVTX ranges the real trainer emits, as Nsight Systems would see
 * them, without a GPU or Nsight: `ddpprof train` runs with NVTX_INJECTION64_PATH pointing at
 * the capture tool (libddpprof_nvtx_inject.so), which saves every NVTX event of each
 * process; nvtx_capture_check then asserts the domain, registered names, categories,
 * colours, payloads (steps, forward's images, the collectives' bytes), the rank mark with
 * the world size, and the nesting step > [data] forward backward optimizer with one
 * allreduce.bN range per bucket, for 1 rank (baseline) and 2 DDP ranks with 3 buckets,
 * under --trace full (its per-layer ranges too).
 * With the argument `gpu` (ctest test_nvtx_trainer_gpu; gpu-check's "nvtx" row) the same on
 * GPU 0: the baseline on --gpu 0, DDP on 2 ranks sharing it (--gpu 0,0); skips (77) without
 * CUDA or a GPU. */
#include "cuda/cuda_api.h"
#include "probes/phase.h"
#include "probes/tools/nvtx_capture.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* run ddpprof with the capture tool into dir/cap; 0 on success */
static int run(const char *dir, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "mkdir -p \"%s/cap\" && NVTX_INJECTION64_PATH=\"%s/libddpprof_nvtx_inject.so\" "
             "DDPPROF_NVTX_CAPTURE=\"%s/cap\" \"%s\" train --quiet --threads 1 --epochs 1 "
             "--test-limit 64 --trace full --out \"%s/run\" %s >\"%s/log\" 2>&1",
             dir, getenv("DDPPROF_BUILD_DIR"), dir, getenv("DDPPROF"), dir, args, dir);
    int rc = system(cmd);
    if (rc) {
        snprintf(cmd, sizeof cmd, "cat \"%s/log\" >&2", dir);
        if (system(cmd)) {
        }
    }
    return rc;
}

/* check every process's capture in dir/cap against x: how many processes emitted steps,
 * and in *bad how many of them failed the check (the first reason in why) */
static int layer_pushes[2]; /* check_dir's last count of "fc" layer ranges: fwd, bwd */

static int check_dir(const char *dir, const struct nvtx_capture_expect *x, int *bad,
                     char *why, size_t why_cap)
{
    *bad = 0;
    layer_pushes[0] = layer_pushes[1] = 0;
    char cap[4200];
    snprintf(cap, sizeof cap, "%s/cap", dir);
    DIR *d = opendir(cap);
    int ranks = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "nvtx.", 5) != 0)
            continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", cap, e->d_name);
        struct nvtx_capture_event *ev = NULL;
        size_t n = 0;
        CHECK(nvtx_capture_load(path, &ev, &n) == 0, "load %s", path);
        int steps = 0;
        for (size_t i = 0; i < n; i++)
        {
            steps += ev[i].op == NVTX_CAPTURE_PUSH && strcmp(ev[i].name, "step") == 0;
            /* per-layer ranges (--trace full): named by the module, the phase's category */
            for (int d = 0; d < 2; d++) {
                const enum probe_phase ph = d ? PROBE_LAYER_BACKWARD : PROBE_LAYER_FORWARD;
                layer_pushes[d] += ev[i].op == NVTX_CAPTURE_PUSH &&
                                   strcmp(ev[i].name, "fc") == 0 &&
                                   ev[i].category == phase_category(ph);
            }
        }
        if (steps) { /* the launcher process itself trains nothing */
            ranks++;
            if (nvtx_capture_check(ev, n, x, why, why_cap) != 0)
                (*bad)++;
        }
        free(ev);
    }
    if (d)
        closedir(d);
    return ranks;
}

int main(int argc, char **argv)
{
    /* the ranks' devices: CPU ranks, or GPU 0 (the DDP run's two ranks share it) */
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    if (gpu && !cuda_build_enabled())
        test_skip("this build has no CUDA (toolkit not found or -DDDPPROF_CUDA=OFF)");
    if (gpu && cuda_device_count() == 0)
        test_skip("no CUDA device (no GPU or no driver): the GPU ranks' NVTX need one");
    if (access(getenv("DDPPROF_BUILD_DIR") ? getenv("DDPPROF_BUILD_DIR") : ".", R_OK) != 0)
        test_skip("DDPPROF_BUILD_DIR not set");
    char so[4096];
    snprintf(so, sizeof so, "%s/libddpprof_nvtx_inject.so", getenv("DDPPROF_BUILD_DIR"));
    if (access(so, R_OK) != 0)
        test_skip("no NVTX3 headers in this build: the capture tool was not built");

    /* baseline: 320 samples / batch 32 = 10 steps, no buckets */
    char *a = test_tmpdir();
    CHECK(run(a, gpu ? "--gpu 0 --mode baseline --limit 320" : "--cpu 1 --mode baseline --limit 320") == 0,
          "baseline run");
    struct nvtx_capture_expect base = {.steps = 10, .first_step = 1, .buckets = 0, .data = 1,
                                       .world_size = 1};
    char why[512] = "";
    int bad = 0;
    CHECK(check_dir(a, &base, &bad, why, sizeof why) == 1, "one process with steps");
    CHECK(bad == 0, "baseline: %s", why);
    /* the checker also holds every layer range right inside forward or backward */
    CHECK(layer_pushes[0] == 10 && layer_pushes[1] == 10,
          "baseline: layer 'fc' ranges: %d forward, %d backward, expected 10 each (one per step)",
          layer_pushes[0], layer_pushes[1]);

    /* DDP: 2 ranks x 16 = 32 per step, 320 samples = 10 steps; 3 buckets at 0.02 MiB */
    char *b = test_tmpdir();
    CHECK(run(b, gpu ? "--gpu 0,0 --mode ddp --batch-size 16 --limit 320 --bucket-cap-mb 0.02"
                     : "--cpu 2 --mode ddp --batch-size 16 --limit 320 --bucket-cap-mb 0.02") == 0,
          "2-rank run");
    struct nvtx_capture_expect ddp = {.steps = 10, .first_step = 1, .buckets = 3, .data = 1,
                                      .world_size = 2};
    CHECK(check_dir(b, &ddp, &bad, why, sizeof why) == 2, "two ranks with steps");
    CHECK(bad == 0, "ddp: %s", why);
    CHECK(layer_pushes[0] == 20 && layer_pushes[1] == 20,
          "ddp: layer 'fc' ranges: %d forward, %d backward, expected 20 each (10 steps x 2 "
          "ranks)", layer_pushes[0], layer_pushes[1]);

    /* the check can fail: the same captures do not pass for a wrong bucket count */
    struct nvtx_capture_expect wrong = ddp;
    wrong.buckets = 2;
    check_dir(b, &wrong, &bad, why, sizeof why);
    CHECK(bad == 2, "a wrong expectation (2 buckets) was accepted by %d rank(s)", 2 - bad);

    char cmd[8400];
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\" \"%s\"", a, b);
    if (test_failed == 0 && system(cmd)) {
    }
    free(a);
    free(b);
    return test_finish();
}
