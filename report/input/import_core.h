/* import_core.h — the import core: what every importer (report/input/importer.h) hands over, as
 * normalised events, and what becomes of them.  An importer only translates its format:
 * per rank, host spans (steps, phases, collectives with their kind and bytes), kernel
 * launches, device activity (kernels, memcpy, memset; collective kernels with kind and
 * bytes) and device ranges, then who the rank is (rank, world, host, clock, base time).
 * The core owns the rest, the same for every format (report/FORMULAS.md "Imported PyTorch
 * traces"): the step ranges and their numbering over the run, buckets, kernel attribution
 * to phases through the launch map, the kernel sweep, cross-host clock alignment and the
 * run's meta.
 *
 * Memory does not grow with the file: events pass through two bounded reorder windows (host
 * spans, device activity); what is kept per rank is what the tables need: one row per step,
 * phase call and collective, the launches, and the running unions of the device activity
 * (struct kernel_sweep).  The cost is an assumption about order, which Kineto and the legacy
 * exporter both meet: the host spans of a step come before, or within the window of, the
 * device activity they launched.  Events further out of order are still used and counted in
 * a warning. */
#ifndef DDPPROF_REPORT_IMPORT_CORE_H
#define DDPPROF_REPORT_IMPORT_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "report/input/run.h"

#define IMPORT_WINDOW 65536 /* events per reorder window */
/* Times an importer passes on, so that sums and offsets stay far from int64 overflow: ts and
 * base times within 4e18 ns (127 years), one event at most 1e14 ns (28 hours); the core keeps
 * a clock offset within 1e17 ns (3 years).  An importer skips (and counts) what is beyond. */
#define IMPORT_MAX_TS 4000000000000000000LL
#define IMPORT_MAX_DUR 100000000000000LL

/* What collective a span or kernel is.  The gradient buckets are the all-reduces
 * (IMPORT_COLL_ALL_REDUCE); every kind is communication, its own phase (import_core.c's
 * coll_phase: comm.broadcast, ..., comm.allreduce for IMPORT_COLL_ALL_REDUCE_OTHER). */
enum import_coll {
    IMPORT_COLL_NONE,
    IMPORT_COLL_ALL_REDUCE,
    IMPORT_COLL_BROADCAST,
    IMPORT_COLL_ALL_GATHER,
    IMPORT_COLL_REDUCE_SCATTER,
    IMPORT_COLL_REDUCE,
    IMPORT_COLL_BARRIER,
    IMPORT_COLL_ALL_REDUCE_OTHER, /* an all-reduce that carries no gradients (SyncBatchNorm's
                                     sums, AMP's found-inf flag, the step's loss): not a bucket,
                                     one comm.allreduce row per call, as the other kinds */
    IMPORT_COLL_COUNT
};

/* What a host span is. */
enum import_kind {
    IMPORT_STEP,      /* a training step (val: its number in the trace, 0..1e9) */
    IMPORT_FORWARD,   /* the model's forward (val: batch size, -1 unknown: a DIMS fills it) */
    IMPORT_BACKWARD,  /* one backward op: a run of them, any thread, is one backward span */
    IMPORT_OPTIMIZER, /* an optimizer call */
    IMPORT_DATA,      /* loading a batch */
    IMPORT_EVAL,      /* evaluation (phase eval; outside the steps, not a step's figure) */
    IMPORT_COLL,      /* a collective as the backend ran it (coll; val: bytes, -1 unknown) */
    IMPORT_PARAMS,    /* a collective's description (coll; val: bytes): an all-reduce's,
                         around its op on the same thread, gives the op its bytes and stands
                         for it in a step without any; another's is paired with its op by
                         order in the step (import_core.c, imp_other_collectives) */
    IMPORT_DIMS,      /* an op with input shapes (val: the first input's first size): the
                         first one inside a forward on its thread gives the batch size */
    IMPORT_ISSUE      /* the op that issued a collective other than an all-reduce (coll;
                         val: bytes): the collective's row starts with it */
};

/* A host span (import_rank_span), or a device range over a phase's or a collective's device
 * work (import_rank_device_span: FORWARD, BACKWARD, OPTIMIZER, DATA, EVAL or COLL). */
struct import_span {
    int64_t start_ns, end_ns; /* on the file's clock */
    int64_t tid;
    int64_t val; /* see enum import_kind; -1 none */
    enum import_kind kind;
    enum import_coll coll;
    const char *name; /* as the trace names it (not needed for BACKWARD, DIMS) */
    size_t name_len;
    int64_t ext; /* its External id (0 or less: none): a device range takes the step of the
                    host span of the same External id (Kineto links a record_function to its
                    gpu_user_annotation so), else the step its start falls in */
};

/* A device activity: a kernel, memcpy or memset. */
struct import_activity {
    int64_t start_ns, end_ns;
    int64_t corr;   /* the launch's correlation id (has_corr) */
    int64_t stream; /* -1: not given */
    int64_t bytes;  /* a collective's payload, -1 unknown */
    enum kernel_class cls;
    enum import_coll coll; /* a collective kernel's kind (cls KERNEL_COMM) */
    int has_corr;
    int unknown_name; /* a communication kernel named in no known scheme (counted) */
    const char *name; /* its name (a kernel's; "Memcpy HtoD ..."), for ops.csv and, for a
                         collective kernel, its rows; NULL: none */
    size_t name_len;
};

