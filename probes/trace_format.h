/* trace_format.h — the per-rank trace file format, written once: the file name, the
 * columns and the header line, the values of the phase, clock and kind columns, the lanes
 * of the stream column and the name cap.  probes/TRACE.md explains what they mean; this
 * header is what both sides compile against: the writer (probes/trace_writer.c,
 * probes/phase.c) and the reader (report/input/run.c, report/analysis/analysis.c,
 * report/output/timeline.c).
 *
 * Header-only and dependency-free on purpose: report/ may include this one file of
 * probes/ and does not link ddpprof_probes (cmake/layers.cmake).  Each list is an X-macro
 * (X(ID, "name")) expanded here into an enum and a name lookup, so a value and its name
 * cannot drift apart; adding a value means adding one line to its list. */
#ifndef DDPPROF_TRACE_FORMAT_H
#define DDPPROF_TRACE_FORMAT_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dir/TRACE_FILE_FORMAT with the rank: "rank3.trace.csv" */
#define TRACE_FILE_FORMAT "rank%d.trace.csv"

/* the rank of a trace file's name ("rank3.trace.csv": 3), or -1 when name is not one
 * (a negative rank included: no run writes one) */
static inline int trace_file_rank(const char *name)
{
    int rank, used = 0;
    if (sscanf(name, TRACE_FILE_FORMAT "%n", &rank, &used) == 1 && used > 0 &&
        name[used] == '\0' && rank >= 0)
        return rank;
    return -1;
}

/* the highest step a trace holds: the step column is a 32-bit integer (report/input/run.h's
 * rows); a run resumed from a checkpoint nearer than its steps to this is refused at start
 * (trainer/train_resume.c) rather than writing rows the report refuses */
#define TRACE_STEP_MAX 2147483647LL

/* names are written whole, whatever their length (no cap: a templated kernel's name runs
 * to kilobytes, and a cut one no longer equals what other tools show) */

/* ---- columns, in file order: FIRST(ID, "name") once, then X(ID, "name") ---- */
#define TRACE_COLUMNS(FIRST, X)                                                              \
    FIRST(RANK, "rank")                                                                      \
    X(STEP, "step")                                                                          \
    X(EPOCH, "epoch")                                                                        \
    X(PHASE, "phase")                                                                        \
    X(BUCKET, "bucket")                                                                      \
    X(CLOCK, "clock")                                                                        \
    X(START, "start_ns")                                                                     \
    X(END, "end_ns")                                                                         \
    X(BYTES, "bytes")                                                                        \
    X(NAME, "name")                                                                          \
    X(KIND, "kind")                                                                          \
    X(STREAM, "stream")

#define TRACE_COL_ENUM_(id, name) TRACE_COL_##id,
enum trace_column { TRACE_COLUMNS(TRACE_COL_ENUM_, TRACE_COL_ENUM_) TRACE_COL_COUNT };
#undef TRACE_COL_ENUM_

#define TRACE_COL_FIRST_(id, name) name
#define TRACE_COL_NEXT_(id, name) "," name
/* "rank,step,...,stream": the header line without its newline (a string literal) */
#define TRACE_COLUMNS_CSV TRACE_COLUMNS(TRACE_COL_FIRST_, TRACE_COL_NEXT_)
/* the first line of every trace file */
#define TRACE_HEADER TRACE_COLUMNS_CSV "\n"

