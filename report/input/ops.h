/* ops.h — time per operator and per kernel name, for traces that name their ops (PyTorch
 * profiler traces, Nsight Systems reports): ops.csv and the page's top-N tables.
 *
 * Per rank, an op table is filled while the import core reads the trace
 * (report/input/import_core.c): every host op (a CPU op, a record_function range, a CUDA runtime
 * call, an NVTX range) with its thread, and every device activity (kernel, memcpy, memset)
 * with its class.  CPU ops get torch.profiler's key_averages() figures: calls, total (the
 * sum of their durations) and self time (each op's duration less that of its children: the
 * ops on the same thread it encloses one level down, nested as
 * torch.autograd.profiler_util.EventList._populate_cpu_children nests them).  Kernels get
 * Holistic Trace Analysis' kernel breakdown: calls, total, mean, min, max and share of the
 * rank's kernel time of their type (computation, communication, memory).
 * report/FORMULAS.md "ops.csv" gives the definitions; report/output/ops_view.h writes the tables.
 * ddpprof's own runs have no op table: no ops.csv. */
#ifndef DDPPROF_REPORT_OPS_H
#define DDPPROF_REPORT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "report/input/kernels.h"

enum op_kind {
    OP_CPU,   /* a host op */
    OP_KERNEL /* a device activity */
};

/* One op or kernel name of a rank. */
struct op_stat {
    uint32_t name; /* id in runset.names */
    uint8_t kind;  /* enum op_kind */
    uint8_t cls;   /* OP_KERNEL: enum kernel_class */
    int64_t calls;
    int64_t total_ns, self_ns; /* self: OP_CPU only */
    int64_t min_ns, max_ns;
};

/* An op still open on a thread: its children are still coming. */
struct op_frame {
    int64_t start, end, child_ns;
    size_t stat; /* index in op_table.v */
    uint32_t hist; /* 1 + its index in the thread's history; 0: not kept */
    uint32_t nchild;
    /* merge_only_child: its only child so far, of its own name, not counted yet */
    int pend;
    int64_t pend_dur, pend_child_ns;
};

/* An op kept to nest ops that come too late for the window (ops.h, op_table_cpu). */
struct op_hist {
    int64_t start, end;
    uint32_t stat;
    uint32_t parent; /* 1 + the index of its parent in the thread's history; 0: none */
};

#define OPS_HISTORY (1u << 18) /* ops kept for late ones, all threads: 6 MiB */

struct op_thread {
    int64_t tid;
    struct op_frame *v;
    size_t n, cap;
    struct op_frame *late; /* the late ops still open (op_table_cpu), innermost last */
    size_t nlate, cap_late;
    struct op_hist *hist; /* the thread's first ops, in the order given */
    size_t nhist, cap_hist;
    int hist_full;      /* the history stopped (OPS_HISTORY reached) ... */
    int64_t hist_stop;  /* ... at this start */
};

/* A rank's ops (zeroed: empty). */
struct op_table {
    struct op_stat *v;
    size_t n, cap;
    uint32_t *slot; /* hash of (kind, name): 1 + index in v, 0 empty */
    size_t nslot;   /* a power of two, at least twice n */
    struct op_thread *threads;
    size_t nthreads, cap_threads;
    size_t last_thread; /* the thread of the last op (a cache) */
    size_t nhist;       /* history kept, all threads */
    int64_t last_start; /* the latest start of an op given so far */
    int any;
    int merge_only_child;   /* torch's EventList._remove_dup_nodes (op_table_torch) */
    uint64_t late;          /* ops that came after an op that started later */
    uint64_t late_unnested; /* of those, the ones beyond the history */
};

/* A host op [start, end) of thread tid named name.  Ops must come in start order, an
 * enclosing op before what it encloses (start ascending, end descending; equal ranges in
 * file order): then this is exactly key_averages' nesting.  An op that comes later than
 * that (it starts before the latest start given: Kineto writes CUDA runtime calls after
 * every CPU op, beyond the reorder window in a long trace) is nested by the same rule
 * among the late ops before it on its thread (a driver call in its runtime call), else
 * among its thread's first ops (OPS_HISTORY of them, all threads, kept for this; beyond
 * them in nothing, counted in late_unnested); ops given in time cannot be its children.
 * Returns 0, or -1 after error_set() (out of memory). */
int op_table_cpu(struct op_table *t, int64_t tid, int64_t start, int64_t end, uint32_t name);

/* PyTorch traces: as torch builds its tree before key_averages
 * (EventList._remove_dup_nodes), an op that is the only child of an op of the same name
 * is not an op: its children are its parent's.  Call before the first op. */
void op_table_torch(struct op_table *t);

/* A host op that began on one thread and ended on another (torch's is_async): counted, no
 * self time, nesting nothing, in any order.  0 or -1 as above. */
int op_table_async(struct op_table *t, uint32_t name, int64_t start, int64_t end);

/* A device activity [start, end) named name, of class cls (any order).  0 or -1 as above. */
int op_table_kernel(struct op_table *t, uint32_t name, enum kernel_class cls, int64_t start,
                    int64_t end);

/* The end of the ops: what is still open is closed.  0 or -1 as above. */
int op_table_finish(struct op_table *t);

/* Does the table hold any op or kernel? */
int op_table_any(const struct op_table *t);

void op_table_free(struct op_table *t);

#endif
