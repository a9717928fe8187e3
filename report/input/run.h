/* run.h — the report's input: runs read into memory.  A run is either a ddpprof run
 * directory (meta.csv, metrics.csv and rankN.trace.csv per rank: the contract is
 * probes/TRACE.md, its formats probes/trace_format.h and probes/run_format.h, the headers of
 * probes/ the report includes; a parent directory holding baseline/ and ddp/ runs expands
 * into both), or a set of trace files of other formats mapped onto the same rows
 * (report/input/importer.h).  Trace rows are flat structs with interned strings, shifted onto the
 * run's reference clock as they are read, so memory is linear in the rows. */
#ifndef DDPPROF_REPORT_RUN_H
#define DDPPROF_REPORT_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "probes/trace_format.h"
#include "report/input/kernels.h"
#include "report/input/meta.h"
#include "report/input/strpool.h"
#include "report/input/warn.h" /* report_warn, for every reader of runs */

/* One trace row; 56 bytes. */
struct run_row {
    int64_t start_ns, end_ns; /* on rank 0's clock: the file's value + clock_offset_ns.rankN */
    int64_t bytes;            /* -1: unknown (an imported collective without sizes) */
    int32_t step, epoch, bucket, stream; /* epoch -1: unknown (imports) */
    uint32_t name;  /* id in runset.names */
    uint32_t phase; /* id in runset.labels */
    uint32_t kind;  /* id in runset.labels */
    uint8_t clock;  /* enum trace_clock */
};

struct op_table; /* report/input/ops.h */

/* The rows of one rank's trace file, in file order. */
struct rank_trace {
    int rank;
    char *path;
    int64_t offset_ns;  /* added to the file's times: clock_offset_ns.rankN from meta.csv (0
                           when absent), or the import's estimate */
    char *clock_method; /* how offset_ns was found, for ranks.csv */
    char *host;         /* the host, when the input says (NULL: unknown) */
    struct run_row *rows;
    size_t n, cap;
    /* where the trace ends against the run (ddpprof runs; see run_check_steps in run.c):
     * cut is 1 when last_step < run_steps, a rank that stopped early (it died or hung, or
     * its rows were lost): its ratios (overlap) are left empty and the report cautions */
    int64_t last_step; /* the highest training step in the trace (0: none) */
    int64_t run_steps; /* the steps the run took (meta.csv steps), or, for a run that did
                          not finish, the steps it planned (epochs x steps per epoch); 0:
                          unknown */
    int cut;
    char *flight;      /* where the comm's flight recorder (rankN.flight.csv beside the
                          trace, probes/TRACE.md) says the rank was when a collective
                          failed: "all-gather #80 (failed)"; NULL: no such file */
    int has_kernels;           /* imports: kern was swept while reading */
    struct kernel_sweep kern;
    struct op_table *ops;      /* imports that name their ops: ops.csv's (report/input/ops.h);
                                  NULL: none (ddpprof's own runs) */
};

/* One row of metrics.csv: a training step and the images it took (all ranks). */
struct run_step_images {
    int64_t step, images;
};

struct run {
    char *dir;   /* the run directory (an import: the traces' directory, or its first file) */
    const char *format; /* "ddpprof", "kineto" or "legacy" (a static string) */
    char *label; /* short unique name: "baseline", "ddp", or the directory's name */
    struct run_meta meta; /* meta.csv, parsed (report/input/meta.h); an import's own facts */
    int world_size;            /* meta.csv world_size, else the highest rank file + 1 */
    struct rank_trace *ranks;  /* the ranks whose trace was found, in rank order */
    int nranks;
    int has_metrics;           /* metrics.csv was read (imports: every step's batch is known) */
    int64_t metrics_images;    /* sum of its images column (imports: of the batch sizes) */
    long metrics_steps;        /* its rows */
    struct run_step_images *metrics_rows; /* its rows' step and images, in file order, when
                                             it has a step column (NULL: none; imports) */
    size_t metrics_nrows, metrics_cap;
};

struct runset {
    struct run *runs;
    int n;
    size_t cap_runs;
    struct strpool names;  /* trace `name` values */
    struct strpool labels; /* trace `phase` and `kind` values */
    char *default_out;     /* the first directory given: the run itself, or the parent */
    int hta_defaults;      /* PyTorch traces: the kernel sweep as HTA's default settings
                              (--hta-defaults: times rounded to µs, the last step dropped) */
};


void runset_init(struct runset *rs);
void runset_free(struct runset *rs);

/* Append a new, zeroed run for dir to rs; NULL after error_set() (out of memory).  The
 * pointer is valid until the next call. */
struct run *runset_new_run(struct runset *rs, const char *dir);

/* Read the run in dir, or the runs under it (baseline/, ddp/, any other subdirectory with
 * a meta.csv), and append them to rs.  Returns 0, or -1 after error_set() naming the file
 * and line (unreadable directory, bad meta.csv or metrics.csv, a malformed trace).  Missing
 * ranks, a truncated last trace line and missing clock offsets are warnings. */
int runset_add_dir(struct runset *rs, const char *dir);

/* The main job's other run beside the run in dir: its parent's baseline/ and ddp/ that are
 * runs, dir itself aside, appended to rs.  0, or -1 after error_set(). */
int runset_add_siblings(struct runset *rs, const char *dir);

/* Merge the directories of one run on several nodes (meta.csv's run_id is the same; the
 * directory holding node 0's meta.csv keeps its meta and name), then give every run a
 * short label unique in the set; call once after the last add. */
int runset_finish(struct runset *rs);

/* The host of a rank of a ddpprof run on several nodes (meta.csv's host.rankN), or NULL
 * when the run does not say.  (An import's hosts, from its file names, are in ranks.csv.) */
const char *run_rank_host(const struct run *r, int rank);

/* Read one trace file into out (which must be zeroed; out->path and out->rank are set
 * here).  offset_ns is added to every start_ns and end_ns.  Returns 0, or -1 after
 * error_set("PATH line N: ...").  A last line without a newline is dropped with a warning. */
int trace_load(struct strpool *names, struct strpool *labels, const char *path, int rank,
               int64_t offset_ns, struct rank_trace *out);
void rank_trace_free(struct rank_trace *t);

/* whether meta.csv's mode is mode ("baseline", "ddp"); 0 when the run has none */
int run_mode_is(const struct run *r, const char *mode);

/* Call fn(ctx, fields, nfields, line) for every complete row of the CSV file path (RFC
 * 4180, the header included; line is the row's first line, 1-based), until fn returns
 * -1.  0, or -1 after error_set() (unreadable, malformed; or fn's error). */
typedef int (*run_csv_row_fn)(void *ctx, char **fields, int nfields, long line);
int run_csv_each(const char *path, run_csv_row_fn fn, void *ctx);

/* dir/meta.csv parsed into *meta (zeroed; meta_free it, also after an error).  0, or -1
 * after error_set(). */
int run_meta_read(const char *dir, struct run_meta *meta);

/* Is dir a ddpprof run directory (it has meta.csv)? */
int run_dir_is_run(const char *dir);

#endif
