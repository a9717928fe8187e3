/* kernels.h — the device activity of one rank (kernels, memcpy, memset) swept once, in
 * start order, as it is read (an import's kernels, or a ddpprof run's CUPTI rows): the
 * running unions behind overlap.csv's kernel columns and each stream's activities behind
 * idle.csv (report/FORMULAS.md "Kernel-based overlap and idle"; the figures read from a
 * finished sweep are analysis.h's). */
#ifndef DDPPROF_REPORT_KERNELS_H
#define DDPPROF_REPORT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The device activity of one rank (kernels, memcpy, memset) swept in start order: the
 * running unions behind overlap.csv's kernel columns (report/FORMULAS.md "Kernel-based
 * overlap and idle").  Filled by kernel_sweep_add: while an import is read, or by the
 * analysis from a ddpprof run's CUPTI rows. */
enum kernel_class {
    KERNEL_COMPUTE, /* a kernel that is not NCCL's */
    KERNEL_COMM,    /* an NCCL kernel (ncclKernel_*, ncclDevKernel_*, any nccl* name) */
    KERNEL_MEMORY   /* memcpy, memset */
};

struct kernel_run {
    int open;
    int64_t s, e;  /* the merged interval still growing */
    int64_t total; /* the length of the closed ones */
};

/* One device activity on a stream, for HTA's per-stream figures (idle.csv). */
struct kernel_act {
    int64_t start, end, launch; /* launch -1: unknown */
};

/* A stream's activities and, after kernel_sweep_finish, HTA's figures for it. */
struct kernel_stream {
    int64_t id;
    struct kernel_act *v;
    size_t n, cap;
    int64_t host_wait_ns, kernel_wait_ns, other_ns; /* HTA's idle time breakdown */
    int64_t queue_points, queue_max;                /* HTA's queue length (0 points: none) */
    double queue_mean;
};

struct kernel_sweep {
    int64_t count;             /* activities added */
    int64_t first_ns, last_ns; /* the window: first start, last end */
    int64_t prev_start;        /* the sweep's position (starts must not go back) */
    struct kernel_run all, compute, comm, cc; /* unions: all, compute, comm, compute + comm */
    int64_t host_wait_ns;      /* gaps of `all` closed by an activity launched after they began */
    int64_t gaps, gaps_launch_known;
    int64_t launches_known;    /* activities whose launch time was known */
    int finished;
    struct kernel_stream *streams; /* per stream, ascending id (owned by the rank_trace; a
                                      rank_stat's copy borrows them) */
    int nstreams, cap_streams;
};

/* One device activity, in start order (a start earlier than the previous one is moved up
 * to it); launch_ns is when the host launched it (-1: unknown). */
void kernel_sweep_add(struct kernel_sweep *k, int64_t start_ns, int64_t end_ns,
                      enum kernel_class cls, int64_t launch_ns);

/* The same activity on its stream, for HTA's per-stream figures (idle.csv); -1: out of
 * memory (error set). */
int kernel_sweep_stream_add(struct kernel_sweep *k, int64_t stream, int64_t start_ns,
                            int64_t end_ns, int64_t launch_ns);

/* HTA's consecutive_kernel_delay: a gap under it whose kernel was already launched is
 * "kernel wait" (HTA compares it with the trace's unit, µs in Kineto JSON: 30 µs). */
#define KERNEL_WAIT_NS 30000

/* Close the sweep's open intervals (after the last kernel_sweep_add) and compute each
 * stream's idle time breakdown and queue length. */
int kernel_sweep_finish(struct kernel_sweep *k);

#endif
