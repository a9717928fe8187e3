/* run.h — the report's input: run directories read into memory.  A run is one directory
 * with meta.csv, metrics.csv and rankN.trace.csv per rank (the contract is probes/TRACE.md,
 * its format probes/trace_format.h, the one header of probes/ the report includes);
 * a parent directory holding baseline/ and ddp/ runs expands into both.  Trace rows are
 * flat structs with interned strings, shifted onto rank 0's clock as they are read, so
 * memory is linear in the rows. */
#ifndef DDPPROF_REPORT_RUN_H
#define DDPPROF_REPORT_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "probes/trace_format.h"
#include "report/strpool.h"

/* One trace row; 56 bytes. */
struct run_row {
    int64_t start_ns, end_ns; /* on rank 0's clock: the file's value + clock_offset_ns.rankN */
    int64_t bytes;
    int32_t step, epoch, bucket, stream;
    uint32_t name;  /* id in runset.names */
    uint32_t phase; /* id in runset.labels */
    uint32_t kind;  /* id in runset.labels */
    uint8_t clock;  /* enum trace_clock */
};

/* The rows of one rank's trace file, in file order. */
struct rank_trace {
    int rank;
    char *path;
    int64_t offset_ns; /* clock_offset_ns.rankN from meta.csv (0 when absent) */
    struct run_row *rows;
    size_t n, cap;
};

struct meta_kv {
    char *key, *value;
};

struct run {
    char *dir;   /* the run directory */
    char *label; /* short unique name: "baseline", "ddp", or the directory's name */
    struct meta_kv *meta; /* meta.csv in file order (a repeated key: the last one counts) */
    size_t nmeta, cap_meta;
    int world_size;            /* meta.csv world_size, else the highest rank file + 1 */
    struct rank_trace *ranks;  /* the ranks whose trace was found, in rank order */
    int nranks;
    int has_metrics;           /* metrics.csv was read */
    int64_t metrics_images;    /* sum of its images column */
    long metrics_steps;        /* its rows */
};

struct runset {
    struct run *runs;
    int n;
    size_t cap_runs;
    struct strpool names;  /* trace `name` values */
    struct strpool labels; /* trace `phase` and `kind` values */
    char *default_out;     /* the first directory given: the run itself, or the parent */
};

/* Print "ddpprof report: warning: ..." on stderr (the report's one side channel: a partial
 * report goes on, the user is told what is missing). */
void report_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void runset_init(struct runset *rs);
void runset_free(struct runset *rs);

/* Read the run in dir, or the runs under it (baseline/, ddp/, any other subdirectory with
 * a meta.csv), and append them to rs.  Returns 0, or -1 after error_set() naming the file
 * and line (unreadable directory, bad meta.csv or metrics.csv, a malformed trace).  Missing
 * ranks, a truncated last trace line and missing clock offsets are warnings. */
int runset_add_dir(struct runset *rs, const char *dir);

/* Merge the directories of one run on several nodes (meta.csv's run_id is the same; the
 * directory holding node 0's meta.csv keeps its meta and name), then give every run a
 * short label unique in the set; call once after the last add. */
int runset_finish(struct runset *rs);

/* The host of a rank (meta.csv's host.rankN), or NULL when the run does not say. */
const char *run_rank_host(const struct run *r, int rank);

/* Read one trace file into out (which must be zeroed; out->path and out->rank are set
 * here).  offset_ns is added to every start_ns and end_ns.  Returns 0, or -1 after
 * error_set("PATH line N: ...").  A last line without a newline is dropped with a warning. */
int trace_load(struct strpool *names, struct strpool *labels, const char *path, int rank,
               int64_t offset_ns, struct rank_trace *out);
void rank_trace_free(struct rank_trace *t);

/* meta.csv's value of key (the last one when repeated), or NULL when absent. */
const char *run_meta(const struct run *r, const char *key);

#endif
