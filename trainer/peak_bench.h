/* peak_bench.h — the device's attainable peak for the roofline (report/FORMULAS.md "Per
 * layer"): a short sgemm and a copy on the backend, measured where the rank computes (its
 * own CPU threads through OpenBLAS, or its GPU), in well under a second. */
#ifndef DDPPROF_PEAK_BENCH_H
#define DDPPROF_PEAK_BENCH_H

#include <stddef.h>

struct backend;

struct peak {
    double gflops;     /* best of the sgemm repeats: 2*n^3 / time */
    double gbps;       /* best of the copy repeats: 2*bytes (read + write) / time */
    char source[200];  /* what measured them: "sgemm 512^3 x5, copy 64 MiB x5 on cpu ..." */
};

/* Measure on be (gpu: 1 when be is a GPU's, for the sizes); the time spent is bounded by
 * budget_s (each benchmark stops repeating after half of it, one repeat at least).
 * 0, or -1 (error_set) when memory runs out. */
int peak_measure(struct backend *be, int gpu, int threads, double budget_s, struct peak *out);

#endif