/* ---- the phase column, in enum probe_phase order (probes/phase.h) ---- */
#define TRACE_PHASES(X)                                                                      \
    X(STEP, "step")           /* one optimizer step: contains data, forward, backward,       \
                                 optimizer */                                                \
    X(DATA, "data")           /* loading / copying a batch */                                \
    X(FORWARD, "forward")                                                                    \
    X(BACKWARD, "backward")                                                                  \
    X(ALLREDUCE, "allreduce") /* one DDP bucket's all-reduce (bucket column set) */          \
    X(OPTIMIZER, "optimizer")                                                                \
    X(EVAL, "eval")                                                                          \
    X(BARRIER, "barrier")                                                                    \
    X(SETUP, "setup")         /* outside training steps; also CUPTI activity launched        \
                                 outside any range */                                        \
    /* every other collective, one phase per kind (bucket -1, bytes set, lane comm) */      \
    X(COMM_ALLREDUCE, "comm.allreduce") /* not a gradient bucket: SyncBatchNorm backward,  \
                                           AMP's found-inf flag, the loss */               \
    X(COMM_BROADCAST, "comm.broadcast") /* DDP's parameter/buffer broadcast, a checkpoint */ \
    X(COMM_ALLGATHER, "comm.allgather") /* SyncBatchNorm forward's statistics */             \
    X(COMM_REDUCE_SCATTER, "comm.reduce_scatter")                                            \
    X(COMM_REDUCE, "comm.reduce")       /* evaluation's totals */                         \
    /* one model layer (--trace full only): name = its module name, bytes = its parameter  \
       bytes; nested in forward / backward (TRACE.md) */                                   \
    X(LAYER_FORWARD, "layer.forward")                                                        \
    X(LAYER_BACKWARD, "layer.backward")

#define TRACE_PHASE_ENUM_(id, name) TRACE_PHASE_##id,
enum trace_phase { TRACE_PHASES(TRACE_PHASE_ENUM_) TRACE_PHASE_COUNT };
#undef TRACE_PHASE_ENUM_

/* ---- collectives: the phases that are communication and the collective kind each one
 * is (report/FORMULAS.md: every collective is communication; gradient all-reduces are
 * the allreduce phase, the buckets) ---- */
#define TRACE_COLLECTIVES(X)                                                                 \
    X(ALLREDUCE, "allreduce")                                                                \
    X(COMM_ALLREDUCE, "allreduce")                                                           \
    X(COMM_BROADCAST, "broadcast")                                                           \
    X(COMM_ALLGATHER, "allgather")                                                           \
    X(COMM_REDUCE_SCATTER, "reduce_scatter")                                                 \
    X(COMM_REDUCE, "reduce")                                                                 \
    X(BARRIER, "barrier")

/* The collective kind of a phase ("allreduce", "broadcast", ...), or NULL when the phase
 * (enum trace_phase) is not communication. */
static inline const char *trace_phase_collective(int phase)
{
#define TRACE_COLL_CASE_(id, kind)                                                           \
    case TRACE_PHASE_##id:                                                                   \
        return kind;
    switch (phase) { TRACE_COLLECTIVES(TRACE_COLL_CASE_) default: return NULL; }
#undef TRACE_COLL_CASE_
}

/* ---- the clock column ---- */
#define TRACE_CLOCKS(X)                                                                      \
    X(HOST, "host")     /* CLOCK_MONOTONIC of the rank's host */                             \
    X(DEVICE, "device") /* CUDA events, converted to the host clock */                       \
    X(CUPTI, "cupti")   /* CUPTI activity timestamps, same clock as host */

#define TRACE_CLOCK_ENUM_(id, name) TRACE_CLOCK_##id,
enum trace_clock { TRACE_CLOCKS(TRACE_CLOCK_ENUM_) TRACE_CLOCK_COUNT };
#undef TRACE_CLOCK_ENUM_

/* The name suffix of a `device` all-reduce row that no CUDA event timed: the all-reduce ran
 * on the host through device copies (comm shm-staged), and the row is the host clock's
 * launch (download) to wait return (upload done): "allreduce.b3.host-staged" (TRACE.md). */
#define TRACE_HOST_STAGED_SUFFIX ".host-staged"

/* ---- the kind column ---- */
#define TRACE_KINDS(X)                                                                       \
    X(RANGE, "range") /* a probe range */                                                    \
    X(KERNEL, "kernel")                                                                      \
    X(MEMCPY, "memcpy")                                                                      \
    X(MEMSET, "memset")                                                                      \
    X(SYNC, "sync")                                                                          \
    X(CPU, "cpu") /* CPU ranks: the CPU time the process's threads other than the training   \
                     thread took during the row's phase (step, backward): in `bytes`, ns   \
                     (TRACE.md) */

#define TRACE_KIND_ENUM_(id, name) TRACE_KIND_##id,
enum trace_kind { TRACE_KINDS(TRACE_KIND_ENUM_) TRACE_KIND_COUNT };
#undef TRACE_KIND_ENUM_

