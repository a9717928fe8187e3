/* bench_layer_range.c — what one layer range costs the training thread, for
 * scripts/bench-layers: probe_push_named + probe_pop of a layer.forward range (the NVTX
 * push/pop, two clock reads, one row formatted into the trace buffer, its share of the
 * flushes) in --trace full mode on a CPU rank, timed over batches of ranges.
 *
 * usage: bench_layer_range DIR [RANGES]  -> prints "layer_range_ns <median of 11 batches>"
 * (the trace goes to DIR/rank0.trace.csv).  A benchmark, not a test: it asserts nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/error.h"
#include "probes/probe.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_layer_range DIR [RANGES]\n");
        return 2;
    }
    const long n = argc > 2 ? atol(argv[2]) : 100000;
    struct probe_opts o;
    probe_opts_default(&o);
    o.run_dir = argv[1];
    o.mode = PROBE_FULL;
    o.quiet = 1;
    struct probe *p = probe_create(&o);
    if (!p) {
        fprintf(stderr, "bench_layer_range: %s\n", error_get());
        return 1;
    }
    double ns[11];
    for (int b = 0; b < 11; b++) {
        probe_set_step(p, b + 1, 1);
        probe_push(p, PROBE_FORWARD);
        const int64_t t0 = clock_now_ns();
        for (long i = 0; i < n; i++) {
            probe_push_named(p, PROBE_LAYER_FORWARD, "conv5.1.residual_function.0", 147456);
            probe_pop(p);
        }
        ns[b] = (double)(clock_now_ns() - t0) / (double)n;
        probe_pop(p);
    }
    qsort(ns, 11, sizeof ns[0], cmp_d);
    printf("layer_range_ns %.1f\n", ns[5]);
    return probe_destroy(p) ? 1 : 0;
}