/* A named host op for ops.csv (report/input/ops.h): any CPU op, record_function range, CUDA
 * runtime call or NVTX range, whether or not it is also a span.  ProfilerStep#N is counted
 * as "ProfilerStep*", as key_averages() groups it. */
struct import_op {
    int64_t start_ns, end_ns; /* on the file's clock */
    int64_t tid;
    const char *name;
    size_t name_len;
    int async; /* begun on one thread and ended on another (gloo's collective work): as
                  key_averages, no self time, and it nests nothing */
};

/* Who a rank is, as its importer found out (import_rank_info; zeroed at the start). */
struct import_rank_info {
    const char *format;      /* "kineto", "legacy", ...: the run's format (static string) */
    int shared_clock;        /* ranks of this format on one host share one clock */
    int has_rank, has_world, has_backend;
    int64_t rank, world_size;
    const char *no_rank_why; /* said in the warning when the trace gives no rank */
    int64_t base_ns;         /* added to every time of the rank */
    char backend[32];        /* the communication backend: meta "comm" (the lowest rank's) */
    int devices;             /* GPUs the trace describes (meta "device" cuda when > 0) */
    uint64_t bad_durs;       /* events left out for a duration that is none (a warning) */
};

struct import_rank; /* a rank being read (import_core.c) */
struct imp_result;  /* what a rank came to, for the run (import_core.c) */

/* One run being imported: its ranks, one import_rank_begin .. import_rank_free each, then
 * import_sink_finish. */
struct import_sink {
    struct runset *rs;
    const char *where;   /* names the run (a directory, or its first file) */
    int from_memory;     /* the paths name buffers, not files: no rank from the name */
    int run;             /* index in rs->runs, -1: no rank begun yet */
    struct import_rank_info *info;
    struct imp_result *res;
    size_t cap;
};

void import_sink_init(struct import_sink *s, struct runset *rs, const char *where,
                      int from_memory);
/* The run's ranks (in rank order), world size, steps renumbered from 1 over the run, clocks
 * aligned, meta.  Returns 0, or -1 after error_set() (bad or repeated ranks). */
int import_sink_finish(struct import_sink *s);
void import_sink_free(struct import_sink *s);

/* A rank read while its importer hands over its events: a new rank of the sink's run (the
 * run made with the first one), read from path.  NULL after error_set() (out of memory). */
struct import_rank *import_rank_begin(struct import_sink *s, const char *path);

/* The events, in file order.  Each returns 0, or -1 after error_set() (out of memory). */
int import_rank_span(struct import_rank *r, const struct import_span *sp);
int import_rank_device_span(struct import_rank *r, const struct import_span *sp);
int import_rank_activity(struct import_rank *r, const struct import_activity *a);
int import_rank_op(struct import_rank *r, const struct import_op *op);
/* The rank's ops are PyTorch's: nested as torch builds its tree (report/input/ops.h,
 * op_table_torch).  Before the first op. */
void import_rank_ops_torch(struct import_rank *r);
/* A kernel launch: correlation id corr (>= 0; others ignored) at ts; the later of two wins. */
int import_rank_launch(struct import_rank *r, int64_t corr, int64_t ts);

/* --hta-defaults (rs->hta_defaults): the device activity swept is what was launched before
 * last_step_ns (the last step's start; INT64_MAX: none). */
void import_rank_hta_cut(struct import_rank *r, int64_t last_step_ns);

/* End of the events: every window let out.  Returns 0 or -1 after error_set(). */
int import_rank_drain(struct import_rank *r);
/* After the drain: did nothing a training step is made of come (no span, kernel)? */
int import_rank_empty(const struct import_rank *r);

/* Counts for the importer's warnings. */
struct import_counts {
    uint64_t unknown_comm;       /* activities with unknown_name */
    char unknown_comm_name[96];  /* the first one's name */
};
const struct import_counts *import_rank_counts(const struct import_rank *r);

/* The core's warnings about the events (out of order, launches not found). */
void import_rank_warn(const struct import_rank *r);
/* Steps, buckets and rows of the rank.  Returns 0 or -1 after error_set(). */
int import_rank_finish(struct import_rank *r);
/* Who the rank is: filled by the importer before the next import_rank_begin. */
struct import_rank_info *import_rank_info(struct import_rank *r);
/* The rank's host (owned by the rank from now; NULL: unknown). */
void import_rank_set_host(struct import_rank *r, char *host);
void import_rank_free(struct import_rank *r);

/* An imported rank's clock offset to the reference rank from d[0..n) = end_ref - end_rank
 * over the collectives both saw: their median (the lower middle value for even n); sorts
 * d.  n > 0. */
int64_t import_clock_offset(int64_t *d, size_t n);

#endif