/* ---- the stream column of range rows: lanes (CUPTI rows hold the CUDA stream id) ---- */
#define TRACE_LANES(X)                                                                       \
    X(COMPUTE, "compute") /* the training thread / compute stream */                         \
    X(COMM, "comm")       /* the comm thread / NCCL stream: collectives  */                  \
    X(DATA, "data")       /* data loading: data rows */

#define TRACE_LANE_ENUM_(id, name) TRACE_LANE_##id,
enum trace_lane { TRACE_LANES(TRACE_LANE_ENUM_) TRACE_LANE_COUNT };
#undef TRACE_LANE_ENUM_

/* ---- names: each list as a table of (text, length), so the reader's lookups compare
 * lengths first (they run for every row's clock field) ---- */
struct trace_name {
    const char *s;
    size_t len;
};

#define TRACE_NAME_ENTRY_(id, name) {name, sizeof(name) - 1},

static inline const struct trace_name *trace_column_names(void)
{
    static const struct trace_name names[] = {
        TRACE_COLUMNS(TRACE_NAME_ENTRY_, TRACE_NAME_ENTRY_)};
    return names;
}

static inline const struct trace_name *trace_phase_names(void)
{
    static const struct trace_name names[] = {TRACE_PHASES(TRACE_NAME_ENTRY_)};
    return names;
}

static inline const struct trace_name *trace_clock_names(void)
{
    static const struct trace_name names[] = {TRACE_CLOCKS(TRACE_NAME_ENTRY_)};
    return names;
}

static inline const struct trace_name *trace_kind_names(void)
{
    static const struct trace_name names[] = {TRACE_KINDS(TRACE_NAME_ENTRY_)};
    return names;
}

static inline const struct trace_name *trace_lane_names(void)
{
    static const struct trace_name names[] = {TRACE_LANES(TRACE_NAME_ENTRY_)};
    return names;
}

#undef TRACE_NAME_ENTRY_

/* The column's text for a value (enum trace_column, trace_phase, trace_clock, trace_kind,
 * trace_lane); NULL for an out-of-range value. */
static inline const char *trace_column_name(int v)
{
    return v >= 0 && v < TRACE_COL_COUNT ? trace_column_names()[v].s : NULL;
}

static inline const char *trace_phase_name(int v)
{
    return v >= 0 && v < TRACE_PHASE_COUNT ? trace_phase_names()[v].s : NULL;
}

static inline const char *trace_clock_name(int v)
{
    return v >= 0 && v < TRACE_CLOCK_COUNT ? trace_clock_names()[v].s : NULL;
}

static inline const char *trace_kind_name(int v)
{
    return v >= 0 && v < TRACE_KIND_COUNT ? trace_kind_names()[v].s : NULL;
}

static inline const char *trace_lane_name(int v)
{
    return v >= 0 && v < TRACE_LANE_COUNT ? trace_lane_names()[v].s : NULL;
}

/* The index in names[0..count) of s[0..len) (need not be NUL-terminated), or -1.  The
 * names are a few bytes long: compared inline, byte by byte, not through memcmp. */
static inline int trace_name_find(const struct trace_name *names, int count, const char *s,
                                  size_t len)
{
    for (int v = 0; v < count; v++) {
        if (names[v].len != len)
            continue;
        size_t i = 0;
        while (i < len && names[v].s[i] == s[i])
            i++;
        if (i == len)
            return v;
    }
    return -1;
}

/* The value (enum trace_column / trace_phase / trace_clock / trace_kind) named s[0..len),
 * or -1. */
static inline int trace_column_of(const char *s, size_t len)
{
    return trace_name_find(trace_column_names(), TRACE_COL_COUNT, s, len);
}

static inline int trace_phase_of(const char *s, size_t len)
{
    return trace_name_find(trace_phase_names(), TRACE_PHASE_COUNT, s, len);
}

static inline int trace_clock_of(const char *s, size_t len)
{
    return trace_name_find(trace_clock_names(), TRACE_CLOCK_COUNT, s, len);
}

static inline int trace_kind_of(const char *s, size_t len)
{
    return trace_name_find(trace_kind_names(), TRACE_KIND_COUNT, s, len);
}

#ifdef __cplusplus
}
#endif
#endif
