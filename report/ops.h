/* ops.h — time per operator and per kernel name, for traces that name their ops (PyTorch
 * profiler traces, Nsight Systems reports): ops.csv and the page's top-N tables.
 *
 * Per rank, an op table is filled while the import core reads the trace
 * (report/import_core.c): every host op (a CPU op, a record_function range, a CUDA runtime
 * call, an NVTX range) with its thread, and every device activity (kernel, memcpy, memset)
 * with its class.  CPU ops get torch.profiler's key_averages() figures: calls, total (the
 * sum of their durations) and self time (each op's duration less that of its children: the
 * ops on the same thread it encloses one level down, nested as
 * torch.autograd.profiler_util.EventList._populate_cpu_children nests them).  Kernels get
 * Holistic Trace Analysis' kernel breakdown: calls, total, mean, min, max and share of the
 * rank's kernel time of their type (computation, communication, memory).
 * report/FORMULAS.md "Operators and kernels (ops.csv)" gives the definitions.  ddpprof's own
 * runs have no op table: no ops.csv. */
#ifndef DDPPROF_REPORT_OPS_H
#define DDPPROF_REPORT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "report/run.h"
#include "report/table.h"

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
};

struct op_thread {
    int64_t tid;
    struct op_frame *v;
    size_t n, cap;
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
};

/* A host op [start, end) of thread tid named name.  The ops of a thread must come in start
 * order, an enclosing op before what it encloses (start ascending, end descending; equal
 * ranges in file order): then this is exactly key_averages' nesting.  Returns 0, or -1
 * after error_set() (out of memory). */
int op_table_cpu(struct op_table *t, int64_t tid, int64_t start, int64_t end, uint32_t name);

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

/* ---- the report's tables ---- */

#define OPS_TOP 10 /* rows per rank of the top-N tables */

struct ops_tables {
    struct table all;    /* ops.csv: every op and kernel name of every rank */
    struct table cpu;    /* the page's: the OPS_TOP ops by self time, per run and rank */
    struct table kernel; /* the page's: the OPS_TOP kernels by total time, per run and rank */
};

void ops_tables_init(struct ops_tables *o);
/* Fill the three from every rank with an op table (none: no rows). */
void ops_tables_fill(struct ops_tables *o, const struct runset *rs);
/* Write out_dir/ops.csv when there are rows.  Returns 0, or -1 after error_set(). */
int ops_tables_write(const struct ops_tables *o, const char *out_dir);
void ops_tables_free(struct ops_tables *o);

#endif
