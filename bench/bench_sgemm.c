/* bench_sgemm.c — the machine's fp32 GEMM peak as OpenBLAS reaches it, for scripts/bench-cpu.
 *
 * usage: bench_sgemm THREADS  -> prints "sgemm_gflops <best GFLOP/s of several sizes>", then
 * "openblas_core <the kernel OpenBLAS chose>" (OPENBLAS_CORETYPE overrides its choice).
 * A benchmark, not a test: it prints a figure and asserts nothing. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads > 0)
        openblas_set_num_threads(threads);
    const int sizes[] = {512, 1024, 2048};
    double best = 0.0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
        float *c = malloc((size_t)n * n * sizeof *c);
        if (!a || !b || !c)
            return 1;
        for (size_t i = 0; i < (size_t)n * n; i++) {
            a[i] = (float)(i % 7) * 0.1f;
            b[i] = (float)(i % 5) * 0.1f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n); /* warm-up */
        int reps = n <= 512 ? 20 : n <= 1024 ? 5 : 2;
        double t0 = clock_now_s();
        for (int r = 0; r < reps; r++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n,
                        0.0f, c, n);
        double gflops = 2.0 * n * n * (double)n * reps / (clock_now_s() - t0) / 1e9;
        if (gflops > best)
            best = gflops;
        free(a);
        free(b);
        free(c);
    }
    printf("sgemm_gflops %.1f\n", best);
    printf("openblas_core %s\n", openblas_get_corename());
    return 0;
}
