/* peak_bench.c — the device's measured peak: sgemm and copy on the backend (peak_bench.h). */
#include "peak_bench.h"

#include "backend/backend.h"
#include "common/clock.h"
#include "common/error.h"

#include <stdio.h>

/* seconds of the fastest of the repeats of fn(be, a, b, c, n), repeated until half of
 * budget_s is spent (one warm-up call first, not counted; at most 20 repeats) */
typedef void (*peak_fn)(struct backend *be, void *a, void *b, void *c, size_t n);

static double peak_best_s(struct backend *be, peak_fn fn, void *a, void *b, void *c, size_t n,
                          double budget_s, int *reps)
{
    fn(be, a, b, c, n);
    be->synchronize(be);
    double best = 0.0;
    const int64_t until = clock_now_ns() + (int64_t)(budget_s * 0.5e9);
    *reps = 0;
    do {
        const int64_t t0 = clock_now_ns();
        fn(be, a, b, c, n);
        be->synchronize(be);
        const double s = (double)(clock_now_ns() - t0) * 1e-9;
        if (*reps == 0 || s < best)
            best = s;
        ++*reps;
    } while (*reps < 20 && clock_now_ns() < until);
    return best;
}

static void peak_sgemm(struct backend *be, void *a, void *b, void *c, size_t n)
{
    /* c (n,n) = a (n,n) b^T: one n x n x n sgemm */
    be->linear_forward(be, (int)n, (int)n, (int)n, DT_F32, a, b, NULL, c);
}

static void peak_copy(struct backend *be, void *a, void *b, void *c, size_t n)
{
    (void)c;
    be->copy(be, b, a, n);
}

int peak_measure(struct backend *be, int gpu, int threads, double budget_s, struct peak *out)
{
    const size_t n = gpu ? 4096 : 512;                  /* sgemm side */
    const size_t copy_bytes = (size_t)(gpu ? 1024 : 64) << 20;
    *out = (struct peak){0};
    void *a = be->alloc(be, n * n * sizeof(float)), *b = be->alloc(be, n * n * sizeof(float)),
         *c = be->alloc(be, n * n * sizeof(float));
    void *src = be->alloc(be, copy_bytes), *dst = be->alloc(be, copy_bytes);
    int rc = 0;
    if (!a || !b || !c || !src || !dst) {
        rc = error_wrap("peak benchmark: buffers of %zu MiB", copy_bytes >> 20);
    } else {
        int reps_gemm = 0, reps_copy = 0;
        const double s_gemm = peak_best_s(be, peak_sgemm, a, b, c, n, budget_s, &reps_gemm);
        const double s_copy =
            peak_best_s(be, peak_copy, src, dst, NULL, copy_bytes, budget_s, &reps_copy);
        out->gflops = s_gemm > 0 ? 2.0 * (double)n * n * n / s_gemm * 1e-9 : 0.0;
        out->gbps = s_copy > 0 ? 2.0 * (double)copy_bytes / s_copy * 1e-9 : 0.0;
        if (gpu)
            snprintf(out->source, sizeof out->source,
                     "sgemm %zu^3 (best of %d) and copy %zu MiB (best of %d) on the GPU (%s "
                     "backend)", n, reps_gemm, copy_bytes >> 20, reps_copy, be->name);
        else
            snprintf(out->source, sizeof out->source,
                     "sgemm %zu^3 (best of %d) and copy %zu MiB (best of %d) on this rank's "
                     "%d thread(s) (%s backend)", n, reps_gemm, copy_bytes >> 20, reps_copy,
                     threads, be->name);
    }
    be->free(be, a);
    be->free(be, b);
    be->free(be, c);
    be->free(be, src);
    be->free(be, dst);
    return rc;
}
